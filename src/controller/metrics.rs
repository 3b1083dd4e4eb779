//! The controller runtime's series under controller-runtime's names, labels, help and buckets:
//! `controller_runtime_*` and `workqueue_*`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::manager::Manager;
use crate::manager::metrics::{gauge_value, write_label};

/// Buckets of `controller_runtime_reconcile_time_seconds`, 5ms to 60s.
///
/// controller-runtime pkg/internal/controller/metrics/metrics.go `ReconcileTime` (its native
/// histogram settings are not copied: the text exposition carries classic buckets only).
/// The manager's reload histogram uses the same buckets (a reload is the manager reconciling
/// itself), defined with it since the manager is the lower room.
pub const RECONCILE_TIME_BUCKETS: [f64; 40] = crate::manager::metrics::RELOAD_DURATION_BUCKETS;

/// How one reconcile ended: the `result` label of `controller_runtime_reconcile_total`.
///
/// controller-runtime pkg/internal/controller/controller.go (`labelError`, `labelRequeueAfter`,
/// `labelRequeue`, `labelSuccess`), decided in that order: an error wins over a requeue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReconcileResult {
    /// The reconciler returned an error (also counted in
    /// `controller_runtime_reconcile_errors_total`).
    Error,
    /// The reconciler asked to run again after a delay.
    RequeueAfter,
    /// The reconciler asked to run again, rate limited.
    Requeue,
    /// The reconciler finished and waits for the next change.
    Success,
}

impl ReconcileResult {
    /// Every result, in controller-runtime's order.
    pub const ALL: [ReconcileResult; 4] = [
        ReconcileResult::Error,
        ReconcileResult::RequeueAfter,
        ReconcileResult::Requeue,
        ReconcileResult::Success,
    ];

    /// The label value: `error`, `requeue_after`, `requeue` or `success`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            ReconcileResult::Error => "error",
            ReconcileResult::RequeueAfter => "requeue_after",
            ReconcileResult::Requeue => "requeue",
            ReconcileResult::Success => "success",
        }
    }
}

impl EncodeLabelValue for ReconcileResult {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), fmt::Error> {
        write_label(encoder, self.as_str())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: ReconcileResult,
}

/// Labels of `workqueue_adds_total` and `workqueue_retries_total`; controller-runtime names
/// each queue after its controller and sets both labels to that name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: String,
    controller: String,
}

/// Labels of `workqueue_depth`; `priority` is `""` as in controller-runtime's queues without
/// priorities.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DepthLabels {
    name: String,
    controller: String,
    priority: String,
}

type HistogramFamily<S> = Family<S, Histogram, fn() -> Histogram>;

fn reconcile_time_histogram() -> Histogram {
    Histogram::new(RECONCILE_TIME_BUCKETS)
}

/// The controller runtime's metrics, with controller-runtime's names, labels, help and buckets
/// so its dashboards and alerts work unchanged. Cheap to clone (clones share the series).
///
/// | series | labels | upstream |
/// |---|---|---|
/// | `controller_runtime_reconcile_total` | `controller`, `result` | `ReconcileTotal` |
/// | `controller_runtime_reconcile_errors_total` | `controller` | `ReconcileErrors` |
/// | `controller_runtime_reconcile_timeouts_total` | `controller` | `ReconcileTimeouts` |
/// | `controller_runtime_reconcile_time_seconds` (histogram, [`RECONCILE_TIME_BUCKETS`]) | `controller` | `ReconcileTime` |
/// | `controller_runtime_max_concurrent_reconciles` | `controller` | `WorkerCount` |
/// | `controller_runtime_active_workers` | `controller` | `ActiveWorkers` |
/// | `workqueue_depth` | `name`, `controller`, `priority` | `depth` |
/// | `workqueue_adds_total` | `name`, `controller` | `adds` |
/// | `workqueue_retries_total` | `name`, `controller` | `retries` |
///
/// Upstream: controller-runtime pkg/internal/controller/metrics/metrics.go (the
/// `controller_runtime_*` series) and pkg/internal/metrics/workqueue.go with the keys of
/// pkg/metrics/workqueue.go (the `workqueue_*` series; the `controller` label since v0.19,
/// `priority` since v0.20; `ReconcileTimeouts` since v0.22). Not exposed: terminal errors, panics,
/// and the workqueue latency histograms.
///
/// The runtime calls [`ControllerMetrics::controller`] once per controller and keeps the
/// returned [`ControllerSeries`], whose methods touch pre-resolved series (no label lookup
/// per reconcile).
///
/// ```
/// use std::time::Duration;
/// use informant::controller::{ControllerMetrics, ReconcileResult};
/// use prometheus_client::registry::Registry;
///
/// let metrics = ControllerMetrics::new();
/// let mut registry = Registry::default();
/// metrics.register(&mut registry);
///
/// let pods = metrics.controller("pods", 1);
/// pods.queue_added();
/// pods.queue_depth(1);
/// let worker = pods.reconcile_started();
/// pods.queue_depth(0);
/// pods.reconcile_finished(ReconcileResult::Success, Duration::from_millis(12));
/// drop(worker);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ControllerMetrics(Arc<ControllerInner>);

