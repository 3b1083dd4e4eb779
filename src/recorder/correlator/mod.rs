//! The correlator: aggregator → logger → spam filter, in client-go's order
//! (`tools/record/events_cache.go`, `EventCorrelator.EventCorrelate`). Synchronous; every
//! stage reads `now` from the injected [`Clock`].
//!
//! Defaults (see [`CorrelatorOptions`]): buckets of 25 tokens refilled at 1/300 per second
//! (a float32 in client-go), aggregation after 10 distinct messages within 600 s, LRUs of
//! 4096 entries, spam key source + involved object + type. Unlike client-go, a new Event's
//! name is unique ([`EventNaming`]), and the options can change while it runs
//! ([`Correlator::reconfigure`]).

mod aggregator;
mod keys;
mod logger;
mod names;
mod spam_filter;

use std::fmt;

pub use aggregator::{Aggregator, CacheKey};
pub use keys::{AggregateKey, EventHashes, EventView, Message, SpamKey};
pub use logger::EventLogger;
pub use names::{EventNaming, Names};
pub use spam_filter::SpamFilter;

use super::clock::{Clock, Time};
use super::event::{Event, EventName, Written};
use super::options::CorrelatorOptions;

/// What to do with an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Create a new Event object.
    Create,
    /// Patch the existing Event object (count, lastTimestamp, message).
    Patch,
    /// Drop it: the spam filter refused it.
    Skip,
}

impl Action {
    /// `create`, `patch` or `skip`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Patch => "patch",
            Action::Skip => "skip",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The correlator's decision on one event, with the keys and state that led to it.
#[derive(Clone, Debug)]
pub struct Correlation {
    /// Create, patch or skip.
    pub action: Action,
    /// The Event object's name (for a patch, the one created first).
    pub name: EventName,
    /// The Event's count after this event (also when skipped: client-go counts first).
    pub count: u32,
    /// First timestamp of the Event.
    pub first_timestamp: Time,
    /// Last timestamp of the Event: now.
    pub last_timestamp: Time,
    /// True if the event became the aggregate (`(combined from similar events): …`).
    pub combined: bool,
    /// The aggregate key (similar events).
    pub aggregate_key: AggregateKey,
    /// The key the logger counted under.
    pub cache_key: CacheKey,
    /// The spam filter's bucket.
    pub spam_key: SpamKey,
    /// Tokens left in that bucket.
    pub tokens_left: f64,
    /// Distinct messages of similar events in the aggregation window.
    pub distinct_messages: usize,
    /// Fingerprints of the event's parts, reused by [`Correlator::update_state`].
    pub hashes: EventHashes,
}

impl Correlation {
    /// The event as the stages saw it (the aggregate if it became one).
    #[must_use]
    pub fn view<'a>(&self, event: &'a Event) -> EventView<'a> {
        EventView {
            event,
            combined: self.combined,
        }
    }

    /// The message to write.
    #[must_use]
    pub fn message<'a>(&self, event: &'a Event) -> Message<'a> {
        self.view(event).message()
    }

    /// What to write, for [`Event::to_k8s`].
    #[must_use]
    pub fn written<'a>(&'a self, event: &'a Event, message: &'a Message<'a>) -> Written<'a> {
        let view = self.view(event);
        Written {
            name: &self.name,
            count: self.count,
            message,
            first_timestamp: self.first_timestamp,
            last_timestamp: self.last_timestamp,
            reporting_controller: view.reporting_controller(),
            reporting_instance: view.reporting_instance(),
        }
    }

    /// The strategic-merge patch client-go sends for a repeat: the fields that differ from
    /// the Event with count 0, lastTimestamp at the epoch and no message (so `count`,
    /// `lastTimestamp` at second precision, and `message` unless empty). `None` unless the
    /// action is [`Action::Patch`].
    #[must_use]
    pub fn patch_body(&self, event: &Event) -> Option<serde_json::Value> {
        if self.action != Action::Patch {
            return None;
        }
        let mut body = serde_json::Map::new();
        if self.count != 0 {
            body.insert("count".to_owned(), self.count.into());
        }
        let last = self.last_timestamp.to_rfc3339_seconds();
        if last != Time::EPOCH.to_rfc3339_seconds() {
            body.insert("lastTimestamp".to_owned(), last.into());
        }
        let message = self.message(event);
        if !message.text.is_empty() || message.combined {
            body.insert("message".to_owned(), message.to_string().into());
        }
        Some(serde_json::Value::Object(body))
    }
}

