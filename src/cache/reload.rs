//! The pool-aware cache reload: a new config, or a change of the cluster it depends on (a
//! namespace a selector matches, a kind served or not), becomes a new [`Plan`]; when the plan
//! differs, a new tree is built on the same [`InformerPool`] (adopting every informer whose
//! identity is unchanged), its new eager informers sync, it is published, and the informers no
//! tree uses any more are stopped.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::core::{GroupVersion, GroupVersionKind};
use tokio::sync::watch;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::crds::CrdWatch;
use super::namespaces::{NamespaceWatch, namespace_gvk};
use super::{
    Cache, ClusterScope, Context, InformerCache, InformerKey, InformerPool, InformerSettings,
    Options, OptionsError, Plan, Resolver, Scope, ShardScope, SharedCache,
};
use crate::selector::ShardKey;

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
pub const DISCOVERY_REFRESH: Duration = Duration::from_secs(30);

/// What one reload of the cache did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheChange {
    /// Whether the plan changed (otherwise nothing was built and nothing else is set).
    pub changed: bool,
    /// Informers started for the new tree.
    pub started: Vec<InformerKey>,
    /// Informers stopped because no tree uses them any more.
    pub stopped: Vec<InformerKey>,
    /// Informers the new tree took over, running, with their stores.
    pub kept: usize,
    /// Eager informers whose first sync failed or timed out: the kind and why.
    pub unsynced: Vec<(GroupVersionKind, String)>,
    /// From the start of the reload to the new tree serving.
    pub took: Duration,
    /// Namespaces a namespace selector matches now and did not before.
    pub namespaces_entered: BTreeSet<String>,
    /// Namespaces a namespace selector matched before and does not now (relabelled or
    /// deleted): their informers stopped, their objects left the cache.
    pub namespaces_left: BTreeSet<String>,
    /// Kinds (`byObject` kinds and kinds controllers read) served now that waited before
    /// (their CRD became established).
    pub kinds_served: Vec<GroupVersionKind>,
    /// Kinds that wait now and did not before (their CRD was deleted, or a controller wants a
    /// kind that is not served): their informers stopped, their objects left the cache.
    pub kinds_waiting: Vec<GroupVersionKind>,
    /// Whether this member's share of its shard ring changed (the ring's members did): the
    /// sharded kinds' informers were replaced.
    pub share_changed: bool,
}

impl CacheChange {
    /// "started 2 informers, stopped 1, kept 7" (the reload summary's cache part).
    #[must_use]
    pub fn summary(&self) -> String {
        let plural = if self.started.len() == 1 { "" } else { "s" };
        format!(
            "started {} informer{plural}, stopped {}, kept {}",
            self.started.len(),
            self.stopped.len(),
            self.kept
        )
    }

