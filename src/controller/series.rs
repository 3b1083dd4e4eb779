//! A controller's queue as its triggers and reconciles see it, and its hook into the manager's
//! metrics: controller-runtime's `controller_runtime_*` and `workqueue_*` series
//! ([`ControllerMetrics`]), or nothing when the controller runs without them.
//!
//! kube-runtime's scheduler keeps its queue to itself, so the queue is measured at its edges:
//! `workqueue_adds_total` counts the requests the trigger streams hand it (each applied
//! object, each object of a list pass, each resync, each owner a child names, each object a
//! mapper returns), `workqueue_retries_total` the reconciles asking to run again (a requeue, or
//! an error policy's requeue), and `workqueue_depth` the distinct objects requested and not yet
//! taken by the runner (the scheduler merges requests for one object, as client-go's queue
//! does; an object deleted before its turn leaves the count when the runner finds it gone). As
//! in client-go, a requeue waiting for its delay is not counted. The same count paces list
//! passes ([`LIST_PASS_QUEUE`]).

use std::collections::HashSet;
use std::hash::BuildHasher as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use kube::runtime::reflector::{Lookup, ObjectRef};
use tokio::sync::Notify;

use crate::controller::{ActiveWorker, ControllerMetrics, ControllerSeries};

use super::metrics::ReconcileResult as Outcome;

/// How many objects may wait in a controller's queue before a list pass asks for more
/// ([`Series::admit`]): a fresh list of the whole kind reaches kube-runtime's scheduler at the
/// runner's pace, so the scheduler's maps, which keep the capacity of the largest queue they
/// ever held, stay this small instead of growing to the number of objects.
pub const LIST_PASS_QUEUE: usize = 1024;

/// How far a full queue drains before a waiting list pass asks for more: the pass refills the
/// queue in runs, instead of waking for every object the runner takes.
const LIST_PASS_REFILL: usize = LIST_PASS_QUEUE / 2;

/// One controller's queue as its triggers and reconciles see it, and its series in
/// [`ControllerMetrics`] (when the controller is counted).
#[derive(Clone, Debug, Default)]
pub struct Series {
    counted: Option<ControllerSeries>,
    queue: Arc<Queue>,
}

/// The objects requested and not yet taken by a reconcile (`workqueue_depth`), each a hash of
/// its namespace and name (one controller queues one kind): a few bytes per waiting object.
#[derive(Debug, Default)]
struct Queue {
    pending: Mutex<HashSet<u64>>,
    hasher: foldhash::fast::RandomState,
    /// Woken when an object leaves the queue.
    room: Notify,
}

impl Queue {
    fn pending(&self) -> MutexGuard<'_, HashSet<u64>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn key<K: Lookup>(&self, object: &ObjectRef<K>) -> u64 {
        self.key_at(object.namespace.as_deref(), &object.name)
    }

    fn key_at(&self, namespace: Option<&str>, name: &str) -> u64 {
        self.hasher.hash_one((namespace, name))
    }
}

impl Series {
    /// The series of controller `name` in `metrics`, with its concurrency as the maximum.
    #[must_use]
    pub fn new(metrics: Option<&ControllerMetrics>, name: &str, concurrency: u16) -> Self {
        Self {
            counted: metrics.map(|m| m.controller(name, usize::from(concurrency))),
            queue: Arc::default(),
        }
    }

    /// A reconcile of `object` started: it leaves the queue, and counts as active until the
    /// guard drops.
    #[must_use]
    pub fn reconcile_started<K: Lookup>(&self, object: &ObjectRef<K>) -> Option<ActiveWorker> {
        self.taken(object);
        self.reconcile_running()
    }

    /// A reconcile of an object already [taken](Series::taken) started: it counts as active
    /// until the guard drops.
    pub(crate) fn reconcile_running(&self) -> Option<ActiveWorker> {
        self.counted
            .as_ref()
            .map(ControllerSeries::reconcile_started)
    }

    /// A reconcile ended.
    pub fn reconcile_finished(&self, outcome: Outcome, duration: Duration) {
        if let Some(c) = &self.counted {
            c.reconcile_finished(outcome, duration);
        }
    }