/// Aggregator, logger and spam filter, composed as client-go's `EventCorrelator`.
///
/// ```
/// use std::sync::Arc;
/// use informant::recorder::{
///     Action, Clock, Correlator, CorrelatorOptions, Event, EventType, ManualClock, ObjectRef,
///     Source, Time,
/// };
/// let clock = ManualClock::new(Time::from_unix_nanos(1_700_000_000_000_000_000));
/// let mut correlator = Correlator::new(&CorrelatorOptions::default(), clock.clone());
/// let job = Arc::new(ObjectRef::new("batch/v1", "CronJob", "default", "hello", "uid-1"));
/// let source = Arc::new(Source::new("cronjob-controller", ""));
/// let event = Event::new(job, source, EventType::Normal, "SawCompletedJob", "done", clock.now());
/// let first = correlator.correlate(&event);
/// assert_eq!(first.action, Action::Create);
/// correlator.update_state(&event, &first); // the sink wrote it
/// let again = correlator.correlate(&event);
/// assert_eq!((again.action, again.count), (Action::Patch, 2));
/// ```
#[derive(Debug)]
pub struct Correlator<C> {
    clock: C,
    aggregator: Aggregator,
    logger: EventLogger,
    spam_filter: SpamFilter,
    names: Names,
}

/// Entries in each cache of a correlator (exported as
/// `informant_event_correlator_cache_entries{cache}`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheEntries {
    /// Aggregation records (one per aggregate key).
    pub aggregator: usize,
    /// Events the logger counts (one per Event written or seen).
    pub logger: usize,
    /// Spam-filter token buckets (one per spam key).
    pub spam: usize,
}

impl<C: Clock> Correlator<C> {
    /// A correlator with `options`, reading time from `clock`, giving new Events unique
    /// names ([`EventNaming::Unique`]).
    #[must_use]
    pub fn new(options: &CorrelatorOptions, clock: C) -> Self {
        Self {
            clock,
            aggregator: Aggregator::new(
                options.max_events,
                options.max_interval,
                options.lru_cache_size,
            ),
            logger: EventLogger::new(options.lru_cache_size),
            spam_filter: SpamFilter::new(
                options.qps,
                options.burst,
                &options.spam_key_fields,
                options.lru_cache_size,
            ),
            names: Names::new(EventNaming::Unique),
        }
    }

    /// The same correlator naming new Events as `naming` says (before any event).
    #[must_use]
    pub fn with_naming(mut self, naming: EventNaming) -> Self {
        self.names = Names::new(naming);
        self
    }

    /// The clock this correlator reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Entries in each cache now.
    #[must_use]
    pub fn cache_entries(&self) -> CacheEntries {
        CacheEntries {
            aggregator: self.aggregator.len(),
            logger: self.logger.len(),
            spam: self.spam_filter.len(),
        }
    }

    /// Applies `options` to the events correlated from now on, keeping the state that still
    /// means the same thing (reads the clock once):
    ///
    /// - aggregation records and the logger's counts (so repeats still patch the Events
    ///   already written) survive every change; a smaller `lruCacheSize` keeps the most
    ///   recently used entries that fit;
    /// - the spam filter keeps its buckets across a qps or burst change (each refilled at
    ///   the old rate up to now; a higher burst grants its extra tokens at once, a lower one
    ///   caps them) and starts afresh when the spam key fields change, since old keys cannot
    ///   be mapped to new ones;
    /// - names already handed out stay taken.
    pub fn reconfigure(&mut self, options: &CorrelatorOptions) {
        let now = self.clock.now();
        self.aggregator.reconfigure(
            options.max_events,
            options.max_interval,
            options.lru_cache_size,
        );
        self.logger.resize(options.lru_cache_size);
        self.spam_filter.reconfigure(
            options.qps,
            options.burst,
            &options.spam_key_fields,
            options.lru_cache_size,
            now,
        );
    }

