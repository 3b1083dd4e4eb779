//! The input format of `informant simulate` (one event per JSON line, as in
//! `tests/data/scenarios/README.md`) and the event client-go's recorder builds from it.

use std::sync::Arc;

use serde::Deserialize;

use crate::recorder::clock::Time;
use crate::recorder::event::{Event, EventType, ObjectRef, Source};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InSource {
    #[serde(default)]
    component: String,
    #[serde(default)]
    host: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InObject {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    resource_version: String,
    #[serde(default)]
    field_path: String,
}

impl InObject {
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

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct InEvent {
    pub(super) t: f64,
    source: InSource,
    involved_object: InObject,
    #[serde(rename = "type", default)]
    event_type: String,
    #[serde(default)]
    pub(super) reason: String,
    #[serde(default)]
    message: String,
    reporting_controller: Option<String>,
    reporting_instance: Option<String>,
    action: Option<String>,
    related: Option<InObject>,
}

/// The event client-go's recorder would build for `ev` at `now`, or `None` if it drops it.
pub(super) fn build(ev: &InEvent, now: Time) -> Option<Event> {
    let event_type = EventType::parse(&ev.event_type)?;
    let mut event = Event::new(
        Arc::new(ev.involved_object.to_ref()),
        Arc::new(Source::new(&ev.source.component, &ev.source.host)),
        event_type,
        &ev.reason,
        &ev.message,
        now,
    );
    if let Some(rc) = &ev.reporting_controller {
        event.reporting_controller = rc.as_str().into();
    }
    if let Some(ri) = &ev.reporting_instance {
        event.reporting_instance = ri.as_str().into();
    }
    event.action = ev.action.as_deref().map(Into::into);
    event.related = ev.related.as_ref().map(|o| Arc::new(o.to_ref()));
    event.validate().ok()?;
    Some(event)
}
