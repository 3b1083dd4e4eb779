//! `informant simulate --summary`: per reason, how many events ended in each fate (the labels
//! of `informant_events_total{fate}`: `created`, `patched`, `spam_filtered`, `invalid`), and the
//! time after which the reason is never delivered again.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;

use super::Error;
use super::output::go_number;
use crate::recorder::fate::Fate;

/// The fates a replay through the correlator ends events in, in the table's column order.
pub const CORRELATOR_FATES: [Fate; 4] = [
    Fate::Created,
    Fate::Patched,
    Fate::SpamFiltered,
    Fate::Invalid,
];

/// Per-reason tallies for `--summary`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReasonSummary {
    /// Events created.
    pub created: u64,
    /// Events patched.
    pub patched: u64,
    /// Events the spam filter dropped.
    pub spam_filtered: u64,
    /// Events dropped as invalid before the correlator (no kind, name or reason; a bad type).
    pub invalid: u64,
    /// `t` of the last delivered event of this reason.
    pub last_delivered: Option<f64>,
    /// `t` of the last event of this reason.
    pub last_seen: f64,
}

impl ReasonSummary {
    /// Counts one event that ended in `fate` (one of [`CORRELATOR_FATES`]; the correlator
    /// ends events in no other).
    pub fn count(&mut self, fate: Fate) {
        match fate {
            Fate::Created => self.created += 1,
            Fate::Patched => self.patched += 1,
            Fate::Invalid => self.invalid += 1,
            _ => self.spam_filtered += 1,
        }
    }

    /// How many events ended in `fate`.
    #[must_use]
    pub fn get(&self, fate: Fate) -> u64 {
        match fate {
            Fate::Created => self.created,
            Fate::Patched => self.patched,
            Fate::SpamFiltered => self.spam_filtered,
            Fate::Invalid => self.invalid,
            _ => 0,
        }
    }

    /// Every event of this reason: the sum of its fates.
    #[must_use]
    pub fn recorded(&self) -> u64 {
        CORRELATOR_FATES.iter().map(|f| self.get(*f)).sum()
    }

    /// The time after which this reason is never delivered again: the last delivery, if a
    /// later event of the reason was not delivered (`None` if its last event was delivered).
    #[must_use]
    pub fn never_delivered_after(&self) -> Option<f64> {
        match self.last_delivered {
            Some(t) if t < self.last_seen => Some(t),
            Some(_) => None,
            None => Some(f64::NEG_INFINITY),
        }
    }
}

/// The outcome of a whole simulation, per reason (sorted by reason).
pub type Summary = BTreeMap<String, ReasonSummary>;

/// Writes `summary` as an aligned table: per reason, the events in each of
/// [`CORRELATOR_FATES`] (headed by the fate's metric label), and the time after which the
/// reason is never delivered again.
///
/// # Errors
///
/// The output cannot be written.
pub fn write_summary(summary: &Summary, mut out: impl Write) -> Result<(), Error> {
    let width = summary.keys().map(String::len).max().unwrap_or(0).max(6);
    let mut w = |s: String| out.write_all(s.as_bytes()).map_err(Error::Write);
    let mut header = format!("{:<width$}", "reason");
    for fate in CORRELATOR_FATES {
        let _ = write!(header, "  {:>7}", fate.as_str());
    }
    header.push_str("  never delivered after\n");
    w(header)?;
    for (reason, s) in summary {
        let after = match s.never_delivered_after() {
            None => "-".to_owned(),
            Some(t) if t == f64::NEG_INFINITY => "never delivered".to_owned(),
            Some(t) => format!("t={} s (minute {:.0})", go_number(t), (t / 60.0).floor()),
        };
        let mut row = format!("{reason:<width$}");
        for fate in CORRELATOR_FATES {
            let column = fate.as_str().len().max(7);
            let _ = write!(row, "  {:>column$}", s.get(fate));
        }
        let _ = writeln!(row, "  {after}");
        w(row)?;
    }
    Ok(())
}