#[derive(Debug)]
struct ControllerInner {
    reconcile_total: Family<ResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    reconcile_timeouts: Family<ControllerLabels, Counter>,
    reconcile_time: HistogramFamily<ControllerLabels>,
    max_concurrent_reconciles: Family<ControllerLabels, Gauge>,
    active_workers: Family<ControllerLabels, Gauge>,
    queue_depth: Family<DepthLabels, Gauge>,
    queue_adds: Family<QueueLabels, Counter>,
    queue_retries: Family<QueueLabels, Counter>,
}

impl Default for ControllerInner {
    fn default() -> Self {
        Self {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_timeouts: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_time_histogram),
            max_concurrent_reconciles: Family::default(),
            active_workers: Family::default(),
            queue_depth: Family::default(),
            queue_adds: Family::default(),
            queue_retries: Family::default(),
        }
    }
}

impl ControllerMetrics {
    /// No controllers yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The series of `manager`'s controllers, registered on its `/metrics` the first time any
    /// controller asks: every controller of a manager counts into the same families.
    #[must_use]
    pub fn of(manager: &mut Manager) -> Self {
        manager.shared(|registry| {
            let metrics = Self::new();
            registry.register(|r| metrics.register(r));
            metrics
        })
    }

    /// Registers every series in `registry`. The help texts are controller-runtime's (with the
    /// period prometheus-client adds).
    pub fn register(&self, registry: &mut Registry) {
        let inner = &self.0;
        // controller-runtime pkg/internal/controller/metrics/metrics.go
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            inner.reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            inner.reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_timeouts",
            "Total number of reconciliation timeouts per controller",
            inner.reconcile_timeouts.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            inner.reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            inner.max_concurrent_reconciles.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            inner.active_workers.clone(),
        );
        // controller-runtime pkg/internal/metrics/workqueue.go
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue by workqueue and priority",
            inner.queue_depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            inner.queue_adds.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
            inner.queue_retries.clone(),
        );
    }

    /// The series of the controller `name` (also its queue's name), created at zero as
    /// controller-runtime's `initMetrics` does: every `result` at 0, errors at 0, active
    /// workers at 0, and `controller_runtime_max_concurrent_reconciles` set to
    /// `max_concurrent_reconciles`. Calling it again for the same name returns handles on the
    /// same series (and sets the maximum again).
    #[must_use]
    pub fn controller(&self, name: &str, max_concurrent_reconciles: usize) -> ControllerSeries {
        let inner = &self.0;
        let controller = ControllerLabels {
            controller: name.to_owned(),
        };
        let queue = QueueLabels {
            name: name.to_owned(),
            controller: name.to_owned(),
        };
        let results = ReconcileResult::ALL.map(|result| {
            inner
                .reconcile_total
                .get_or_create(&ResultLabels {
                    controller: name.to_owned(),
                    result,
                })
                .clone()
        });
        let max = inner
            .max_concurrent_reconciles
            .get_or_create(&controller)
            .clone();
        max.set(gauge_value(max_concurrent_reconciles));
        ControllerSeries {
            results,
            errors: inner.reconcile_errors.get_or_create(&controller).clone(),
            timeouts: inner.reconcile_timeouts.get_or_create(&controller).clone(),
            time: inner.reconcile_time.get_or_create(&controller).clone(),
            active_workers: inner.active_workers.get_or_create(&controller).clone(),
            depth: inner
                .queue_depth
                .get_or_create(&DepthLabels {
                    name: name.to_owned(),
                    controller: name.to_owned(),
                    priority: String::new(),
                })
                .clone(),
            adds: inner.queue_adds.get_or_create(&queue).clone(),
            retries: inner.queue_retries.get_or_create(&queue).clone(),
        }
    }
}