    /// Decides what to do with `event`: aggregate (reads the clock), count, then filter
    /// (reads the clock again), as client-go does. An Event to create gets a unique name
    /// (see [`EventNaming`]).
    pub fn correlate(&mut self, event: &Event) -> Correlation {
        let now = self.clock.now();
        let hashes = EventHashes::of(event);
        let aggregated = self.aggregator.aggregate(event, &hashes, now);
        // The aggregate gets a fresh name from the aggregator's clock reading; a plain event
        // keeps the name it was recorded with.
        let name = if aggregated.combined {
            EventName::new(event.involved_object.name.clone(), now)
        } else {
            event.name()
        };
        let first_sighting = if aggregated.combined { now } else { event.time };
        let names = &mut self.names;
        let observed = self.logger.observe(
            aggregated.cache_key,
            || names.claim(event.namespace(), name),
            first_sighting,
        );
        let view = EventView {
            event,
            combined: aggregated.combined,
        };
        let verdict = self.spam_filter.filter(view, &hashes, self.clock.now());
        let action = if !verdict.allowed {
            Action::Skip
        } else if observed.patch {
            Action::Patch
        } else {
            Action::Create
        };
        Correlation {
            action,
            name: observed.name,
            count: observed.count,
            first_timestamp: observed.first_timestamp,
            last_timestamp: if aggregated.combined { now } else { event.time },
            combined: aggregated.combined,
            aggregate_key: aggregated.aggregate_key,
            cache_key: aggregated.cache_key,
            spam_key: verdict.key,
            tokens_left: verdict.tokens_left,
            distinct_messages: aggregated.distinct_messages,
            hashes,
        }
    }

