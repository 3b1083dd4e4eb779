//! The sink's watcher (client-go `StartRecordingToSink` / `recordToSink`): takes events from
//! its queue, correlates them, writes them with retries, and ends each in its fate. On
//! shutdown it keeps writing what is queued for a bounded grace period; what is left then
//! ends `dropped_shutdown`.
//!
//! A reload reaches it in band, behind every event recorded before it: those are correlated
//! and written (retries included) under the old options, everything after under the new.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::clock::Clock;
use super::correlator::{Action, Correlator};
use super::envelope::Envelope;
use super::fate::Fate;
use super::metrics::{CacheGauges, SinkLatency};
use super::options::SinkOptions;
use super::queue::{Item, Receiver};
use super::sink::{Sink, deliver};

/// Correlates and writes the events of one watcher queue.
#[derive(Debug)]
pub struct SinkWorker<S, C> {
    queue: Receiver,
    correlator: Correlator<C>,
    sink: S,
    options: SinkOptions,
    grace: Duration,
    latency: SinkLatency,
    caches: CacheGauges,
}

impl<S: Sink, C: Clock> SinkWorker<S, C> {
    /// A worker draining `queue` through `correlator` into `sink`, flushing for `grace`
    /// after shutdown.
    #[must_use]
    pub(crate) fn new(
        queue: Receiver,
        correlator: Correlator<C>,
        sink: S,
        options: SinkOptions,
        grace: Duration,
    ) -> Self {
        Self {
            queue,
            correlator,
            sink,
            options,
            grace,
            latency: SinkLatency::default(),
            caches: CacheGauges::default(),
        }
    }

    /// Reports request latency to `latency` and cache sizes to `caches`.
    #[must_use]
    pub(crate) fn with_metrics(mut self, latency: SinkLatency, caches: CacheGauges) -> Self {
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
        loop {
            let item = tokio::select! {
                biased;
                () = stop() => break,
                item = self.queue.recv() => match item {
                    Some(item) => item,
                    None => break,
                },
            };
            match item {
                Item::Event(envelope) => self.handle(envelope, stop()).await,
                Item::Reload(options) => {
                    self.correlator.reconfigure(&options.correlator);
                    self.options.clone_from(&options.sink);
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
        let delivery = deliver(&self.sink, &self.options, &self.latency, &event, &c, stop)
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