/// The series of one controller and its queue, from [`ControllerMetrics::controller`]. Cheap
/// to clone (clones share the series); each method is a few atomic operations.
#[derive(Clone, Debug)]
pub struct ControllerSeries {
    /// `controller_runtime_reconcile_total`, in [`ReconcileResult::ALL`] order.
    results: [Counter; 4],
    errors: Counter,
    timeouts: Counter,
    time: Histogram,
    active_workers: Gauge,
    depth: Gauge,
    adds: Counter,
    retries: Counter,
}

impl ControllerSeries {
    /// A worker took an item: `controller_runtime_active_workers` goes up until the returned
    /// guard drops, so a reconcile that is cancelled or panics still gives its worker back.
    #[must_use = "the worker counts as active until the guard drops"]
    pub fn reconcile_started(&self) -> ActiveWorker {
        self.active_workers.inc();
        ActiveWorker(self.active_workers.clone())
    }

    /// A reconcile ended in `result` after `duration`: counts it under its result (and in
    /// `controller_runtime_reconcile_errors_total` for [`ReconcileResult::Error`]) and
    /// observes `controller_runtime_reconcile_time_seconds`.
    pub fn reconcile_finished(&self, result: ReconcileResult, duration: Duration) {
        self.results[result as usize].inc();
        if result == ReconcileResult::Error {
            self.errors.inc();
        }
        self.time.observe(duration.as_secs_f64());
    }

    /// A reconcile ran past its controller's timeout and was cancelled
    /// (`controller_runtime_reconcile_timeouts_total`); it is also counted by
    /// [`ControllerSeries::reconcile_finished`] as an [`ReconcileResult::Error`], as
    /// controller-runtime counts the `context deadline exceeded` its reconciler returns.
    pub fn reconcile_timed_out(&self) {
        self.timeouts.inc();
    }

    /// An item was added to the queue (`workqueue_adds_total`), as client-go counts `Add`
    /// calls, including adds of an item already queued.
    pub fn queue_added(&self) {
        self.adds.inc();
    }

    /// An item was added back with a delay: a rate-limited requeue after an error or
    /// [`ReconcileResult::Requeue`], or a requeue after [`ReconcileResult::RequeueAfter`]
    /// (`workqueue_retries_total`).
    pub fn queue_retried(&self) {
        self.retries.inc();
    }

    /// The queue now holds `n` items ready to be taken (`workqueue_depth`); items waiting for
    /// their delay are not counted, as in client-go.
    pub fn queue_depth(&self, n: usize) {
        self.depth.set(gauge_value(n));
    }

    /// Reconciles that ended in `result` so far.
    #[must_use]
    pub fn reconciles(&self, result: ReconcileResult) -> u64 {
        self.results[result as usize].get()
    }

    /// Reconciles cancelled by the controller's timeout so far.
    #[must_use]
    pub fn timeouts(&self) -> u64 {
        self.timeouts.get()
    }

    /// Workers reconciling now.
    #[must_use]
    pub fn active_workers(&self) -> i64 {
        self.active_workers.get()
    }

    /// Items in the queue now (`workqueue_depth`).
    #[must_use]
    pub fn depth(&self) -> i64 {
        self.depth.get()
    }

    /// Items added to the queue so far (`workqueue_adds_total`).
    #[must_use]
    pub fn adds(&self) -> u64 {
        self.adds.get()
    }
}

/// A worker counted in `controller_runtime_active_workers`, from
/// [`ControllerSeries::reconcile_started`]; dropping it gives the worker back.
#[derive(Debug)]
pub struct ActiveWorker(Gauge);

impl Drop for ActiveWorker {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::metrics::testing::{encode, lines_without_buckets};

