//! The sink's watcher (client-go `StartRecordingToSink` / `recordToSink`): takes events from
//! its queue, correlates them, writes them with retries, and ends each in its fate. On
//! shutdown it keeps writing what is queued for a bounded grace period; what is left then
//! ends `dropped_shutdown`.
//!
//! A reload reaches it in band, behind every event recorded before it: those are correlated
//! and written (retries included) under the old options, everything after under the new.
//!
//! With `api: events.k8s.io/v1` events go to the series path instead (a
//! [`series::driver::Driver`](super::series::driver::Driver)), whose writes run concurrently
//! with the queue. A reload switching the API sends the events after it down the other path;
//! the series already cached keep their refresh and finish, so nothing queued or counted is
//! lost. While a core/v1 event is being retried the series path waits (as it would for any
//! slow write of the one worker).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::clock::Clock;
use super::correlator::{Action, Correlator};
use super::envelope::Envelope;
use super::fate::Fate;
use super::metrics::{CacheGauges, SinkLatency};
use super::options::{Api, Options, SinkOptions};
use super::queue::{Item, Receiver};
use super::series::driver::Driver;
use super::sink::{Sink, deliver};

/// Correlates and writes the events of one watcher queue.
#[derive(Debug)]
pub struct SinkWorker<S, C> {
    queue: Receiver,
    correlator: Correlator<C>,
    sink: Arc<S>,
    options: SinkOptions,
    api: Api,
    /// Boxed: the series path is rarely used and would otherwise grow every future holding
    /// a pipeline.
    series: Box<Driver<S>>,
    grace: Duration,
    latency: SinkLatency,
    caches: CacheGauges,
}

impl<S: Sink, C: Clock> SinkWorker<S, C> {
    /// A worker draining `queue` through `correlator` (core/v1) or the series path
    /// (`events.k8s.io/v1`, as `options.api` says) into `sink`, with the series path's time
    /// from `clock`, flushing for `grace` after shutdown.
    #[must_use]
    pub(crate) fn new(
        queue: Receiver,
        correlator: Correlator<C>,
        sink: S,
        options: &Options,
        clock: Arc<dyn super::clock::Clock>,
        grace: Duration,
    ) -> Self {
        let sink = Arc::new(sink);
        Self {
            queue,
            correlator,
            series: Box::new(Driver::new(
                sink.clone(),
                clock,
                &options.series,
                &options.sink,
            )),
            sink,
            options: options.sink.clone(),
            api: options.api,
            grace,
            latency: SinkLatency::default(),
            caches: CacheGauges::default(),
        }
    }

    /// Reports request latency to `latency` and cache sizes to `caches`.
    #[must_use]
    pub(crate) fn with_metrics(mut self, latency: SinkLatency, caches: CacheGauges) -> Self {
        self.series = Box::new(self.series.with_latency(latency.clone()));
        self.latency = latency;
        self.caches = caches;
        self
    }

    /// Sets the grace period after shutdown.
    #[must_use]
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Runs until the broadcaster is gone and the queue is empty, or until `grace` after
    /// `shutdown` is cancelled.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let deadline = OnceLock::new();
        let grace = self.grace;
        let stop = || {
            let shutdown = &shutdown;
            let deadline = &deadline;
            async move {
                shutdown.cancelled().await;
                let at = *deadline.get_or_init(|| Instant::now() + grace);
                tokio::time::sleep_until(at).await;
            }
        };
        if self.api == Api::EventsV1 {
            self.series.start();
        }
        loop {
            let item = tokio::select! {
                biased;
                () = stop() => break,
                item = self.queue.recv() => match item {
                    Some(item) => item,
                    None => break,
                },
                () = self.series.step() => {
                    self.caches.set_series(self.series.cached());
                    continue;
                }
            };
            match item {
                Item::Event(envelope) if self.api == Api::EventsV1 => {
                    self.series.record(envelope);
                    self.caches.set_series(self.series.cached());
                }
                Item::Event(envelope) => self.handle(envelope, stop()).await,
                Item::Reload(options) => {
                    self.correlator.reconfigure(&options.correlator);
                    self.options.clone_from(&options.sink);
                    self.series.reconfigure(&options.series, &options.sink);
                    self.api = options.api;
                    if self.api == Api::EventsV1 {
                        self.series.start();
                    }
                    self.caches.set(self.correlator.cache_entries());
                }
            }
        }
        self.queue.close();
        while let Some(item) = self.queue.try_recv() {
            if let Item::Event(envelope) = item {
                envelope.finish(Fate::DroppedShutdown);
            }
        }
        self.series.finish(stop()).await;
        self.caches.set_series(0);
    }

    /// Keys cached by the series path.
    #[must_use]
    pub fn series_cached(&self) -> usize {
        self.series.cached()
    }

    async fn handle(&mut self, envelope: Envelope, stop: impl Future<Output = ()>) {
        let event = envelope.event().clone();
        let c = self.correlator.correlate(&event);
        self.caches.set(self.correlator.cache_entries());
        let span = envelope.span();
        span.record(
            "event.aggregation_key",
            tracing::field::display(c.aggregate_key.0),
        );
        span.record("event.spam_key", tracing::field::display(c.spam_key.0));
        span.record("event.count", c.count);
        span.record("event.tokens_left", c.tokens_left);
        if c.action == Action::Skip {
            envelope.finish(Fate::SpamFiltered);
            return;
        }
        let delivery = deliver(&*self.sink, &self.options, &self.latency, &event, &c, stop)
            .instrument(span.clone())
            .await;
        if delivery.fate.is_delivered() {
            // client-go `UpdateState`: remember what the server now holds.
            self.correlator.update_state(&event, &c);
        }
        span.record("event.tries", delivery.tries);
        envelope.finish(delivery.fate);
    }
}
