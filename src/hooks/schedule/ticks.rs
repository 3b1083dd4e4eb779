//! `perObject` ticks: at each tick, every object of the runner's store asked for through the
//! controller's own queue (kube-runtime's `reconcile_on`, which merges a request for an object
//! already queued), unless the previous tick's calls have not all run.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use futures::{Stream, StreamExt as _, stream};
use kube::core::{ApiResource, DynamicObject};
use kube::runtime::controller as runtime;
use kube::runtime::reflector::{ObjectRef, Store};

use super::Ticker;
use crate::controller::{Series, Stub};
use crate::hooks::metrics::HookMetrics;
use crate::hooks::shared::Shared;

/// An object of a tick, by namespace and name.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct Key {
    namespace: Option<String>,
    name: String,
}

impl Key {
    pub(super) fn of(stub: &Stub<DynamicObject>) -> Self {
        Self {
            namespace: stub.namespace().map(str::to_owned),
            name: stub.name().to_owned(),
        }
    }
}

/// The objects of the last tick whose call has not ended: those still waiting for a worker,
/// and those whose reconcile runs.
#[derive(Debug, Default)]
pub(in crate::hooks) struct Outstanding(Mutex<Calls>);

#[derive(Debug, Default)]
struct Calls {
    waiting: HashSet<Key>,
    running: HashSet<Key>,
}

/// A reconcile that answers a tick: the tick's call of its object ends when this drops.
pub(in crate::hooks) struct Claim {
    outstanding: Arc<Outstanding>,
    key: Key,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.outstanding.lock().running.remove(&self.key);
    }
}

impl Outstanding {
    fn lock(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a tick of `objects` (the store now), unless the last one has not ended: an
    /// object still waiting (and still in the store: one deleted meanwhile never runs) or
    /// still running. Returns whether it started.
    pub(super) fn begin(&self, objects: &[Key]) -> bool {
        let mut calls = self.lock();
        let present: HashSet<&Key> = objects.iter().collect();
        calls.waiting.retain(|key| present.contains(key));
        if !calls.waiting.is_empty() || !calls.running.is_empty() {
            return false;
        }
        calls.waiting.extend(objects.iter().cloned());
        true
    }

    /// A reconcile of `stub` starts: if a tick waits for its call, this reconcile is it (a
    /// tick's request merged with one already queued is answered by the same reconcile).
    pub(in crate::hooks) fn claim(self: &Arc<Self>, stub: &Stub<DynamicObject>) -> Option<Claim> {
        let key = Key::of(stub);
        let mut calls = self.lock();
        if !calls.waiting.remove(&key) {
            return None;
        }
        calls.running.insert(key.clone());
        Some(Claim {
            outstanding: Arc::clone(self),
            key,
        })
    }
}

/// The requests of `perObject` ticks for kube-runtime's `Controller::reconcile_on`: at each
/// tick of `ticker`, every object of `store`, counted as queue adds in `series`, and the tick
/// counted in `metrics` as `run`; or nothing, counted `skipped`, when the previous tick's
/// calls have not all ended.
pub(in crate::hooks) fn per_object_ticks(
    ticker: Ticker,
    store: Store<Stub<DynamicObject>>,
    stub_type: Arc<ApiResource>,
    outstanding: Arc<Outstanding>,
    (series, metrics, name): (Series, Option<HookMetrics>, String),
) -> impl Stream<Item = ObjectRef<Stub<DynamicObject>>> + Send {
    stream::unfold(ticker, move |mut ticker| {
        let (store, stub_type, outstanding) =
            (store.clone(), Arc::clone(&stub_type), Arc::clone(&outstanding));
        let (series, metrics, name) = (series.clone(), metrics.clone(), name.clone());
        async move {
            loop {
                let at = ticker.tick().await;
                let stubs = store.state();
                let keys: Vec<Key> = stubs.iter().map(|s| Key::of(s)).collect();
                let started = outstanding.begin(&keys);
                if let Some(m) = &metrics {
                    m.schedule_tick(&name, started);
                }
                if !started {
                    tracing::info!(controller = %name, tick = %at, "schedule tick skipped: the previous tick's calls still run");
                    continue;
                }
                tracing::debug!(controller = %name, tick = %at, objects = keys.len(), "schedule tick");
                let requests: Vec<_> = stubs
                    .iter()
                    .map(|s| ObjectRef::from_obj_with(s.as_ref(), Arc::clone(&stub_type)))
                    .collect();
                for request in &requests {
                    series.queue_added(request);
                }
                return Some((stream::iter(requests), ticker));
            }
        }
    })
    .flatten()
}

/// `controller` with the requests of the `perObject` ticks of `ticker`, if any, over the
/// runner's store `parents`.
pub(in crate::hooks) fn with_ticks(
    controller: runtime::Controller<Stub<DynamicObject>>,
    ticker: Option<(Ticker, Arc<Outstanding>)>,
    parents: &Store<Stub<DynamicObject>>,
    stub_type: &Arc<ApiResource>,
    shared: &Shared,
) -> runtime::Controller<Stub<DynamicObject>> {
    let Some((ticker, outstanding)) = ticker else {
        return controller;
    };
    let counted = (
        shared.series.clone(),
        shared.hook_metrics.clone(),
        shared.settings.key.to_string(),
    );
    controller.reconcile_on(per_object_ticks(
        ticker,
        parents.clone(),
        Arc::clone(stub_type),
        outstanding,
        counted,
    ))
}