    #[test]
    fn controller_series_have_controller_runtime_names_labels_and_help() {
        let metrics = ControllerMetrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let pods = metrics.controller("pods", 2);
        pods.queue_added();
        pods.queue_added();
        pods.queue_depth(2);
        {
            let _worker = pods.reconcile_started();
            assert_eq!(pods.active_workers(), 1);
            pods.reconcile_finished(ReconcileResult::Error, Duration::from_millis(20));
            pods.reconcile_timed_out();
        }
        pods.queue_retried();
        let _still_running = pods.reconcile_started();
        pods.reconcile_finished(ReconcileResult::RequeueAfter, Duration::from_secs(2));
        pods.queue_depth(0);

        let text = encode(&registry);
        let expected = [
            "# EOF",
            "# HELP controller_runtime_active_workers Number of currently used workers per controller.",
            "# HELP controller_runtime_max_concurrent_reconciles Maximum number of concurrent reconciles per controller.",
            "# HELP controller_runtime_reconcile Total number of reconciliations per controller.",
            "# HELP controller_runtime_reconcile_errors Total number of reconciliation errors per controller.",
            "# HELP controller_runtime_reconcile_time_seconds Length of time per reconciliation per controller.",
            "# HELP controller_runtime_reconcile_timeouts Total number of reconciliation timeouts per controller.",
            "# HELP workqueue_adds Total number of adds handled by workqueue.",
            "# HELP workqueue_depth Current depth of workqueue by workqueue and priority.",
            "# HELP workqueue_retries Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls).",
            "# TYPE controller_runtime_active_workers gauge",
            "# TYPE controller_runtime_max_concurrent_reconciles gauge",
            "# TYPE controller_runtime_reconcile counter",
            "# TYPE controller_runtime_reconcile_errors counter",
            "# TYPE controller_runtime_reconcile_time_seconds histogram",
            "# TYPE controller_runtime_reconcile_timeouts counter",
            "# TYPE workqueue_adds counter",
            "# TYPE workqueue_depth gauge",
            "# TYPE workqueue_retries counter",
            "controller_runtime_active_workers{controller=\"pods\"} 1",
            "controller_runtime_max_concurrent_reconciles{controller=\"pods\"} 2",
            "controller_runtime_reconcile_errors_total{controller=\"pods\"} 1",
            "controller_runtime_reconcile_time_seconds_count{controller=\"pods\"} 2",
            "controller_runtime_reconcile_time_seconds_sum{controller=\"pods\"} 2.02",
            "controller_runtime_reconcile_timeouts_total{controller=\"pods\"} 1",
            "controller_runtime_reconcile_total{controller=\"pods\",result=\"error\"} 1",
            "controller_runtime_reconcile_total{controller=\"pods\",result=\"requeue\"} 0",
            "controller_runtime_reconcile_total{controller=\"pods\",result=\"requeue_after\"} 1",
            "controller_runtime_reconcile_total{controller=\"pods\",result=\"success\"} 0",
            "workqueue_adds_total{name=\"pods\",controller=\"pods\"} 2",
            "workqueue_depth{name=\"pods\",controller=\"pods\",priority=\"\"} 0",
            "workqueue_retries_total{name=\"pods\",controller=\"pods\"} 1",
        ];
        assert_eq!(lines_without_buckets(&text), expected, "{text}");

        // controller-runtime's 40 buckets, then +Inf.
        let bounds: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("controller_runtime_reconcile_time_seconds_bucket{"))
            .map(|l| l.split("le=\"").nth(1).unwrap().split('"').next().unwrap())
            .collect();
        let finite: Vec<f64> = bounds[..bounds.len() - 1]
            .iter()
            .map(|b| b.parse().unwrap())
            .collect();
        assert_eq!(finite, RECONCILE_TIME_BUCKETS, "{text}");
        assert_eq!(bounds.last(), Some(&"+Inf"));
        assert_eq!((bounds[0], bounds[39]), ("0.005", "60.0"));
        // Buckets are cumulative: 20ms counts from le=0.025 on, 2s from le=2.5 on
        // (prometheus-client writes `le` before the family's labels).
        assert!(
            text.contains(
                "controller_runtime_reconcile_time_seconds_bucket{le=\"0.025\",controller=\"pods\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "controller_runtime_reconcile_time_seconds_bucket{le=\"2.5\",controller=\"pods\"} 2\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn two_controllers_keep_separate_series_and_a_second_handle_shares_them() {
        let metrics = ControllerMetrics::new();
        let a = metrics.controller("a", 1);
        let b = metrics.controller("b", 4);
        a.reconcile_finished(ReconcileResult::Success, Duration::ZERO);
        metrics
            .controller("a", 1)
            .reconcile_finished(ReconcileResult::Success, Duration::ZERO);
        assert_eq!(a.reconciles(ReconcileResult::Success), 2);
        assert_eq!(b.reconciles(ReconcileResult::Success), 0);
        let worker = b.reconcile_started();
        assert_eq!((a.active_workers(), b.active_workers()), (0, 1));
        drop(worker);
        assert_eq!(b.active_workers(), 0);
    }
}
