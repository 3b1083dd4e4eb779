//! The output line of `informant simulate`: the scenario README's fields, in its order, then
//! informant's own (fate, keys, tokens left).

use serde::Serialize;
use serde_json::{Value, json};

use super::BASE;
use super::input::InEvent;
use crate::recorder::clock::Time;
use crate::recorder::correlator::{Action, Correlation};
use crate::recorder::event::Event;
use crate::recorder::fate::Fate;

/// A number as Go's `encoding/json` prints a float64: integral values without a fraction.
#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // Reason: guarded by the range check.
pub(super) fn go_number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// Seconds from [`BASE`] to `t`.
fn rel(t: Time) -> Value {
    go_number(t.seconds_since(BASE))
}

/// One output line: the scenario README's fields in its order, then informant's own.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct OutLine<'a> {
    pub(super) i: usize,
    pub(super) t: Value,
    pub(super) skip: bool,
    pub(super) action: &'static str,
    pub(super) count: u32,
    pub(super) message: String,
    pub(super) name: String,
    pub(super) patch: bool,
    pub(super) reason: &'a str,
    #[serde(rename = "firstT")]
    pub(super) first_t: Value,
    #[serde(rename = "lastT")]
    pub(super) last_t: Value,
    pub(super) patch_body: Option<Value>,
    pub(super) clock_reads: i64,
    #[serde(serialize_with = "fate_name")]
    pub(super) fate: Fate,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub(super) details: Option<Details>,
}

/// What the correlator knew of an event that reached it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Details {
    /// The count the logger reached, also for a skipped event.
    pub(super) observed_count: u32,
    pub(super) combined: bool,
    pub(super) aggregate_key: String,
    pub(super) spam_key: String,
    pub(super) tokens_left: f64,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // Reason: serde's `serialize_with` passes a reference.
fn fate_name<S: serde::Serializer>(fate: &Fate, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(fate.as_str())
}

impl<'a> OutLine<'a> {
    /// The line of `event` (input line `ev`), which the correlator decided as `c`.
    pub(super) fn correlated(
        i: usize,
        ev: &'a InEvent,
        event: &Event,
        c: &Correlation,
        clock_reads: i64,
    ) -> Self {
        let fate = match c.action {
            Action::Create => Fate::Created,
            Action::Patch => Fate::Patched,
            Action::Skip => Fate::SpamFiltered,
        };
        let skip = c.action == Action::Skip;
        OutLine {
            i,
            t: go_number(ev.t),
            skip,
            action: c.action.as_str(),
            count: if skip { 0 } else { c.count },
            message: if skip {
                String::new()
            } else {
                c.message(event).to_string()
            },
            name: if skip {
                String::new()
            } else {
                c.name.to_string()
            },
            patch: c.action == Action::Patch,
            reason: &ev.reason,
            first_t: if skip {
                Value::Null
            } else {
                rel(c.first_timestamp)
            },
            last_t: if skip {
                Value::Null
            } else {
                rel(c.last_timestamp)
            },
            patch_body: c.patch_body(event),
            clock_reads,
            fate,
            details: Some(Details {
                observed_count: c.count,
                combined: c.combined,
                aggregate_key: c.aggregate_key.0.to_string(),
                spam_key: c.spam_key.0.to_string(),
                tokens_left: c.tokens_left,
            }),
        }
    }

    /// The line of an input event client-go's recorder would refuse.
    pub(super) fn invalid(i: usize, ev: &'a InEvent) -> Self {
        OutLine {
            i,
            t: go_number(ev.t),
            skip: true,
            action: Action::Skip.as_str(),
            count: 0,
            message: String::new(),
            name: String::new(),
            patch: false,
            reason: &ev.reason,
            first_t: Value::Null,
            last_t: Value::Null,
            patch_body: None,
            clock_reads: 0,
            fate: Fate::Invalid,
            details: None,
        }
    }
}
