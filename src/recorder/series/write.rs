//! One write of an `events.k8s.io/v1` Event, as client-go's `recordEvent`
//! (`tools/events/event_broadcaster.go`) makes it: a series is patched, falling back to a
//! create carrying the series on `NotFound`; anything else is created. Then the answer is
//! sorted: delivered, retry (transport errors, and `AlreadyExists` for a series only) or
//! abandoned (every other status error, a request that cannot be built).

use std::sync::Arc;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::events::v1 as eventsv1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

use crate::recorder::clock::Time;
use crate::recorder::event::{Event, EventName, ObjectRef};
use crate::recorder::sink::SinkError;

/// A series as client-go's `EventSeries` holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesState {
    /// Occurrences so far (2 when the series opens).
    pub count: u32,
    /// When the last one was observed.
    pub last_observed: Time,
}

/// The HTTP verb of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `POST …/events`.
    Create,
    /// `PATCH …/events/<name>`, strategic merge.
    Patch,
}

impl Verb {
    /// `create` or `patch`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Patch => "patch",
        }
    }
}

/// A snapshot of a cached Event to write: the first occurrence, its name, and the series.
#[derive(Clone, Debug)]
pub struct Write {
    /// The first occurrence (its note, eventTime and name are the Event's).
    pub event: Arc<Event>,
    /// The Event's name.
    pub name: EventName,
    /// The series, if it opened.
    pub series: Option<SeriesState>,
}

/// How one call ended, sorted as client-go's `recordEvent` sorts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Written, by this verb.
    Delivered(Verb),
    /// Fall back to a create carrying the series (a series patch got `NotFound`).
    CreateInstead,
    /// Try again later (a transport error; `AlreadyExists` on a series create).
    Retry,
    /// Give up: a status error, or a request that cannot be built.
    Abandon,
}

impl Write {
    /// The first call of this write: patch for a series, else create.
    #[must_use]
    pub fn first_verb(&self) -> Verb {
        if self.series.is_some() {
            Verb::Patch
        } else {
            Verb::Create
        }
    }

    /// Sorts the answer `result` to a call made with `verb`.
    #[must_use]
    pub fn sort(&self, verb: Verb, result: &Result<(), SinkError>) -> Answer {
        let is_series = self.series.is_some();
        match result {
            Ok(()) => Answer::Delivered(verb),
            Err(SinkError::NotFound) if verb == Verb::Patch => Answer::CreateInstead,
            Err(SinkError::Transport(_)) => Answer::Retry,
            // client-go: "If we tried to create an Event from an EventSerie, it means that the
            // original Patch request failed because the Event we were trying to patch didn't
            // exist. If the creation failed because the Event now exists, it is safe to retry."
            Err(SinkError::Rejected { code: 409, .. }) if is_series => Answer::Retry,
            Err(_) => Answer::Abandon,
        }
    }

    /// The namespace of the Event: the regarding object's, or `default`.
    #[must_use]
    pub fn namespace(&self) -> &str {
        self.event.namespace()
    }

