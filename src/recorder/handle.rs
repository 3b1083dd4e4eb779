//! The [`Recorder`] handle controllers use: `record()` builds the event as client-go's
//! recorder does and queues it; it never blocks and never fails the caller.

use std::sync::{Arc, PoisonError, RwLock};

use super::clock::Clock;
use super::envelope::Envelope;
use super::event::{Event, EventType, ObjectRef, Source};
use super::fate::{Fate, FateCounter};
use super::queue::{Refused, Sender};

/// The source stamped on recorded events; a reload replaces it for every [`Recorder`] at
/// once.
pub(crate) type SharedSource = Arc<RwLock<Arc<Source>>>;

/// Records events for controllers. Cheap to clone; `Send + Sync`.
///
/// `record` is synchronous and infallible for the caller: an event the pipeline cannot take
/// ends in a fate (`invalid`, `dropped_incoming_full`, `dropped_shutdown`), counted and
/// traced, instead of an error.
///
/// A [`Reloader`](super::Reloader) reload reaches every handle already given out: events
/// recorded after it returns get the new component and queue length; nothing needs to be
/// fetched again.
#[derive(Clone, Debug)]
#[doc(alias = "EventRecorder")]
pub struct Recorder {
    incoming: Sender,
    source: SharedSource,
    clock: Arc<dyn Clock>,
    fates: FateCounter,
}

impl Recorder {
    pub(crate) fn new(
        incoming: Sender,
        source: SharedSource,
        clock: Arc<dyn Clock>,
        fates: FateCounter,
    ) -> Self {
        Self {
            incoming,
            source,
            clock,
            fates,
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
        let source = self
            .source
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Event::new(
            object.clone(),
            source,
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
