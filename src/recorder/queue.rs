//! The pipeline's queues: events bounded by a length that can change while the queue is in
//! use, and reloads carried in band, after every event queued before them.
//!
//! A queue is an unbounded tokio channel plus two gauges: the configured length and the
//! events in it (`informant_event_queue_length` / `_depth`). An event is admitted only while
//! the depth is below the length (a compare-and-swap on the depth, as a bounded channel's
//! semaphore takes a permit), so memory stays bounded by the length; a control item (a
//! reload) is always admitted and not counted, so a reload is never lost to a full queue.
//! A shorter length applies to admissions at once; events already queued beyond it stay
//! and drain.
//!
//! The depth, which producers and the consumer both write, sits alone on its cache line,
//! and "closed" is a flag beside the read-mostly length: a `record()` that finds the queue
//! full touches no line the consumer keeps writing other than the depth it must read.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use prometheus_client::metrics::gauge::{Atomic, Gauge};
use tokio::sync::mpsc;

use super::envelope::Envelope;
use super::options::Options;

/// What travels through a queue.
#[derive(Debug)]
pub(crate) enum Item {
    /// An event on its way to its fate.
    Event(Envelope),
    /// New options for everything queued after this item.
    Reload(Arc<Options>),
}

/// Why an event was not queued; it is handed back.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The queue holds its length of events.
    Full(Envelope),
    /// The receiver is gone or closed.
    Closed(Envelope),
}

/// An `i64` on a cache line of its own (see the module documentation).
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct PaddedI64(AtomicI64);

impl Atomic<i64> for PaddedI64 {
    fn inc(&self) -> i64 {
        self.inc_by(1)
    }
    fn inc_by(&self, v: i64) -> i64 {
        self.0.fetch_add(v, Ordering::Relaxed)
    }
    fn dec(&self) -> i64 {
        self.dec_by(1)
    }
    fn dec_by(&self, v: i64) -> i64 {
        self.0.fetch_sub(v, Ordering::Relaxed)
    }
    fn set(&self, v: i64) -> i64 {
        self.0.swap(v, Ordering::Relaxed)
    }
    fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A gauge whose value has a cache line of its own.
pub(crate) type PaddedGauge = Gauge<i64, PaddedI64>;

/// The configured length and the current depth of one queue.
#[derive(Debug, Default)]
pub(crate) struct Bound {
    /// Events the queue may hold.
    pub(crate) length: PaddedGauge,
    /// Events in the queue now.
    pub(crate) depth: PaddedGauge,
    /// Set once the receiver is closed or gone.
    closed: AtomicBool,
}

impl Bound {
    /// A bound reporting through these gauges.
    pub(crate) fn new(length: PaddedGauge, depth: PaddedGauge) -> Self {
        Self {
            length,
            depth,
            closed: AtomicBool::new(false),
        }
    }

    /// Sets the length (at least 1, as the bounded channels before it).
    pub(crate) fn set_length(&self, length: usize) {
        self.length
            .set(i64::try_from(length.max(1)).unwrap_or(i64::MAX));
    }
}

/// A queue whose length is `length`, reporting through `bound`.
pub(crate) fn channel(length: usize, bound: Bound) -> (Sender, Receiver) {
    bound.set_length(length);
    let bound = Arc::new(bound);
    let (tx, rx) = mpsc::unbounded_channel();
    (
        Sender {
            tx,
            bound: bound.clone(),
        },
        Receiver { rx, bound },
    )
}

/// The sending half; cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Sender {
    tx: mpsc::UnboundedSender<Item>,
    bound: Arc<Bound>,
}

impl Sender {
    /// Queues `envelope` if the queue is below its length, without waiting.
    pub(crate) fn try_send(&self, envelope: Envelope) -> Result<(), Refused> {
        let length = self.bound.length.get();
        let admitted = self
            .bound
            .depth
            .inner()
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |depth| {
                (depth < length).then_some(depth + 1)
            })
            .is_ok();
        if !admitted {
            return Err(if self.bound.closed.load(Ordering::Relaxed) {
                Refused::Closed(envelope)
            } else {
                Refused::Full(envelope)
            });
        }
        match self.tx.send(Item::Event(envelope)) {
            Ok(()) => Ok(()),
            Err(mpsc::error::SendError(item)) => {
                self.bound.depth.dec();
                match item {
                    Item::Event(envelope) => Err(Refused::Closed(envelope)),
                    Item::Reload(_) => unreachable!("an event was sent"),
                }
            }
        }
    }

    /// Queues a control item, whatever the depth; false if the receiver is gone.
    pub(crate) fn send_control(&self, item: Item) -> bool {
        self.tx.send(item).is_ok()
    }

    /// The length and depth of this queue.
    pub(crate) fn bound(&self) -> &Bound {
        &self.bound
    }

    /// A sender that does not keep the queue open.
    pub(crate) fn downgrade(&self) -> WeakSender {
        WeakSender {
            tx: self.tx.downgrade(),
            bound: self.bound.clone(),
        }
    }
}

