//! Typed recorder options, with client-go's defaults.

use std::time::Duration;

use super::changes::{Changes, show_duration, show_fields, show_seconds};
use super::series::key::SeriesKeyField;

/// Default length of the broadcaster's incoming queue and of each watcher's queue.
///
/// client-go `tools/record/event.go`: `maxQueuedEvents = 1000`, passed to apimachinery
/// `pkg/watch/mux.go` `NewLongQueueBroadcaster`, which uses it for both queues.
pub const DEFAULT_QUEUE_LENGTH: usize = 1000;

/// Default number of tries the sink makes for one event.
///
/// client-go `tools/record/event.go`: `maxTriesPerEvent = 12`; the same in
/// `tools/events/event_broadcaster.go`: `maxTriesPerEvent = 12`.
pub const DEFAULT_MAX_RETRIES: u32 = 12;

/// Default wait between two tries of the sink (the first wait is jittered).
///
/// client-go `tools/record/event.go`: `defaultSleepDuration = 10 * time.Second`; the same in
/// `tools/events/event_broadcaster.go`: `defaultSleepDuration = 10 * time.Second` (there
/// every wait is jittered up to 25% longer, see
/// [`RETRY_JITTER`](crate::recorder::series::RETRY_JITTER)).
pub const DEFAULT_RETRY_INTERVAL: Duration = Duration::from_secs(10);

/// Default size of each LRU cache of the correlator.
///
/// client-go `tools/record/events_cache.go`: `maxLruCacheEntries = 4096`.
pub const DEFAULT_LRU_CACHE_SIZE: usize = 4096;

/// Default number of distinct messages of similar events before they are aggregated.
///
/// client-go `tools/record/events_cache.go`: `defaultAggregateMaxEvents = 10`.
pub const DEFAULT_MAX_EVENTS: usize = 10;

/// Default aggregation window, in seconds.
///
/// client-go `tools/record/events_cache.go`: `defaultAggregateIntervalInSeconds = 600`.
pub const DEFAULT_MAX_INTERVAL_SECONDS: u64 = 600;

/// Default burst of the spam filter's token bucket.
///
/// client-go `tools/record/events_cache.go`: `defaultSpamBurst = 25`.
pub const DEFAULT_BURST: u32 = 25;

/// Default refill rate of the spam filter's token bucket, in tokens per second.
///
/// client-go `tools/record/events_cache.go`: `defaultSpamQPS = 1. / 300.`, stored in
/// `CorrelatorOptions.QPS`, a `float32`: the value the bucket really uses is
/// `1.0_f32 / 300.0` widened to `f64` (0.0033333334…), which decides whether an event passes
/// at exactly 300 s boundaries (see `tests/data/scenarios/README.md`, fact 4).
pub const DEFAULT_QPS: f64 = (1.0_f32 / 300.0_f32) as f64;

/// How often open series are written again (their count so far), whatever happens.
///
/// client-go `tools/events/event_broadcaster.go`: `refreshTime = 30 * time.Minute`.
pub const DEFAULT_SERIES_REFRESH: Duration = Duration::from_mins(30);

/// How long after its last occurrence a series is finished (its count written one last time
/// and its key forgotten); also the period of the check, so a key lives 6–12 minutes after its
/// last sighting.
///
/// client-go `tools/events/event_broadcaster.go`: `finishTime = 6 * time.Minute`.
pub const DEFAULT_SERIES_FINISH: Duration = Duration::from_mins(6);

/// Which Events API the recorder writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Api {
    /// core/v1 Events, client-go's `tools/record`: aggregation, dedupe into `count`, the spam
    /// filter (the default).
    #[default]
    CoreV1,
    /// `events.k8s.io/v1` Events, client-go's `tools/events`: isomorphic events folded into an
    /// `EventSeries` (controller-runtime ≥ v0.23's default, kube-rs's `Recorder`).
    EventsV1,
}

impl Api {
    /// Both APIs, in the order they are documented.
    pub const ALL: [Api; 2] = [Api::CoreV1, Api::EventsV1];

    /// The name used in the `CacheConfig` and on the command line: `v1` or
    /// `events.k8s.io/v1`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Api::CoreV1 => "v1",
            Api::EventsV1 => "events.k8s.io/v1",
        }
    }

    /// Parses the name used in the `CacheConfig`; `None` if it is not an API.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Options of the `events.k8s.io/v1` series path (client-go `tools/events`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeriesOptions {
    /// The fields of the isomorphic key, sorted and without duplicates; events with one key
    /// make one series. Default client-go's seven ([`SeriesKeyField::DEFAULT`]).
    pub key_fields: Vec<SeriesKeyField>,
    /// Period of the refresh of every open series. Always > 0.
    pub refresh: Duration,
    /// Quiet time after which a series is finished, and period of that check. Always > 0.
    pub finish: Duration,
}

