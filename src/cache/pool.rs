//! `InformerPool`: the informers of every cache tree, keyed by their full identity, so a tree
//! built for a new config reuses each running informer whose identity did not change (no new
//! LIST, no lost store) and the manager stops the ones no tree references any more.
//!
//! A tree holds an [`Arc<PooledInformer>`] for each informer it routes to; the pool keeps only
//! a weak reference to that handle. [`InformerPool::sweep`] stops every informer whose handles
//! are all gone, that is, no tree uses it.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use kube::{Client, core::GroupVersionKind};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::informer::{Informer, InformerEvent};
use super::options::DEFAULT_SYNC_PERIOD;
use super::resolver::KindInfo;
use super::settings::InformerSettings;

/// The identity of an informer: what it lists and watches and how it stores what it gets.
/// Two informers with equal keys would hold the same objects, so one serves both.
///
/// The resync period is not part of it: informers never resync (kube-runtime's watcher does
/// not), the controllers do, each from its own stubs at the period of the cache serving the
/// object (`controller::resync`), so a changed `syncPeriod` keeps the informer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InformerKey {
    /// The kind.
    pub gvk: GroupVersionKind,
    /// The namespace of the cache that asked for it (`None`: all namespaces).
    pub namespace: Option<String>,
    /// Selectors, transform, metadata-only, bookmarks and copy mode.
    pub settings: InformerSettings,
}

impl InformerKey {
    /// Kind, namespace and selectors, the order informers are listed in (reload summaries,
    /// status): every field compared as what it is, not as its debug text.
    #[must_use]
    pub fn order(&self) -> impl Ord + '_ {
        let selector = |s: Option<String>| s.unwrap_or_default();
        (
            (&self.gvk.group, &self.gvk.version, &self.gvk.kind),
            &self.namespace,
            selector(
                self.settings
                    .label_selector
                    .as_ref()
                    .map(ToString::to_string),
            ),
            selector(
                self.settings
                    .field_selector
                    .as_ref()
                    .map(ToString::to_string),
            ),
            self.settings.metadata_only,
        )
    }

    /// The key of an informer of `gvk` for a cache over `namespace` with `settings`, whose
    /// objects live in namespaces when `namespaced`: a cluster-scoped kind is never sharded,
    /// so a member's new share keeps its informers.
    #[must_use]
    pub fn for_kind(
        gvk: GroupVersionKind,
        namespace: Option<String>,
        settings: &InformerSettings,
        namespaced: bool,
    ) -> Self {
        let mut key = Self::new(gvk, namespace, settings);
        if !namespaced {
            key.settings.shard = None;
        }
        key
    }

    /// The key of an informer of `gvk` for a cache over `namespace` with `settings`.
    #[must_use]
    pub fn new(
        gvk: GroupVersionKind,
        namespace: Option<String>,
        settings: &InformerSettings,
    ) -> Self {
        Self {
            gvk,
            namespace,
            settings: identity(settings),
        }
    }
}

/// `settings` without what does not change the informer's contents.
fn identity(settings: &InformerSettings) -> InformerSettings {
    InformerSettings {
        sync_period: DEFAULT_SYNC_PERIOD,
        ..settings.clone()
    }
}

/// A tree's hold on a pooled informer. While any handle of an informer lives, the pool keeps
/// it running.
#[derive(Debug)]
pub struct PooledInformer {
    informer: Arc<Informer>,
}

impl PooledInformer {
    /// Wraps an informer that no pool owns (tests feed such informers by hand).
    #[must_use]
    #[cfg(test)]
    pub(crate) fn unpooled(informer: Arc<Informer>) -> Arc<Self> {
        Arc::new(Self { informer })
    }

    /// The informer itself.
    #[must_use]
    pub fn informer(&self) -> &Arc<Informer> {
        &self.informer
    }
}

impl Deref for PooledInformer {
    type Target = Informer;

    fn deref(&self) -> &Informer {
        &self.informer
    }
}

struct Entry {
    informer: Arc<Informer>,
    handle: Weak<PooledInformer>,
    stop: CancellationToken,
    started: bool,
    /// The [`InformerPool::begin_tree`] mark current when a tree last took a handle to it
    /// ([`InformerPool::obtain`], [`InformerPool::adopt`]).
    claimed: u64,
    /// Held outside any tree ([`InformerPool::hold`]): never left over from an older tree.
    held: bool,
}

