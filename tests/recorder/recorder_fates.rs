//! The recorder pipeline end to end (record → broadcaster → correlator → sink) against fake
//! sinks: each fate is reached, and recorded = sum of fates, also under load.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use informant::recorder::{
    Clock, EventType, Fate, FateCounter, ManualClock, ObjectRef, Options, Pipeline, Sink,
    SinkError, Time,
};
use k8s_openapi::api::core::v1 as corev1;
use tokio_util::sync::CancellationToken;

/// Answers from a script (then `Ok`), optionally taking `delay` per call, counting calls.
#[derive(Clone, Default)]
struct ScriptedSink {
    script: Arc<Mutex<VecDeque<Result<(), SinkError>>>>,
    delay: Duration,
    calls: Arc<AtomicU64>,
}

impl ScriptedSink {
    fn new(script: Vec<Result<(), SinkError>>, delay: Duration) -> Self {
        Self {
            script: Arc::new(Mutex::new(script.into())),
            delay,
            calls: Arc::default(),
        }
    }
    async fn answer(&self) -> Result<(), SinkError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        self.script.lock().unwrap().pop_front().unwrap_or(Ok(()))
    }
}

impl Sink for ScriptedSink {
    async fn create(&self, _event: &corev1::Event) -> Result<(), SinkError> {
        self.answer().await
    }
    async fn patch(
        &self,
        _namespace: &str,
        _name: &str,
        _body: &serde_json::Value,
    ) -> Result<(), SinkError> {
        self.answer().await
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

fn options(incoming: usize, watcher: usize) -> Options {
    Options {
        incoming_queue_length: incoming,
        watcher_queue_length: watcher,
        ..Options::default()
    }
}

fn assert_conserved(fates: &FateCounter, recorded: u64) {
    assert_eq!(
        fates.recorded(),
        recorded,
        "informant_events_recorded_total counts every event recorded"
    );
    let snapshot = fates.snapshot();
    assert_eq!(
        fates.total(),
        recorded,
        "recorded {recorded} != sum of fates {:?}",
        Fate::ALL.iter().zip(snapshot).collect::<Vec<_>>()
    );
}

fn transport() -> SinkError {
    SinkError::Transport("connection refused".into())
}

#[tokio::test(start_paused = true)]
async fn identical_events_are_created_once_patched_then_spam_filtered() {
    let p = Pipeline::new(&options(100, 100), ScriptedSink::default(), clock());
    let rec = p.recorder();
    let fates = p.fates();
    for _ in 0..30 {
        rec.record(&pod("web-0"), EventType::Warning, "BackOff", "restarting");
    }
    drop(rec);
    p.run(CancellationToken::new()).await;
    assert_eq!(fates.get(Fate::Created), 1);
    assert_eq!(fates.get(Fate::Patched), 24);
    assert_eq!(fates.get(Fate::SpamFiltered), 5);
    assert_conserved(&fates, 30);
}

#[tokio::test(start_paused = true)]
async fn invalid_events_are_refused_before_queuing() {
    let p = Pipeline::new(&options(10, 10), ScriptedSink::default(), clock());
    let rec = p.recorder();
    let fates = p.fates();
    rec.record(&pod("web-0"), EventType::Normal, "", "no reason");
    rec.record(&pod(""), EventType::Normal, "R", "no name");
    drop(rec);
    p.run(CancellationToken::new()).await;
    assert_eq!(fates.get(Fate::Invalid), 2);
    assert_conserved(&fates, 2);
}

#[tokio::test(start_paused = true)]
async fn a_full_incoming_queue_drops_without_blocking_the_caller() {
    let p = Pipeline::new(&options(3, 10), ScriptedSink::default(), clock());
    let rec = p.recorder();
    let fates = p.fates();
    // The pipeline is not running: the queue fills and record() still returns at once.
    for i in 0..10 {
        rec.record(&pod(&format!("p{i}")), EventType::Normal, "R", "m");
    }
    assert_eq!(fates.get(Fate::DroppedIncomingFull), 7);
    drop(rec);
    p.run(CancellationToken::new()).await;
    assert_eq!(fates.get(Fate::Created), 3);
    assert_conserved(&fates, 10);
}

#[tokio::test(start_paused = true)]
async fn a_full_watcher_queue_drops_as_dropped_watcher_full() {
    let p = Pipeline::new(&options(10, 2), ScriptedSink::default(), clock());
    let rec = p.recorder();
    let fates = p.fates();
    for i in 0..10 {
        rec.record(&pod(&format!("p{i}")), EventType::Normal, "R", "m");
    }
    drop(rec);
    // The broadcaster hands all ten over before the worker takes one (biased scheduling on
    // one thread is not guaranteed, so only bound the drops).
    p.run(CancellationToken::new()).await;
    let dropped = fates.get(Fate::DroppedWatcherFull);
    assert!((1..=8).contains(&dropped), "{dropped}");
    assert_eq!(fates.get(Fate::Created), 10 - dropped);
    assert_conserved(&fates, 10);
}

#[tokio::test(start_paused = true)]
async fn server_rejections_are_not_retried_and_transport_errors_fail_after_max_retries() {
    let mut script = vec![Err(SinkError::Rejected {
        code: 403,
        message: "forbidden".into(),
    })];
    script.extend((0..12).map(|_| Err(transport())));
    let sink = ScriptedSink::new(script, Duration::ZERO);
    let calls = sink.calls.clone();
    let p = Pipeline::new(&options(10, 10), sink, clock());
    let rec = p.recorder();
    let fates = p.fates();
    rec.record(&pod("a"), EventType::Normal, "R", "m");
    rec.record(&pod("b"), EventType::Normal, "R", "m");
    rec.record(&pod("c"), EventType::Normal, "R", "m");
    drop(rec);
    p.run(CancellationToken::new()).await;
    assert_eq!(fates.get(Fate::Rejected), 1);
    assert_eq!(fates.get(Fate::Failed), 1);
    assert_eq!(fates.get(Fate::Created), 1);
    assert_eq!(calls.load(Ordering::SeqCst), 1 + 12 + 1);
    assert_conserved(&fates, 3);
}

#[tokio::test(start_paused = true)]
async fn on_shutdown_queued_events_are_written_within_the_grace_then_dropped_shutdown() {
    // Each write takes 1 s; the grace is 2.5 s: about three more get written.
    let sink = ScriptedSink::new(Vec::new(), Duration::from_secs(1));
    let p = Pipeline::new(&options(100, 100), sink, clock())
        .with_shutdown_grace(Duration::from_millis(2_500));
    let rec = p.recorder();
    let fates = p.fates();
    for i in 0..20 {
        rec.record(&pod(&format!("p{i}")), EventType::Normal, "R", "m");
    }
    let shutdown = CancellationToken::new();
    shutdown.cancel();
    p.run(shutdown).await;
    // After shutdown, record() no longer queues.
    rec.record(&pod("late"), EventType::Normal, "R", "m");
    let written = fates.get(Fate::Created);
    assert!((2..=4).contains(&written), "{written}");
    assert_eq!(fates.get(Fate::DroppedShutdown), 21 - written);
    assert_conserved(&fates, 21);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_load_with_a_slow_sink_recorded_equals_the_sum_of_fates() {
    const N: u64 = 100_000;
    let sink = ScriptedSink::new(Vec::new(), Duration::from_micros(50));
    let p = Pipeline::new(&Options::default(), sink, clock())
        .with_shutdown_grace(Duration::from_millis(50));
    let fates = p.fates();
    let rec = p.recorder();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(p.run(shutdown.clone()));
    let producers: Vec<_> = (0..4u64)
        .map(|t| {
            let rec = rec.clone();
            std::thread::spawn(move || {
                for i in 0..N / 4 {
                    let obj = pod(&format!("p{}", (i * 7 + t) % 500));
                    rec.record(&obj, EventType::Normal, "Sync", &format!("m{}", i % 20));
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    drop(rec);
    shutdown.cancel();
    running.await.unwrap();
    assert_conserved(&fates, N);
    assert!(fates.get(Fate::DroppedIncomingFull) + fates.get(Fate::DroppedWatcherFull) > 0);
    assert!(fates.get(Fate::Created) > 0);
}
