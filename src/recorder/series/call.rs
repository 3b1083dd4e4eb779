//! What the series engine hands out and back: the calls to make ([`Call`], why: [`Purpose`])
//! and the occurrences that reached their fate ([`Finished`]).

use super::write::{Verb, Write};
use crate::recorder::fate::Fate;

/// Identifies a call handed out by [`Engine::poll`](super::Engine::poll).
pub type CallId = u64;

/// Why a write is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// An occurrence's own write (the first, or the second that opens the series).
    Occurrence,
    /// The periodic refresh of an open series.
    Refresh,
    /// The last write of a quiet series.
    Finish,
    /// The write of a series' uncounted occurrences when the recorder stops (informant's
    /// addition: client-go loses them).
    Flush,
}

impl Purpose {
    /// `occurrence`, `refresh`, `finish` or `flush`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Purpose::Occurrence => "occurrence",
            Purpose::Refresh => "refresh",
            Purpose::Finish => "finish",
            Purpose::Flush => "flush",
        }
    }
}

/// One API call to make now; answer it with [`Engine::answer`](super::Engine::answer).
#[derive(Clone, Debug)]
pub struct Call {
    /// Its identity.
    pub id: CallId,
    /// Create or patch.
    pub verb: Verb,
    /// What to write.
    pub write: Write,
    /// Why.
    pub purpose: Purpose,
}

/// An occurrence that reached its fate.
#[derive(Debug)]
pub struct Finished<T> {
    /// The token given to [`Engine::record`](super::Engine::record).
    pub token: T,
    /// Its fate.
    pub fate: Fate,
    /// Tries of its own write (0 for a folded or dropped occurrence).
    pub tries: u32,
    /// The series count this occurrence made: 1 for the first, 2 for the one that opened
    /// the series, n for the n-th folded.
    pub count: u32,
}
