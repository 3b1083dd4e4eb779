//! The typed event the recorder carries: a core/v1 Event built as client-go's recorder builds
//! it, with shared (`Arc`) strings so the correlator can key and copy it without allocating.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time as MetaTime};

use super::clock::Time;

/// The namespace of events about cluster-scoped objects.
///
/// client-go `tools/record/event.go` `makeEvent`: `metav1.NamespaceDefault`.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The type of an event. Kubernetes knows exactly these two.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventType {
    /// Nothing to worry about (`Normal`).
    #[default]
    Normal,
    /// Something may need attention (`Warning`).
    Warning,
}

impl EventType {
    /// The API spelling: `Normal` or `Warning`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }

    /// Parses the API spelling; `None` for anything else (client-go's `ValidateEventType`).
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Normal" => Some(EventType::Normal),
            "Warning" => Some(EventType::Warning),
            _ => None,
        }
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who emits an event (core/v1 `EventSource`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Source {
    /// The component, e.g. `cronjob-controller`.
    pub component: Arc<str>,
    /// The host (node name); usually empty for controllers.
    pub host: Arc<str>,
}

impl Source {
    /// A source with this component and host.
    #[must_use]
    pub fn new(component: &str, host: &str) -> Self {
        Self {
            component: component.into(),
            host: host.into(),
        }
    }
}

/// The object an event is about (core/v1 `ObjectReference`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[doc(alias = "ObjectReference")]
pub struct ObjectRef {
    /// Kind, e.g. `CronJob`.
    pub kind: Arc<str>,
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// UID.
    pub uid: Arc<str>,
    /// API version, e.g. `batch/v1`.
    pub api_version: Arc<str>,
    /// Resource version the event refers to; part of no key.
    pub resource_version: Arc<str>,
    /// Part of the object the event is about, e.g. `spec.containers{app}`; only the dedupe
    /// (count) key includes it.
    pub field_path: Arc<str>,
}

impl ObjectRef {
    /// A reference with the identifying fields set and no resource version or field path.
    #[must_use]
    pub fn new(api_version: &str, kind: &str, namespace: &str, name: &str, uid: &str) -> Self {
        Self {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
            api_version: api_version.into(),
            ..Self::default()
        }
    }

    fn to_k8s(&self) -> corev1::ObjectReference {
        corev1::ObjectReference {
            api_version: non_empty(&self.api_version),
            field_path: non_empty(&self.field_path),
            kind: non_empty(&self.kind),
            name: non_empty(&self.name),
            namespace: non_empty(&self.namespace),
            resource_version: non_empty(&self.resource_version),
            uid: non_empty(&self.uid),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

/// The name of an Event object: `<involved object name>.<Unix nanoseconds in hex>`, as
/// client-go's `makeEvent` and `EventAggregate` build it. Formatted only when needed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct EventName {
    object_name: Arc<str>,
    time: Time,
}

impl EventName {
    /// The name client-go gives an event about `object_name` created at `time`.
    #[must_use]
    pub fn new(object_name: Arc<str>, time: Time) -> Self {
        Self { object_name, time }
    }

    /// The involved object's name, the part before the dot.
    #[must_use]
    pub fn object_name(&self) -> &str {
        &self.object_name
    }

    /// The instant the suffix encodes.
    #[must_use]
    pub fn time(&self) -> Time {
        self.time
    }

    /// The same object name with the suffix of `time`.
    #[must_use]
    pub fn at(self, time: Time) -> Self {
        Self { time, ..self }
    }
}

impl fmt::Display for EventName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.time.unix_nanos();
        if n < 0 {
            write!(f, "{}.-{:x}", self.object_name, n.unsigned_abs())
        } else {
            write!(f, "{}.{:x}", self.object_name, n)
        }
    }
}

/// Why an event was refused before it was queued (fate `invalid`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// The involved object has no kind (client-go cannot build its reference).
    #[error("event has no involved object kind")]
    MissingKind,
    /// The involved object has no name.
    #[error("event has no involved object name")]
    MissingName,
    /// The event has no reason.
    #[error("event has no reason")]
    MissingReason,
}

/// One event, as client-go's recorder builds it (`makeEvent`): count 1, first and last
/// timestamp the instant it was recorded, reporting controller and instance from the source.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The object the event is about.
    pub involved_object: Arc<ObjectRef>,
    /// Who emits it.
    pub source: Arc<Source>,
    /// Normal or Warning.
    pub event_type: EventType,
    /// Short machine-readable reason, e.g. `SawCompletedJob`.
    pub reason: Arc<str>,
    /// Human-readable message.
    pub message: Arc<str>,
    /// `reportingComponent` of the Event; client-go sets it to the source component.
    pub reporting_controller: Arc<str>,
    /// `reportingInstance` of the Event; client-go sets it to the source host.
    pub reporting_instance: Arc<str>,
    /// Optional action taken (events.k8s.io style), carried to the API unchanged.
    pub action: Option<Arc<str>>,
    /// Optional secondary object, carried to the API unchanged.
    pub related: Option<Arc<ObjectRef>>,
    /// When it was recorded: its first and last timestamp, and the suffix of its name.
    pub time: Time,
}

impl Event {
    /// An event as client-go's `makeEvent` builds it at `time`.
    #[must_use]
    pub fn new(
        involved_object: Arc<ObjectRef>,
        source: Arc<Source>,
        event_type: EventType,
        reason: &str,
        message: &str,
        time: Time,
    ) -> Self {
        Self {
            reporting_controller: source.component.clone(),
            reporting_instance: source.host.clone(),
            involved_object,
            source,
            event_type,
            reason: reason.into(),
            message: message.into(),
            action: None,
            related: None,
            time,
        }
    }

