//! The `event` span of the recorder pipeline: one per event, with its keys, count, tokens
//! left, tries and fate recorded as the event moves on. The subscriber is the test thread's
//! default (`support::capture_spans`; a paused runtime is current-thread), so the other tests of this
//! binary, on their own threads, neither see it nor feed it.

use std::sync::{Arc, Mutex};

use informant::recorder::{
    Clock, EventType, ManualClock, ObjectRef, Options, Pipeline, Sink, SinkError, Time,
};
use k8s_openapi::api::core::v1 as corev1;
use tokio_util::sync::CancellationToken;

/// A sink that accepts everything.
#[derive(Clone, Default)]
struct OkSink;

impl Sink for OkSink {
    async fn create(&self, _event: &corev1::Event) -> Result<(), SinkError> {
        Ok(())
    }
    async fn patch(
        &self,
        _ns: &str,
        _name: &str,
        _body: &serde_json::Value,
    ) -> Result<(), SinkError> {
        Ok(())
    }
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(ManualClock::new(Time::from_unix_nanos(
        1_700_000_000_000_000_000,
    )))
}

fn pod(name: &str) -> Arc<ObjectRef> {
    Arc::new(ObjectRef::new(
        "v1",
        "Pod",
        "ns",
        name,
        &format!("uid-{name}"),
    ))
}

/// Collects the fields of every `event` span, as `name=value` strings (shared with
/// `recorder_series_spans`).
#[derive(Clone, Default)]
pub(crate) struct SpanFields(pub(crate) Arc<Mutex<Vec<SpanRecord>>>);

/// A span's id and its fields so far.
pub(crate) type SpanRecord = (u64, Vec<String>);

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
        if attrs.metadata().name() != "event" {
            return;
        }
        let mut fields = Vec::new();
        attrs.record(&mut Visitor(&mut fields));
        self.0.lock().unwrap().push((id.into_u64(), fields));
    }
    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut spans = self.0.lock().unwrap();
        // Ids are reused once a span closes: the open one is the last with this id.
        if let Some((_, fields)) = spans.iter_mut().rev().find(|(i, _)| *i == id.into_u64()) {
            values.record(&mut Visitor(fields));
        }
    }
}

#[tokio::test(start_paused = true)]
async fn each_event_span_carries_keys_count_tokens_tries_and_fate() {
    use tracing_subscriber::layer::SubscriberExt;
    let fields = SpanFields::default();
    let subscriber = tracing_subscriber::registry().with(fields.clone());
    let _guard = crate::support::capture_spans(subscriber);
    let mut opts = Options::default();
    opts.correlator.burst = 1;
    let p = Pipeline::new(&opts, OkSink, clock());
    let rec = p.recorder();
    rec.record(&pod("web-0"), EventType::Warning, "BackOff", "restarting");
    rec.record(&pod("web-0"), EventType::Warning, "BackOff", "restarting");
    drop(rec);
    p.run(CancellationToken::new()).await;
    let spans: Vec<Vec<String>> = fields
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(_, f)| f.clone())
        .collect();
    assert_eq!(spans.len(), 2, "{spans:?}");
    let first = spans[0].join(" ");
    for want in [
        "event.reason=BackOff",
        "event.type=Warning",
        "object.ref=Pod/ns/web-0",
        "event.aggregation_key=",
        "event.spam_key=",
        "event.count=1",
        "event.tokens_left=0.0",
        "event.tries=1",
        "event.fate=created",
    ] {
        assert!(first.contains(want), "{want} missing in {first}");
    }
    let second = spans[1].join(" ");
    assert!(second.contains("event.count=2"), "{second}");
    assert!(second.contains("event.fate=spam_filtered"), "{second}");
    assert!(!second.contains("event.tries"), "{second}");
}