impl Default for SeriesOptions {
    fn default() -> Self {
        Self {
            key_fields: SeriesKeyField::DEFAULT.to_vec(),
            refresh: DEFAULT_SERIES_REFRESH,
            finish: DEFAULT_SERIES_FINISH,
        }
    }
}

/// A field of an event that is part of the spam filter's key.
///
/// Events that share a key share one token bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpamKeyField {
    /// The event's source: component and host.
    Source,
    /// The involved object: kind, namespace, name, uid, apiVersion (not fieldPath).
    InvolvedObject,
    /// The event type (Normal or Warning).
    Type,
    /// The event reason.
    Reason,
    /// The event message.
    Message,
}

impl SpamKeyField {
    /// client-go ≥ v0.32's spam key: source, involved object and type
    /// (`tools/record/events_cache.go`, `getSpamKey`).
    pub const DEFAULT: [SpamKeyField; 3] = [
        SpamKeyField::Source,
        SpamKeyField::InvolvedObject,
        SpamKeyField::Type,
    ];

    /// Every field, in the order they are documented.
    pub const ALL: [SpamKeyField; 5] = [
        SpamKeyField::Source,
        SpamKeyField::InvolvedObject,
        SpamKeyField::Type,
        SpamKeyField::Reason,
        SpamKeyField::Message,
    ];

    /// The name used in the `CacheConfig` and on the command line (`involvedObject`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SpamKeyField::Source => "source",
            SpamKeyField::InvolvedObject => "involvedObject",
            SpamKeyField::Type => "type",
            SpamKeyField::Reason => "reason",
            SpamKeyField::Message => "message",
        }
    }

    /// Parses the name used in the `CacheConfig`; `None` if it is not a field.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == name)
    }
}

impl std::fmt::Display for SpamKeyField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Options of the correlator: aggregator, logger and spam filter.
#[derive(Clone, Debug, PartialEq)]
pub struct CorrelatorOptions {
    /// Refill rate of each spam-filter token bucket, in tokens per second. Always > 0.
    pub qps: f64,
    /// Capacity of each spam-filter token bucket. Always ≥ 1.
    pub burst: u32,
    /// Distinct messages of similar events, within `max_interval`, before aggregation.
    pub max_events: usize,
    /// Aggregation window.
    pub max_interval: Duration,
    /// Entries of each LRU cache (spam, aggregation, dedupe). Always ≥ 1.
    pub lru_cache_size: usize,
    /// The fields that make up the spam key, sorted and without duplicates.
    pub spam_key_fields: Vec<SpamKeyField>,
}

impl Default for CorrelatorOptions {
    fn default() -> Self {
        Self {
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
            max_events: DEFAULT_MAX_EVENTS,
            max_interval: Duration::from_secs(DEFAULT_MAX_INTERVAL_SECONDS),
            lru_cache_size: DEFAULT_LRU_CACHE_SIZE,
            spam_key_fields: SpamKeyField::DEFAULT.to_vec(),
        }
    }
}

/// Options of the sink that writes events to the API server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkOptions {
    /// Tries per event before its fate is `failed`. Always ≥ 1.
    pub max_retries: u32,
    /// Wait between tries; the first wait is jittered as client-go does.
    pub retry_interval: Duration,
}

impl Default for SinkOptions {
    fn default() -> Self {
        Self {
            max_retries: DEFAULT_MAX_RETRIES,
            retry_interval: DEFAULT_RETRY_INTERVAL,
        }
    }
}

/// Typed options of the whole recorder pipeline. `Default` equals client-go's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// The `source.component` (and reporting controller) of recorded events.
    pub component: String,
    /// Length of the broadcaster's incoming queue; a full queue drops the event
    /// (`dropped_incoming_full`).
    pub incoming_queue_length: usize,
    /// Length of each watcher's queue; a full queue drops the event for that watcher
    /// (`dropped_watcher_full`).
    pub watcher_queue_length: usize,
    /// The correlator's options.
    pub correlator: CorrelatorOptions,
    /// The sink's options.
    pub sink: SinkOptions,
    /// The Events API written; the correlator applies to `v1` only, the series to
    /// `events.k8s.io/v1` only.
    pub api: Api,
    /// The series options (`events.k8s.io/v1`).
    pub series: SeriesOptions,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            component: "informant".to_owned(),
            incoming_queue_length: DEFAULT_QUEUE_LENGTH,
            watcher_queue_length: DEFAULT_QUEUE_LENGTH,
            correlator: CorrelatorOptions::default(),
            sink: SinkOptions::default(),
            api: Api::default(),
            series: SeriesOptions::default(),
        }
    }
}