    /// A reconcile ended in `outcome` after `duration`, cancelled by the controller's timeout
    /// if `timed_out` (counted besides its [`Outcome::Error`]); the `result` its span records:
    /// `timed_out`, else the outcome's label.
    pub(crate) fn reconcile_ended(
        &self,
        outcome: Outcome,
        timed_out: bool,
        duration: Duration,
    ) -> &'static str {
        self.reconcile_finished(outcome, duration);
        if !timed_out {
            return outcome.as_str();
        }
        if let Some(c) = &self.counted {
            c.reconcile_timed_out();
        }
        "timed_out"
    }

    /// A trigger asked for a reconcile of `object`.
    pub fn queue_added<K: Lookup>(&self, object: &ObjectRef<K>) {
        let key = self.queue.key(object);
        let mut pending = self.queue.pending();
        pending.insert(key);
        self.added(pending.len());
    }

    /// Waits until the queue has room ([`LIST_PASS_QUEUE`]) or already holds `object`, then
    /// adds it: how a list pass asks for each object. A full queue is let drain to half
    /// before anything more is added.
    pub async fn admit<K: Lookup>(&self, object: &ObjectRef<K>) {
        while !self.try_admit(object) {
            self.drained().await;
        }
    }

    /// Adds `object` if the queue has room ([`LIST_PASS_QUEUE`]) or already holds it; `false`
    /// (nothing added) when it is full.
    pub(crate) fn try_admit<K: Lookup>(&self, object: &ObjectRef<K>) -> bool {
        let key = self.queue.key(object);
        let mut pending = self.queue.pending();
        if pending.len() < LIST_PASS_QUEUE || pending.contains(&key) {
            pending.insert(key);
            self.added(pending.len());
            true
        } else {
            false
        }
    }

    /// Waits until at most half of [`LIST_PASS_QUEUE`] objects wait.
    pub(crate) async fn drained(&self) {
        loop {
            // Registered before the check, so a departure in between is not missed.
            let room = self.queue.room.notified();
            let mut room = std::pin::pin!(room);
            room.as_mut().enable();
            if self.queue.pending().len() <= LIST_PASS_REFILL {
                return;
            }
            room.await;
        }
    }

    fn added(&self, depth: usize) {
        if let Some(c) = &self.counted {
            c.queue_added();
            c.queue_depth(depth);
        }
    }

    /// The runner took `object` from the queue: for a reconcile, or to find it gone (deleted
    /// before its turn).
    pub fn taken<K: Lookup>(&self, object: &ObjectRef<K>) {
        self.take(self.queue.key(object));
    }

    /// [`Series::taken`] of the object `namespace/name`, without a reference built for it.
    pub(crate) fn taken_at(&self, namespace: Option<&str>, name: &str) {
        self.take(self.queue.key_at(namespace, name));
    }

    fn take(&self, key: u64) {
        let mut pending = self.queue.pending();
        if !pending.remove(&key) {
            return;
        }
        if pending.is_empty() {
            // The set keeps the capacity of its largest queue otherwise.
            pending.shrink_to_fit();
        }
        if let Some(c) = &self.counted {
            c.queue_depth(pending.len());
        }
        let refill = pending.len() == LIST_PASS_REFILL;
        drop(pending);
        if refill {
            self.queue.room.notify_waiters();
        }
    }

    /// `object` left the queue without a reconcile (it was deleted before its turn).
    pub fn dropped<K: Lookup>(&self, object: &ObjectRef<K>) {
        self.taken(object);
    }

    /// A reconcile asked to run again later.
    pub fn queue_retried(&self) {
        if let Some(c) = &self.counted {
            c.queue_retried();
        }
    }

    /// Empties the queue (the runner that would have taken its objects was dropped); how
    /// many objects it held.
    #[must_use]
    pub fn clear(&self) -> usize {
        let mut pending = self.queue.pending();
        let dropped = pending.len();
        pending.clear();
        pending.shrink_to_fit();
        if let Some(c) = &self.counted {
            c.queue_depth(0);
        }
        drop(pending);
        self.queue.room.notify_waiters();
        dropped
    }

    /// How many objects wait in the queue now.
    #[must_use]
    pub fn depth(&self) -> usize {
        self.queue.pending().len()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn object(i: usize) -> ObjectRef<ConfigMap> {
        ObjectRef::new(&format!("cm-{i}")).within("default")
    }

    #[tokio::test]
    async fn a_list_pass_waits_for_a_full_queue_to_drain_to_half_and_an_object_already_queued_passes()
     {
        let series = Series::default();
        for i in 0..LIST_PASS_QUEUE {
            series.admit(&object(i)).await;
        }
        assert_eq!(series.depth(), LIST_PASS_QUEUE);
        // Already queued: merged, no room needed.
        tokio::time::timeout(Duration::from_secs(5), series.admit(&object(0)))
            .await
            .expect("an object already queued is admitted at once");

        let waiting = tokio::spawn({
            let series = series.clone();
            async move { series.admit(&object(LIST_PASS_QUEUE)).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the queue is full");
        for i in 0..LIST_PASS_REFILL - 1 {
            series.taken(&object(i));
        }
        tokio::task::yield_now().await;
        assert!(
            !waiting.is_finished(),
            "a full queue is let drain to half first"
        );
        series.taken(&object(LIST_PASS_REFILL - 1));
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("a queue drained to half makes room")
            .unwrap();
        assert_eq!(series.depth(), LIST_PASS_REFILL + 1);

        for i in 0..=LIST_PASS_QUEUE {
            series.dropped(&object(i));
        }
        assert_eq!(series.depth(), 0);
    }
}
