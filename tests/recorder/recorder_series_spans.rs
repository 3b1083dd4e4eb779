//! The `event` span on `events.k8s.io/v1`: one per occurrence, with the series count it made,
//! the tries of its own write and its fate. The subscriber is the test thread's default, as in
//! `recorder_spans`, whose span collector it shares.

use std::sync::Arc;

use informant::recorder::{
    Api, Clock, EventType, ManualClock, NullSink, ObjectRef, Options, Pipeline, Time,
};
use tokio_util::sync::CancellationToken;

use crate::recorder_spans::SpanFields;

#[tokio::test(start_paused = true)]
async fn each_occurrence_span_carries_its_series_count_tries_and_fate() {
    use tracing_subscriber::layer::SubscriberExt;
    let fields = SpanFields::default();
    let _guard = crate::support::capture_spans(tracing_subscriber::registry().with(fields.clone()));
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
