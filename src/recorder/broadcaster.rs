//! The broadcaster: one bounded incoming queue, fanned out to bounded watcher queues without
//! ever blocking (apimachinery `pkg/watch/mux.go`, `NewLongQueueBroadcaster` with
//! `DropIfChannelFull`). Unlike client-go, every drop is a fate: the sink's watcher is fixed at
//! construction, so no event is lost before it is registered (mux.go's "terrible hack"), and
//! an event its full queue cannot take ends `dropped_watcher_full`.
//!
//! A reload arrives in band, behind every event recorded before it: the broadcaster applies
//! its watcher queue length from there on and passes it to the sink's watcher, again behind
//! the events it already handed over.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio_util::sync::CancellationToken;

use super::envelope::Envelope;
use super::event::Event;
use super::fate::Fate;
use super::queue::{Item, Receiver, Refused, Sender};

/// Moves events from the incoming queue to the sink's watcher queue and to observers.
#[derive(Debug)]
pub struct Broadcaster {
    incoming: Receiver,
    sink_watcher: Sender,
    observers: Vec<mpsc::Sender<Arc<Event>>>,
    observer_drops: Arc<AtomicU64>,
}

impl Broadcaster {
    /// A broadcaster reading `incoming` and feeding `sink_watcher`, whose outcome is each
    /// event's fate.
    #[must_use]
    pub(crate) fn new(incoming: Receiver, sink_watcher: Sender) -> Self {
        Self {
            incoming,
            sink_watcher,
            observers: Vec::new(),
            observer_drops: Arc::default(),
        }
    }

    /// Adds an observer (a logger, a test) with its own queue of `capacity` events. An
    /// observer sees events but decides no fate; events its full queue cannot take are
    /// counted in [`Broadcaster::observer_drops`].
    pub fn subscribe(&mut self, capacity: usize) -> mpsc::Receiver<Arc<Event>> {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        self.observers.push(tx);
        rx
    }

    /// Events observers missed because their queue was full.
    #[must_use]
    pub fn observer_drops(&self) -> Arc<AtomicU64> {
        self.observer_drops.clone()
    }

    /// Distributes events until every recorder is gone or `shutdown` is cancelled; then
    /// closes the incoming queue (later `record()`s end `dropped_shutdown`) and hands what was
    /// already queued to the watchers, still without blocking.
    pub async fn run(mut self, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                item = self.incoming.recv() => match item {
                    Some(item) => self.handle(item),
                    None => return,
                },
            }
        }
        self.incoming.close();
        while let Some(item) = self.incoming.recv().await {
            self.handle(item);
        }
    }

    fn handle(&self, item: Item) {
        match item {
            Item::Event(envelope) => self.distribute(envelope),
            Item::Reload(options) => {
                self.sink_watcher
                    .bound()
                    .set_length(options.watcher_queue_length);
                self.sink_watcher.send_control(Item::Reload(options));
            }
        }
    }

    fn distribute(&self, envelope: Envelope) {
        for observer in &self.observers {
            if let Err(TrySendError::Full(_)) = observer.try_send(envelope.event().clone()) {
                self.observer_drops.fetch_add(1, Ordering::Relaxed);
            }
        }
        match self.sink_watcher.try_send(envelope) {
            Ok(()) => {}
            Err(Refused::Full(envelope)) => envelope.finish(Fate::DroppedWatcherFull),
            Err(Refused::Closed(envelope)) => envelope.finish(Fate::DroppedShutdown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::fate::FateCounter;
    use crate::recorder::options::Options;
    use crate::recorder::queue::{Bound, channel};

    #[tokio::test]
    async fn a_full_watcher_queue_drops_as_dropped_watcher_full_without_blocking() {
        let fates = FateCounter::new();
        let (in_tx, in_rx) = channel(10, Bound::default());
        let (w_tx, mut w_rx) = channel(2, Bound::default());
        let mut b = Broadcaster::new(in_rx, w_tx);
        let mut observer = b.subscribe(1);
        let drops = b.observer_drops();
        for _ in 0..5 {
            in_tx.try_send(Envelope::for_test(&fates)).unwrap();
        }
        drop(in_tx);
        b.run(CancellationToken::new()).await;
        assert_eq!(fates.get(Fate::DroppedWatcherFull), 3);
        assert_eq!(drops.load(Ordering::Relaxed), 4);
        assert!(observer.recv().await.is_some());
        let mut queued = 0;
        while let Some(Item::Event(e)) = w_rx.try_recv() {
            e.finish(Fate::Created);
            queued += 1;
        }
        assert_eq!(queued, 2);
        assert_eq!(fates.total(), 5);
    }

    #[tokio::test]
    async fn after_shutdown_queued_events_are_still_handed_over_and_later_sends_fail() {
        let fates = FateCounter::new();
        let (in_tx, in_rx) = channel(10, Bound::default());
        let (w_tx, mut w_rx) = channel(10, Bound::default());
        let b = Broadcaster::new(in_rx, w_tx);
        for _ in 0..3 {
            in_tx.try_send(Envelope::for_test(&fates)).unwrap();
        }
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        b.run(shutdown).await;
        assert!(matches!(
            in_tx.try_send(Envelope::for_test(&fates)),
            Err(Refused::Closed(_))
        ));
        let mut handed = 0;
        while w_rx.try_recv().is_some() {
            handed += 1;
        }
        assert_eq!(handed, 3);
    }

    #[tokio::test]
    async fn a_reload_sets_the_watcher_length_for_the_events_behind_it_and_is_passed_on() {
        let fates = FateCounter::new();
        let (in_tx, in_rx) = channel(100, Bound::default());
        let (w_tx, mut w_rx) = channel(2, Bound::default());
        let b = Broadcaster::new(in_rx, w_tx);
        for _ in 0..3 {
            in_tx.try_send(Envelope::for_test(&fates)).unwrap();
        }
        let longer = Options {
            watcher_queue_length: 10,
            ..Options::default()
        };
        assert!(in_tx.send_control(Item::Reload(Arc::new(longer))));
        for _ in 0..3 {
            in_tx.try_send(Envelope::for_test(&fates)).unwrap();
        }
        drop(in_tx);
        b.run(CancellationToken::new()).await;
        // Before the reload 2 fit and 1 was dropped; after it all 3 fit (5 of 10 used).
        assert_eq!(fates.get(Fate::DroppedWatcherFull), 1);
        let mut order = Vec::new();
        while let Some(item) = w_rx.try_recv() {
            order.push(match item {
                Item::Event(e) => {
                    e.finish(Fate::Created);
                    'e'
                }
                Item::Reload(_) => 'R',
            });
        }
        assert_eq!(order.iter().collect::<String>(), "eeReee");
        assert_eq!(fates.total(), 6);
    }
}
