//! Wires the recorder pipeline: [`Recorder`] → [`Broadcaster`] → [`SinkWorker`]
//! (correlator, sink), with one [`FateCounter`] and one set of metrics for all of it, and a
//! [`Reloader`] to change its options while it runs.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::broadcaster::Broadcaster;
use super::clock::Clock;
use super::correlator::Correlator;
use super::event::{Event, Source};
use super::fate::FateCounter;
use super::handle::{Recorder, SourceCell};
use super::metrics::Metrics;
use super::options::Options;
use super::queue;
use super::reloader::Reloader;
use super::sink::Sink;
use super::worker::SinkWorker;

/// How long the sink keeps writing queued events after shutdown (informant's choice; the
/// manager's own grace period bounds it from outside).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The whole recorder pipeline, built but not running. Nothing starts until [`Pipeline::run`].
///
/// Its options can change while it runs, through a [`Reloader`] ([`Pipeline::reloader`]);
/// [`Recorder`]s already handed out follow the reload.
#[derive(Debug)]
pub struct Pipeline<S> {
    recorder: Recorder,
    reloader: Reloader,
    broadcaster: Broadcaster,
    worker: SinkWorker<S, Arc<dyn Clock>>,
    metrics: Metrics,
}

impl<S: Sink> Pipeline<S> {
    /// A pipeline with `options` writing to `sink`, stamping and correlating events with
    /// `clock`. The sink's watcher exists from the start, so no event recorded before
    /// [`Pipeline::run`] is lost (they wait in the incoming queue).
    #[must_use]
    pub fn new(options: &Options, sink: S, clock: Arc<dyn Clock>) -> Self {
        let fates = FateCounter::new();
        let metrics = Metrics::default();
        let (in_tx, in_rx) =
            queue::channel(options.incoming_queue_length, metrics.queue("incoming"));
        let (w_tx, w_rx) = queue::channel(options.watcher_queue_length, metrics.queue("watcher"));
        let source = Arc::new(SourceCell::new(Source::new(&options.component, "")));
        let reloader = Reloader::new(in_tx.downgrade(), source.clone(), options.clone());
        let recorder = Recorder::new(in_tx, source, clock.clone(), fates);
        let correlator = Correlator::new(&options.correlator, clock.clone());
        let worker = SinkWorker::new(
            w_rx,
            correlator,
            sink,
            options,
            clock,
            DEFAULT_SHUTDOWN_GRACE,
        )
        .with_metrics(metrics.sink_latency.clone(), metrics.caches.clone());
        Self {
            recorder,
            reloader,
            broadcaster: Broadcaster::new(in_rx, w_tx),
            worker,
            metrics,
        }
    }

    /// Sets how long queued events are still written after shutdown.
    #[must_use]
    pub fn with_shutdown_grace(self, grace: Duration) -> Self {
        Self {
            worker: self.worker.with_grace(grace),
            ..self
        }
    }

    /// A handle to record events with.
    #[must_use]
    pub fn recorder(&self) -> Recorder {
        self.recorder.clone()
    }

    /// A handle to change the options while the pipeline runs (see [`Reloader`]).
    #[must_use]
    pub fn reloader(&self) -> Reloader {
        self.reloader.clone()
    }

    /// The counter of fates.
    #[must_use]
    pub fn fates(&self) -> FateCounter {
        self.recorder.fates().clone()
    }

    /// Registers the pipeline's metrics in `registry`: the fates
    /// (`informant_events_total{fate}`, as [`FateCounter::register`]), the sink's request
    /// latency (`informant_event_sink_request_duration_seconds{verb}`), the correlator's
    /// cache sizes and the series path's keys (`informant_event_correlator_cache_entries{cache}`,
    /// `cache` = `aggregator`, `logger`, `spam` or `series`), and each queue's
    /// configured length and depth (`informant_event_queue_length{queue}`,
    /// `informant_event_queue_depth{queue}`, `queue` = `incoming` or `watcher`).
    pub fn register(&self, registry: &mut Registry) {
        self.recorder.fates().register(registry);
        self.metrics.register(registry);
    }

    /// Adds an observer of every event, with a queue of `capacity` (see
    /// [`Broadcaster::subscribe`]).
    pub fn subscribe(&mut self, capacity: usize) -> mpsc::Receiver<Arc<Event>> {
        self.broadcaster.subscribe(capacity)
    }

