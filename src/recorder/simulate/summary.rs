//! `informant simulate --summary`: per reason, created / patched / skipped, and the time after
//! which the reason is never delivered again.

use std::collections::BTreeMap;
use std::io::Write;

use super::Error;
use super::output::go_number;

/// Per-reason tallies for `--summary`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReasonSummary {
    /// Events created.
    pub created: u64,
    /// Events patched.
    pub patched: u64,
    /// Events skipped (spam filtered) or invalid.
    pub skipped: u64,
    /// `t` of the last delivered event of this reason.
    pub last_delivered: Option<f64>,
    /// `t` of the last event of this reason.
    pub last_seen: f64,
}

impl ReasonSummary {
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

/// Writes `summary` as an aligned table: per reason, created / patched / skipped, and the
/// time after which the reason is never delivered again.
///
/// # Errors
///
/// The output cannot be written.
pub fn write_summary(summary: &Summary, mut out: impl Write) -> Result<(), Error> {
    let width = summary.keys().map(String::len).max().unwrap_or(0).max(6);
    let mut w = |s: String| out.write_all(s.as_bytes()).map_err(Error::Write);
    w(format!(
        "{:<width$}  {:>7}  {:>7}  {:>7}  never delivered after\n",
        "reason", "created", "patched", "skipped"
    ))?;
    for (reason, s) in summary {
        let after = match s.never_delivered_after() {
            None => "-".to_owned(),
            Some(t) if t == f64::NEG_INFINITY => "never delivered".to_owned(),
            Some(t) => format!("t={} s (minute {:.0})", go_number(t), (t / 60.0).floor()),
        };
        w(format!(
            "{reason:<width$}  {:>7}  {:>7}  {:>7}  {after}\n",
            s.created, s.patched, s.skipped
        ))?;
    }
    Ok(())
}
