//! [`WantedKinds`]: the kinds a controller reads, wanted from the cache tree while it runs or
//! waits. The reloader behind the tree follows every wanted custom kind as it follows a custom
//! `byObject` kind (its CRD watched, or discovery asked), so a kind that is not served waits in
//! the tree ([`super::Layer::Waiting`]) instead of failing its reads; the controller waits with
//! it and is told when it is served and when it waits again.
//!
//! ```text
//! Rust controller / hook supervisor ──want(kinds)──▶ SharedCache ──wanted custom kinds──▶ CacheReloader
//!        ▲                                               │                                (CRD watch,
//!        └──── waiting(): the tree's WaitingForKind ◀────┘◀── tree published, kinds settled ─ discovery)
//! ```
//!
//! Built-in kinds are always taken as served (nothing follows them). A custom kind is
//! *unsettled* until the reloader has planned a tree knowing it is wanted: until then it
//! waits, so a controller never starts on a kind nobody looked up.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use kube::core::GroupVersionKind;
use tokio::sync::watch;

use super::api::Cache as _;
use super::shared::SharedCache;

/// What a [`SharedCache`] knows of the kinds its readers want.
#[derive(Debug)]
pub(crate) struct Wants {
    /// How many [`WantedKinds`] want each kind.
    counts: Mutex<HashMap<GroupVersionKind, usize>>,
    /// The custom kinds wanted now: what the reloader follows besides `byObject`.
    custom: watch::Sender<HashSet<GroupVersionKind>>,
    /// The custom kinds the published tree was planned knowing they are wanted.
    settled: Mutex<HashSet<GroupVersionKind>>,
    /// Whether a reloader follows the wanted kinds; without one every kind counts as served.
    followed: AtomicBool,
}

impl Default for Wants {
    fn default() -> Self {
        Self {
            counts: Mutex::new(HashMap::new()),
            custom: watch::Sender::new(HashSet::new()),
            settled: Mutex::new(HashSet::new()),
            followed: AtomicBool::new(false),
        }
    }
}

/// Whether `gvk` is a kind Kubernetes serves itself (never followed, never waiting for a CRD).
pub(crate) fn is_builtin(gvk: &GroupVersionKind) -> bool {
    crate::kinds::builtin(&gvk.group, &gvk.version, &gvk.kind).is_some()
}

impl Wants {
    fn add(&self, kinds: &[GroupVersionKind]) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        for gvk in kinds {
            *counts.entry(gvk.clone()).or_insert(0) += 1;
        }
        self.publish(&counts);
    }

    fn remove(&self, kinds: &[GroupVersionKind]) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        for gvk in kinds {
            if let Some(n) = counts.get_mut(gvk) {
                *n -= 1;
                if *n == 0 {
                    counts.remove(gvk);
                }
            }
        }
        self.publish(&counts);
    }

    /// Tells the reloader the custom kinds wanted now, when they changed.
    fn publish(&self, counts: &HashMap<GroupVersionKind, usize>) {
        let custom: HashSet<GroupVersionKind> = counts
            .keys()
            .filter(|gvk| !is_builtin(gvk))
            .cloned()
            .collect();
        self.custom.send_if_modified(|current| {
            let changed = *current != custom;
            *current = custom;
            changed
        });
    }

    /// A receiver of the custom kinds wanted, for the reloader.
    pub(crate) fn subscribe(&self) -> watch::Receiver<HashSet<GroupVersionKind>> {
        self.custom.subscribe()
    }

    /// A reloader follows the wanted kinds from now on.
    pub(crate) fn follow(&self) {
        self.followed.store(true, Ordering::Relaxed);
    }

    /// The published tree was planned knowing `kinds` are wanted; returns whether that
    /// changed what is settled.
    pub(crate) fn settle(&self, kinds: HashSet<GroupVersionKind>) -> bool {
        let mut settled = self.settled.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = *settled != kinds;
        *settled = kinds;
        changed
    }

    fn is_settled(&self, gvk: &GroupVersionKind) -> bool {
        !self.followed.load(Ordering::Relaxed)
            || is_builtin(gvk)
            || self
                .settled
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(gvk)
    }
}

/// The kinds one controller reads (its `for`, `owns` and `watches` kinds), wanted from a
/// [`SharedCache`] until dropped: the reloader behind the cache follows each custom one (its
/// CRD, or discovery), and the tree has it wait while it is not served.
///
/// ```no_run
/// # async fn demo(cache: std::sync::Arc<informant::cache::SharedCache>) {
/// use kube::core::GroupVersionKind;
///
/// let mut wanted = cache.want(&[GroupVersionKind::gvk("example.com", "v1", "Widget")]);
/// wanted.served().await; // its CRD is established: start the controller
/// let why = wanted.gone().await; // its CRD was deleted: stop it
/// # let _ = why;
/// # }
/// ```
pub struct WantedKinds {
    cache: Arc<SharedCache>,
    kinds: Vec<GroupVersionKind>,
    changes: watch::Receiver<u64>,
}

impl std::fmt::Debug for WantedKinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WantedKinds")
            .field("kinds", &self.kinds)
            .finish_non_exhaustive()
    }
}

