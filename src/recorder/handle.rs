//! The [`Recorder`] handle controllers use: `record()` builds the event as client-go's
//! recorder does and queues it; it never blocks and never fails the caller.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use super::clock::Clock;
use super::envelope::Envelope;
use super::event::{Event, EventType, ObjectRef, Source};
use super::fate::{Fate, FateCounter};
use super::queue::{Refused, Sender};

/// The source stamped on recorded events; a reload replaces it for every [`Recorder`] at
/// once.
///
/// Each handle keeps the source it was made with and the generation it had; `record()`
/// takes the lock only if a reload changed the component since (a relaxed load of a line
/// that only reloads write, instead of a lock every producer writes).
#[derive(Debug)]
pub(crate) struct SourceCell {
    generation: AtomicU64,
    current: RwLock<Arc<Source>>,
}

impl SourceCell {
    pub(crate) fn new(source: Source) -> Self {
        Self {
            generation: AtomicU64::new(0),
            current: RwLock::new(Arc::new(source)),
        }
    }

    /// Replaces the source for every event recorded after this returns.
    pub(crate) fn set(&self, source: Source) {
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        *current = Arc::new(source);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The source now and its generation.
    fn snapshot(&self) -> (u64, Arc<Source>) {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        (self.generation.load(Ordering::Acquire), current.clone())
    }
}

/// Records events for controllers. Cheap to clone; `Send + Sync`.
///
/// `record` is synchronous and infallible for the caller: an event the pipeline cannot take
/// ends in a fate (`invalid`, `dropped_incoming_full`, `dropped_shutdown`), counted and
/// traced, instead of an error.
///
/// A [`Reloader`](super::Reloader) reload reaches every handle already given out: events
/// recorded after it returns get the new component and queue length; nothing needs to be
/// fetched again.
#[derive(Debug)]
#[doc(alias = "EventRecorder")]
pub struct Recorder {
    incoming: Sender,
    cell: Arc<SourceCell>,
    /// The cell's source when this handle was made, valid while its generation holds.
    source: Arc<Source>,
    generation: u64,
    clock: Arc<dyn Clock>,
    fates: FateCounter,
}

impl Clone for Recorder {
    fn clone(&self) -> Self {
        Self::new(
            self.incoming.clone(),
            self.cell.clone(),
            self.clock.clone(),
            self.fates.clone(),
        )
    }
}

impl Recorder {
    pub(crate) fn new(
        incoming: Sender,
        cell: Arc<SourceCell>,
        clock: Arc<dyn Clock>,
        fates: FateCounter,
    ) -> Self {
        let (generation, source) = cell.snapshot();
        Self {
            incoming,
            cell,
            source,
            generation,
            clock,
            fates,
        }
    }

    /// The source to stamp an event with now.
    fn source(&self) -> Arc<Source> {
        if self.cell.generation.load(Ordering::Acquire) == self.generation {
            self.source.clone()
        } else {
            self.cell.snapshot().1
        }
    }

    /// Records an event about `object` (client-go `Event` / `Eventf`).
    pub fn record(
        &self,
        object: &Arc<ObjectRef>,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) {
        self.record_event(self.event(object, event_type, reason, message));
    }

    /// The event `record` would queue, stamped now; set `action` or `related` on it, then
    /// pass it to [`Recorder::record_event`].
    #[must_use]
    pub fn event(
        &self,
        object: &Arc<ObjectRef>,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Event {
        Event::new(
            object.clone(),
            self.source(),
            event_type,
            reason,
            message,
            self.clock.now(),
        )
    }

    /// Queues `event` (client-go `ActionOrDrop`): an invalid event ends `invalid`, a full
    /// incoming queue `dropped_incoming_full`, a stopped pipeline `dropped_shutdown`.
    pub fn record_event(&self, event: Event) {
        let invalid = event.validate().is_err();
        let envelope = Envelope::new(event, self.fates.clone());
        if invalid {
            envelope.finish(Fate::Invalid);
            return;
        }
        match self.incoming.try_send(envelope) {
            Ok(()) => {}
            Err(Refused::Full(envelope)) => envelope.finish(Fate::DroppedIncomingFull),
            Err(Refused::Closed(envelope)) => envelope.finish(Fate::DroppedShutdown),
        }
    }

    /// The fate counter of this recorder's pipeline.
    #[must_use]
    pub fn fates(&self) -> &FateCounter {
        &self.fates
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::clock::ManualClock;
    use crate::recorder::queue::{Bound, channel};

    #[test]
    fn handles_made_before_and_after_a_component_change_both_stamp_the_new_one() {
        let (tx, _rx) = channel(10, Bound::default());
        let cell = Arc::new(SourceCell::new(Source::new("old", "")));
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::default());
        let before = Recorder::new(tx, cell.clone(), clock, FateCounter::new());
        let pod = Arc::new(ObjectRef::new("v1", "Pod", "ns", "p", "u"));
        let component = |r: &Recorder| {
            r.event(&pod, EventType::Normal, "R", "m")
                .source
                .component
                .to_string()
        };
        assert_eq!(component(&before), "old");
        cell.set(Source::new("new", ""));
        let after = before.clone();
        assert_eq!(component(&before), "new");
        assert_eq!(component(&after), "new");
        // The clone made after the change has it at hand, without the lock.
        assert_eq!((before.generation, after.generation), (0, 1));
        assert_eq!(&*after.source.component, "new");
    }
}
