//! The recorder's own metrics, next to the fate counter: sink request latency, correlator
//! cache sizes, and each queue's configured length against its depth.
//!
//! ```text
//! informant_event_sink_request_duration_seconds{verb="create"|"patch"}   histogram
//! informant_event_correlator_cache_entries{cache="aggregator"|"logger"|"spam"}   gauge
//! informant_event_queue_length{queue="incoming"|"watcher"}   gauge (configured)
//! informant_event_queue_depth{queue="incoming"|"watcher"}    gauge (queued now)
//! ```

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::correlator::CacheEntries;
use super::queue::{Bound, PaddedGauge};

/// Buckets of the sink latency histogram, in seconds.
///
/// k8s.io/component-base `metrics/prometheus/restclient/metrics.go` `requestLatency`
/// (`rest_client_request_duration_seconds`).
pub const SINK_LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    cache: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: &'static str,
}

fn latency_histogram() -> Histogram {
    Histogram::new(SINK_LATENCY_BUCKETS)
}

/// Latency of the sink's requests, by verb. Cheap to clone (clones share the histograms).
#[derive(Clone, Debug)]
pub(crate) struct SinkLatency {
    family: Family<VerbLabels, Histogram, fn() -> Histogram>,
    create: Histogram,
    patch: Histogram,
}

impl Default for SinkLatency {
    fn default() -> Self {
        let family: Family<VerbLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency_histogram);
        let create = family.get_or_create(&VerbLabels { verb: "create" }).clone();
        let patch = family.get_or_create(&VerbLabels { verb: "patch" }).clone();
        Self {
            family,
            create,
            patch,
        }
    }
}

impl SinkLatency {
    /// Records a create that took `took`.
    pub(crate) fn create(&self, took: Duration) {
        self.create.observe(took.as_secs_f64());
    }

    /// Records a patch that took `took`.
    pub(crate) fn patch(&self, took: Duration) {
        self.patch.observe(took.as_secs_f64());
    }
}

/// The correlator's cache sizes and the series path's (`cache="series"`: keys cached by the
/// `events.k8s.io/v1` engine), set by the sink worker when they change.
#[derive(Clone, Debug)]
pub(crate) struct CacheGauges {
    family: Family<CacheLabels, Gauge>,
    aggregator: Gauge,
    logger: Gauge,
    spam: Gauge,
    series: Gauge,
    last: CacheEntries,
}

impl Default for CacheGauges {
    fn default() -> Self {
        let family = Family::<CacheLabels, Gauge>::default();
        let gauge = |cache| family.get_or_create(&CacheLabels { cache }).clone();
        let (aggregator, logger, spam) = (gauge("aggregator"), gauge("logger"), gauge("spam"));
        let series = gauge("series");
        Self {
            family,
            aggregator,
            logger,
            spam,
            series,
            last: CacheEntries::default(),
        }
    }
}

impl CacheGauges {
    /// Shows `entries` (three plain comparisons when nothing changed).
    pub(crate) fn set(&mut self, entries: CacheEntries) {
        if entries == self.last {
            return;
        }
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        self.aggregator.set(n(entries.aggregator));
        self.logger.set(n(entries.logger));
        self.spam.set(n(entries.spam));
        self.last = entries;
    }

    /// Shows the keys cached by the series path.
    pub(crate) fn set_series(&self, keys: usize) {
        self.series.set(i64::try_from(keys).unwrap_or(i64::MAX));
    }
}

/// Every metric of one pipeline (except the fates, which the [`super::FateCounter`] owns).
#[derive(Clone, Debug, Default)]
pub(crate) struct Metrics {
    pub(crate) sink_latency: SinkLatency,
    pub(crate) caches: CacheGauges,
    queue_length: Family<QueueLabels, PaddedGauge>,
    queue_depth: Family<QueueLabels, PaddedGauge>,
}

impl Metrics {
    /// The gauges of the queue `queue` (`incoming` or `watcher`).
    pub(crate) fn queue(&self, queue: &'static str) -> Bound {
        let labels = QueueLabels { queue };
        Bound::new(
            self.queue_length.get_or_create(&labels).clone(),
            self.queue_depth.get_or_create(&labels).clone(),
        )
    }

    /// Registers every metric in `registry`.
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "informant_event_sink_request_duration_seconds",
            "Latency of the event sink's requests to the API server, by verb",
            self.sink_latency.family.clone(),
        );
        registry.register(
            "informant_event_correlator_cache_entries",
            "Entries in each cache of the event correlator",
            self.caches.family.clone(),
        );
        registry.register(
            "informant_event_queue_length",
            "Configured length of each event queue",
            self.queue_length.clone(),
        );
        registry.register(
            "informant_event_queue_depth",
            "Events waiting in each event queue",
            self.queue_depth.clone(),
        );
    }
}