    /// What a change of the cluster did to the tree's scope: the namespaces that entered
    /// and left, the kinds that started being served or waiting
    /// ("namespaces entered: team-c; kinds waiting: example.com/v1 Widget"); `None` when
    /// none did.
    #[must_use]
    pub fn scope_summary(&self) -> Option<String> {
        let kinds = |gvks: &[GroupVersionKind]| {
            gvks.iter()
                .map(|g| format!("{} {}", g.api_version(), g.kind))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts: Vec<String> = self.namespaces_summary().into_iter().collect();
        if !self.kinds_served.is_empty() {
            parts.push(format!("kinds served: {}", kinds(&self.kinds_served)));
        }
        if !self.kinds_waiting.is_empty() {
            parts.push(format!("kinds waiting: {}", kinds(&self.kinds_waiting)));
        }
        if self.share_changed {
            parts.push("shard share changed".to_owned());
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// "namespaces entered: team-c; left: team-b" (what a scope change did to the
    /// namespaces), or `None` when none entered or left.
    #[must_use]
    pub fn namespaces_summary(&self) -> Option<String> {
        let list = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(", ");
        match (
            self.namespaces_entered.is_empty(),
            self.namespaces_left.is_empty(),
        ) {
            (true, true) => None,
            (false, true) => Some(format!(
                "namespaces entered: {}",
                list(&self.namespaces_entered)
            )),
            (true, false) => Some(format!("namespaces left: {}", list(&self.namespaces_left))),
            (false, false) => Some(format!(
                "namespaces entered: {}; left: {}",
                list(&self.namespaces_entered),
                list(&self.namespaces_left)
            )),
        }
    }
}

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
    /// cannot be listed ([`DISCOVERY_REFRESH`] unless set).
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

    /// Follows the custom kinds the tree must know about (`byObject` ones and the ones
    /// controllers want): the CRD watch runs while there are any, and discovery is asked about
    /// those the CRDs do not settle (every one with `all`, else only those followed since the
    /// last call: the others keep what discovery said). Returns why the CRDs could not be
    /// listed, if they could not.
    async fn follow_kinds(&mut self, all: bool) -> Option<(GroupVersionKind, String)> {
        let before = self.followed_kinds();
        self.wanted_now.clone_from(&self.wanted.borrow_and_update());
        let custom = self.followed_kinds();
        if custom.is_empty() {
            self.crds = None;
            self.discovered.clear();
            self.confirmed.clear();
            self.refresh_at = None;
            self.recheck_at = None;
            return None;
        }
        let listed = self.follow_crds().await;
        let refused = self.crds.as_ref().and_then(CrdWatch::unavailable);
        self.confirm(&custom).await;
        if all {
            self.discovered = self.discover(&custom).await;
        } else {
            let new: Vec<GroupVersionKind> = custom
                .iter()
                .filter(|gvk| !before.contains(gvk))
                .cloned()
                .collect();
            let answers = self.discover(&new).await;
            self.discovered.retain(|gvk, _| custom.contains(gvk));
            self.discovered.extend(answers);
        }
        // While the CRDs cannot be listed, discovery is asked again at a fixed period.
        self.refresh_at = match (listed, self.refresh_at) {
            (true, _) => None,
            (false, Some(at)) if !all => Some(at),
            (false, _) => Some(tokio::time::Instant::now() + self.discovery_refresh),
        };
        // Refused (RBAC): the watch said why and discovery stands in; not listed in time:
        // the CRD watch is late, the kinds are known by discovery meanwhile.
        (!listed && refused.is_none()).then(|| {
            (
                crd_gvk(),
                format!(
                    "CustomResourceDefinitions were not listed within {}s; custom kinds are \
                     looked up by discovery meanwhile",
                    self.sync_timeout.as_secs_f64()
                ),
            )
        })
    }

    /// Asks discovery about each of `custom` an established CRD serves and discovery has not
    /// served yet; while one is missing, asks again after a growing delay.
    async fn confirm(&mut self, custom: &[GroupVersionKind]) {
        let crd_served: Vec<&GroupVersionKind> = custom
            .iter()
            .filter(|gvk| {
                self.crds
                    .as_ref()
                    .filter(|c| c.is_synced())
                    .and_then(|c| c.crd_of(gvk))
                    .is_some_and(|crd| crd.serves(gvk).is_ok())
            })
            .collect();
        self.confirmed.retain(|gvk| crd_served.contains(&gvk));
        let mut missing = false;
        for gvk in crd_served {
            if self.confirmed.contains(gvk) {
                continue;
            }
            self.context.resolver.forget(gvk);
            if self.context.resolver.resolve(gvk).await.is_ok() {
                self.confirmed.insert(gvk.clone());
            } else {
                missing = true;
            }
        }
        if missing {
            self.recheck_at = Some(tokio::time::Instant::now() + self.recheck_delay);
            self.recheck_delay = (self.recheck_delay * 2).min(DISCOVERY_REFRESH);
        } else {
            self.recheck_at = None;
            self.recheck_delay = RECHECK_DELAY;
        }
    }

    /// The custom kinds followed: those of `byObject`, then the wanted ones not among them.
    fn followed_kinds(&self) -> Vec<GroupVersionKind> {
        let mut kinds: Vec<GroupVersionKind> = self.options.iter().flat_map(custom_kinds).collect();
        for gvk in &self.wanted_now {
            if !kinds.contains(gvk) {
                kinds.push(gvk.clone());
            }
        }
        kinds
    }

    /// Tells the wanted kinds' controllers that the published tree knows them now.
    fn settle(&self) {
        if self.shared.wants().settle(self.wanted_now.clone()) {
            self.shared.changed();
        }
    }

    /// The plan of the running options for the cluster as it is now: custom kinds take the
    /// scope their CRD declares, each waiting kind is forgotten by the resolver (its CRD may
    /// come back different).
    fn plan_for_cluster(&self) -> Result<Plan, OptionsError> {
        let Some(mut options) = self.options.clone() else {
            return Plan::new(&Options::default());
        };
        if let Some(crds) = &self.crds {
            for by in &mut options.by_object {
                if let Some(crd) = crds.crd_of(&by.gvk) {
                    by.scope = if crd.namespaced {
                        Scope::Namespaced
                    } else {
                        Scope::Cluster
                    };
                }
            }
        }
        let plan = Plan::for_cluster(&options, &self.cluster_scope())?;
        for (gvk, _) in plan.waiting_kinds() {
            self.context.resolver.forget(&gvk);
        }
        Ok(plan)
    }

    /// Starts the CRD watch (once) and waits for its first list, at most the sync timeout;
    /// whether it listed.
    async fn follow_crds(&mut self) -> bool {
        let watch = self.crds.get_or_insert_with(|| {
            CrdWatch::start(self.context.client.clone(), &self.tracker, &self.shutdown)
        });
        let cancel = self.shutdown.child_token();
        tokio::time::timeout(self.sync_timeout, watch.synced(&cancel))
            .await
            .unwrap_or(false)
    }

    /// Asks discovery about each custom kind the CRDs do not settle (no CRD defines it, or
    /// the CRDs could not be listed).
    async fn discover(
        &self,
        custom: &[GroupVersionKind],
    ) -> HashMap<GroupVersionKind, Result<(), String>> {
        let mut out = HashMap::new();
        for gvk in custom {
            let settled = self
                .crds
                .as_ref()
                .filter(|c| c.is_synced())
                .is_some_and(|c| c.crd_of(gvk).is_some());
            if !settled {
                // Ask the server, not what the resolver remembers: the kind may have gone.
                self.context.resolver.forget(gvk);
                let verdict = self
                    .context
                    .resolver
                    .resolve(gvk)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string());
                out.insert(gvk.clone(), verdict);
            }
        }
        out
    }

    /// Plans the running options again for the cluster as it is now (the namespaces and
    /// their labels, the kinds served, the kinds controllers want) and applies the difference
    /// as [`CacheReloader::apply`] does: a namespace that now matches a selector gets its
    /// informers (one LIST per kind the tree caches there, started and synced before the tree
    /// is published), one that no longer matches has them stopped; a kind served now starts,
    /// one that waits now stops. Objects that leave with a namespace are not reported as
    /// deleted: subscribers are told to read the kind again. Nothing happens before the first
    /// apply.
    ///
    /// # Errors
    /// [`OptionsError`] when the options can not be planned (they could be when applied).
    pub async fn rescope(&mut self) -> Result<CacheChange, OptionsError> {
        let began = Instant::now();
        if self.options.is_none() {
            return Ok(CacheChange::default());
        }
        let refresh = std::mem::take(&mut self.refresh_due);
        if refresh {
            self.refreshes += 1;
        }
        let unsynced = self.follow_kinds(refresh).await;
        let plan = self.plan_for_cluster()?;
        let mut change = self.publish(plan, began, true).await;
        self.settle();
        if change.changed {
            change.unsynced.extend(unsynced);
        }
        Ok(change)
    }

    /// Waits until something the plan depends on may have changed in the cluster (a
    /// namespace was created, labelled, unlabelled or deleted; a CRD was created, changed or
    /// deleted; the discovery period passed while the CRDs cannot be listed; this member's
    /// share of its shard ring changed) or a controller wants other custom kinds; then call
    /// [`CacheReloader::rescope`]. Never returns while nothing is followed.
    pub async fn scope_changed(&mut self) {
        let namespaces = async {
            match &mut self.namespaces {
                Some(watch) => watch.changed().await,
                None => std::future::pending().await,
            }
        };
        let crds = async {
            match &mut self.crds {
                Some(watch) => watch.changed().await,
                None => std::future::pending().await,
            }
        };
        let shard = async {
            match &mut self.shard {
                Some(shard) => {
                    if shard.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        let wanted = async {
            if self.wanted.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let at = |when: Option<tokio::time::Instant>| async move {
            match when {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let (refresh, recheck) = (at(self.refresh_at), at(self.recheck_at));
        let mut due = false;
        tokio::select! {
            () = namespaces => {}
            () = crds => {}
            () = wanted => {}
            () = shard => {}
            () = refresh => due = true,
            () = recheck => {}
        }
        if due {
            self.refresh_due = true;
            self.refresh_at = None;
        }
    }

    /// What the plan takes from the cluster now: the namespaces and their labels (while a
    /// selector needs them), and the followed custom kinds (`byObject` and wanted) that are
    /// not served, with why.
    #[must_use]
    pub fn cluster_scope(&self) -> ClusterScope {
        let mut waiting = HashMap::new();
        let crds = self.crds.as_ref().filter(|c| c.is_synced());
        for gvk in self.followed_kinds() {
            let no_crd = || {
                format!(
                    "no CustomResourceDefinition defines {} in group {}",
                    gvk.kind, gvk.group
                )
            };
            let verdict = match (crds, crds.and_then(|c| c.crd_of(&gvk))) {
                (_, Some(crd)) => crd.serves(&gvk).and_then(|()| {
                    if self.confirmed.contains(&gvk) {
                        Ok(())
                    } else {
                        Err(format!(
                            "CustomResourceDefinition {} is established; discovery does not \
                             serve {} {} yet",
                            crd.name,
                            gvk.api_version(),
                            gvk.kind
                        ))
                    }
                }),
                // No CRD: served only by an aggregated API, which discovery found.
                (Some(_), None) => match self.discovered.get(&gvk) {
                    Some(Ok(())) => Ok(()),
                    _ => Err(no_crd()),
                },
                (None, None) => self
                    .discovered
                    .get(&gvk)
                    .cloned()
                    .unwrap_or_else(|| Err(no_crd())),
            };
            if let Err(reason) = verdict {
                waiting.insert(gvk, reason);
            }
        }
        ClusterScope {
            namespaces: self.namespaces.as_ref().and_then(NamespaceWatch::labels),
            waiting,
            wide: self
                .plan
                .as_ref()
                .map(Plan::wide_selections)
                .unwrap_or_default(),
            shard: self
                .options
                .as_ref()
                .filter(|o| o.sharding.is_some())
                .and(self.shard.as_ref())
                .and_then(|shard| shard.borrow().clone()),
        }
    }

    /// Starts the namespace informer (once) and waits for its first list, at most the sync
    /// timeout.
    async fn follow_namespaces(&mut self) -> super::Result<()> {
        let watch = self
            .namespaces
            .get_or_insert_with(|| NamespaceWatch::new(&self.context.pool));
        self.context.pool.start(&self.tracker, &self.shutdown);
        let cancel = self.shutdown.child_token();
        let wait = watch.synced(&cancel);
        match tokio::time::timeout(self.sync_timeout, wait).await {
            Ok(result) => result,
            Err(_) => Err(super::Error::Timeout {
                gvk: namespace_gvk(),
            }),
        }
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
        let kept = after.iter().filter(|k| before.contains(k)).count();
        self.plan = Some(plan);
        self.planned_share = share;
        CacheChange {
            changed: true,
            started,
            stopped,
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

/// Whether the plan of `options` depends on the cluster's namespaces: a namespace selector
/// matches them, or the objects are sharded by namespace.
fn follows_namespaces(options: &Options) -> bool {
    options.uses_namespace_selector()
        || options
            .sharding
            .as_ref()
            .is_some_and(|s| s.key == ShardKey::Namespace)
}

/// The `byObject` kinds of `options` that are not built in: a CRD (or an aggregated API)
/// serves them, so they may come and go.
fn custom_kinds(options: &Options) -> Vec<GroupVersionKind> {
    options
        .by_object
        .iter()
        .filter(|by| !super::wanted::is_builtin(&by.gvk))
        .map(|by| by.gvk.clone())
        .collect()
}

/// `apiextensions.k8s.io/v1 CustomResourceDefinition`.
fn crd_gvk() -> GroupVersionKind {
    GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
}

/// The kinds served in `new` (its `byObject` kinds, and the `wanted` ones) that waited in
/// `old`, and those waiting in `new` that did not in `old`.
fn kind_moves(
    old: Option<&Plan>,
    new: &Plan,
    wanted: &HashSet<GroupVersionKind>,
) -> (Vec<GroupVersionKind>, Vec<GroupVersionKind>) {
    let waiting = |plan: Option<&Plan>| -> Vec<GroupVersionKind> {
        plan.map(Plan::waiting_kinds)
            .unwrap_or_default()
            .into_iter()
            .map(|(gvk, _)| gvk)
            .collect()
    };
    let (before, after) = (waiting(old), waiting(Some(new)));
    let served_now = new.by_object_kinds();
    (
        before
            .iter()
            .filter(|g| served_now.contains(g) || wanted.contains(*g) && !after.contains(g))
            .cloned()
            .collect(),
        after
            .iter()
            .filter(|g| old.is_some() && !before.contains(g))
            .cloned()
            .collect(),
    )
}

/// The namespaces selectors match in `new` and did not in `old`, and the reverse.
fn namespace_moves(old: Option<&Plan>, new: &Plan) -> (BTreeSet<String>, BTreeSet<String>) {
    let matched = |plan: Option<&Plan>| -> BTreeSet<String> {
        plan.map(Plan::namespace_selections)
            .unwrap_or_default()
            .into_values()
            .flatten()
            .flatten()
            .collect()
    };
    let (before, after) = (matched(old), matched(Some(new)));
    (
        after.difference(&before).cloned().collect(),
        before.difference(&after).cloned().collect(),
    )
}
