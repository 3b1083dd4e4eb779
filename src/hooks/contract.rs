//! The hook contract, version `v1`: what the manager sends a hook (a [`Request`], on standard
//! input or as a POST body) and what it expects back (a [`Response`], on standard output or as
//! the response body). `docs/hooks.md` documents it for hook authors, and
//! `docs/hooks-v1.schema.json` is its JSON schema.
//!
//! Every object in a request comes from the cache tree: exactly what `informant cache` would
//! return (with the cache's transforms applied).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `apiVersion` of every request; a hook may refuse a version it does not know.
pub const API_VERSION: &str = "hooks.informant.dev/v1";

/// What the manager sends a hook for one object.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// The `Controller` resource the call is for.
    pub controller: ControllerRef,
    /// The reconciled object, as the cache holds it.
    pub object: Value,
    /// The object's children (objects of the `owns` kinds whose controller owner reference
    /// names it), keyed by `Kind.apiVersion` (`Job.batch/v1`, `ConfigMap.v1`), sorted by
    /// namespace and name. Every owned kind has a key, possibly with an empty list.
    pub children: BTreeMap<String, Vec<Value>>,
    /// Objects of the `watches` kinds in the object's namespace.
    pub related: Vec<Value>,
    /// Whether the object is being deleted (it has a `deletionTimestamp`).
    pub finalizing: bool,
}

/// What the manager sends a hook at a tick of a `Controller` whose `scheduleMode` is `batch`:
/// every object at once.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BatchRequest {
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// The `Controller` resource the call is for.
    pub controller: ControllerRef,
    /// The tick this call answers (RFC 3339, UTC).
    pub scheduled_time: String,
    /// Every object of the controller's `for` kind the cache holds (matching its selectors),
    /// sorted by namespace and name.
    pub objects: Vec<Value>,
}

/// The `Controller` a request is for.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ControllerRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// What a hook answers. Every field is optional: `{}` records nothing, leaves the children
/// and the status alone and waits for the next change.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Response {
    /// Events to record through the manager's recorder (correlated, spam-filtered, each
    /// ending in a counted fate), against the object unless `regarding` says otherwise.
    #[serde(default)]
    pub events: Vec<Event>,
    /// The desired children: applied with server-side apply (field manager
    /// `informant-hook/<namespace>/<name>` of the controller; a controller owner reference to
    /// the object is added). Existing children missing from the list are deleted, so `[]`
    /// deletes them all; absent or `null` leaves them alone (a hook that only watches). Each
    /// needs `apiVersion`, `kind` (one of the `owns` kinds) and `metadata.name`;
    /// `metadata.namespace` defaults to the object's.
    #[serde(default)]
    pub children: Option<Vec<Value>>,
    /// The object's desired status, written to its status subresource only when it differs
    /// from the cached one. Absent or `null`: the status is left alone.
    #[serde(default)]
    pub status: Option<Value>,
    /// Call the hook again for this object after this many seconds even if nothing changed:
    /// from 0 (no requeue) to [`MAX_REQUEUE_AFTER`] (a year); anything else fails the call
    /// (see [`Response::requeue_after`]).
    #[serde(default)]
    pub requeue_after_seconds: Option<f64>,
    /// When the request has `finalizing: true` and the controller holds a finalizer
    /// (`spec.finalize`): `true` removes it, so the object goes; otherwise the hook is called
    /// again (at `requeueAfterSeconds`, or with the error backoff of 5 s). Ignored otherwise.
    #[serde(default)]
    pub finalized: Option<bool>,
}

/// The longest `requeueAfterSeconds` a hook may ask for: 365 days. controller-runtime sets
/// none, but a `Duration` of more than about 584 billion years does not exist and a far
/// deadline overflows the scheduler's clock; a year is longer than any manager runs.
pub const MAX_REQUEUE_AFTER: Duration = Duration::from_hours(365 * 24);

/// An answer that parses but asks for something the manager cannot do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// `requeueAfterSeconds` is negative or over [`MAX_REQUEUE_AFTER`].
    #[error(
        "requeueAfterSeconds: {seconds} is {why}; write a number of seconds from 0 (no requeue) \
         to {max} (365 days)",
        max = MAX_REQUEUE_AFTER.as_secs()
    )]
    RequeueAfter {
        /// The number, as the answer wrote it (shortened).
        seconds: String,
        /// `negative` or `more than the maximum`.
        why: &'static str,
    },
    /// An admission hook's answer that can not be applied (a validating hook changing the
    /// object, both `object` and `patch`, a patch that does not apply).
    #[error("{0}")]
    Admission(String),
}

/// What a hook answers to one kind of request: decoded from its JSON, then checked for what
/// parsing alone does not catch.
pub trait Answer: serde::de::DeserializeOwned {
    /// What is wrong with the decoded answer, if anything.
    ///
    /// # Errors
    /// The [`AnswerError`] the answer breaks.
    fn check(&self) -> Result<(), AnswerError>;
}