impl Options {
    /// The fields that differ between `self` (the running options) and `new`, named as in
    /// the `CacheConfig`'s `spec.recorder`, for a one-line reload summary:
    /// `burst 25→50, spamKeyFields source+involvedObject→source+involvedObject+reason`.
    ///
    /// ```
    /// use informant::recorder::{CorrelatorOptions, Options};
    /// let old = Options::default();
    /// let new = Options {
    ///     correlator: CorrelatorOptions { qps: 1.0, burst: 50, ..CorrelatorOptions::default() },
    ///     ..Options::default()
    /// };
    /// assert_eq!(old.changes(&new).to_string(), "qps 0.0033→1, burst 25→50");
    /// assert!(old.changes(&old).is_empty());
    /// ```
    #[must_use]
    pub fn changes(&self, new: &Self) -> Changes {
        let mut c = Changes::default();
        let (o, n) = (&self.correlator, &new.correlator);
        c.diff(
            "component",
            self.component.as_str(),
            &new.component,
            str::to_owned,
        );
        c.diff(
            "incomingQueueLength",
            &self.incoming_queue_length,
            &new.incoming_queue_length,
            ToString::to_string,
        );
        c.diff(
            "watcherQueueLength",
            &self.watcher_queue_length,
            &new.watcher_queue_length,
            ToString::to_string,
        );
        c.diff_rate("qps", o.qps, n.qps);
        c.diff("burst", &o.burst, &n.burst, ToString::to_string);
        c.diff(
            "maxEvents",
            &o.max_events,
            &n.max_events,
            ToString::to_string,
        );
        c.diff(
            "maxIntervalSeconds",
            &o.max_interval,
            &n.max_interval,
            show_seconds,
        );
        c.diff(
            "lruCacheSize",
            &o.lru_cache_size,
            &n.lru_cache_size,
            ToString::to_string,
        );
        c.diff(
            "spamKeyFields",
            o.spam_key_fields.as_slice(),
            n.spam_key_fields.as_slice(),
            show_fields,
        );
        c.diff(
            "maxRetries",
            &self.sink.max_retries,
            &new.sink.max_retries,
            ToString::to_string,
        );
        c.diff(
            "retryInterval",
            &self.sink.retry_interval,
            &new.sink.retry_interval,
            show_duration,
        );
        c.diff("api", &self.api, &new.api, ToString::to_string);
        c.diff(
            "series.keyFields",
            self.series.key_fields.as_slice(),
            new.series.key_fields.as_slice(),
            show_fields,
        );
        c.diff(
            "series.refresh",
            &self.series.refresh,
            &new.series.refresh,
            show_duration,
        );
        c.diff(
            "series.finish",
            &self.series.finish,
            &new.series.finish,
            show_duration,
        );
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_qps_is_client_go_float32_one_over_three_hundred() {
        assert!((DEFAULT_QPS - 0.003_333_333_4).abs() < 1e-10);
        assert_ne!(DEFAULT_QPS.to_bits(), (1.0_f64 / 300.0).to_bits());
    }

    #[test]
    fn spam_key_field_names_round_trip() {
        for f in SpamKeyField::ALL {
            assert_eq!(SpamKeyField::parse(f.as_str()), Some(f));
        }
        assert_eq!(SpamKeyField::parse("involvedobject"), None);
    }

    #[test]
    fn changes_name_every_changed_field_in_config_order() {
        let old = Options::default();
        let new = Options {
            component: "shop-operator".into(),
            incoming_queue_length: 10,
            watcher_queue_length: 20,
            correlator: CorrelatorOptions {
                qps: 1.0,
                burst: 50,
                max_events: 5,
                max_interval: Duration::from_mins(5),
                lru_cache_size: 100,
                spam_key_fields: vec![
                    SpamKeyField::Source,
                    SpamKeyField::InvolvedObject,
                    SpamKeyField::Reason,
                ],
            },
            sink: SinkOptions {
                max_retries: 3,
                retry_interval: Duration::from_millis(1500),
            },
            ..Options::default()
        };
        assert_eq!(
            old.changes(&new).to_string(),
            "component informant→shop-operator, incomingQueueLength 1000→10, \
             watcherQueueLength 1000→20, qps 0.0033→1, burst 25→50, maxEvents 10→5, \
             maxIntervalSeconds 600→300, lruCacheSize 4096→100, \
             spamKeyFields source+involvedObject+type→source+involvedObject+reason, \
             maxRetries 12→3, retryInterval 10s→1.5s"
        );
        assert_eq!(new.changes(&old).len(), 11);
        assert!(new.changes(&new.clone()).is_empty());
    }

    #[test]
    fn changes_name_the_api_and_series_fields() {
        let old = Options::default();
        let new = Options {
            api: Api::EventsV1,
            series: SeriesOptions {
                key_fields: vec![SeriesKeyField::Reason, SeriesKeyField::Note],
                refresh: Duration::from_mins(10),
                finish: Duration::from_mins(2),
            },
            ..Options::default()
        };
        assert_eq!(
            old.changes(&new).to_string(),
            "api v1→events.k8s.io/v1, \
             series.keyFields type+action+reason+reportingController+reportingInstance+regarding+related→reason+note, \
             series.refresh 1800s→600s, series.finish 360s→120s"
        );
        assert_eq!(Api::parse("events.k8s.io/v1"), Some(Api::EventsV1));
        assert_eq!(Api::parse("events/v1"), None);
    }
}
