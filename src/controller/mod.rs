//! The controller runtime: a [`Controller`] declares the kind it reconciles, the kinds it owns
//! and watches, and runs a `reconcile(object, ctx) -> Result<Action>` on kube-runtime's
//! scheduler and runner (per-object dedupe, concurrency, `Action::requeue`, the error policy),
//! fed from the manager's informer pool instead of watches of its own.
//!
//! ```text
//! InformerPool::subscribe(kind) ─▶ changes as stubs ─▶ Store<Stub<K>> + triggers ─▶ kube-runtime
//!   (every informer of the kind,  (listed from the     (for, list pass,    scheduler ─▶ read K ─▶ reconcile
//!    across reloads)               cache's keys)        resync, owns,       runner      from the  (span,
//!                                                       watches)                        cache      metrics)
//! ```
//!
//! One copy of every object: the runner's store holds [`Stub`]s (name, namespace and
//! `resourceVersion`) and each reconcile reads its object through the cache tree (the module
//! `stub` says why this route). After each list the objects it brought in or changed (every
//! object after the first list and after an informer's relist: [`reflected`]) are asked for
//! once at the runner's pace ([`LIST_PASS_QUEUE`]), and every object again once per the
//! `syncPeriod` of the cache serving it
//! ([`resync`], jittered and spread; fed to kube-runtime's `reconcile_on`).
//!
//! The reconcile's [`Context`] reads through the cache tree (never straight to the API
//! server), writes with a kube `Client`, and records with the manager's
//! [`crate::recorder::Recorder`]; [`object_ref`] makes the event reference of an object.
//! Each reconcile runs in a `reconcile` span (`controller`, `k8s.namespace`, `object.name`,
//! `result`, `error`) and is counted in controller-runtime's series
//! ([`ControllerMetrics`]) when [`Controller::metrics`] is set.
//!
//! kube-runtime's runner is assembled in one place, `controller/runner.rs`, for these Rust
//! controllers and for the hook controllers of `crate::hooks` alike.
//!
//! A complete controller: `informant::samples::cronjob`, run by `examples/cronjob_controller.rs`.

mod backoff;
mod builder;
pub mod conditions;
mod context;
mod error;
mod finalizer;
mod metrics;
mod pass;
mod predicate;
mod reconcile;
mod relation;
mod resync;
mod rules;
mod run;
pub(crate) mod runner;
mod scope;
mod series;
mod shard;
mod shutdown;
mod source;
mod stub;
pub mod testing;
mod write;

use std::sync::Arc;

use kube::core::{DynamicObject, GroupVersionKind};
use serde::de::DeserializeOwned;

pub use backoff::{
    DEFAULT_ERROR_BACKOFF_BASE, DEFAULT_ERROR_BACKOFF_MAX, default_error_policy, error_backoff,
};
pub use builder::{Controller, DEFAULT_CONCURRENCY};
pub use context::{Context, object_ref};
pub use error::{Error, Result};
pub use kube::runtime::controller::Action;
pub use metrics::{
    ActiveWorker, ControllerMetrics, ControllerSeries, RECONCILE_TIME_BUCKETS, ReconcileResult,
};
pub use predicate::Predicate;
#[cfg(feature = "hooks")]
pub(crate) use reconcile::bounded;
pub use resync::{RESYNC_JITTER, SCANS_PER_PERIOD, resync};
pub use series::{LIST_PASS_QUEUE, Series};
pub(crate) use shard::gained as shard_gained;
pub(crate) use shutdown::stopped_before_ready;
pub use source::{Change, Decode, Follow, Versioned, changes, reflected};
#[cfg(feature = "hooks")]
pub(crate) use stub::read;
pub use stub::{Stub, StubDecoder, stubs};
pub use write::WriteError;
#[cfg(feature = "hooks")]
pub(crate) use write::{
    apply_as, apply_status_as, controlled_by, delete_child, set_controller_owner,
};

/// Decodes a cached object into `T`, skipping (with a warning) one that does not fit.
fn decode<T: DeserializeOwned>(gvk: &GroupVersionKind, obj: Arc<DynamicObject>) -> Option<T> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let namespace = obj.metadata.namespace.clone().unwrap_or_default();
    match crate::cache::typed::from_cached(gvk, obj) {
        Ok(typed) => Some(typed),
        Err(error) => {
            tracing::warn!(
                k8s.namespace = namespace,
                object.name = name,
                error = %crate::telemetry::error_chain(&error),
                "controller skips an object that does not decode"
            );
            None
        }
    }
}