    /// The Event to create (client-go `makeEvent`, with the series if it opened).
    #[must_use]
    pub fn to_k8s(&self) -> eventsv1::Event {
        let e = &*self.event;
        eventsv1::Event {
            metadata: ObjectMeta {
                name: Some(self.name.to_string()),
                namespace: Some(e.namespace().to_owned()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(e.time.to_timestamp())),
            series: self.series.map(series_to_k8s),
            reporting_controller: Some(e.reporting_controller.to_string()),
            reporting_instance: Some(reporting_instance(e).to_owned()),
            action: e.action.as_deref().map(str::to_owned),
            reason: Some(e.reason.to_string()),
            regarding: Some(object_ref(&e.involved_object)),
            related: e.related.as_deref().map(object_ref),
            note: Some(e.message.to_string()),
            type_: Some(e.event_type.as_str().to_owned()),
            ..eventsv1::Event::default()
        }
    }

    /// The strategic-merge patch of a series (client-go `createPatchBytesForSeries`: the
    /// two-way merge patch from the Event without its series to the Event with it), or
    /// `None` if there is no series.
    #[must_use]
    pub fn patch_body(&self) -> Option<serde_json::Value> {
        let series = serde_json::to_value(series_to_k8s(self.series?)).ok()?;
        Some(serde_json::json!({ "series": series }))
    }
}

fn series_to_k8s(s: SeriesState) -> eventsv1::EventSeries {
    eventsv1::EventSeries {
        count: i32::try_from(s.count).unwrap_or(i32::MAX),
        last_observed_time: MicroTime(s.last_observed.to_timestamp()),
    }
}

/// `reportingInstance`, which `events.k8s.io/v1` requires: the event's, or its controller's
/// name when none was set (client-go appends the host name; informant's recorder has no
/// host unless its source names one).
#[must_use]
pub fn reporting_instance(e: &Event) -> &str {
    if e.reporting_instance.is_empty() {
        &e.reporting_controller
    } else {
        &e.reporting_instance
    }
}

fn object_ref(o: &ObjectRef) -> corev1::ObjectReference {
    let s = |v: &Arc<str>| (!v.is_empty()).then(|| v.to_string());
    corev1::ObjectReference {
        api_version: s(&o.api_version),
        field_path: s(&o.field_path),
        kind: s(&o.kind),
        name: s(&o.name),
        namespace: s(&o.namespace),
        resource_version: s(&o.resource_version),
        uid: s(&o.uid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::event::{EventType, Source};

    fn write(series: Option<u32>) -> Write {
        let mut e = Event::new(
            Arc::new(ObjectRef::new("v1", "Pod", "", "p", "u")),
            Arc::new(Source::new("ctrl", "")),
            EventType::Warning,
            "BackOff",
            "restarting",
            Time::from_unix_nanos(1_700_000_000_000_000_000),
        );
        e.action = Some("Restart".into());
        let e = Arc::new(e);
        Write {
            name: e.name(),
            event: e,
            series: series.map(|count| SeriesState {
                count,
                last_observed: Time::from_unix_nanos(1_700_000_000_500_000_000),
            }),
        }
    }

    #[test]
    fn a_series_is_patched_with_count_and_last_observed_time_only() {
        let w = write(Some(2));
        assert_eq!(w.first_verb(), Verb::Patch);
        assert_eq!(
            w.patch_body().unwrap(),
            serde_json::json!({"series": {"count": 2, "lastObservedTime": "2023-11-14T22:13:20.500000Z"}})
        );
        assert_eq!(write(None).first_verb(), Verb::Create);
        assert_eq!(write(None).patch_body(), None);
    }

    #[test]
    fn the_created_event_is_client_go_make_event() {
        let k = write(None).to_k8s();
        assert_eq!(k.metadata.name.as_deref(), Some("p.17979cfe362a0000"));
        assert_eq!(k.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(k.reporting_instance.as_deref(), Some("ctrl"));
        assert_eq!(k.note.as_deref(), Some("restarting"));
        assert_eq!(k.series, None);
        let json = serde_json::to_value(&k).unwrap();
        assert_eq!(json["eventTime"], "2023-11-14T22:13:20.000000Z");
        assert_eq!(write(Some(3)).to_k8s().series.unwrap().count, 3);
    }

    #[test]
    fn answers_are_sorted_as_client_go_record_event_sorts_them() {
        let status = |code| {
            Err(SinkError::Rejected {
                code,
                message: String::new(),
            })
        };
        let series = write(Some(2));
        let single = write(None);
        assert_eq!(
            series.sort(Verb::Patch, &Ok(())),
            Answer::Delivered(Verb::Patch)
        );
        assert_eq!(
            series.sort(Verb::Patch, &Err(SinkError::NotFound)),
            Answer::CreateInstead
        );
        assert_eq!(
            single.sort(Verb::Create, &Err(SinkError::NotFound)),
            Answer::Abandon
        );
        assert_eq!(series.sort(Verb::Create, &status(409)), Answer::Retry);
        assert_eq!(single.sort(Verb::Create, &status(409)), Answer::Abandon);
        for code in [403, 422] {
            assert_eq!(single.sort(Verb::Create, &status(code)), Answer::Abandon);
        }
        let unavailable = Err(SinkError::Unavailable {
            code: 500,
            message: String::new(),
        });
        assert_eq!(series.sort(Verb::Patch, &unavailable), Answer::Abandon);
        let transport = Err(SinkError::Transport("reset".into()));
        assert_eq!(single.sort(Verb::Create, &transport), Answer::Retry);
        let request = Err(SinkError::Request("bad".into()));
        assert_eq!(single.sort(Verb::Create, &request), Answer::Abandon);
    }
}
