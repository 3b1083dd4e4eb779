//! Wires the recorder pipeline: [`Recorder`] → [`Broadcaster`] → [`SinkWorker`]
//! (correlator, sink), with one [`FateCounter`] for all of it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::broadcaster::Broadcaster;
use super::clock::Clock;
use super::correlator::Correlator;
use super::event::{Event, Source};
use super::fate::FateCounter;
use super::handle::Recorder;
use super::options::Options;
use super::sink::Sink;
use super::worker::SinkWorker;

/// How long the sink keeps writing queued events after shutdown (informant's choice; the
/// manager's own grace period bounds it from outside).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The whole recorder pipeline, built but not running. Nothing starts until [`Pipeline::run`].
#[derive(Debug)]
pub struct Pipeline<S> {
    recorder: Recorder,
    broadcaster: Broadcaster,
    worker: SinkWorker<S, Arc<dyn Clock>>,
}

impl<S: Sink> Pipeline<S> {
    /// A pipeline with `options` writing to `sink`, stamping and correlating events with
    /// `clock`. The sink's watcher exists from the start, so no event recorded before
    /// [`Pipeline::run`] is lost (they wait in the incoming queue).
    #[must_use]
    pub fn new(options: &Options, sink: S, clock: Arc<dyn Clock>) -> Self {
        let fates = FateCounter::new();
        let (in_tx, in_rx) = mpsc::channel(options.incoming_queue_length.max(1));
        let (w_tx, w_rx) = mpsc::channel(options.watcher_queue_length.max(1));
        let source = Arc::new(Source::new(&options.component, ""));
        let recorder = Recorder::new(in_tx, source, clock.clone(), fates);
        let correlator = Correlator::new(&options.correlator, clock);
        Self {
            recorder,
            broadcaster: Broadcaster::new(in_rx, w_tx),
            worker: SinkWorker::new(
                w_rx,
                correlator,
                sink,
                options.sink.clone(),
                DEFAULT_SHUTDOWN_GRACE,
            ),
        }
    }

    /// Sets how long queued events are still written after shutdown.
    #[must_use]
    pub fn with_shutdown_grace(self, grace: Duration) -> Self {
        let Self {
            recorder,
            broadcaster,
            worker,
        } = self;
        Self {
            recorder,
            broadcaster,
            worker: worker.with_grace(grace),
        }
    }

    /// A handle to record events with.
    #[must_use]
    pub fn recorder(&self) -> Recorder {
        self.recorder.clone()
    }

    /// The counter of fates.
    #[must_use]
    pub fn fates(&self) -> FateCounter {
        self.recorder.fates().clone()
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
        } = self;
        // The pipeline's own handle must not keep the queue open.
        drop(recorder);
        tokio::join!(broadcaster.run(shutdown.clone()), worker.run(shutdown));
    }
}