/// A sender that does not keep the queue open (the queue ends when every [`Sender`] is gone).
#[derive(Clone, Debug)]
pub(crate) struct WeakSender {
    tx: mpsc::WeakUnboundedSender<Item>,
    bound: Arc<Bound>,
}

impl WeakSender {
    /// A sender, if the queue is still open to senders.
    pub(crate) fn upgrade(&self) -> Option<Sender> {
        Some(Sender {
            tx: self.tx.upgrade()?,
            bound: self.bound.clone(),
        })
    }

    /// The length and depth of this queue.
    pub(crate) fn bound(&self) -> &Bound {
        &self.bound
    }
}

/// The receiving half.
#[derive(Debug)]
pub(crate) struct Receiver {
    rx: mpsc::UnboundedReceiver<Item>,
    bound: Arc<Bound>,
}

impl Receiver {
    /// The next item; `None` once every sender is gone (or the queue is closed) and it is
    /// empty.
    pub(crate) async fn recv(&mut self) -> Option<Item> {
        let item = self.rx.recv().await;
        self.took(item.as_ref());
        item
    }

    /// The next item if one is queued.
    pub(crate) fn try_recv(&mut self) -> Option<Item> {
        let item = self.rx.try_recv().ok();
        self.took(item.as_ref());
        item
    }

    /// Refuses new items; queued ones can still be received.
    pub(crate) fn close(&mut self) {
        self.bound.closed.store(true, Ordering::Relaxed);
        self.rx.close();
    }

    fn took(&self, item: Option<&Item>) {
        if let Some(Item::Event(_)) = item {
            self.bound.depth.dec();
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.bound.closed.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::fate::{Fate, FateCounter};

    #[test]
    fn events_beyond_the_length_are_refused_but_reloads_always_pass() {
        let fates = FateCounter::new();
        let (tx, mut rx) = channel(2, Bound::default());
        assert!(tx.try_send(Envelope::for_test(&fates)).is_ok());
        assert!(tx.try_send(Envelope::for_test(&fates)).is_ok());
        assert!(matches!(
            tx.try_send(Envelope::for_test(&fates)),
            Err(Refused::Full(_))
        ));
        assert!(tx.send_control(Item::Reload(Arc::new(Options::default()))));
        assert_eq!(tx.bound().depth.get(), 2);
        assert!(matches!(rx.try_recv(), Some(Item::Event(_))));
        assert_eq!(tx.bound().depth.get(), 1);
        assert!(tx.try_send(Envelope::for_test(&fates)).is_ok());
        drop(rx);
        // All four envelopes (queued, refused, received) end in a fate once dropped.
        assert_eq!(fates.get(Fate::DroppedShutdown), 4);
    }

    #[test]
    fn a_new_length_applies_to_the_next_admission() {
        let fates = FateCounter::new();
        let (tx, mut rx) = channel(3, Bound::default());
        for _ in 0..3 {
            assert!(tx.try_send(Envelope::for_test(&fates)).is_ok());
        }
        tx.bound().set_length(1);
        assert!(matches!(
            tx.try_send(Envelope::for_test(&fates)),
            Err(Refused::Full(_))
        ));
        while rx.try_recv().is_some() {}
        assert!(tx.try_send(Envelope::for_test(&fates)).is_ok());
        assert!(matches!(
            tx.try_send(Envelope::for_test(&fates)),
            Err(Refused::Full(_))
        ));
        tx.bound().set_length(5);
        assert!(tx.try_send(Envelope::for_test(&fates)).is_ok());
    }

    #[test]
    fn a_closed_queue_refuses_as_closed_even_when_full() {
        let fates = FateCounter::new();
        let (tx, mut rx) = channel(1, Bound::default());
        assert!(tx.try_send(Envelope::for_test(&fates)).is_ok());
        rx.close();
        assert!(matches!(
            tx.try_send(Envelope::for_test(&fates)),
            Err(Refused::Closed(_))
        ));
        assert!(rx.try_recv().is_some());
        assert!(matches!(
            tx.try_send(Envelope::for_test(&fates)),
            Err(Refused::Closed(_))
        ));
        assert!(!tx.send_control(Item::Reload(Arc::new(Options::default()))));
    }

    #[test]
    fn a_dropped_receiver_refuses_as_closed_even_when_full() {
        let fates = FateCounter::new();
        let (tx, rx) = channel(1, Bound::default());
        assert!(tx.try_send(Envelope::for_test(&fates)).is_ok());
        drop(rx);
        assert!(matches!(
            tx.try_send(Envelope::for_test(&fates)),
            Err(Refused::Closed(_))
        ));
    }

    #[test]
    fn the_depth_has_a_cache_line_of_its_own() {
        assert_eq!(std::mem::align_of::<PaddedI64>(), 64);
    }

    #[test]
    fn a_weak_sender_does_not_keep_the_queue_open() {
        let (tx, mut rx) = channel(1, Bound::default());
        let weak = tx.downgrade();
        assert!(weak.upgrade().is_some());
        drop(tx);
        assert!(weak.upgrade().is_none());
        assert!(rx.try_recv().is_none());
    }
}