    /// The Event's namespace: the object's, or `default` for cluster-scoped objects.
    #[must_use]
    pub fn namespace(&self) -> &str {
        if self.involved_object.namespace.is_empty() {
            DEFAULT_NAMESPACE
        } else {
            &self.involved_object.namespace
        }
    }

    /// The name client-go gives this event when it is created.
    #[must_use]
    pub fn name(&self) -> EventName {
        EventName::new(self.involved_object.name.clone(), self.time)
    }

    /// Checks what client-go checks before queuing (a buildable object reference) and that
    /// there is a reason.
    ///
    /// # Errors
    ///
    /// The first missing field, as an [`Invalid`].
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.involved_object.kind.is_empty() {
            Err(Invalid::MissingKind)
        } else if self.involved_object.name.is_empty() {
            Err(Invalid::MissingName)
        } else if self.reason.is_empty() {
            Err(Invalid::MissingReason)
        } else {
            Ok(())
        }
    }

    /// The core/v1 Event to write, with the name, count, timestamps and message the
    /// correlator decided (the API boundary: the only place strings are built).
    #[must_use]
    pub fn to_k8s(&self, written: &Written<'_>) -> corev1::Event {
        corev1::Event {
            metadata: ObjectMeta {
                name: Some(written.name.to_string()),
                namespace: Some(self.namespace().to_owned()),
                ..ObjectMeta::default()
            },
            involved_object: self.involved_object.to_k8s(),
            reason: non_empty(&self.reason),
            message: Some(written.message.to_string()),
            source: Some(corev1::EventSource {
                component: non_empty(&self.source.component),
                host: non_empty(&self.source.host),
            }),
            first_timestamp: Some(MetaTime(written.first_timestamp.to_timestamp())),
            last_timestamp: Some(MetaTime(written.last_timestamp.to_timestamp())),
            count: Some(i32::try_from(written.count).unwrap_or(i32::MAX)),
            type_: Some(self.event_type.as_str().to_owned()),
            reporting_component: Some(written.reporting_controller.to_string()),
            reporting_instance: Some(written.reporting_instance.to_string()),
            action: self.action.as_deref().map(str::to_owned),
            related: self.related.as_deref().map(ObjectRef::to_k8s),
            ..corev1::Event::default()
        }
    }
}

/// What the correlator decided to write for an event (borrowed; see [`Event::to_k8s`]).
#[derive(Clone)]
pub struct Written<'a> {
    /// Name of the Event object.
    pub name: &'a EventName,
    /// Its count.
    pub count: u32,
    /// Its message (for an aggregate, `(combined from similar events): …`).
    pub message: &'a dyn fmt::Display,
    /// First timestamp.
    pub first_timestamp: Time,
    /// Last timestamp.
    pub last_timestamp: Time,
    /// Reporting controller (empty for an aggregate, as client-go builds it).
    pub reporting_controller: &'a str,
    /// Reporting instance (empty for an aggregate).
    pub reporting_instance: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str) -> Arc<ObjectRef> {
        Arc::new(ObjectRef::new("v1", "Pod", ns, "web-0", "uid-1"))
    }

    #[test]
    fn name_is_object_name_dot_hex_unix_nanos() {
        let e = Event::new(
            pod("ns"),
            Arc::new(Source::new("c", "")),
            EventType::Normal,
            "Started",
            "m",
            Time::from_unix_nanos(1_700_000_000_000_000_000),
        );
        assert_eq!(e.name().to_string(), "web-0.17979cfe362a0000");
    }

    #[test]
    fn cluster_scoped_objects_get_events_in_default_namespace() {
        let src = Arc::new(Source::new("c", "h"));
        let e = Event::new(
            pod(""),
            src.clone(),
            EventType::Warning,
            "R",
            "m",
            Time::EPOCH,
        );
        assert_eq!(e.namespace(), "default");
        let e = Event::new(
            pod("team-a"),
            src,
            EventType::Warning,
            "R",
            "m",
            Time::EPOCH,
        );
        assert_eq!(e.namespace(), "team-a");
    }

    #[test]
    fn reporting_controller_and_instance_come_from_the_source() {
        let e = Event::new(
            pod("a"),
            Arc::new(Source::new("ctrl", "node-1")),
            EventType::Normal,
            "R",
            "m",
            Time::EPOCH,
        );
        assert_eq!(&*e.reporting_controller, "ctrl");
        assert_eq!(&*e.reporting_instance, "node-1");
    }

    #[test]
    fn events_without_kind_name_or_reason_are_invalid() {
        let src = Arc::new(Source::new("c", ""));
        let mut obj = ObjectRef::new("v1", "", "a", "n", "u");
        let e = Event::new(
            Arc::new(obj.clone()),
            src.clone(),
            EventType::Normal,
            "R",
            "m",
            Time::EPOCH,
        );
        assert_eq!(e.validate(), Err(Invalid::MissingKind));
        obj.kind = "Pod".into();
        obj.name = "".into();
        let e = Event::new(
            Arc::new(obj.clone()),
            src.clone(),
            EventType::Normal,
            "R",
            "m",
            Time::EPOCH,
        );
        assert_eq!(e.validate(), Err(Invalid::MissingName));
        obj.name = "n".into();
        let e = Event::new(Arc::new(obj), src, EventType::Normal, "", "m", Time::EPOCH);
        assert_eq!(e.validate(), Err(Invalid::MissingReason));
    }

    #[test]
    fn event_types_parse_only_the_api_spelling() {
        assert_eq!(EventType::parse("Warning"), Some(EventType::Warning));
        assert_eq!(EventType::parse("warning"), None);
    }
}
