//! What a hook controller did since it started: the numbers its `Controller`'s status shows.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// What a hook controller did since it started: the numbers of its `Controller`'s status.
#[derive(Clone, Debug, Default)]
pub struct Stats(pub(super) Arc<StatsInner>);

/// The counters a running hook controller updates.
#[derive(Debug, Default)]
pub(super) struct StatsInner {
    pub(super) reconciles: AtomicU64,
    pub(super) calls: AtomicU64,
    pub(super) failures: AtomicU64,
    pub(super) ready: AtomicBool,
    pub(super) last_error: Mutex<Option<String>>,
    /// The next tick of the controller's schedule, while it runs.
    pub(super) next_tick: Arc<Mutex<Option<jiff::Timestamp>>>,
}

impl Stats {
    /// Reconciles run (the `Controller` status's `reconciles`).
    #[must_use]
    pub fn reconciles(&self) -> u64 {
        self.0.reconciles.load(Ordering::Relaxed)
    }

    /// Hook calls made, each counted once the reconcile that made it has ended (its writes
    /// done, or failed). A reconcile that only adds the controller's finalizer, or that waits
    /// for the cache to hold the manager's own status write, calls no hook.
    #[must_use]
    pub fn calls(&self) -> u64 {
        self.0.calls.load(Ordering::Relaxed)
    }

    /// Reconciles that failed.
    #[must_use]
    pub fn failures(&self) -> u64 {
        self.0.failures.load(Ordering::Relaxed)
    }

    /// Whether the controller's informers synced and it takes reconciles.
    #[must_use]
    pub fn ready(&self) -> bool {
        self.0.ready.load(Ordering::Relaxed)
    }

    /// The last failure, with the object it was about.
    #[must_use]
    pub fn last_error(&self) -> Option<String> {
        self.0
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// When the next tick of the controller's `spec.schedule` is due, while it runs.
    #[must_use]
    pub fn next_tick(&self) -> Option<jiff::Timestamp> {
        *self
            .0
            .next_tick
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