#[derive(Clone)]
struct Running {
    tracker: TaskTracker,
    shutdown: CancellationToken,
}

/// Counts of what the pool did, for reload summaries and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Informers running now.
    pub running: usize,
    /// Informers started since the pool was created.
    pub started_total: u64,
    /// Informers stopped by [`InformerPool::sweep`] since the pool was created.
    pub stopped_total: u64,
}

/// Every informer of every cache tree of one client, keyed by [`InformerKey`].
#[doc(alias = "informer map")]
pub struct InformerPool {
    client: Client,
    entries: Mutex<HashMap<InformerKey, Entry>>,
    running: OnceLock<Running>,
    stats: Mutex<PoolStats>,
    events: Mutex<HashMap<GroupVersionKind, tokio::sync::broadcast::Sender<InformerEvent>>>,
    /// The mark of the tree being built ([`InformerPool::begin_tree`]).
    tree: AtomicU64,
    /// The test-only fault of [`InformerPool::skip_relist_after_gone`], given to each informer
    /// this pool creates.
    skip_relist_after_gone: AtomicBool,
}

/// How many changes a slow [`InformerPool::subscribe`] receiver may fall behind before it
/// lags (it should then read the kind again through the cache).
const EVENT_CAPACITY: usize = 4096;

impl std::fmt::Debug for InformerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerPool")
            .field("informers", &self.len())
            .finish_non_exhaustive()
    }
}

impl InformerPool {
    /// An empty pool whose informers list and watch through `client`.
    #[must_use]
    pub fn new(client: Client) -> Arc<Self> {
        Arc::new(Self {
            client,
            entries: Mutex::new(HashMap::new()),
            running: OnceLock::new(),
            stats: Mutex::new(PoolStats::default()),
            events: Mutex::new(HashMap::new()),
            tree: AtomicU64::new(0),
            skip_relist_after_gone: AtomicBool::new(false),
        })
    }

    /// **Test only; never call it elsewhere.** While `on`, the informers this pool creates
    /// from now on ignore the relist their watcher makes after the first sync (after 410
    /// Gone), keeping the store they had: the bug the chaos suite
    /// (`tests/chaos/skip_relist.rs`) must catch. A switch of this pool (of the cache context
    /// that owns it), not of the process, so other tests in the same binary are unaffected.
    #[doc(hidden)]
    pub fn skip_relist_after_gone(&self, on: bool) {
        self.skip_relist_after_gone.store(on, Ordering::SeqCst);
    }

