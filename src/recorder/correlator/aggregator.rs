//! The aggregator: after `maxEvents` distinct messages of similar events (same source,
//! object, type, reason, reporting controller/instance) within `maxInterval`, an event is
//! replaced by the aggregate `(combined from similar events): <message>`
//! (client-go `tools/record/events_cache.go`, `EventAggregator.EventAggregate`).

use std::time::Duration;

use super::keys::{AggregateKey, CountKey, EventHashes, EventView, FingerprintHasher, LocalKey};
use crate::recorder::clock::Time;
use crate::recorder::event::Event;
use crate::recorder::lru::Lru;

/// The distinct messages seen for one aggregate key, and when the last similar event came.
#[derive(Debug)]
struct Record {
    local_keys: LocalKeys,
    last_timestamp: Time,
}

/// A small set of local keys in insertion order; one key is stored inline, so the common
/// case (a message seen once) allocates nothing.
#[derive(Debug)]
enum LocalKeys {
    One(Option<LocalKey>),
    Many(Vec<LocalKey>),
}

impl LocalKeys {
    fn len(&self) -> usize {
        match self {
            LocalKeys::One(k) => usize::from(k.is_some()),
            LocalKeys::Many(v) => v.len(),
        }
    }

    fn clear(&mut self) {
        match self {
            LocalKeys::One(k) => *k = None,
            LocalKeys::Many(v) => v.clear(),
        }
    }

    /// Inserts `key`; false if it was already there.
    fn insert(&mut self, key: LocalKey) -> bool {
        match self {
            LocalKeys::One(None) => *self = LocalKeys::One(Some(key)),
            LocalKeys::One(Some(k)) if *k == key => return false,
            LocalKeys::One(Some(k)) => *self = LocalKeys::Many(vec![*k, key]),
            LocalKeys::Many(v) if v.contains(&key) => return false,
            LocalKeys::Many(v) => v.push(key),
        }
        true
    }

    fn remove(&mut self, key: LocalKey) {
        match self {
            LocalKeys::One(k) if *k == Some(key) => *k = None,
            LocalKeys::One(_) => {}
            LocalKeys::Many(v) => {
                if let Some(pos) = v.iter().position(|k| *k == key) {
                    v.remove(pos);
                }
            }
        }
    }
}

/// The key under which the logger counts an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheKey {
    /// The event stays itself: counted under its own key.
    Event(CountKey),
    /// The event became the aggregate: counted under the aggregate key.
    Aggregate(AggregateKey),
}

/// What the aggregator made of an event.
#[derive(Clone, Copy, Debug)]
pub struct Aggregated {
    /// True if the event became the aggregate (a fresh name, `(combined …)` message).
    pub combined: bool,
    /// The aggregate key of the event (whether or not it became the aggregate).
    pub aggregate_key: AggregateKey,
    /// The key the logger counts it under.
    pub cache_key: CacheKey,
    /// Distinct messages seen in the window, this one included (before the aggregator
    /// forgets one to stay under `maxEvents`).
    pub distinct_messages: usize,
}

/// Groups similar events by aggregate key over an LRU of `lruCacheSize` records.
#[derive(Debug)]
pub struct Aggregator {
    cache: Lru<AggregateKey, Record, FingerprintHasher>,
    max_events: usize,
    max_interval_nanos: i64,
}

impl Aggregator {
    /// An aggregator with client-go's parameters: `max_events` distinct messages within
    /// `max_interval` trigger the aggregate; `lru_cache_size` records are remembered.
    #[must_use]
    pub fn new(max_events: usize, max_interval: Duration, lru_cache_size: usize) -> Self {
        Self {
            cache: Lru::new(lru_cache_size),
            max_events,
            max_interval_nanos: i64::try_from(max_interval.as_nanos()).unwrap_or(i64::MAX),
        }
    }

    /// Records remembered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Applies new parameters, keeping every record that fits: the distinct messages seen so
    /// far count toward the new `max_events`, and the window of each record is measured with
    /// the new `max_interval` from the next similar event on.
    pub fn reconfigure(
        &mut self,
        max_events: usize,
        max_interval: Duration,
        lru_cache_size: usize,
    ) {
        self.max_events = max_events;
        self.max_interval_nanos = i64::try_from(max_interval.as_nanos()).unwrap_or(i64::MAX);
        self.cache.set_capacity(lru_cache_size);
    }

