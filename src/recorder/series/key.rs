//! The isomorphic key of client-go's `tools/events` (`event_broadcaster.go`, `getKey`): events
//! with equal keys make one series. Its fields are declared (`spec.recorder.series.keyFields`).

use std::fmt;
use std::sync::Arc;

use crate::recorder::event::{Event, EventType, ObjectRef};

/// A field of an `events.k8s.io/v1` Event that is part of the isomorphic key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SeriesKeyField {
    /// `type` (Normal or Warning); in client-go's key since v0.27.
    Type,
    /// `action`.
    Action,
    /// `reason`.
    Reason,
    /// `reportingController`.
    ReportingController,
    /// `reportingInstance`; in client-go's key since v0.27.
    ReportingInstance,
    /// `regarding`: the whole object reference, `fieldPath` and `resourceVersion` included.
    Regarding,
    /// `related`: the whole object reference, or none.
    Related,
    /// `note`, the message: not in client-go's key, so events with different notes merge
    /// into one series (whose note is the first one's). Add it to keep them apart.
    Note,
}

impl SeriesKeyField {
    /// client-go's key (`tools/events/event_broadcaster.go`, `eventKey`): every field but
    /// `note`.
    pub const DEFAULT: [SeriesKeyField; 7] = [
        SeriesKeyField::Type,
        SeriesKeyField::Action,
        SeriesKeyField::Reason,
        SeriesKeyField::ReportingController,
        SeriesKeyField::ReportingInstance,
        SeriesKeyField::Regarding,
        SeriesKeyField::Related,
    ];

    /// Every field, in the order they are documented.
    pub const ALL: [SeriesKeyField; 8] = [
        SeriesKeyField::Type,
        SeriesKeyField::Action,
        SeriesKeyField::Reason,
        SeriesKeyField::ReportingController,
        SeriesKeyField::ReportingInstance,
        SeriesKeyField::Regarding,
        SeriesKeyField::Related,
        SeriesKeyField::Note,
    ];

    /// The name used in the `CacheConfig` (the Event's JSON field name).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            SeriesKeyField::Type => "type",
            SeriesKeyField::Action => "action",
            SeriesKeyField::Reason => "reason",
            SeriesKeyField::ReportingController => "reportingController",
            SeriesKeyField::ReportingInstance => "reportingInstance",
            SeriesKeyField::Regarding => "regarding",
            SeriesKeyField::Related => "related",
            SeriesKeyField::Note => "note",
        }
    }

    /// Parses the name used in the `CacheConfig`; `None` if it is not a field.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == name)
    }
}

impl fmt::Display for SeriesKeyField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The isomorphic key of an event under a set of [`SeriesKeyField`]s: the fields not in the
/// set are `None`, so they never tell two events apart (a bit per field in the set keeps keys
/// of different sets apart).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[allow(
    clippy::option_option,
    reason = "outer None: the field is not in the key; Some(None): in the key, and the event has none"
)]
pub struct SeriesKey {
    fields: u16,
    event_type: Option<EventType>,
    action: Option<Arc<str>>,
    reason: Option<Arc<str>>,
    reporting_controller: Option<Arc<str>>,
    reporting_instance: Option<Arc<str>>,
    regarding: Option<Arc<ObjectRef>>,
    related: Option<Arc<ObjectRef>>,
    note: Option<Arc<str>>,
}

impl SeriesKey {
    /// The key of `event` under `fields`.
    #[must_use]
    pub fn of(event: &Event, fields: &[SeriesKeyField]) -> Self {
        let mut key = Self::default();
        for field in fields {
            key.fields |= 1 << (*field as u16);
            match field {
                SeriesKeyField::Type => key.event_type = Some(event.event_type),
                SeriesKeyField::Action => key.action.clone_from(&event.action),
                SeriesKeyField::Reason => key.reason = Some(event.reason.clone()),
                SeriesKeyField::ReportingController => {
                    key.reporting_controller = Some(event.reporting_controller.clone());
                }
                SeriesKeyField::ReportingInstance => {
                    key.reporting_instance = Some(event.reporting_instance.clone());
                }
                SeriesKeyField::Regarding => key.regarding = Some(event.involved_object.clone()),
                SeriesKeyField::Related => key.related.clone_from(&event.related),
                SeriesKeyField::Note => key.note = Some(event.message.clone()),
            }
        }
        key
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::clock::Time;
    use crate::recorder::event::Source;

    fn event(note: &str) -> Event {
        let mut e = Event::new(
            Arc::new(ObjectRef::new("v1", "Pod", "ns", "p", "u")),
            Arc::new(Source::new("ctrl", "node")),
            EventType::Warning,
            "BackOff",
            note,
            Time::EPOCH,
        );
        e.action = Some("Restarting".into());
        e
    }

    #[test]
    fn field_names_round_trip_and_the_default_is_every_field_but_note() {
        for f in SeriesKeyField::ALL {
            assert_eq!(SeriesKeyField::parse(f.as_str()), Some(f));
        }
        assert!(!SeriesKeyField::DEFAULT.contains(&SeriesKeyField::Note));
        assert_eq!(SeriesKeyField::DEFAULT.len() + 1, SeriesKeyField::ALL.len());
    }

    /// client-go `getKey`: each field of the key, changed alone, makes another series; the
    /// note does not, unless it is added.
    #[test]
    fn each_key_field_alone_tells_events_apart() {
        let base = event("a");
        let d = &SeriesKeyField::DEFAULT;
        let k = |e: &Event| SeriesKey::of(e, d);
        let mut changed: Vec<(SeriesKeyField, Event)> = Vec::new();
        let mut e = base.clone();
        e.event_type = EventType::Normal;
        changed.push((SeriesKeyField::Type, e));
        let mut e = base.clone();
        e.action = Some("Other".into());
        changed.push((SeriesKeyField::Action, e));
        let mut e = base.clone();
        e.reason = "Other".into();
        changed.push((SeriesKeyField::Reason, e));
        let mut e = base.clone();
        e.reporting_controller = "other".into();
        changed.push((SeriesKeyField::ReportingController, e));
        let mut e = base.clone();
        e.reporting_instance = "other".into();
        changed.push((SeriesKeyField::ReportingInstance, e));
        let mut e = base.clone();
        let mut o = (*base.involved_object).clone();
        o.field_path = "spec.containers{app}".into();
        e.involved_object = Arc::new(o);
        changed.push((SeriesKeyField::Regarding, e));
        let mut e = base.clone();
        e.related = Some(Arc::new(ObjectRef::new("v1", "Node", "", "n", "u2")));
        changed.push((SeriesKeyField::Related, e));
        for (field, e) in &changed {
            assert_ne!(k(e), k(&base), "{field} is in the key");
            let without: Vec<_> = d.iter().copied().filter(|f| f != field).collect();
            assert_eq!(
                SeriesKey::of(e, &without),
                SeriesKey::of(&base, &without),
                "{field} removed from the key"
            );
        }
        assert_eq!(k(&event("b")), k(&base), "note is not in client-go's key");
        let mut with_note = d.to_vec();
        with_note.push(SeriesKeyField::Note);
        assert_ne!(
            SeriesKey::of(&event("b"), &with_note),
            SeriesKey::of(&base, &with_note)
        );
    }
}
