//! The recorder's `event` spans reach an OpenTelemetry exporter through tracing-opentelemetry,
//! with the event's fate and keys as attributes. The subscriber is the test thread's default
//! (`support::capture_spans`; a paused runtime is current-thread), not the process's.

use std::sync::Arc;

use informant::recorder::{
    Clock, EventType, ManualClock, ObjectRef, Options, Pipeline, Sink, SinkError, Time,
};
use k8s_openapi::api::core::v1 as corev1;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::layer::SubscriberExt as _;

/// A sink that accepts everything.
struct OkSink;

impl Sink for OkSink {
    async fn create(&self, _event: &corev1::Event) -> Result<(), SinkError> {
        Ok(())
    }
    async fn patch(&self, _: &str, _: &str, _: &serde_json::Value) -> Result<(), SinkError> {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn every_event_becomes_one_exported_otel_span_with_its_fate() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("informant")));
    let _guard = crate::support::capture_spans(subscriber);

    let mut options = Options::default();
    options.correlator.burst = 2;
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(Time::from_unix_nanos(
        1_700_000_000_000_000_000,
    )));
    let pipeline = Pipeline::new(&options, OkSink, clock);
    let fates = pipeline.fates();
    let recorder = pipeline.recorder();
    let pod = Arc::new(ObjectRef::new("v1", "Pod", "ns", "web-0", "uid-web-0"));
    for _ in 0..3 {
        recorder.record(&pod, EventType::Warning, "BackOff", "restarting");
    }
    drop(recorder);
    pipeline.run(CancellationToken::new()).await;
    provider.force_flush().unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    let events: Vec<_> = spans.iter().filter(|s| s.name == "event").collect();
    assert_eq!(events.len(), 3, "one span per recorded event: {spans:#?}");
    let fate_of = |s: &opentelemetry_sdk::trace::SpanData| {
        s.attributes
            .iter()
            .find(|kv| kv.key.as_str() == "event.fate")
            .map(|kv| kv.value.to_string())
    };
    let mut fates_seen: Vec<_> = events.iter().filter_map(|s| fate_of(s)).collect();
    fates_seen.sort();
    assert_eq!(fates_seen, ["created", "patched", "spam_filtered"]);
    assert_eq!(fates.total(), 3, "recorded = sum of fates");
    for s in &events {
        let keys: Vec<&str> = s.attributes.iter().map(|kv| kv.key.as_str()).collect();
        for want in ["event.reason", "event.type", "object.ref", "event.spam_key"] {
            assert!(keys.contains(&want), "{want} missing in {keys:?}");
        }
    }
}