    /// Runs the broadcaster and the sink worker until every [`Recorder`] is dropped and all
    /// events are written, or until `shutdown` plus the grace period.
    ///
    /// It has the shape of every long-running component (`run(self, shutdown) -> Result`), and
    /// cannot fail: a sink error is an event's fate, never the pipeline's
    /// (`let Ok(()) = pipeline.run(shutdown).await;`).
    ///
    /// # Errors
    /// None: the error type is [`Infallible`].
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Infallible> {
        let Self {
            recorder,
            broadcaster,
            worker,
            ..
        } = self;
        // The pipeline's own handle must not keep the queue open.
        drop(recorder);
        tokio::join!(broadcaster.run(shutdown.clone()), worker.run(shutdown));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Mutex;

    use k8s_openapi::api::core::v1 as corev1;

    use super::*;
    use crate::recorder::clock::{ManualClock, Time};
    use crate::recorder::event::{EventType, ObjectRef};
    use crate::recorder::fate::Fate;
    use crate::recorder::options::CorrelatorOptions;
    use crate::recorder::sink::SinkError;

    /// Refuses a second create of a name with 409, as the API server does; remembers the
    /// component of each Event created.
    #[derive(Clone, Default)]
    struct UniqueNameSink {
        names: Arc<Mutex<HashSet<String>>>,
        components: Arc<Mutex<Vec<String>>>,
    }

    impl Sink for UniqueNameSink {
        async fn create(&self, event: &corev1::Event) -> Result<(), SinkError> {
            let name = event.metadata.name.clone().unwrap_or_default();
            if !self.names.lock().unwrap().insert(name.clone()) {
                return Err(SinkError::Rejected {
                    code: 409,
                    message: format!("events \"{name}\" already exists"),
                });
            }
            let source = event.source.clone().unwrap_or_default();
            self.components
                .lock()
                .unwrap()
                .push(source.component.unwrap_or_default());
            Ok(())
        }
        async fn patch(
            &self,
            _namespace: &str,
            name: &str,
            _body: &serde_json::Value,
        ) -> Result<(), SinkError> {
            if self.names.lock().unwrap().contains(name) {
                Ok(())
            } else {
                Err(SinkError::NotFound)
            }
        }
    }

    fn clock() -> Arc<ManualClock> {
        Arc::new(ManualClock::new(Time::from_unix_nanos(
            1_700_000_000_000_000_000,
        )))
    }

    fn hello() -> Arc<ObjectRef> {
        Arc::new(ObjectRef::new(
            "batch/v1", "CronJob", "default", "hello", "u",
        ))
    }

    #[tokio::test]
    async fn two_events_on_one_object_in_one_instant_are_both_created_despite_409_on_duplicates() {
        let sink = UniqueNameSink::default();
        let p = Pipeline::new(&Options::default(), sink.clone(), clock());
        let rec = p.recorder();
        let fates = p.fates();
        rec.record(
            &hello(),
            EventType::Normal,
            "SawCompletedJob",
            "saw hello-4",
        );
        rec.record(
            &hello(),
            EventType::Normal,
            "SuccessfulDelete",
            "deleted hello-1",
        );
        drop(rec);
        p.run(CancellationToken::new()).await;
        assert_eq!(fates.get(Fate::Created), 2);
        assert_eq!(fates.get(Fate::Rejected), 0);
        let mut names: Vec<_> = sink.names.lock().unwrap().iter().cloned().collect();
        names.sort();
        assert_eq!(names, ["hello.17979cfe362a0000", "hello.17979cfe362a0001"]);
    }

    #[tokio::test]
    async fn a_reload_before_run_applies_to_the_events_recorded_after_it_only() {
        let sink = UniqueNameSink::default();
        let clock = clock();
        let old = Options {
            component: "old".into(),
            ..Options::default()
        };
        let p = Pipeline::new(&old, sink.clone(), clock.clone());
        let rec = p.recorder();
        let fates = p.fates();
        let pod = |n: u32| Arc::new(ObjectRef::new("v1", "Pod", "ns", &format!("p{n}"), "u"));
        for n in 0..3 {
            rec.record(&pod(n), EventType::Normal, "R", "m");
        }
        let new = Options {
            component: "new".into(),
            correlator: CorrelatorOptions {
                burst: 1,
                ..CorrelatorOptions::default()
            },
            ..Options::default()
        };
        let changes = p.reloader().reload(&new);
        assert_eq!(changes.to_string(), "component old→new, burst 25→1");
        assert_eq!(p.reloader().options(), new);
        // The same handle, not fetched again: a new component and a bucket of one.
        for _ in 0..3 {
            rec.record(&pod(9), EventType::Normal, "R", "m");
        }
        drop(rec);
        p.run(CancellationToken::new()).await;
        assert_eq!(
            *sink.components.lock().unwrap(),
            ["old", "old", "old", "new"]
        );
        assert_eq!(fates.get(Fate::Created), 4);
        assert_eq!(fates.get(Fate::SpamFiltered), 2);
        assert_eq!(fates.total(), 6);
    }

    #[tokio::test]
    async fn metrics_show_sink_latency_cache_sizes_and_queue_lengths() {
        let opts = Options {
            incoming_queue_length: 7,
            watcher_queue_length: 9,
            ..Options::default()
        };
        let p = Pipeline::new(&opts, UniqueNameSink::default(), clock());
        let mut registry = Registry::default();
        p.register(&mut registry);
        let rec = p.recorder();
        for _ in 0..3 {
            rec.record(&hello(), EventType::Warning, "BackOff", "restarting");
        }
        rec.record(&hello(), EventType::Warning, "BackOff", "pulling");
        rec.record(&hello(), EventType::Normal, "Started", "started");
        let reloader = p.reloader();
        drop(rec);
        p.run(CancellationToken::new()).await;
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "informant_events_total{fate=\"created\"} 3",
            "informant_events_total{fate=\"patched\"} 2",
            "informant_event_sink_request_duration_seconds_count{verb=\"create\"} 3",
            "informant_event_sink_request_duration_seconds_count{verb=\"patch\"} 2",
            "informant_event_sink_request_duration_seconds_bucket{le=\"0.005\",verb=\"create\"}",
            "informant_event_correlator_cache_entries{cache=\"aggregator\"} 2",
            "informant_event_correlator_cache_entries{cache=\"logger\"} 3",
            "informant_event_correlator_cache_entries{cache=\"spam\"} 2",
            "informant_event_queue_length{queue=\"incoming\"} 7",
            "informant_event_queue_length{queue=\"watcher\"} 9",
            "informant_event_queue_depth{queue=\"incoming\"} 0",
            "informant_event_queue_depth{queue=\"watcher\"} 0",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        // A reload shows at once in the configured length of the incoming queue.
        reloader.reload(&Options {
            incoming_queue_length: 70,
            ..opts
        });
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("informant_event_queue_length{queue=\"incoming\"} 70"));
    }
}