    /// Observes `event` at `now` and says whether it becomes the aggregate.
    ///
    /// The window restarts when the last similar event is strictly more than `maxInterval`
    /// old (exactly `maxInterval` keeps it). Once `maxEvents` distinct messages are reached,
    /// client-go forgets an arbitrary one (`PopAny`) so the set stays below the threshold;
    /// informant forgets the message that just crossed it, so the choice is deterministic and
    /// repeats of that message keep joining the aggregate.
    pub fn aggregate(&mut self, event: &Event, hashes: &EventHashes, now: Time) -> Aggregated {
        let aggregate_key = AggregateKey::of(event, hashes);
        let local_key = LocalKey::of(hashes);
        let max_interval = self.max_interval_nanos;
        let (record, _) = self.cache.get_or_insert_with(aggregate_key, || Record {
            local_keys: LocalKeys::One(None),
            last_timestamp: Time::EPOCH,
        });
        // A record just created has lastTimestamp zero, so it is "too old" as in client-go
        // (Go's zero time is year 1; the epoch is as good for any sane clock).
        if now.nanos_since(record.last_timestamp) > max_interval {
            record.local_keys.clear();
        }
        record.local_keys.insert(local_key);
        record.last_timestamp = now;
        let distinct_messages = record.local_keys.len();
        if distinct_messages < self.max_events {
            return Aggregated {
                combined: false,
                aggregate_key,
                cache_key: CacheKey::Event(CountKey::of(
                    EventView {
                        event,
                        combined: false,
                    },
                    hashes,
                )),
                distinct_messages,
            };
        }
        // Stay below the threshold: forget this message (client-go: any one).
        record.local_keys.remove(local_key);
        Aggregated {
            combined: true,
            aggregate_key,
            cache_key: CacheKey::Aggregate(aggregate_key),
            distinct_messages,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::recorder::event::{EventType, ObjectRef, Source};

    const S: i64 = 1_000_000_000;

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

    fn run(a: &mut Aggregator, e: &Event, now: Time) -> Aggregated {
        a.aggregate(e, &EventHashes::of(e), now)
    }

    fn agg() -> Aggregator {
        Aggregator::new(10, Duration::from_mins(10), 4096)
    }

    #[test]
    fn the_tenth_distinct_message_becomes_the_aggregate() {
        let mut a = agg();
        for i in 0..9 {
            let r = run(&mut a, &ev(&format!("m{i}")), Time::from_unix_nanos(i * S));
            assert!(!r.combined, "message {i}");
        }
        let r = run(&mut a, &ev("m9"), Time::from_unix_nanos(9 * S));
        assert!(r.combined);
        assert_eq!(r.cache_key, CacheKey::Aggregate(r.aggregate_key));
        assert!(run(&mut a, &ev("m10"), Time::from_unix_nanos(10 * S)).combined);
    }

    #[test]
    fn repeating_one_message_never_aggregates() {
        let mut a = agg();
        for i in 0..50 {
            assert!(!run(&mut a, &ev("same"), Time::from_unix_nanos(i * S)).combined);
        }
    }

    #[test]
    fn window_resets_only_when_strictly_older_than_max_interval() {
        let mut a = agg();
        for i in 0..9 {
            run(&mut a, &ev(&format!("m{i}")), Time::from_unix_nanos(0));
        }
        // Exactly 600 s later: the window holds, the 10th message aggregates.
        assert!(run(&mut a, &ev("m9"), Time::from_unix_nanos(600 * S)).combined);

        let mut a = agg();
        for i in 0..9 {
            run(&mut a, &ev(&format!("m{i}")), Time::from_unix_nanos(0));
        }
        // One nanosecond more: a fresh window.
        let r = run(&mut a, &ev("m9"), Time::from_unix_nanos(600 * S + 1));
        assert!(!r.combined);
        assert_eq!(r.distinct_messages, 1);
    }

    #[test]
    fn an_evicted_record_starts_over() {
        let mut a = Aggregator::new(2, Duration::from_mins(10), 1);
        run(&mut a, &ev("m0"), Time::EPOCH);
        let mut other = ev("x");
        other.reason = "Other".into();
        run(&mut a, &other, Time::EPOCH);
        assert!(!run(&mut a, &ev("m1"), Time::EPOCH).combined);
    }

    #[test]
    fn a_lower_max_events_applies_to_the_messages_already_seen() {
        let mut a = agg();
        for i in 0..5 {
            assert!(!run(&mut a, &ev(&format!("m{i}")), Time::EPOCH).combined);
        }
        a.reconfigure(6, Duration::from_mins(10), 4096);
        assert_eq!(a.len(), 1);
        assert!(run(&mut a, &ev("m5"), Time::EPOCH).combined);
    }
}
