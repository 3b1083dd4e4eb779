//! The recorder pipeline on `events.k8s.io/v1` (`Options::api`): series created, patched and
//! counted through a fake sink, every occurrence's fate counted (recorded = Σ fates, also
//! under sink faults), and a reload switching the API losing nothing queued.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use informant::recorder::{
    Api, Clock, EventType, Fate, FateCounter, ManualClock, ObjectRef, Options, Pipeline, Recorder,
    Sink, SinkError, Time,
};
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::events::v1 as eventsv1;
use tokio_util::sync::CancellationToken;

/// Records every call (`create v1 <name>`, `patch events <name> <count>`, …) and answers
/// `events.k8s.io/v1` calls from a script (then `Ok`).
#[derive(Clone, Default)]
struct Recording {
    calls: Arc<Mutex<Vec<String>>>,
    script: Arc<Mutex<VecDeque<Result<(), SinkError>>>>,
}

impl Recording {
    fn answering(script: Vec<Result<(), SinkError>>) -> Self {
        Self {
            script: Arc::new(Mutex::new(script.into())),
            ..Self::default()
        }
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
    fn next(&self, call: String) -> Result<(), SinkError> {
        self.calls.lock().unwrap().push(call);
        self.script.lock().unwrap().pop_front().unwrap_or(Ok(()))
    }
}

impl Sink for Recording {
    async fn create(&self, event: &corev1::Event) -> Result<(), SinkError> {
        self.calls.lock().unwrap().push(format!(
            "create v1 {}",
            event.reason.clone().unwrap_or_default()
        ));
        Ok(())
    }
    async fn patch(&self, _ns: &str, _name: &str, _b: &serde_json::Value) -> Result<(), SinkError> {
        self.calls.lock().unwrap().push("patch v1".into());
        Ok(())
    }
    async fn create_events_v1(&self, event: &eventsv1::Event) -> Result<(), SinkError> {
        let count = event.series.as_ref().map_or(0, |s| s.count);
        assert!(
            event.action.as_deref().is_some_and(|a| !a.is_empty()),
            "{event:?}"
        );
        self.next(format!(
            "create events {} {count}",
            event.reason.clone().unwrap_or_default()
        ))
    }
    async fn patch_events_v1(
        &self,
        _ns: &str,
        _name: &str,
        body: &serde_json::Value,
    ) -> Result<(), SinkError> {
        self.next(format!("patch events {}", body["series"]["count"]))
    }
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(ManualClock::new(Time::from_unix_nanos(
        1_700_000_000_000_000_000,
    )))
}

fn events_v1() -> Options {
    Options {
        api: Api::EventsV1,
        ..Options::default()
    }
}

fn record(rec: &Recorder, reason: &str, action: Option<&str>) {
    let pod = Arc::new(ObjectRef::new("v1", "Pod", "ns", "web-0", "u"));
    let mut e = rec.event(&pod, EventType::Warning, reason, "restarting");
    e.action = action.map(Into::into);
    rec.record_event(e);
}

fn assert_conserved(fates: &FateCounter, recorded: u64) {
    assert_eq!(
        fates.total(),
        recorded,
        "recorded {recorded} != Σ fates {:?}",
        Fate::ALL.iter().zip(fates.snapshot()).collect::<Vec<_>>()
    );
}

#[tokio::test(start_paused = true)]
async fn a_burst_is_created_then_patched_once_and_the_rest_counted_and_flushed_at_the_end() {
    let sink = Recording::default();
    let p = Pipeline::new(&events_v1(), sink.clone(), clock());
    let rec = p.recorder();
    let fates = p.fates();
    for _ in 0..30 {
        record(&rec, "BackOff", Some("Restart"));
    }
    drop(rec);
    p.run(CancellationToken::new()).await;
    assert_eq!(fates.get(Fate::Created), 1);
    assert_eq!(fates.get(Fate::SeriesPatched), 1);
    assert_eq!(fates.get(Fate::SeriesCounted), 28);
    assert_conserved(&fates, 30);
    assert_eq!(
        sink.calls(),
        [
            "create events BackOff 0",
            "patch events 2",
            "patch events 30"
        ]
    );
}

/// `Recorder::record` has no action, which `events.k8s.io/v1` requires: the reason is the
/// action, so what the manager and controllers record is delivered on either API.
#[tokio::test(start_paused = true)]
async fn an_event_without_action_takes_its_reason_as_action() {
    let sink = Recording::default();
    let p = Pipeline::new(&events_v1(), sink.clone(), clock());
    let rec = p.recorder();
    let fates = p.fates();
    record(&rec, "BackOff", None);
    rec.record(
        &Arc::new(ObjectRef::new("v1", "Pod", "ns", "web-1", "u")),
        EventType::Normal,
        "Started",
        "started",
    );
    drop(rec);
    p.run(CancellationToken::new()).await;
    assert_eq!(fates.get(Fate::Created), 2);
    assert_conserved(&fates, 2);
    let mut calls = sink.calls();
    calls.sort();
    assert_eq!(
        calls,
        ["create events BackOff 0", "create events Started 0"]
    );
}

/// The manager reloads with `pipeline.reloader().reload(&config.recorder)`: the API switch
/// travels in band, so events recorded before it take the old path and after it the new,
/// and the series opened before a switch back are still written.
#[tokio::test(start_paused = true)]
async fn a_reload_switching_the_api_loses_nothing_queued() {
    let sink = Recording::default();
    let p = Pipeline::new(&Options::default(), sink.clone(), clock());
    let rec = p.recorder();
    let fates = p.fates();
    let reloader = p.reloader();
    record(&rec, "OnCore", Some("A"));
    assert_eq!(
        reloader.reload(&events_v1()).to_string(),
        "api v1→events.k8s.io/v1"
    );
    for _ in 0..3 {
        record(&rec, "OnEvents", Some("A"));
    }
    reloader.reload(&Options::default());
    record(&rec, "OnCoreAgain", Some("A"));
    drop(rec);
    p.run(CancellationToken::new()).await;
    assert_conserved(&fates, 5);
    assert_eq!(fates.get(Fate::Created), 3);
    assert_eq!(fates.get(Fate::SeriesPatched), 1);
    assert_eq!(fates.get(Fate::SeriesCounted), 1);
    // The two paths write concurrently; each keeps its own order.
    let calls = sink.calls();
    let on =
        |api: &str| -> Vec<String> { calls.iter().filter(|c| c.contains(api)).cloned().collect() };
    assert_eq!(on(" v1"), ["create v1 OnCore", "create v1 OnCoreAgain"]);
    assert_eq!(
        on(" events"),
        [
            "create events OnEvents 0",
            "patch events 2",
            "patch events 3"
        ]
    );
}

/// recorded = Σ fates whatever the sink answers: every error class, in a long random-ish
/// script, over several objects and reasons.
#[tokio::test(start_paused = true)]
async fn recorded_equals_the_sum_of_fates_under_sink_faults() {
    let classes = |i: u64| match i % 7 {
        0 => Err(SinkError::Transport("reset".into())),
        1 => Err(SinkError::NotFound),
        2 => Err(SinkError::Rejected {
            code: 409,
            message: "exists".into(),
        }),
        3 => Err(SinkError::Rejected {
            code: 403,
            message: "forbidden".into(),
        }),
        4 => Err(SinkError::Unavailable {
            code: 500,
            message: "boom".into(),
        }),
        _ => Ok(()),
    };
    let script = (0..400u64).map(|i| classes(i * 31 % 97)).collect();
    let sink = Recording::answering(script);
    let p = Pipeline::new(&events_v1(), sink.clone(), clock());
    let rec = p.recorder();
    let fates = p.fates();
    let mut recorded = 0;
    for i in 0..300u64 {
        let reason = format!("R{}", i % 5);
        let pod = Arc::new(ObjectRef::new(
            "v1",
            "Pod",
            "ns",
            &format!("p{}", i % 3),
            "u",
        ));
        let mut e = rec.event(&pod, EventType::Normal, &reason, "m");
        e.action = Some("A".into());
        rec.record_event(e);
        recorded += 1;
        if i % 50 == 49 {
            // Let writes, retries and ticks run between bursts (virtual time).
            tokio::time::sleep(std::time::Duration::from_mins(7)).await;
        }
    }
    drop(rec);
    p.run(CancellationToken::new()).await;
    assert_conserved(&fates, recorded);
    for fate in [Fate::Created, Fate::SeriesCounted, Fate::Abandoned] {
        assert!(
            fates.get(fate) > 0,
            "{fate} never reached: {:?}",
            fates.snapshot()
        );
    }
}

/// A shutdown stops the retries after the grace period; what is still retrying or folded
/// ends `dropped_shutdown`, counted.
#[tokio::test(start_paused = true)]
async fn shutdown_ends_what_is_left_in_dropped_shutdown() {
    let script = (0..100)
        .map(|_| Err(SinkError::Transport("down".into())))
        .collect();
    let p = Pipeline::new(&events_v1(), Recording::answering(script), clock())
        .with_shutdown_grace(std::time::Duration::from_secs(1));
    let rec = p.recorder();
    let fates = p.fates();
    for _ in 0..5 {
        record(&rec, "BackOff", Some("Restart"));
    }
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(p.run(shutdown.clone()));
    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    shutdown.cancel();
    run.await.unwrap().unwrap();
    drop(rec);
    assert_conserved(&fates, 5);
    assert_eq!(fates.get(Fate::DroppedShutdown), 5);
}

#[test]
fn the_cache_config_selects_the_api_and_its_series_with_client_go_defaults() {
    let doc = "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\nspec:\n  \
               recorder: {api: events.k8s.io/v1, series: {keyFields: [note, reason], refresh: 10m}}\n";
    let recorder = informant::config::load_str(doc).unwrap().recorder;
    assert_eq!(recorder.api, Api::EventsV1);
    assert_eq!(
        recorder.series.key_fields,
        [
            informant::recorder::SeriesKeyField::Reason,
            informant::recorder::SeriesKeyField::Note
        ]
    );
    assert_eq!(recorder.series.refresh, std::time::Duration::from_mins(10));
    assert_eq!(
        recorder.series.finish,
        informant::recorder::DEFAULT_SERIES_FINISH
    );
    let empty =
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\nspec: {}\n";
    assert_eq!(
        informant::config::load_str(empty).unwrap().recorder,
        Options::default(),
        "an empty CacheConfig still behaves like client-go's tools/record"
    );
}

/// `informant_event_correlator_cache_entries{cache="series"}` shows the keys the series path
/// holds while it runs (two objects: two keys), and 0 once it has flushed and stopped.
#[tokio::test(start_paused = true)]
async fn the_series_cache_size_is_a_metric() {
    let p = Pipeline::new(&events_v1(), Recording::default(), clock());
    let mut registry = prometheus_client::registry::Registry::default();
    p.register(&mut registry);
    let rec = p.recorder();
    let fates = p.fates();
    let run = tokio::spawn(p.run(CancellationToken::new()));
    for name in ["web-0", "web-1"] {
        let pod = Arc::new(ObjectRef::new("v1", "Pod", "ns", name, "u"));
        rec.record(&pod, EventType::Normal, "Started", "started");
    }
    let text = || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    };
    tokio::time::timeout(std::time::Duration::from_secs(5), async {
        while fates.total() < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("both events written");
    let series = "informant_event_correlator_cache_entries{cache=\"series\"}";
    assert!(text().contains(&format!("{series} 2")), "{}", text());
    drop(rec);
    run.await.unwrap().unwrap();
    assert!(text().contains(&format!("{series} 0")), "{}", text());
}
