//! The `event` span on `events.k8s.io/v1`: one per occurrence, with the series count it made,
//! the tries of its own write and its fate. (Alone in its test binary: tracing's callsite
//! interest is process-wide.)

use std::sync::{Arc, Mutex};

use informant::recorder::{
    Api, Clock, EventType, ManualClock, NullSink, ObjectRef, Options, Pipeline, Time,
};
use tokio_util::sync::CancellationToken;

/// The fields of every `event` span, as `name=value` strings, by span id (ids are reused
/// once a span closes: the open one is the last with its id).
#[derive(Clone, Default)]
struct SpanFields(Arc<Mutex<Vec<SpanRecord>>>);

/// A span's id and its fields so far.
type SpanRecord = (u64, Vec<String>);

struct Visitor<'a>(&'a mut Vec<String>);

impl tracing::field::Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push(format!("{}={value:?}", field.name()));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push(format!("{}={value}", field.name()));
    }
}

impl<S> tracing_subscriber::Layer<S> for SpanFields
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if attrs.metadata().name() == "event" {
            let mut fields = Vec::new();
            attrs.record(&mut Visitor(&mut fields));
            self.0.lock().unwrap().push((id.into_u64(), fields));
        }
    }
    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut spans = self.0.lock().unwrap();
        if let Some((_, fields)) = spans.iter_mut().rev().find(|(i, _)| *i == id.into_u64()) {
            values.record(&mut Visitor(fields));
        }
    }
}

#[tokio::test(start_paused = true)]
async fn each_occurrence_span_carries_its_series_count_tries_and_fate() {
    use tracing_subscriber::layer::SubscriberExt;
    let fields = SpanFields::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(fields.clone()));
    let options = Options {
        api: Api::EventsV1,
        ..Options::default()
    };
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(Time::from_unix_nanos(
        1_700_000_000_000_000_000,
    )));
    let p = Pipeline::new(&options, NullSink, clock);
    let rec = p.recorder();
    let pod = Arc::new(ObjectRef::new("v1", "Pod", "ns", "web-0", "u"));
    for _ in 0..3 {
        rec.record(&pod, EventType::Warning, "BackOff", "restarting");
    }
    drop(rec);
    p.run(CancellationToken::new()).await;
    let spans: Vec<String> = fields
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(_, f)| f.join(" "))
        .collect();
    assert_eq!(spans.len(), 3, "{spans:?}");
    for (span, want) in spans.iter().zip([
        ["event.count=1", "event.tries=1", "event.fate=created"],
        [
            "event.count=2",
            "event.tries=1",
            "event.fate=series_patched",
        ],
        [
            "event.count=3",
            "object.ref=Pod/ns/web-0",
            "event.fate=series_counted",
        ],
    ]) {
        for w in want {
            assert!(span.contains(w), "{w} missing in {span}");
        }
    }
    assert!(!spans[2].contains("event.tries"), "{}", spans[2]);
}
