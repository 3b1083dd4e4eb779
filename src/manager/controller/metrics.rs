//! The controller runtime's hook into the manager's metrics: controller-runtime's
//! `controller_runtime_*` and `workqueue_*` series ([`ControllerMetrics`]), or nothing when
//! the controller runs without them.
//!
//! kube-runtime's scheduler keeps its queue to itself, so `workqueue_adds_total` counts the
//! requests the trigger streams hand it (each applied object, each owner a child names, each
//! object a mapper returns; the scheduler then merges requests for the same object), and
//! `workqueue_retries_total` the reconciles asking to run again (a requeue, or an error
//! policy's requeue). `workqueue_depth` is not known and stays 0.

use std::time::Duration;

use crate::manager::metrics::{ActiveWorker, ControllerMetrics, ControllerSeries};

pub(super) use crate::manager::metrics::ReconcileResult as Outcome;

/// One controller's series, or none.
#[derive(Clone, Debug, Default)]
pub(super) struct Series(Option<ControllerSeries>);

impl Series {
    /// The series of controller `name` in `metrics`, with its concurrency as the maximum.
    pub(super) fn new(metrics: Option<&ControllerMetrics>, name: &str, concurrency: u16) -> Self {
        Self(metrics.map(|m| m.controller(name, usize::from(concurrency))))
    }

    /// A reconcile started; it counts as active until the guard drops.
    pub(super) fn reconcile_started(&self) -> Option<ActiveWorker> {
        self.0.as_ref().map(ControllerSeries::reconcile_started)
    }

    /// A reconcile ended.
    pub(super) fn reconcile_finished(&self, outcome: Outcome, duration: Duration) {
        if let Some(series) = &self.0 {
            series.reconcile_finished(outcome, duration);
        }
    }

    /// A trigger asked for a reconcile.
    pub(super) fn queue_added(&self) {
        if let Some(series) = &self.0 {
            series.queue_added();
        }
    }

    /// A reconcile asked to run again later.
    pub(super) fn queue_retried(&self) {
        if let Some(series) = &self.0 {
            series.queue_retried();
        }
    }
}
