//! The input of `informant simulate --api events.k8s.io/v1`: one JSON object per line, an
//! occurrence, a sink fault, or the end.
//!
//! ```text
//! {"t": 0, "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "p", "uid": "u"},
//!  "type": "Warning", "reason": "BackOff", "action": "Restart", "note": "back-off"}
//! {"t": 5, "op": "sink", "verb": "patch", "matchReason": "BackOff", "results": ["notfound"], "always": false}
//! {"t": 900, "op": "end"}
//! ```

use std::sync::Arc;

use serde::Deserialize;

use crate::recorder::clock::Time;
use crate::recorder::event::{Event, EventType, ObjectRef, Source};
use crate::recorder::series::Verb;
use crate::recorder::sink::SinkError;

/// An object reference as the input writes it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct InRef {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    field_path: String,
    #[serde(default)]
    resource_version: String,
}

impl InRef {
    fn to_ref(&self) -> ObjectRef {
        ObjectRef {
            kind: self.kind.as_str().into(),
            namespace: self.namespace.as_str().into(),
            name: self.name.as_str().into(),
            uid: self.uid.as_str().into(),
            api_version: self.api_version.as_str().into(),
            resource_version: self.resource_version.as_str().into(),
            field_path: self.field_path.as_str().into(),
        }
    }
}

/// What a sink fault makes a call answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultResult {
    /// The connection broke (retried).
    Transport,
    /// 404 `NotFound`.
    Notfound,
    /// 409 `AlreadyExists`.
    Alreadyexists,
    /// 403 `Forbidden`.
    Forbidden,
    /// 500 `InternalError`.
    Servererror,
    /// 504 `Timeout`.
    Timeout,
}

impl FaultResult {
    /// The name in the input and output.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            FaultResult::Transport => "transport",
            FaultResult::Notfound => "notfound",
            FaultResult::Alreadyexists => "alreadyexists",
            FaultResult::Forbidden => "forbidden",
            FaultResult::Servererror => "servererror",
            FaultResult::Timeout => "timeout",
        }
    }

    /// The error a real sink would return.
    #[must_use]
    pub fn to_error(self) -> SinkError {
        let status = |code: u16, message: &str| SinkError::Rejected {
            code,
            message: message.to_owned(),
        };
        match self {
            FaultResult::Transport => SinkError::Transport("connection reset (simulated)".into()),
            FaultResult::Notfound => SinkError::NotFound,
            FaultResult::Alreadyexists => status(409, "already exists"),
            FaultResult::Forbidden => status(403, "forbidden"),
            FaultResult::Servererror => SinkError::Unavailable {
                code: 500,
                message: "internal error".to_owned(),
            },
            FaultResult::Timeout => SinkError::Unavailable {
                code: 504,
                message: "timeout".to_owned(),
            },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum InVerb {
    Create,
    Patch,
}

impl From<InVerb> for Verb {
    fn from(v: InVerb) -> Self {
        match v {
            InVerb::Create => Verb::Create,
            InVerb::Patch => Verb::Patch,
        }
    }
}

/// One input line.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum InLine {
    Op(InOp),
    Event(Box<InEvent>),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub(super) enum InOp {
    Sink {
        t: f64,
        verb: InVerb,
        #[serde(rename = "matchReason", default)]
        match_reason: Option<String>,
        results: Vec<FaultResult>,
        #[serde(default)]
        always: bool,
    },
    End {
        t: f64,
    },
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct InEvent {
    pub(super) t: f64,
    regarding: InRef,
    related: Option<InRef>,
    #[serde(rename = "type", default)]
    event_type: String,
    #[serde(default)]
    pub(super) reason: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    note: String,
    reporting_controller: Option<String>,
    reporting_instance: Option<String>,
}

impl InLine {
    pub(super) fn t(&self) -> f64 {
        match self {
            InLine::Op(InOp::Sink { t, .. } | InOp::End { t }) => *t,
            InLine::Event(e) => e.t,
        }
    }
}

/// The Event client-go's `tools/events` recorder would build for `ev` at `now`, or `None` if
/// it refuses it (no kind, name or reason; a type other than Normal or Warning). Without an
/// `action` the reason is the action, as in the pipeline.
pub(super) fn build(ev: &InEvent, now: Time, component: &str) -> Option<Event> {
    let event_type = EventType::parse(&ev.event_type)?;
    let controller = ev.reporting_controller.as_deref().unwrap_or(component);
    let mut event = Event::new(
        Arc::new(ev.regarding.to_ref()),
        Arc::new(Source::new(controller, "")),
        event_type,
        &ev.reason,
        &ev.note,
        now,
    );
    if let Some(ri) = &ev.reporting_instance {
        event.reporting_instance = ri.as_str().into();
    }
    let action = if ev.action.is_empty() {
        &ev.reason
    } else {
        &ev.action
    };
    event.action = Some(action.as_str().into());
    event.related = ev.related.as_ref().map(|o| Arc::new(o.to_ref()));
    event.validate().ok()?;
    Some(event)
}
