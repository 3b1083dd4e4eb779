//! Config reloads: `informant_config_reloads_total{result}`, `informant_informer_restarts_total`,
//! `informant_config_reload_duration_seconds`, and Prometheus's pair of gauges for the last
//! reload (`informant_config_last_reload_successful`,
//! `informant_config_last_reload_success_timestamp_seconds`).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime};

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::write_label;

/// Buckets of `informant_config_reload_duration_seconds`, 5ms to 60s: controller-runtime's
/// reconcile buckets, since a reload is the manager reconciling itself (and may wait for new
/// informers to sync, hence up to 60s).
///
/// controller-runtime pkg/internal/controller/metrics/metrics.go `ReconcileTime` (its native
/// histogram settings are not copied: the text exposition carries classic buckets only).
pub const RELOAD_DURATION_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// How a config reload ended: the `result` label of `informant_config_reloads_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReloadResult {
    /// The new config was valid and different: it runs (a new cache tree, new recorder
    /// options, or both).
    Applied,
    /// The file or spec was edited, but declares the running config (a comment, or an invalid
    /// edit reverted): nothing changed. Saving the same text again is no reload at all.
    Unchanged,
    /// The new config was invalid: the last good one stays (`Valid=False`).
    Rejected,
}

impl ReloadResult {
    /// Every result, in label order.
    pub const ALL: [ReloadResult; 3] = [
        ReloadResult::Applied,
        ReloadResult::Unchanged,
        ReloadResult::Rejected,
    ];

    /// The label value: `applied`, `unchanged` or `rejected`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            ReloadResult::Applied => "applied",
            ReloadResult::Unchanged => "unchanged",
            ReloadResult::Rejected => "rejected",
        }
    }
}

impl fmt::Display for ReloadResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl EncodeLabelValue for ReloadResult {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), fmt::Error> {
        write_label(encoder, self.as_str())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    result: ReloadResult,
}

/// The manager's own metrics: config reloads and the informers they start. Cheap to clone
/// (clones share the counts).
///
/// | series | updated by |
/// |---|---|
/// | `informant_config_reloads_total{result="applied"\|"unchanged"\|"rejected"}` | [`ManagerMetrics::reload`] |
/// | `informant_informer_restarts_total` | `ManagerMetrics::informers_started` |
/// | `informant_config_reload_duration_seconds` (histogram) | `ManagerMetrics::reload_took` |
/// | `informant_config_last_reload_successful` (gauge, 0 or 1) | `ManagerMetrics::last_reload` |
/// | `informant_config_last_reload_success_timestamp_seconds` (gauge) | `ManagerMetrics::last_reload` |
///
/// Every `result` series exists from the start, at 0. The config applied at start is not a
/// reload: it counts in none of them, but sets the two gauges, as Prometheus's initial load
/// sets `prometheus_config_last_reload_successful` and
/// `prometheus_config_last_reload_success_timestamp_seconds` (prometheus/prometheus
/// `cmd/prometheus/main.go`, `reloadConfig`). An invalid edit sets the first to 0 while the
/// last good config keeps running (and `/readyz` stays ready): alert on it.
///
/// ```
/// use informant::manager::{ManagerMetrics, ReloadResult};
/// use prometheus_client::registry::Registry;
///
/// let metrics = ManagerMetrics::new();
/// let mut registry = Registry::default();
/// metrics.register(&mut registry);
/// metrics.reload(ReloadResult::Applied);
/// assert_eq!(metrics.reloads(ReloadResult::Applied), 1);
/// ```
#[derive(Clone, Debug)]
pub struct ManagerMetrics(Arc<ManagerInner>);

#[derive(Debug)]
struct ManagerInner {
    reloads: Family<ReloadLabels, Counter>,
    /// The `reloads` series, in [`ReloadResult::ALL`] order (no map lookup per reload).
    reload_counts: [Counter; 3],
    informer_restarts: Counter,
    reload_duration: Histogram,
    last_reload_successful: Gauge,
    last_reload_success: Gauge<f64, AtomicU64>,
}

impl Default for ManagerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ManagerMetrics {
    /// Metrics at zero.
    #[must_use]
    pub fn new() -> Self {
        let reloads = Family::<ReloadLabels, Counter>::default();
        let reload_counts =
            ReloadResult::ALL.map(|result| reloads.get_or_create(&ReloadLabels { result }).clone());
        Self(Arc::new(ManagerInner {
            reloads,
            reload_counts,
            informer_restarts: Counter::default(),
            reload_duration: Histogram::new(RELOAD_DURATION_BUCKETS),
            last_reload_successful: Gauge::default(),
            last_reload_success: Gauge::default(),
        }))
    }