    /// Tells the correlator the sink wrote the Event `correlation` decided for `event`
    /// (client-go `UpdateState`, called by `recordEvent` on success).
    pub fn update_state(&mut self, event: &Event, correlation: &Correlation) {
        self.logger.update_state(
            correlation.view(event),
            &correlation.hashes,
            correlation.count,
            correlation.first_timestamp,
            &correlation.name,
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::recorder::clock::ManualClock;
    use crate::recorder::event::{EventType, ObjectRef, Source};

    const BASE: i64 = 1_700_000_000_000_000_000;

    fn ev(clock: &ManualClock, reason: &str, message: &str) -> Event {
        Event::new(
            Arc::new(ObjectRef::new(
                "batch/v1", "CronJob", "default", "hello", "u",
            )),
            Arc::new(Source::new("cronjob-controller", "")),
            EventType::Normal,
            reason,
            message,
            clock.now(),
        )
    }

    fn run(c: &mut Correlator<ManualClock>, e: &Event) -> Correlation {
        let r = c.correlate(e);
        if r.action != Action::Skip {
            c.update_state(e, &r);
        }
        r
    }

    #[test]
    fn first_event_is_created_and_its_repeat_patched_with_count_two() {
        let clock = ManualClock::new(Time::from_unix_nanos(BASE));
        let mut c = Correlator::new(&CorrelatorOptions::default(), clock.clone());
        let e1 = ev(&clock, "BackOff", "same");
        let r1 = run(&mut c, &e1);
        assert_eq!(r1.action, Action::Create);
        clock.advance(Duration::from_secs(10));
        let e2 = ev(&clock, "BackOff", "same");
        let r2 = run(&mut c, &e2);
        assert_eq!(r2.action, Action::Patch);
        assert_eq!(r2.count, 2);
        assert_eq!(r2.name, r1.name);
        assert_eq!(r2.first_timestamp, e1.time);
        let body = r2.patch_body(&e2).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"count": 2, "lastTimestamp": "2023-11-14T22:13:30Z", "message": "same"})
        );
    }

    #[test]
    fn skipped_events_still_raise_the_count() {
        let clock = ManualClock::new(Time::from_unix_nanos(BASE));
        let opts = CorrelatorOptions {
            burst: 1,
            ..CorrelatorOptions::default()
        };
        let mut c = Correlator::new(&opts, clock.clone());
        assert_eq!(run(&mut c, &ev(&clock, "R", "m")).action, Action::Create);
        let r = run(&mut c, &ev(&clock, "R", "m"));
        assert_eq!((r.action, r.count), (Action::Skip, 2));
        clock.advance(Duration::from_mins(5));
        let r = run(&mut c, &ev(&clock, "R", "m"));
        assert_eq!((r.action, r.count), (Action::Patch, 3));
    }

    #[test]
    fn the_correlator_reads_the_clock_twice_per_event() {
        let clock = ManualClock::new(Time::from_unix_nanos(BASE));
        let e = ev(&clock, "R", "m");
        let before = clock.reads();
        let mut c = Correlator::new(&CorrelatorOptions::default(), clock.clone());
        c.correlate(&e);
        assert_eq!(clock.reads() - before, 2);
    }

    #[test]
    fn two_events_on_one_object_in_one_instant_get_two_names() {
        let clock = ManualClock::new(Time::from_unix_nanos(BASE));
        let mut c = Correlator::new(&CorrelatorOptions::default(), clock.clone());
        let a = run(&mut c, &ev(&clock, "SawCompletedJob", "saw hello-4"));
        let b = run(&mut c, &ev(&clock, "SuccessfulDelete", "deleted hello-1"));
        assert_eq!((a.action, b.action), (Action::Create, Action::Create));
        assert_eq!(a.name.to_string(), "hello.17979cfe362a0000");
        assert_eq!(b.name.to_string(), "hello.17979cfe362a0001");
        // A repeat of the second still patches the Event created under the bumped name.
        clock.advance(Duration::from_secs(1));
        let again = run(&mut c, &ev(&clock, "SuccessfulDelete", "deleted hello-1"));
        assert_eq!((again.action, again.name), (Action::Patch, b.name));

        let mut go = Correlator::new(&CorrelatorOptions::default(), clock.clone())
            .with_naming(EventNaming::ClientGo);
        let a = run(&mut go, &ev(&clock, "A", "a"));
        let b = run(&mut go, &ev(&clock, "B", "b"));
        assert_eq!(a.name, b.name, "client-go repeats the name");
    }

    #[test]
    fn a_burst_change_keeps_the_counts_and_an_lru_shrink_keeps_what_fits() {
        let clock = ManualClock::new(Time::from_unix_nanos(BASE));
        let opts = CorrelatorOptions {
            burst: 1,
            ..CorrelatorOptions::default()
        };
        let mut c = Correlator::new(&opts, clock.clone());
        assert_eq!(run(&mut c, &ev(&clock, "R", "m")).action, Action::Create);
        assert_eq!(run(&mut c, &ev(&clock, "R", "m")).action, Action::Skip);
        c.reconfigure(&CorrelatorOptions {
            burst: 100,
            ..CorrelatorOptions::default()
        });
        let r = run(&mut c, &ev(&clock, "R", "m"));
        assert_eq!((r.action, r.count), (Action::Patch, 3));
        let entries = c.cache_entries();
        assert_eq!(
            entries,
            CacheEntries {
                aggregator: 1,
                logger: 1,
                spam: 1
            }
        );
        run(&mut c, &ev(&clock, "Other", "x"));
        c.reconfigure(&CorrelatorOptions {
            lru_cache_size: 1,
            ..CorrelatorOptions::default()
        });
        assert_eq!(c.cache_entries().aggregator, 1);
        assert_eq!(c.cache_entries().logger, 1);
    }
}
