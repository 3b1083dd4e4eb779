//! An event on its way through the pipeline, with its `event` span; it ends in exactly one
//! fate, counted and recorded on the span (dropping an unfinished envelope counts it as
//! `dropped_shutdown`, so the conservation law holds even if a task is aborted).

use std::sync::Arc;

use tracing::Span;

use super::event::Event;
use super::fate::{Fate, FateCounter};

/// An event in flight: the event, its span (open from `record()` to its fate) and the
/// counter its fate goes to.
#[derive(Debug)]
pub struct Envelope {
    event: Arc<Event>,
    span: Span,
    fates: FateCounter,
    done: bool,
}

impl Envelope {
    /// Wraps `event`, opening its `event` span with the late fields declared empty, and counts
    /// it recorded (`informant_events_recorded_total`): from here it ends in exactly one fate.
    #[must_use]
    pub fn new(event: Event, fates: FateCounter) -> Self {
        fates.record();
        let span = tracing::info_span!(
            "event",
            event.reason = %event.reason,
            event.type = event.event_type.as_str(),
            object.ref = %event.involved_object,
            event.aggregation_key = tracing::field::Empty,
            event.spam_key = tracing::field::Empty,
            event.count = tracing::field::Empty,
            event.tokens_left = tracing::field::Empty,
            event.tries = tracing::field::Empty,
            event.fate = tracing::field::Empty,
        );
        Self {
            event: Arc::new(event),
            span,
            fates,
            done: false,
        }
    }

    /// The event.
    #[must_use]
    pub fn event(&self) -> &Arc<Event> {
        &self.event
    }

    /// The event's span, to record fields on or to enter.
    #[must_use]
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// Ends the event in `fate`: counts it and records it on the span, which then closes.
    pub fn finish(mut self, fate: Fate) {
        self.end(fate);
    }

    fn end(&mut self, fate: Fate) {
        if self.done {
            return;
        }
        self.done = true;
        self.fates.inc(fate);
        self.span.record("event.fate", fate.as_str());
        if !fate.is_delivered() {
            let _entered = self.span.enter();
            tracing::debug!(fate = fate.as_str(), "event not delivered");
        }
    }
}

impl Drop for Envelope {
    fn drop(&mut self) {
        self.end(Fate::DroppedShutdown);
    }
}

#[cfg(test)]
impl Envelope {
    /// A `Normal` event `R` about Pod `ns/p`, counted in `fates`: what queue and broadcaster
    /// tests put through the pipeline.
    pub(crate) fn for_test(fates: &FateCounter) -> Self {
        use super::clock::Time;
        use super::event::{EventType, ObjectRef, Source};
        let event = Event::new(
            Arc::new(ObjectRef::new("v1", "Pod", "ns", "p", "u")),
            Arc::new(Source::new("c", "")),
            EventType::Normal,
            "R",
            "m",
            Time::EPOCH,
        );
        Self::new(event, fates.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finishing_counts_exactly_one_fate() {
        let fates = FateCounter::new();
        Envelope::for_test(&fates).finish(Fate::Created);
        assert_eq!(fates.get(Fate::Created), 1);
        assert_eq!(fates.total(), 1);
    }

    #[test]
    fn an_envelope_dropped_unfinished_counts_as_dropped_shutdown() {
        let fates = FateCounter::new();
        drop(Envelope::for_test(&fates));
        assert_eq!(fates.get(Fate::DroppedShutdown), 1);
        assert_eq!(fates.total(), 1);
    }
}
