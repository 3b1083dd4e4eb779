//! The event logger (dedupe): repeats of an event, or of an aggregate, become increments of
//! its count and last timestamp, written as a patch of the Event already created
//! (client-go `tools/record/events_cache.go`, `eventLogger.eventObserve` and `updateState`).

use super::aggregator::CacheKey;
use super::keys::{CountKey, EventHashes, EventView, Fingerprint, FingerprintHasher};
use crate::recorder::clock::Time;
use crate::recorder::event::EventName;
use crate::recorder::lru::Lru;

/// What the logger remembers of an Event it has seen (client-go `eventLog`).
#[derive(Clone, Debug)]
struct Observation {
    count: u32,
    first_timestamp: Time,
    name: EventName,
}

/// The logger's verdict on one event.
#[derive(Clone, Debug)]
pub struct Observed {
    /// The Event's count after this observation (1 for a first sighting).
    pub count: u32,
    /// Its first timestamp (the first sighting's).
    pub first_timestamp: Time,
    /// Its name (the first sighting's, so a patch reaches the Event created then).
    pub name: EventName,
    /// True if an earlier sighting exists: the Event is patched, not created.
    pub patch: bool,
}

/// Counts sightings per cache key over an LRU of `lruCacheSize` entries. Entries never
/// expire by time, only by eviction.
#[derive(Debug)]
pub struct EventLogger {
    cache: Lru<Fingerprint, Observation, FingerprintHasher>,
}

fn raw(key: CacheKey) -> Fingerprint {
    match key {
        CacheKey::Event(k) => k.0,
        CacheKey::Aggregate(k) => k.0,
    }
}

impl EventLogger {
    /// A logger remembering `lru_cache_size` events.
    #[must_use]
    pub fn new(lru_cache_size: usize) -> Self {
        Self {
            cache: Lru::new(lru_cache_size),
        }
    }

    /// Records a sighting under `key` at `now`; a first sighting takes its name from
    /// `name` (called only then, so a unique name is claimed only for an Event to create).
    ///
    /// The count rises even if the spam filter later skips the event (client-go observes
    /// before it filters).
    pub fn observe(
        &mut self,
        key: CacheKey,
        name: impl FnOnce() -> EventName,
        now: Time,
    ) -> Observed {
        let (obs, inserted) = self.cache.get_or_insert_with(raw(key), || Observation {
            count: 1,
            first_timestamp: now,
            name: name(),
        });
        if inserted {
            return Observed {
                count: 1,
                first_timestamp: now,
                name: obs.name.clone(),
                patch: false,
            };
        }
        obs.count = obs.count.saturating_add(1);
        Observed {
            count: obs.count,
            first_timestamp: obs.first_timestamp,
            name: obs.name.clone(),
            patch: true,
        }
    }

    /// Entries remembered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Remembers up to `lru_cache_size` events from now on, forgetting the least recently
    /// seen ones that no longer fit.
    pub fn resize(&mut self, lru_cache_size: usize) {
        self.cache.set_capacity(lru_cache_size);
    }

    /// Remembers an Event the sink wrote, under the key of the Event as written (client-go
    /// `UpdateState` keys by `getEventKey` of the written event, so an aggregate is also
    /// remembered under its `(combined …)` message).
    pub fn update_state(
        &mut self,
        written: EventView<'_>,
        hashes: &EventHashes,
        count: u32,
        first_timestamp: Time,
        name: &EventName,
    ) {
        self.cache.insert(
            CountKey::of(written, hashes).0,
            Observation {
                count,
                first_timestamp,
                name: name.clone(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::recorder::correlator::keys::AggregateKey;
    use crate::recorder::event::{Event, EventType, ObjectRef, Source};

    fn ev(message: &str) -> Event {
        Event::new(
            Arc::new(ObjectRef::new("v1", "Pod", "ns", "p", "u")),
            Arc::new(Source::new("c", "")),
            EventType::Normal,
            "R",
            message,
            Time::EPOCH,
        )
    }

    fn key(e: &Event) -> CacheKey {
        CacheKey::Event(CountKey::of(
            EventView {
                event: e,
                combined: false,
            },
            &EventHashes::of(e),
        ))
    }

    #[test]
    fn repeats_count_up_and_keep_first_name_and_timestamp() {
        let mut l = EventLogger::new(10);
        let e = ev("m");
        let n1 = EventName::new("p".into(), Time::from_unix_nanos(1));
        let n2 = EventName::new("p".into(), Time::from_unix_nanos(2));
        let o = l.observe(key(&e), || n1.clone(), Time::from_unix_nanos(1));
        assert!(!o.patch);
        assert_eq!(o.count, 1);
        let o = l.observe(key(&e), || n2.clone(), Time::from_unix_nanos(2));
        assert!(o.patch);
        assert_eq!(o.count, 2);
        assert_eq!(o.name, n1);
        assert_eq!(o.first_timestamp, Time::from_unix_nanos(1));
    }

    #[test]
    fn different_messages_are_counted_apart() {
        let mut l = EventLogger::new(10);
        let n = EventName::default();
        l.observe(key(&ev("a")), || n.clone(), Time::EPOCH);
        assert!(!l.observe(key(&ev("b")), || n.clone(), Time::EPOCH).patch);
    }

    #[test]
    fn an_evicted_event_is_created_again() {
        let mut l = EventLogger::new(1);
        let n = EventName::default();
        l.observe(key(&ev("a")), || n.clone(), Time::EPOCH);
        l.observe(key(&ev("b")), || n.clone(), Time::EPOCH);
        assert!(!l.observe(key(&ev("a")), || n.clone(), Time::EPOCH).patch);
    }

    #[test]
    fn update_state_of_an_aggregate_uses_its_combined_event_key() {
        let mut l = EventLogger::new(10);
        let e = ev("m");
        let n = EventName::default();
        let h = EventHashes::of(&e);
        let agg = CacheKey::Aggregate(AggregateKey::of(&e, &h));
        l.observe(agg, || n.clone(), Time::EPOCH);
        l.update_state(
            EventView {
                event: &e,
                combined: true,
            },
            &h,
            1,
            Time::EPOCH,
            &n,
        );
        // The aggregate key still counts on; the plain event key was never seen.
        assert_eq!(l.observe(agg, || n.clone(), Time::EPOCH).count, 2);
        assert!(!l.observe(key(&e), || n.clone(), Time::EPOCH).patch);
    }
}
