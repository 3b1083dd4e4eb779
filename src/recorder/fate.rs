//! The terminal fate of a recorded event (every event ends in exactly one) and the
//! `informant_events_total{fate}` counter.

use std::fmt;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Where an event ended. Events recorded = sum over fates, always.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fate {
    /// The broadcaster's incoming queue was full (client-go drops it silently).
    DroppedIncomingFull,
    /// A watcher's queue was full (client-go drops it silently).
    DroppedWatcherFull,
    /// Still queued when the recorder shut down.
    DroppedShutdown,
    /// The spam filter's token bucket was empty.
    SpamFiltered,
    /// Written as a new Event.
    Created,
    /// Written as a patch of an existing Event (a repeat, or an aggregate).
    Patched,
    /// The API server refused it (a 4xx that retrying cannot fix).
    Rejected,
    /// Every try failed (retries exhausted, or cancelled while retrying).
    Failed,
    /// Refused before queuing: no object kind, name or reason, or an unknown type.
    Invalid,
    /// `events.k8s.io/v1`: the occurrence that opened a series (the second), written by a
    /// patch of `series: {count: 2, lastObservedTime}`.
    SeriesPatched,
    /// `events.k8s.io/v1`: a third or later occurrence, folded into the cached series count,
    /// and delivered by a later write of that count (a refresh, the finish, or the flush at
    /// shutdown).
    SeriesCounted,
    /// `events.k8s.io/v1`: the server answered a status error that client-go does not retry
    /// (403, 422, 500, 504, 409 on a first create, …); for a folded occurrence, the finishing
    /// write of its series was.
    Abandoned,
    /// `events.k8s.io/v1`: the queue of writes to the API server was full (client-go
    /// `tools/events` drops it silently).
    DroppedSeriesQueueFull,
}

impl Fate {
    /// How many fates there are.
    pub const COUNT: usize = 13;

    /// Every fate, in pipeline order (core/v1's first, then events.k8s.io/v1's own).
    pub const ALL: [Fate; Fate::COUNT] = [
        Fate::DroppedIncomingFull,
        Fate::DroppedWatcherFull,
        Fate::DroppedShutdown,
        Fate::SpamFiltered,
        Fate::Created,
        Fate::Patched,
        Fate::Rejected,
        Fate::Failed,
        Fate::Invalid,
        Fate::SeriesPatched,
        Fate::SeriesCounted,
        Fate::Abandoned,
        Fate::DroppedSeriesQueueFull,
    ];

    /// The label value: `dropped_incoming_full`, `spam_filtered`, ….
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Fate::DroppedIncomingFull => "dropped_incoming_full",
            Fate::DroppedWatcherFull => "dropped_watcher_full",
            Fate::DroppedShutdown => "dropped_shutdown",
            Fate::SpamFiltered => "spam_filtered",
            Fate::Created => "created",
            Fate::Patched => "patched",
            Fate::Rejected => "rejected",
            Fate::Failed => "failed",
            Fate::Invalid => "invalid",
            Fate::SeriesPatched => "series_patched",
            Fate::SeriesCounted => "series_counted",
            Fate::Abandoned => "abandoned",
            Fate::DroppedSeriesQueueFull => "dropped_series_queue_full",
        }
    }

    /// True if the event reached the API server.
    #[must_use]
    pub const fn is_delivered(self) -> bool {
        matches!(
            self,
            Fate::Created | Fate::Patched | Fate::SeriesPatched | Fate::SeriesCounted
        )
    }

    /// The position of this fate in [`Fate::ALL`].
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Fate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl EncodeLabelValue for Fate {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), fmt::Error> {
        fmt::Write::write_str(encoder, self.as_str())
    }
}

/// The label set of the fate counter: `{fate="spam_filtered"}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FateLabels {
    fate: Fate,
}

/// Counts events per terminal fate; cheap to clone (clones share the counts).
///
/// Exposed as `informant_events_total{fate}` once [`FateCounter::register`]ed. Every fate's
/// series exists from the start (at 0), so dashboards see drops that never happened yet.
#[derive(Clone, Debug)]
pub struct FateCounter(std::sync::Arc<Inner>);

#[derive(Debug)]
struct Inner {
    family: Family<FateLabels, Counter>,
    counters: [Counter; Fate::COUNT],
    recorded: Counter,
}

impl Default for FateCounter {
    fn default() -> Self {
        Self::new()
    }
}

impl FateCounter {
    /// A counter at zero for every fate.
    #[must_use]
    pub fn new() -> Self {
        let family = Family::<FateLabels, Counter>::default();
        let counters = Fate::ALL.map(|fate| family.get_or_create(&FateLabels { fate }).clone());
        Self(std::sync::Arc::new(Inner {
            family,
            counters,
            recorded: Counter::default(),
        }))
    }

    /// Registers the counter as `informant_events_total` in `registry`, and the events
    /// recorded as `informant_events_recorded_total`: once nothing is in flight the two agree
    /// (the difference is what is still on its way to a fate).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "informant_events",
            "Recorded events by terminal fate",
            self.0.family.clone(),
        );
        registry.register(
            "informant_events_recorded",
            "Events recorded; each ends in one fate of informant_events_total",
            self.0.recorded.clone(),
        );
    }

    /// Counts one event recorded (its fate comes later, through [`FateCounter::inc`]).
    pub fn record(&self) {
        self.0.recorded.inc();
    }

    /// Events recorded so far, whether or not they reached their fate yet.
    #[must_use]
    pub fn recorded(&self) -> u64 {
        self.0.recorded.get()
    }

    /// Counts one event ending in `fate`.
    pub fn inc(&self, fate: Fate) {
        self.0.counters[fate.index()].inc();
    }

    /// Events that ended in `fate` so far.
    #[must_use]
    pub fn get(&self, fate: Fate) -> u64 {
        self.0.counters[fate.index()].get()
    }

    /// Every fate's count, in [`Fate::ALL`] order.
    #[must_use]
    pub fn snapshot(&self) -> [u64; Fate::COUNT] {
        Fate::ALL.map(|f| self.get(f))
    }

    /// Events that reached a fate, all fates together.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.snapshot().iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_fate_once_at_its_index() {
        for (i, f) in Fate::ALL.iter().enumerate() {
            assert_eq!(f.index(), i);
        }
        let names: std::collections::HashSet<_> = Fate::ALL.iter().map(|f| f.as_str()).collect();
        assert_eq!(names.len(), Fate::COUNT);
    }

    #[test]
    fn counter_exposes_every_fate_as_informant_events_total() {
        let c = FateCounter::new();
        let mut registry = Registry::default();
        c.register(&mut registry);
        c.inc(Fate::SpamFiltered);
        c.clone().inc(Fate::SpamFiltered);
        c.inc(Fate::Created);
        for _ in 0..4 {
            c.record();
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("informant_events_total{fate=\"spam_filtered\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("informant_events_total{fate=\"dropped_shutdown\"} 0"),
            "{text}"
        );
        assert!(text.contains("informant_events_recorded_total 4"), "{text}");
        assert_eq!(c.total(), 3);
        assert_eq!(c.recorded(), 4);
        assert_eq!(c.get(Fate::Created), 1);
    }
}