    fn sender(&self, gvk: &GroupVersionKind) -> tokio::sync::broadcast::Sender<InformerEvent> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(gvk.clone())
            .or_insert_with(|| tokio::sync::broadcast::channel(EVENT_CAPACITY).0)
            .clone()
    }

    /// Every change any informer of `gvk` applies from now on, whichever trees and reloads
    /// start and stop them; [`InformerEvent::Resynced`] when objects may have left without a
    /// delete (a relist, or an informer of the kind stopped by a reload).
    #[must_use]
    pub fn subscribe(
        &self,
        gvk: &GroupVersionKind,
    ) -> tokio::sync::broadcast::Receiver<InformerEvent> {
        self.sender(gvk).subscribe()
    }

    /// Tells every subscriber of `gvk` to read the kind again ([`InformerEvent::Resynced`]).
    /// A reload calls it once the tree serving new informers of the kind is published: their
    /// first sync announced itself while reads still went to the old tree.
    pub fn resynced(&self, gvk: &GroupVersionKind) {
        // No receiver is fine.
        let _ = self.sender(gvk).send(InformerEvent::Resynced);
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<InformerKey, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts every pooled informer on `tracker`, and every informer added later; each stops
    /// when `shutdown` is cancelled or when [`InformerPool::sweep`] finds it unused. Starting
    /// twice does nothing.
    pub fn start(&self, tracker: &TaskTracker, shutdown: &CancellationToken) {
        let running = Running {
            tracker: tracker.clone(),
            shutdown: shutdown.clone(),
        };
        if self.running.set(running).is_err() {
            return;
        }
        let mut entries = self.entries();
        let mut started = 0;
        for entry in entries.values_mut() {
            started += u64::from(self.start_entry(entry));
        }
        drop(entries);
        self.stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .started_total += started;
    }

    fn start_entry(&self, entry: &mut Entry) -> bool {
        let Some(running) = self.running.get() else {
            return false;
        };
        if entry.started {
            return false;
        }
        entry.started = true;
        // An entry made before the pool started has a token of its own; tie it to shutdown.
        entry.stop = running.shutdown.child_token();
        entry
            .informer
            .start(self.client.clone(), &running.tracker, entry.stop.clone());
        true
    }

    /// The handle of the informer for `key`: the running one when it exists, otherwise a new
    /// one for `kind`, started if the pool runs.
    #[must_use]
    pub fn obtain(&self, key: &InformerKey, kind: &KindInfo) -> Arc<PooledInformer> {
        let claimed = self.tree.load(Ordering::Relaxed);
        let mut entries = self.entries();
        if let Some(entry) = entries.get_mut(key) {
            entry.claimed = claimed;
            if let Some(handle) = entry.handle.upgrade() {
                return handle;
            }
            // Unused but not swept yet: it is still running with its store, so take it back.
            let handle = Arc::new(PooledInformer {
                informer: Arc::clone(&entry.informer),
            });
            entry.handle = Arc::downgrade(&handle);
            return handle;
        }
        let informer = Arc::new(
            Informer::new(
                key.gvk.clone(),
                kind.resource.clone(),
                kind.namespaced,
                key.namespace.clone(),
                key.settings.clone(),
            )
            .with_events(self.sender(&key.gvk))
            .skipping_relist_after_gone(self.skip_relist_after_gone.load(Ordering::SeqCst)),
        );
        let handle = Arc::new(PooledInformer {
            informer: Arc::clone(&informer),
        });
        let stop = self
            .running
            .get()
            .map_or_else(CancellationToken::new, |r| r.shutdown.child_token());
        let mut entry = Entry {
            informer,
            handle: Arc::downgrade(&handle),
            stop,
            started: false,
            claimed,
            held: false,
        };
        let started = self.start_entry(&mut entry);
        entries.insert(key.clone(), entry);
        drop(entries);
        if started {
            self.stats
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .started_total += 1;
        }
        handle
    }

    /// Handles of every pooled informer for a cache over `namespace` with `settings` whose kind
    /// `wanted` accepts: what a new tree's cache takes over from the old tree, so kinds first
    /// read at run time keep their informers across a reload.
    #[must_use]
    pub(crate) fn adopt(
        &self,
        namespace: Option<&str>,
        settings: &InformerSettings,
        wanted: &dyn Fn(&GroupVersionKind) -> bool,
    ) -> Vec<(GroupVersionKind, Arc<PooledInformer>)> {
        let settings = identity(settings);
        // Cluster-scoped kinds are cached whole whatever the member's share.
        let whole = InformerSettings {
            shard: None,
            ..settings.clone()
        };
        let claimed = self.tree.load(Ordering::Relaxed);
        let mut entries = self.entries();
        let mut adopted = Vec::new();
        for (key, entry) in entries.iter_mut() {
            let expected = if entry.informer.is_namespaced() {
                &settings
            } else {
                &whole
            };
            if key.namespace.as_deref() != namespace
                || key.settings != *expected
                || !wanted(&key.gvk)
            {
                continue;
            }
            let handle = entry.handle.upgrade().unwrap_or_else(|| {
                let handle = Arc::new(PooledInformer {
                    informer: Arc::clone(&entry.informer),
                });
                entry.handle = Arc::downgrade(&handle);
                handle
            });
            entry.claimed = claimed;
            adopted.push((key.gvk.clone(), handle));
        }
        adopted
    }

    /// The handle of the informer for `key` (as [`InformerPool::obtain`]) for a holder outside
    /// any tree (the namespace watch): [`InformerPool::left_over`] never names it.
    #[must_use]
    pub(crate) fn hold(&self, key: &InformerKey, kind: &KindInfo) -> Arc<PooledInformer> {
        let handle = self.obtain(key, kind);
        if let Some(entry) = self.entries().get_mut(key) {
            entry.held = true;
        }
        handle
    }

    /// Starts the claims of a new tree: every informer [`InformerPool::obtain`] or
    /// [`InformerPool::adopt`] hands out from now on is marked as the new tree's, until the next
    /// call. Returns the mark for [`InformerPool::left_over`].
    pub(crate) fn begin_tree(&self) -> u64 {
        self.tree.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The running informers the tree of `mark` did not take and something still holds:
    /// readers in flight on an older tree (a read that started before the new tree was
    /// published finishes on the tree it started on). [`InformerPool::sweep`] stops them once
    /// those reads end. An informer a read in flight on an older tree first asked for after
    /// `mark` counts as the new tree's.
    #[must_use]
    pub fn left_over(&self, mark: u64) -> Vec<InformerKey> {
        let mut left: Vec<InformerKey> = self
            .entries()
            .iter()
            .filter(|(_, entry)| entry.claimed < mark && !entry.held)
            .filter(|(_, entry)| entry.handle.strong_count() > 0)
            .map(|(key, _)| key.clone())
            .collect();
        left.sort_by(|a, b| a.order().cmp(&b.order()));
        left
    }

    /// Stops and forgets every informer no tree holds a handle to; returns their keys.
    pub fn sweep(&self) -> Vec<InformerKey> {
        let mut entries = self.entries();
        let unused: Vec<InformerKey> = entries
            .iter()
            .filter(|(_, entry)| entry.handle.strong_count() == 0)
            .map(|(key, _)| key.clone())
            .collect();
        for key in &unused {
            if let Some(entry) = entries.remove(key) {
                entry.stop.cancel();
            }
        }
        drop(entries);
        for key in &unused {
            // No receiver is fine.
            let _ = self.sender(&key.gvk).send(InformerEvent::Resynced);
        }
        self.stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stopped_total += unused.len() as u64;
        unused
    }

    /// The running informer of `key`, if the pool holds one.
    #[must_use]
    pub fn informer(&self, key: &InformerKey) -> Option<Arc<Informer>> {
        self.entries().get(key).map(|e| Arc::clone(&e.informer))
    }

    /// The keys of every pooled informer.
    #[must_use]
    pub fn keys(&self) -> Vec<InformerKey> {
        self.entries().keys().cloned().collect()
    }

    /// How many informers the pool holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether the pool holds no informer.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many objects the informers of each namespaced kind hold together, ordered by
    /// group, version and kind: with `spec.sharding`, this member's share of each sharded
    /// kind.
    #[must_use]
    pub fn namespaced_objects(&self) -> Vec<(GroupVersionKind, usize)> {
        let mut counts: HashMap<GroupVersionKind, usize> = HashMap::new();
        for (key, entry) in self.entries().iter() {
            if entry.informer.is_namespaced() {
                *counts.entry(key.gvk.clone()).or_insert(0) += entry.informer.len();
            }
        }
        let mut counts: Vec<(GroupVersionKind, usize)> = counts.into_iter().collect();
        counts.sort_by(|(a, _), (b, _)| {
            (&a.group, &a.version, &a.kind).cmp(&(&b.group, &b.version, &b.kind))
        });
        counts
    }

    /// What the pool did so far.
    #[must_use]
    pub fn stats(&self) -> PoolStats {
        let running = self.entries().values().filter(|e| e.started).count();
        PoolStats {
            running,
            ..*self.stats.lock().unwrap_or_else(PoisonError::into_inner)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::BuiltinKinds;

    fn client() -> Client {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Client::try_from(config).unwrap()
    }

    fn key(kind: &str, ns: Option<&str>, labels: Option<&str>) -> InformerKey {
        let settings = InformerSettings {
            label_selector: labels.map(|l| crate::selector::LabelSelector::parse(l).unwrap()),
            ..InformerSettings::default()
        };
        InformerKey::new(
            GroupVersionKind::gvk("", "v1", kind),
            ns.map(str::to_string),
            &settings,
        )
    }

    fn kind(key: &InformerKey) -> KindInfo {
        BuiltinKinds::resolve_now(&key.gvk)
    }

    #[tokio::test]
    async fn one_identity_is_one_informer_and_a_different_selector_is_another() {
        let pool = InformerPool::new(client());
        let a = key("ConfigMap", None, Some("app=web"));
        let first = pool.obtain(&a, &kind(&a));
        let again = pool.obtain(&a, &kind(&a));
        assert!(Arc::ptr_eq(first.informer(), again.informer()));
        let b = key("ConfigMap", None, Some("app=db"));
        let other = pool.obtain(&b, &kind(&b));
        assert!(!Arc::ptr_eq(first.informer(), other.informer()));
        assert_eq!(pool.len(), 2);
    }

    #[tokio::test]
    async fn a_sync_period_change_keeps_the_informer() {
        let pool = InformerPool::new(client());
        let a = key("ConfigMap", None, None);
        let first = pool.obtain(&a, &kind(&a));
        let slower = InformerSettings {
            sync_period: std::time::Duration::from_mins(1),
            ..InformerSettings::default()
        };
        let b = InformerKey::new(a.gvk.clone(), None, &slower);
        assert!(Arc::ptr_eq(
            first.informer(),
            pool.obtain(&b, &kind(&b)).informer()
        ));
    }

    #[tokio::test]
    async fn sweep_stops_only_informers_without_a_handle_and_a_dropped_handle_can_be_taken_back() {
        let pool = InformerPool::new(client());
        let tracker = TaskTracker::new();
        let shutdown = CancellationToken::new();
        pool.start(&tracker, &shutdown);
        let kept = key("ConfigMap", None, None);
        let dropped = key("Secret", Some("a"), None);
        let held = pool.obtain(&kept, &kind(&kept));
        let gone = pool.obtain(&dropped, &kind(&dropped));
        assert_eq!(pool.stats().started_total, 2);

        // Dropping the last handle does not stop it yet: a new tree may take it back.
        let informer = Arc::clone(gone.informer());
        drop(gone);
        let back = pool.obtain(&dropped, &kind(&dropped));
        assert!(Arc::ptr_eq(&informer, back.informer()));
        drop(back);

        assert_eq!(pool.sweep(), vec![dropped.clone()]);
        assert_eq!(pool.keys(), vec![kept.clone()]);
        assert_eq!(pool.stats().stopped_total, 1);
        assert_eq!(pool.stats().running, 1);
        drop(held);
        shutdown.cancel();
        tracker.close();
        tokio::time::timeout(std::time::Duration::from_secs(10), tracker.wait())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn left_over_names_what_only_an_older_tree_holds_and_never_a_held_informer() {
        let pool = InformerPool::new(client());
        let (old, both, watch) = (
            key("ConfigMap", None, None),
            key("Secret", None, None),
            key("Namespace", None, None),
        );
        let first = pool.begin_tree();
        let old_tree = [
            pool.obtain(&old, &kind(&old)),
            pool.obtain(&both, &kind(&both)),
        ];
        let watching = pool.hold(&watch, &kind(&watch));
        assert!(pool.left_over(first).is_empty());

        let second = pool.begin_tree();
        let new_tree = pool.obtain(&both, &kind(&both));
        assert_eq!(pool.left_over(second), vec![old.clone()]);
        drop(old_tree);
        assert!(pool.left_over(second).is_empty(), "no holder left");
        assert_eq!(pool.sweep(), vec![old]);
        drop((new_tree, watching));
    }

    #[tokio::test]
    async fn adopt_takes_the_scope_and_kinds_asked_for() {
        let pool = InformerPool::new(client());
        let cm = key("ConfigMap", Some("a"), None);
        let secret = key("Secret", Some("a"), None);
        let elsewhere = key("ConfigMap", Some("b"), None);
        let selected = key("Pod", Some("a"), Some("app=web"));
        let _handles: Vec<_> = [&cm, &secret, &elsewhere, &selected]
            .into_iter()
            .map(|k| pool.obtain(k, &kind(k)))
            .collect();
        let not_secrets = |gvk: &GroupVersionKind| gvk.kind != "Secret";
        let adopted = pool.adopt(Some("a"), &InformerSettings::default(), &not_secrets);
        let kinds: Vec<_> = adopted.iter().map(|(gvk, _)| gvk.kind.as_str()).collect();
        assert_eq!(kinds, vec!["ConfigMap"]);
    }
}
