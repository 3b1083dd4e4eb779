//! Wires the recorder pipeline: [`Recorder`] → [`Broadcaster`] → [`SinkWorker`]
//! (correlator, sink), with one [`FateCounter`] and one set of metrics for all of it, and a
//! [`Reloader`] to change its options while it runs.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::broadcaster::Broadcaster;
use super::clock::Clock;
use super::correlator::Correlator;
use super::event::{Event, Source};
use super::fate::FateCounter;
use super::handle::Recorder;
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
        let source = Arc::new(RwLock::new(Arc::new(Source::new(&options.component, ""))));
        let reloader = Reloader::new(in_tx.downgrade(), source.clone(), options.clone());
        let recorder = Recorder::new(in_tx, source, clock.clone(), fates);
        let correlator = Correlator::new(&options.correlator, clock);
        let worker = SinkWorker::new(
            w_rx,
            correlator,
            sink,
            options.sink.clone(),
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
    /// cache sizes (`informant_event_correlator_cache_entries{cache}`), and each queue's
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
    pub async fn run(self, shutdown: CancellationToken) {
        let Self {
            recorder,
            broadcaster,
            worker,
            ..
        } = self;
        // The pipeline's own handle must not keep the queue open.
        drop(recorder);
        tokio::join!(broadcaster.run(shutdown.clone()), worker.run(shutdown));
    }
}
