//! The terminal fate of a recorded event: every event ends in exactly one.

use std::fmt;

/// Where an event ended. Events recorded = sum over fates, always.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fate {
    /// The broadcaster's incoming queue was full (client-go drops it silently).
    DroppedIncomingFull,
    /// A watcher's queue was full (client-go drops it silently).
    DroppedWatcherFull,
    /// Still queued when the recorder shut down.
    DroppedShutdown,
    /// The spam filter's token bucket was empty.
    SpamFiltered,
    /// Written as a new Event.
    Created,
    /// Written as a patch of an existing Event (a repeat, or an aggregate).
    Patched,
    /// The API server refused it (a 4xx that retrying cannot fix).
    Rejected,
    /// Every try failed (retries exhausted, or cancelled while retrying).
    Failed,
    /// Refused before queuing: no object kind, name or reason, or an unknown type.
    Invalid,
}

impl Fate {
    /// Every fate, in pipeline order.
    pub const ALL: [Fate; 9] = [
        Fate::DroppedIncomingFull,
        Fate::DroppedWatcherFull,
        Fate::DroppedShutdown,
        Fate::SpamFiltered,
        Fate::Created,
        Fate::Patched,
        Fate::Rejected,
        Fate::Failed,
        Fate::Invalid,
    ];

    /// The label value: `dropped_incoming_full`, `spam_filtered`, ….
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Fate::DroppedIncomingFull => "dropped_incoming_full",
            Fate::DroppedWatcherFull => "dropped_watcher_full",
            Fate::DroppedShutdown => "dropped_shutdown",
            Fate::SpamFiltered => "spam_filtered",
            Fate::Created => "created",
            Fate::Patched => "patched",
            Fate::Rejected => "rejected",
            Fate::Failed => "failed",
            Fate::Invalid => "invalid",
        }
    }

    /// True if the event reached the API server.
    #[must_use]
    pub const fn is_delivered(self) -> bool {
        matches!(self, Fate::Created | Fate::Patched)
    }

    /// The position of this fate in [`Fate::ALL`].
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Fate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_fate_once_at_its_index() {
        for (i, f) in Fate::ALL.iter().enumerate() {
            assert_eq!(f.index(), i);
        }
        let names: std::collections::HashSet<_> = Fate::ALL.iter().map(|f| f.as_str()).collect();
        assert_eq!(names.len(), 9);
    }
}
