//! The pool-aware cache reload: a new config, or a change of the cluster it depends on (a
//! namespace a selector matches, a kind served or not), becomes a new [`Plan`]; when the plan
//! differs, a new tree is built on the same [`InformerPool`] (adopting every informer whose
//! identity is unchanged), its new eager informers sync, it is published, and the informers no
//! tree uses any more are stopped.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::core::{GroupVersion, GroupVersionKind};
use tokio::sync::watch;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::crds::CrdWatch;
use super::namespaces::{NamespaceWatch, namespace_gvk};
use super::{
    Cache, Context, InformerCache, InformerKey, InformerPool, InformerSettings, Options,
    OptionsError, Plan, Resolver, ShardScope, SharedCache,
};
mod change;
mod follow;

pub use change::CacheChange;
use change::{kind_moves, namespace_moves};
use follow::follows_namespaces;

/// How long a reload waits for the new eager informers to sync before it publishes the tree
/// anyway, reporting them unsynced.
///
/// controller-runtime's `CacheSyncTimeout` default (pkg/config/controller.go,
/// pkg/internal/controller/controller.go: `c.CacheSyncTimeout = 2 * time.Minute`).
pub const DEFAULT_CACHE_SYNC_TIMEOUT: Duration = Duration::from_mins(2);

/// How often the reloader asks discovery about the custom kinds it follows while the
/// `CustomResourceDefinitions` cannot be listed (no RBAC for `apiextensions.k8s.io`): one GET
/// of each kind's group version per period, never a LIST, so a kind starts at most this long
/// after its CRD is established and stops at most this long after it is deleted.
///
/// kube-controller-manager's garbage collector and resource quota controller refresh discovery
/// at this period to notice new resource types (cmd/kube-controller-manager/app/core.go:
/// `garbageCollector.Sync(ctx, discoveryClient, 30 * time.Second)`,
/// `resourceQuotaController.Sync(ctx, discoveryFunc, 30*time.Second)`).
pub(crate) const DISCOVERY_REFRESH: Duration = Duration::from_secs(30);

/// Keeps the published cache tree in step with the config.
pub struct CacheReloader {
    context: Context,
    plan: Option<Plan>,
    /// The options of the published tree (kinds' scopes resolved): planned again when the
    /// cluster changes.
    options: Option<Options>,
    /// The namespace informer, while a namespace selector needs it.
    namespaces: Option<NamespaceWatch>,
    /// The watch on CRDs, while custom kinds (`byObject` or wanted) need it.
    crds: Option<CrdWatch>,
    /// What discovery said of each followed custom kind no CRD defines (a kind of an
    /// aggregated API is served without one), or of each custom kind when the CRDs could not
    /// be listed: asked at each config change and for each newly wanted kind.
    discovered: HashMap<GroupVersionKind, Result<(), String>>,
    /// The custom kinds controllers want ([`SharedCache::want`]), as the tree knows them.
    wanted: watch::Receiver<HashSet<GroupVersionKind>>,
    /// The wanted custom kinds the last plan was made for (settled once it is published).
    wanted_now: HashSet<GroupVersionKind>,
    /// This member's share of a shard ring, when the manager runs one: applied while the
    /// options have `sharding`.
    shard: Option<watch::Receiver<Option<ShardScope>>>,
    /// The share the published tree was planned for.
    planned_share: Option<ShardScope>,
    /// The pool's mark of the tree serving ([`InformerPool::begin_tree`]).
    tree_mark: u64,
    shared: Arc<SharedCache>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    sync_timeout: Duration,
    /// How often discovery is asked while the CRDs cannot be listed.
    discovery_refresh: Duration,
    /// When discovery is asked next (only while the CRDs cannot be listed).
    refresh_at: Option<tokio::time::Instant>,
    /// The period passed: the next rescope asks discovery about every followed kind.
    refresh_due: bool,
    /// Discovery refreshes made so far.
    refreshes: u64,
    /// The custom kinds an established CRD serves that discovery served too when asked: only
    /// those are planned as served (kube-apiserver's discovery may trail `Established`, and
    /// an informer started before it would fail to resolve its kind).
    confirmed: HashSet<GroupVersionKind>,
    /// When discovery is asked again about CRD-served kinds it did not serve yet.
    recheck_at: Option<tokio::time::Instant>,
    /// The delay before that: 100 ms, doubling up to [`DISCOVERY_REFRESH`].
    recheck_delay: Duration,
}

/// The first delay before discovery is asked again about a kind its CRD serves and discovery
/// did not; it doubles at each miss up to [`DISCOVERY_REFRESH`].
const RECHECK_DELAY: Duration = Duration::from_millis(100);

impl std::fmt::Debug for CacheReloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheReloader")
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