impl Answer for Response {
    fn check(&self) -> Result<(), AnswerError> {
        self.requeue_after().map(|_| ())
    }
}

impl Response {
    /// How long after which the hook wants to be called again: `None` for no
    /// `requeueAfterSeconds` or 0.
    ///
    /// # Errors
    /// [`AnswerError::RequeueAfter`] for a negative number, or one over
    /// [`MAX_REQUEUE_AFTER`].
    pub fn requeue_after(&self) -> Result<Option<Duration>, AnswerError> {
        let Some(seconds) = self.requeue_after_seconds else {
            return Ok(None);
        };
        let bad = |why| AnswerError::RequeueAfter {
            seconds: format!("{seconds}").chars().take(32).collect(),
            why,
        };
        if seconds.is_nan() || seconds < 0.0 {
            return Err(bad("negative"));
        }
        if seconds > MAX_REQUEUE_AFTER.as_secs_f64() {
            return Err(bad("more than the maximum"));
        }
        // Checked above: finite, in range; try_ never fails here, but never panics either.
        Ok(Duration::try_from_secs_f64(seconds)
            .ok()
            .filter(|d| !d.is_zero()))
    }
}

/// An event a hook asks to record.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Event {
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: EventType,
    /// A short CamelCase reason, e.g. `SawCompletedJob`.
    pub reason: String,
    /// A human-readable message.
    pub message: String,
    /// The object the event is about, when not the reconciled object (a child, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regarding: Option<Regarding>,
}

/// An event's type.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Nothing to worry about.
    Normal,
    /// Something may need attention.
    Warning,
}

/// The object an event is about.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Regarding {
    /// Its API version, e.g. `batch/v1`.
    pub api_version: String,
    /// Its kind, e.g. `Job`.
    pub kind: String,
    /// Its namespace; default the reconciled object's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

/// The key of a kind in [`Request::children`]: `Kind.apiVersion` (metacontroller's form).
#[must_use]
pub fn children_key(api_version: &str, kind: &str) -> String {
    format!("{kind}.{api_version}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_empty_answer_is_valid_and_changes_nothing() {
        let r: Response = serde_json::from_str("{}").unwrap();
        assert_eq!(r, Response::default());
    }

    #[test]
    fn a_misspelt_field_is_refused() {
        let e = serde_json::from_value::<Response>(json!({"requeueAfter": 5})).unwrap_err();
        assert!(
            e.to_string().contains("unknown field `requeueAfter`"),
            "{e}"
        );
    }

    #[test]
    fn events_name_their_type_reason_and_optional_object() {
        let r: Response = serde_json::from_value(json!({"events": [
            {"type": "Normal", "reason": "SawCompletedJob", "message": "done",
             "regarding": {"apiVersion": "batch/v1", "kind": "Job", "name": "j"}}]}))
        .unwrap();
        assert_eq!(r.events[0].type_, EventType::Normal);
        assert_eq!(r.events[0].regarding.as_ref().unwrap().name, "j");
        assert_eq!(children_key("batch/v1", "Job"), "Job.batch/v1");
    }

    #[test]
    fn requeue_after_is_checked_never_a_panic() {
        let after = |v: Value| {
            serde_json::from_value::<Response>(json!({"requeueAfterSeconds": v}))
                .map_err(|e| e.to_string())
                .and_then(|r| r.requeue_after().map_err(|e| e.to_string()))
        };
        assert_eq!(after(json!(30)), Ok(Some(Duration::from_secs(30))));
        assert_eq!(after(json!(0.5)), Ok(Some(Duration::from_millis(500))));
        assert_eq!(after(json!(0)), Ok(None));
        assert_eq!(after(json!(31_536_000)), Ok(Some(MAX_REQUEUE_AFTER)));
        let e = after(json!(1e20)).unwrap_err();
        assert_eq!(
            e,
            "requeueAfterSeconds: 100000000000000000000 is more than the maximum; write a \
             number of seconds from 0 (no requeue) to 31536000 (365 days)"
        );
        assert!(after(json!(-1)).unwrap_err().contains("-1 is negative"));
        assert!(
            after(json!(f64::MAX))
                .unwrap_err()
                .contains("more than the maximum")
        );
        let e = after(json!("x")).unwrap_err();
        assert!(
            e.contains("invalid type: string \"x\", expected f64"),
            "{e}"
        );
    }

    #[test]
    fn the_committed_schema_accepts_what_the_types_produce() {
        let schema: Value =
            serde_json::from_str(include_str!("../../docs/hooks-v1.schema.json")).unwrap();
        assert_eq!(
            schema["$defs"]["request"]["properties"]["apiVersion"]["const"],
            API_VERSION
        );
        let response = &schema["$defs"]["response"]["properties"];
        let fields: Vec<&String> = response.as_object().unwrap().keys().collect();
        assert_eq!(
            fields,
            [
                "children",
                "events",
                "finalized",
                "requeueAfterSeconds",
                "status"
            ]
        );
    }
}