    /// Registers the series in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "informant_config_reloads",
            "Config reloads by result: applied (a changed config runs), unchanged (an edit that declares the running config), rejected (invalid, the last good config stays); the config applied at start is not a reload",
            self.0.reloads.clone(),
        );
        registry.register(
            "informant_informer_restarts",
            "Informers started by config reloads after the first cache tree (each one relists)",
            self.0.informer_restarts.clone(),
        );
        registry.register(
            "informant_config_reload_duration_seconds",
            "Time from reading a changed config to publishing its cache tree, including the sync of new informers",
            self.0.reload_duration.clone(),
        );
        registry.register(
            "informant_config_last_reload_successful",
            "Whether the last config reload (or the start's load) succeeded: 1, or 0 while the latest config is invalid and the last good one runs",
            self.0.last_reload_successful.clone(),
        );
        registry.register(
            "informant_config_last_reload_success_timestamp_seconds",
            "Timestamp of the last successful config reload (or the start's load), in seconds since the Unix epoch",
            self.0.last_reload_success.clone(),
        );
    }

    /// Sets the last-reload gauges: the load at start or a reload ended in `successful`, at
    /// `at` (the success timestamp moves only on success).
    pub(crate) fn last_reload(&self, successful: bool, at: SystemTime) {
        self.0.last_reload_successful.set(i64::from(successful));
        if successful {
            let seconds = at
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            self.0.last_reload_success.set(seconds);
        }
    }

    /// Whether the last reload (or the start's load) succeeded, and the time of the last
    /// success in seconds since the Unix epoch (0 before the first).
    #[must_use]
    #[cfg(test)]
    pub(crate) fn last_reload_state(&self) -> (bool, f64) {
        (
            self.0.last_reload_successful.get() == 1,
            self.0.last_reload_success.get(),
        )
    }

    /// Counts one reload that ended in `result`.
    pub fn reload(&self, result: ReloadResult) {
        self.0.reload_counts[result as usize].inc();
    }

    /// Counts `n` informers started by a reload (not those of the first tree: a high rate
    /// means reloads keep relisting).
    pub(crate) fn informers_started(&self, n: u64) {
        self.0.informer_restarts.inc_by(n);
    }

    /// Observes how long one reload took.
    pub(crate) fn reload_took(&self, duration: Duration) {
        self.0.reload_duration.observe(duration.as_secs_f64());
    }

    /// Reloads that ended in `result` so far.
    #[must_use]
    pub fn reloads(&self, result: ReloadResult) -> u64 {
        self.0.reload_counts[result as usize].get()
    }

    /// Informers started by reloads so far.
    #[must_use]
    #[cfg(test)]
    pub(crate) fn informer_restarts(&self) -> u64 {
        self.0.informer_restarts.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::metrics::testing::{encode, lines_without_buckets};

    #[test]
    fn manager_series_have_their_names_labels_and_help() {
        let metrics = ManagerMetrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        metrics.reload(ReloadResult::Applied);
        metrics.clone().reload(ReloadResult::Rejected);
        metrics.reload(ReloadResult::Rejected);
        metrics.informers_started(3);
        metrics.reload_took(Duration::from_millis(30));
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_500);
        metrics.last_reload(true, at);
        metrics.last_reload(false, at + Duration::from_mins(1));

        let text = encode(&registry);
        let expected = [
            "# EOF",
            "# HELP informant_config_last_reload_success_timestamp_seconds Timestamp of the last successful config reload (or the start's load), in seconds since the Unix epoch.",
            "# HELP informant_config_last_reload_successful Whether the last config reload (or the start's load) succeeded: 1, or 0 while the latest config is invalid and the last good one runs.",
            "# HELP informant_config_reload_duration_seconds Time from reading a changed config to publishing its cache tree, including the sync of new informers.",
            "# HELP informant_config_reloads Config reloads by result: applied (a changed config runs), unchanged (an edit that declares the running config), rejected (invalid, the last good config stays); the config applied at start is not a reload.",
            "# HELP informant_informer_restarts Informers started by config reloads after the first cache tree (each one relists).",
            "# TYPE informant_config_last_reload_success_timestamp_seconds gauge",
            "# TYPE informant_config_last_reload_successful gauge",
            "# TYPE informant_config_reload_duration_seconds histogram",
            "# TYPE informant_config_reloads counter",
            "# TYPE informant_informer_restarts counter",
            "informant_config_last_reload_success_timestamp_seconds 1700000000.5",
            "informant_config_last_reload_successful 0",
            "informant_config_reload_duration_seconds_count 1",
            "informant_config_reload_duration_seconds_sum 0.03",
            "informant_config_reloads_total{result=\"applied\"} 1",
            "informant_config_reloads_total{result=\"rejected\"} 2",
            "informant_config_reloads_total{result=\"unchanged\"} 0",
            "informant_informer_restarts_total 3",
        ];
        assert_eq!(lines_without_buckets(&text), expected, "{text}");
        assert!(
            text.contains("informant_config_reload_duration_seconds_bucket{le=\"0.05\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("informant_config_reload_duration_seconds_bucket{le=\"0.025\"} 0\n"),
            "{text}"
        );
        assert_eq!(metrics.reloads(ReloadResult::Rejected), 2);
        assert_eq!(metrics.informer_restarts(), 3);
        assert_eq!(metrics.last_reload_state(), (false, 1_700_000_000.5));
    }
}