impl CacheReloader {
    /// A reloader whose informers list and watch through `context` (its pool and resolver
    /// are shared by every tree) and run on `tracker` until `shutdown`. Until the first
    /// [`CacheReloader::apply`] it serves a tree that is not started: reads fail with
    /// [`crate::cache::Error::NotStarted`].
    #[must_use]
    pub fn new(context: Context, tracker: TaskTracker, shutdown: CancellationToken) -> Self {
        // Not started: until the first apply, reads fail with `NotStarted`, as
        // controller-runtime's reads before the cache starts do.
        let empty = InformerCache::new(context.clone(), None, InformerSettings::default());
        let shared = Arc::new(SharedCache::not_started(Arc::new(empty)));
        shared.wants().follow();
        Self {
            wanted: shared.wants().subscribe(),
            wanted_now: HashSet::new(),
            shared,
            context,
            plan: None,
            options: None,
            namespaces: None,
            crds: None,
            discovered: HashMap::new(),
            shard: None,
            planned_share: None,
            tree_mark: 0,
            tracker,
            shutdown,
            sync_timeout: DEFAULT_CACHE_SYNC_TIMEOUT,
            discovery_refresh: DISCOVERY_REFRESH,
            refresh_at: None,
            refresh_due: false,
            refreshes: 0,
            confirmed: HashSet::new(),
            recheck_at: None,
            recheck_delay: RECHECK_DELAY,
        }
    }

    /// Sets how often discovery is asked about the followed custom kinds while the CRDs
    /// cannot be listed (`DISCOVERY_REFRESH` unless set).
    #[must_use]
    pub fn with_discovery_refresh(mut self, period: Duration) -> Self {
        self.discovery_refresh = period;
        self
    }

    /// How many discovery refreshes were made (each asks about every followed custom kind,
    /// while the CRDs cannot be listed).
    #[must_use]
    pub fn discovery_refreshes(&self) -> u64 {
        self.refreshes
    }

    /// Sets how long a reload waits for new eager informers to sync.
    #[must_use]
    pub fn with_sync_timeout(mut self, timeout: Duration) -> Self {
        self.sync_timeout = timeout;
        self
    }

    /// Caches only the share `shard` says (and follows it: each change is applied as
    /// [`CacheReloader::rescope`] applies a namespace's) while the options have `sharding`.
    /// `None` in the channel, or no channel, caches everything the options say.
    #[must_use]
    pub fn with_shard(mut self, shard: watch::Receiver<Option<ShardScope>>) -> Self {
        self.shard = Some(shard);
        self
    }

    /// The tree readers use; it follows every reload.
    #[must_use]
    pub fn cache(&self) -> Arc<SharedCache> {
        Arc::clone(&self.shared)
    }

    /// The pool of informers.
    #[must_use]
    pub fn pool(&self) -> &Arc<InformerPool> {
        &self.context.pool
    }

    /// The plan of the published tree (`None` before the first apply).
    #[must_use]
    pub fn plan(&self) -> Option<&Plan> {
        self.plan.as_ref()
    }

    /// Makes the published tree the one `options` plan. An unchanged plan builds nothing and
    /// makes no request. Otherwise the new tree adopts every running informer of unchanged
    /// identity, starts and syncs its new eager informers (failures and timeouts are reported,
    /// not fatal), is published, and then the informers no tree uses are stopped.
    ///
    /// Options with a namespace selector are planned for the namespaces the cluster has now:
    /// the first such options start the namespace informer (in the pool) and wait for its
    /// first list; later changes of the namespaces are applied by [`CacheReloader::rescope`].
    ///
    /// # Errors
    /// [`OptionsError`] when the options can not be planned; the published tree is unchanged.
    pub async fn apply(&mut self, options: &Options) -> Result<CacheChange, OptionsError> {
        let began = Instant::now();
        let mut options = options.clone();
        super::resolve_scopes(&mut options, self.context.resolver.as_ref()).await;
        // Refuse options that cannot be planned before following anything for them.
        Plan::new(&options)?;
        let mut unsynced = Vec::new();
        if follows_namespaces(&options) {
            if let Err(error) = self.follow_namespaces().await {
                unsynced.push((namespace_gvk(), error.to_string()));
            }
        } else {
            // Swept with the informers of the old tree.
            self.namespaces = None;
        }
        self.options = Some(options);
        if self
            .crds
            .as_ref()
            .is_some_and(|c| c.unavailable().is_some())
        {
            // A config change tries the CRDs once more (a grant may have come since).
            self.crds = None;
        }
        unsynced.extend(self.follow_kinds(true).await);
        let plan = self.plan_for_cluster()?;
        let mut change = self.publish(plan, began, false).await;
        self.settle();
        change.unsynced.extend(unsynced);
        Ok(change)
    }