impl WantedKinds {
    pub(crate) fn new(cache: &Arc<SharedCache>, kinds: &[GroupVersionKind]) -> Self {
        let mut unique: Vec<GroupVersionKind> = Vec::with_capacity(kinds.len());
        for gvk in kinds {
            if !unique.contains(gvk) {
                unique.push(gvk.clone());
            }
        }
        cache.wants().add(&unique);
        Self {
            changes: cache.changes(),
            cache: Arc::clone(cache),
            kinds: unique,
        }
    }

    /// The kinds wanted.
    #[must_use]
    pub fn kinds(&self) -> &[GroupVersionKind] {
        &self.kinds
    }

    /// Why one of the kinds is not served now (`example.com/v1 Widget: no
    /// CustomResourceDefinition defines Widget in group example.com`), or `None` when every
    /// one is: the tree has it wait (its CRD is missing, not established, or does not serve
    /// its version), or the reloader has not looked it up yet.
    #[must_use]
    pub fn waiting(&self) -> Option<String> {
        let wants = self.cache.wants();
        if let Some(gvk) = self.kinds.iter().find(|gvk| !wants.is_settled(gvk)) {
            return Some(format!(
                "{} {}: not looked up yet",
                gvk.api_version(),
                gvk.kind
            ));
        }
        self.cache
            .informers()
            .into_iter()
            .filter(super::InformerStatus::is_waiting_for_kind)
            .find(|row| {
                self.kinds
                    .iter()
                    .any(|gvk| gvk.kind == row.kind && gvk.api_version() == row.api_version)
            })
            .map(|row| {
                format!(
                    "{} {}: {}",
                    row.api_version,
                    row.kind,
                    row.message.as_deref().unwrap_or("not served")
                )
            })
    }

    /// Whether every kind was looked up by the reloader (served or waiting, it is known).
    #[must_use]
    pub fn settled(&self) -> bool {
        let wants = self.cache.wants();
        self.kinds.iter().all(|gvk| wants.is_settled(gvk))
    }

    /// Waits for the next published tree or the next lookup of wanted kinds; never returns
    /// once the cache is gone.
    pub async fn changed(&mut self) {
        if self.changes.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Waits until every kind is served (at once when they are).
    pub async fn served(&mut self) {
        self.changes.mark_unchanged();
        while self.waiting().is_some() {
            self.changed().await;
        }
    }

    /// Waits until one of the kinds waits (its CRD was deleted); why.
    pub async fn gone(&mut self) -> String {
        self.changes.mark_unchanged();
        loop {
            if let Some(reason) = self.waiting() {
                return reason;
            }
            self.changed().await;
        }
    }
}

impl Drop for WantedKinds {
    fn drop(&mut self) {
        self.cache.wants().remove(&self.kinds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::waiting::WaitingCache;
    use crate::cache::{Context, InformerCache, InformerSettings};

    fn widget() -> GroupVersionKind {
        GroupVersionKind::gvk("example.com", "v1", "Widget")
    }

    fn empty() -> Arc<dyn crate::cache::Cache> {
        Arc::new(InformerCache::new(
            Context::offline(false),
            None,
            InformerSettings::default(),
        ))
    }

    #[tokio::test]
    async fn a_wanted_kind_waits_until_looked_up_and_while_the_tree_has_it_wait() {
        let cache = Arc::new(SharedCache::not_started(empty()));
        cache.wants().follow();
        let custom = cache.wants().subscribe();
        let pod = GroupVersionKind::gvk("", "v1", "Pod");
        let mut wanted = cache.want(&[widget(), pod.clone(), widget()]);
        assert_eq!(wanted.kinds(), [widget(), pod.clone()]);
        assert_eq!(
            *custom.borrow(),
            HashSet::from([widget()]),
            "Pod is built in"
        );
        assert_eq!(
            wanted.waiting().as_deref(),
            Some("example.com/v1 Widget: not looked up yet")
        );
        assert!(!wanted.settled());

        // Looked up, served: the tree has no waiting row for it.
        let served = tokio::spawn({
            let cache = Arc::clone(&cache);
            async move {
                let mut again = cache.want(&[widget()]);
                again.served().await;
            }
        });
        assert!(cache.wants().settle(HashSet::from([widget()])));
        cache.changed();
        tokio::time::timeout(std::time::Duration::from_secs(5), served)
            .await
            .expect("a settled, served kind wakes its waiter")
            .unwrap();
        assert_eq!(wanted.waiting(), None);

        // Its CRD went: the tree has it wait.
        cache.replace(Arc::new(WaitingCache::new(widget(), "no CRD")));
        assert_eq!(wanted.gone().await, "example.com/v1 Widget: no CRD");

        drop(wanted);
        assert!(custom.borrow().is_empty(), "nothing wants it any more");
    }

    #[tokio::test]
    async fn without_a_reloader_every_kind_counts_as_served() {
        let cache = Arc::new(SharedCache::new(empty()));
        let wanted = cache.want(&[widget()]);
        assert!(wanted.settled());
        assert_eq!(wanted.waiting(), None);
    }
}
