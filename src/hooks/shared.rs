//! [`Shared`]: what every reconcile of one hook controller shares (its settings, kinds, hook
//! caller, counters), and the memo of the manager's own writes the reconciles consult so a
//! stale cache does not make them write twice.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use kube::core::DynamicObject;
use serde_json::Value;

use super::call::Caller;
use super::contract::ControllerRef;
use super::metrics::HookMetrics;
use super::resource::ControllerSettings;
use super::stats::Stats;
use crate::cache::KindInfo;
use crate::controller::{Change, Context, Series};

/// Everything a reconcile of one hook controller needs.
pub(super) struct Shared {
    pub(super) settings: ControllerSettings,
    pub(super) controller: ControllerRef,
    pub(super) field_manager: String,
    pub(super) ctx: Context,
    pub(super) parent: KindInfo,
    pub(super) owns: Vec<KindInfo>,
    pub(super) watches: Vec<KindInfo>,
    /// The hook, under the manager's hook policy.
    pub(super) caller: Caller,
    /// The controller's counters, shared with the supervisor that reports them.
    pub(super) stats: Stats,
    /// controller-runtime's reconcile and workqueue series, as the typed controllers count them.
    pub(super) series: Series,
    /// Hook calls and failures, when the manager counts them.
    pub(super) hook_metrics: Option<HookMetrics>,
    /// The last write of each object (`status:<uid>`, `child:<plural>/<ns>/<name>`,
    /// `deleted:<uid>`): the resourceVersion it was based on and what was written.
    pub(super) written: Written,
    /// For each object whose status the manager wrote (by uid): the resourceVersion the write
    /// was based on and the one it produced. See [`Shared::cache_behind`].
    pub(super) status_echo: Mutex<HashMap<String, (String, String)>>,
    /// The calls of the last `perObject` tick of `spec.schedule` not ended yet, if any.
    pub(super) scheduled: Option<Arc<super::schedule::Outstanding>>,
}

/// See [`Shared::already_wrote`].
pub(super) type Written = Arc<Mutex<HashMap<String, (Option<String>, Value)>>>;

/// The memo key of a child write.
pub(super) fn child_key(plural: &str, namespace: Option<&str>, name: &str) -> String {
    format!("child:{plural}/{}/{name}", namespace.unwrap_or_default())
}

/// Forgets the child writes a change of children of kind `plural` makes stale: a deleted
/// child must be applied again even though the cache looks as it did before its creation.
pub(super) fn forget_children(written: &Written, plural: &str, change: &Change<DynamicObject>) {
    let mut written = written.lock().unwrap_or_else(PoisonError::into_inner);
    match change {
        Change::Deleted(child) => {
            written.remove(&child_key(
                plural,
                child.metadata.namespace.as_deref(),
                child.metadata.name.as_deref().unwrap_or_default(),
            ));
        }
        Change::Listed(_) | Change::Relisted(_) => {
            let prefix = format!("child:{plural}/");
            written.retain(|key, _| !key.starts_with(&prefix));
        }
        Change::Applied(_) => {}
    }
}

impl Shared {
    /// A hook call is about to be made: it is counted in [`Stats::calls`] when the guard
    /// drops, at the end of the reconcile.
    pub(super) fn hook_called(&self) -> impl Drop + '_ {
        struct Counted<'a>(&'a AtomicU64);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        Counted(&self.stats.0.calls)
    }

    /// Whether `object`, as the cache holds it, is the version the manager's own status write
    /// replaced: the cache has not seen that write yet. The hook must not be asked about it,
    /// or a hook that keeps its memory in the status (as `examples/hooks/cronjob.py` does)
    /// answers the same events twice; the write's echo reconciles the object again.
    pub(super) fn cache_behind(&self, object: &DynamicObject) -> bool {
        let (Some(uid), Some(version)) = (
            object.metadata.uid.as_deref(),
            object.metadata.resource_version.as_deref(),
        ) else {
            return false;
        };
        self.status_echo
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(uid)
            .is_some_and(|(based_on, produced)| based_on == version && produced != version)
    }

    /// Remembers that the status of the object `uid` was written over `based_on`, producing
    /// `produced`.
    pub(super) fn status_written(&self, uid: &str, based_on: String, produced: String) {
        self.status_echo
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uid.to_owned(), (based_on, produced));
    }

    /// Whether `body` was already written over the version `seen` of the same object: the
    /// cache has not caught up with that write yet (a reconcile triggered by the write's own
    /// echo, or by another change, reading a stale object), so writing again would repeat it.
    pub(super) fn already_wrote(&self, key: &str, seen: Option<&str>, body: &Value) -> bool {
        self.written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .is_some_and(|(base, wrote)| base.as_deref() == seen && wrote == body)
    }

    /// Remembers a write of `body` over the version `seen`.
    pub(super) fn wrote(&self, key: String, seen: Option<String>, body: Value) {
        self.written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, (seen, body));
    }
}