    /// Publishes the tree of `plan` unless it is the one serving. With `carry`, every kind the
    /// serving tree has informers for is started eagerly in the new tree too (so a namespace
    /// that enters a selector's scope gets the kinds read lazily elsewhere, listed before the
    /// tree serves).
    async fn publish(&mut self, plan: Plan, began: Instant, carry: bool) -> CacheChange {
        if self.plan.as_ref() == Some(&plan) {
            return CacheChange::default();
        }
        let mut eager = plan.by_object_kinds();
        if carry {
            for gvk in served_kinds(self.shared.load().as_ref()) {
                if !eager.contains(&gvk) && !plan.waiting_kinds().iter().any(|(g, _)| g == &gvk) {
                    eager.push(gvk);
                }
            }
        }
        let (namespaces_entered, namespaces_left) = namespace_moves(self.plan.as_ref(), &plan);
        let (kinds_served, kinds_waiting) = kind_moves(self.plan.as_ref(), &plan, &self.wanted_now);
        let share = self.cluster_scope().shard;
        let share_changed = self.plan.is_some() && share != self.planned_share;
        let before: HashSet<InformerKey> = self.context.pool.keys().into_iter().collect();
        let mark = self.context.pool.begin_tree();
        let context = Context {
            reader_fail_on_missing_informer: plan.reader_fail_on_missing_informer(),
            ..self.context.clone()
        };
        let tree = plan.instantiate(&context);
        tree.start(&self.tracker, &self.shutdown);
        let unsynced = self.sync_eager(tree.as_ref(), &eager).await;
        let old = self.shared.replace(tree);
        let took = began.elapsed();
        drop(old);
        let stopped = self.context.pool.sweep();
        // Readers in flight on the old tree may still hold informers it alone used: they stop
        // at a later sweep, and are not counted as kept.
        let stopping = self.context.pool.left_over(mark);
        let after = self.context.pool.keys();
        let mut started: Vec<InformerKey> = after
            .iter()
            .filter(|k| !before.contains(k))
            .cloned()
            .collect();
        started.sort_by(|a, b| a.order().cmp(&b.order()));
        // New informers announced their first sync before this tree was published, when
        // subscribers reading the kind again still read the old tree: announce it again.
        let mut announced: Vec<&GroupVersionKind> = Vec::new();
        for key in &started {
            if !announced.contains(&&key.gvk) {
                self.context.pool.resynced(&key.gvk);
                announced.push(&key.gvk);
            }
        }
        let kept = after
            .iter()
            .filter(|k| before.contains(k) && !stopping.contains(k))
            .count();
        self.plan = Some(plan);
        self.planned_share = share;
        self.tree_mark = mark;
        CacheChange {
            changed: true,
            started,
            stopped,
            stopping,
            kept,
            unsynced,
            took,
            namespaces_entered,
            namespaces_left,
            kinds_served,
            kinds_waiting,
            share_changed,
        }
    }

    /// Starts every eager kind's informers in `tree` and waits, all at once, for them to
    /// sync, at most the sync timeout. Returns the kinds that failed or did not sync in time.
    async fn sync_eager(
        &self,
        tree: &dyn Cache,
        eager: &[GroupVersionKind],
    ) -> Vec<(GroupVersionKind, String)> {
        let waits = eager.iter().map(|gvk| async move {
            match tokio::time::timeout(self.sync_timeout, tree.ensure_informer(gvk)).await {
                Ok(Ok(())) => None,
                Ok(Err(error)) => Some((gvk.clone(), error.to_string())),
                Err(_) => Some((
                    gvk.clone(),
                    format!(
                        "informer did not sync within {}s",
                        self.sync_timeout.as_secs_f64()
                    ),
                )),
            }
        });
        futures::future::join_all(waits)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Informers the serving tree does not use that reads in flight on an older tree still
    /// hold: [`CacheReloader::sweep`] stops them once nothing holds them.
    #[must_use]
    pub fn left_over(&self) -> Vec<InformerKey> {
        self.context.pool.left_over(self.tree_mark)
    }

    /// Stops informers that no tree uses any more (a read in flight during a reload may have
    /// held the old tree past the reload's own sweep).
    #[must_use]
    pub fn sweep(&self) -> Vec<InformerKey> {
        self.context.pool.sweep()
    }

    /// The resolver every tree shares.
    #[must_use]
    pub fn resolver(&self) -> &Arc<dyn Resolver> {
        &self.context.resolver
    }
}

/// The kinds `tree` runs informers for (not those waiting for their kind).
fn served_kinds(tree: &dyn Cache) -> Vec<GroupVersionKind> {
    let mut kinds: Vec<GroupVersionKind> = Vec::new();
    for informer in tree.informers() {
        if informer.is_waiting_for_kind() {
            continue;
        }
        let Ok(gv) = informer.api_version.parse::<GroupVersion>() else {
            continue;
        };
        let gvk = gv.with_kind(&informer.kind);
        if !kinds.contains(&gvk) {
            kinds.push(gvk);
        }
    }
    kinds
}
