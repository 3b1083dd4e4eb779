//! The hook controllers' own series: `informant_hook_calls_total{controller,failure}`,
//! `informant_hook_call_duration_seconds{controller}` and
//! `informant_hook_schedule_ticks_total{controller,result}`,
//! `informant_admission_total{hook,operation,fate}`,
//! `informant_conversion_total{hook,fate}` (the reconcile series are
//! controller-runtime's, in [`crate::controller::ControllerMetrics`]).

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::controller::RECONCILE_TIME_BUCKETS;
use crate::manager::Manager;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    controller: String,
    failure: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TickLabels {
    controller: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AdmissionLabels {
    hook: String,
    operation: String,
    fate: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConversionLabels {
    hook: String,
    fate: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabel {
    controller: String,
}

type HistogramFamily = Family<ControllerLabel, Histogram, fn() -> Histogram>;

fn histogram() -> Histogram {
    Histogram::new(RECONCILE_TIME_BUCKETS)
}

/// Hook calls by controller and failure (`none`, `timeout`, `exit`, `too_large`, `malformed`,
/// `http`, `refused`, `start`, `cache`, `child`, `write`), and their duration (the hook's time and
/// the writes).
#[derive(Clone, Debug)]
pub struct HookMetrics(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    calls: Family<CallLabels, Counter>,
    duration: HistogramFamily,
    ticks: Family<TickLabels, Counter>,
    admission: Family<AdmissionLabels, Counter>,
    conversion: Family<ConversionLabels, Counter>,
}

impl Default for HookMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl HookMetrics {
    /// Empty series.
    #[must_use]
    pub fn new() -> Self {
        Self(Arc::new(Inner {
            calls: Family::default(),
            duration: Family::new_with_constructor(histogram as fn() -> Histogram),
            ticks: Family::default(),
            admission: Family::default(),
            conversion: Family::default(),
        }))
    }

    /// The hook series of `manager`, registered on its `/metrics` the first time they are
    /// asked for.
    #[must_use]
    pub fn of(manager: &mut Manager) -> Self {
        manager.shared(|registry| {
            let metrics = Self::new();
            registry.register(|r| metrics.register(r));
            metrics
        })
    }

    /// Registers the series.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "informant_hook_calls",
            "Hook reconciles per controller, by failure (none for a success)",
            self.0.calls.clone(),
        );
        registry.register(
            "informant_hook_call_duration_seconds",
            "Length of a hook reconcile (the call and the writes) per controller",
            self.0.duration.clone(),
        );
        registry.register(
            "informant_hook_schedule_ticks",
            "Ticks of a controller's spec.schedule, by result (run, or skipped when the \
             previous tick still ran)",
            self.0.ticks.clone(),
        );
        registry.register(
            "informant_admission",
            "Admission requests per hook (<namespace>/<controller>/<hook>) and operation, by \
             fate (allowed, denied, patched, failed_open, failed_closed, timed_out, \
             invalid_answer, too_large, busy)",
            self.0.admission.clone(),
        );
        registry.register(
            "informant_conversion",
            "Conversion reviews per hook (<namespace>/<controller>), by fate (converted, \
             failed, invalid_answer, timed_out, too_large, busy)",
            self.0.conversion.clone(),
        );
    }

    /// Counts one conversion review of `hook` (`<namespace>/<controller>`) ending in `fate`.
    pub fn conversion(&self, hook: &str, fate: crate::hooks::ConversionFate) {
        self.0
            .conversion
            .get_or_create(&ConversionLabels {
                hook: hook.to_owned(),
                fate: fate.as_str().to_owned(),
            })
            .inc();
    }

    /// Conversion reviews of `hook` that ended in `fate`.
    #[must_use]
    pub fn conversions(&self, hook: &str, fate: crate::hooks::ConversionFate) -> u64 {
        self.0
            .conversion
            .get_or_create(&ConversionLabels {
                hook: hook.to_owned(),
                fate: fate.as_str().to_owned(),
            })
            .get()
    }

    /// Counts one admission request of `hook` for `operation` ending in `fate`.
    pub fn admission(&self, hook: &str, operation: &str, fate: crate::hooks::AdmissionFate) {
        self.0
            .admission
            .get_or_create(&AdmissionLabels {
                hook: hook.to_owned(),
                operation: operation.to_owned(),
                fate: fate.as_str().to_owned(),
            })
            .inc();
    }

    /// Admission requests of `hook` for `operation` that ended in `fate`.
    #[must_use]
    pub fn admissions(
        &self,
        hook: &str,
        operation: &str,
        fate: crate::hooks::AdmissionFate,
    ) -> u64 {
        self.0
            .admission
            .get_or_create(&AdmissionLabels {
                hook: hook.to_owned(),
                operation: operation.to_owned(),
                fate: fate.as_str().to_owned(),
            })
            .get()
    }

    /// Counts one tick of `controller`'s schedule: `run`, or `skipped` when the previous
    /// tick's calls still ran.
    pub fn schedule_tick(&self, controller: &str, run: bool) {
        self.0
            .ticks
            .get_or_create(&TickLabels {
                controller: controller.to_owned(),
                result: if run { "run" } else { "skipped" }.to_owned(),
            })
            .inc();
    }

    /// Ticks of `controller`'s schedule that ran (`run`) or were skipped.
    #[must_use]
    pub fn schedule_ticks(&self, controller: &str, run: bool) -> u64 {
        self.0
            .ticks
            .get_or_create(&TickLabels {
                controller: controller.to_owned(),
                result: if run { "run" } else { "skipped" }.to_owned(),
            })
            .get()
    }

    /// Counts one reconcile of `controller` ending with `failure` (`none` for a success).
    pub fn observe(&self, controller: &str, failure: &str, duration: Duration) {
        self.0
            .calls
            .get_or_create(&CallLabels {
                controller: controller.to_owned(),
                failure: failure.to_owned(),
            })
            .inc();
        self.0
            .duration
            .get_or_create(&ControllerLabel {
                controller: controller.to_owned(),
            })
            .observe(duration.as_secs_f64());
    }

    /// Reconciles of `controller` that ended with `failure`.
    #[must_use]
    pub fn calls(&self, controller: &str, failure: &str) -> u64 {
        self.0
            .calls
            .get_or_create(&CallLabels {
                controller: controller.to_owned(),
                failure: failure.to_owned(),
            })
            .get()
    }
}
