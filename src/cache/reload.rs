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
    /// `byObject` kinds served now that waited before (their CRD became established).
    pub kinds_served: Vec<GroupVersionKind>,
    /// `byObject` kinds that wait now and did not before (their CRD was deleted): their
    /// informers stopped, their objects left the cache.
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
    /// The watch on CRDs, while custom `byObject` kinds need it.
    crds: Option<CrdWatch>,
    /// What discovery said at the last apply of each custom `byObject` kind no CRD defines
    /// (a kind of an aggregated API is served without one), or of each custom kind when the
    /// CRDs could not be listed.
    discovered: HashMap<GroupVersionKind, Result<(), String>>,
    /// This member's share of a shard ring, when the manager runs one: applied while the
    /// options have `sharding`.
    shard: Option<watch::Receiver<Option<ShardScope>>>,
    /// The share the published tree was planned for.
    planned_share: Option<ShardScope>,
    shared: Arc<SharedCache>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    sync_timeout: Duration,
}

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
        Self {
            shared: Arc::new(SharedCache::not_started(Arc::new(empty))),
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
        }
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
        let custom = custom_kinds(&options);
        if custom.is_empty() {
            self.crds = None;
        } else if !self.follow_crds().await {
            unsynced.push((
                crd_gvk(),
                "CustomResourceDefinitions could not be listed; custom kinds are checked by \
                 discovery when the config is applied"
                    .to_owned(),
            ));
        }
        self.discovered = self.discover(&custom).await;
        self.options = Some(options);
        let plan = self.plan_for_cluster()?;
        let mut change = self.publish(plan, began, false).await;
        change.unsynced.extend(unsynced);
        Ok(change)
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
    /// their labels) and applies the difference as [`CacheReloader::apply`] does: a namespace
    /// that now matches a selector gets its informers (one LIST per kind the tree caches
    /// there, started and synced before the tree is published), one that no longer matches
    /// has them stopped. Objects that leave with a namespace are not reported as deleted:
    /// subscribers are told to read the kind again. Nothing happens before the first apply.
    ///
    /// # Errors
    /// [`OptionsError`] when the options can not be planned (they could be when applied).
    pub async fn rescope(&mut self) -> Result<CacheChange, OptionsError> {
        let began = Instant::now();
        let Some(options) = self.options.as_ref() else {
            return Ok(CacheChange::default());
        };
        if !follows_namespaces(options)
            && custom_kinds(options).is_empty()
            && options.sharding.is_none()
        {
            return Ok(CacheChange::default());
        }
        let plan = self.plan_for_cluster()?;
        Ok(self.publish(plan, began, true).await)
    }

    /// Waits until something the plan depends on may have changed in the cluster (a
    /// namespace was created, labelled, unlabelled or deleted; a CRD was created, changed or
    /// deleted; this member's share of its shard ring changed); then call [`CacheReloader::rescope`]. Never returns while nothing is
    /// followed.
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
        tokio::select! {
            () = namespaces => {}
            () = crds => {}
            () = shard => {}
        }
    }

    /// What the plan takes from the cluster now: the namespaces and their labels (while a
    /// selector needs them), and the custom `byObject` kinds that are not served, with why.
    #[must_use]
    pub fn cluster_scope(&self) -> ClusterScope {
        let mut waiting = HashMap::new();
        let crds = self.crds.as_ref().filter(|c| c.is_synced());
        for gvk in self.options.iter().flat_map(custom_kinds) {
            let no_crd = || {
                format!(
                    "no CustomResourceDefinition defines {} in group {}",
                    gvk.kind, gvk.group
                )
            };
            let verdict = match (crds, crds.and_then(|c| c.crd_of(&gvk))) {
                (_, Some(crd)) => crd.serves(&gvk),
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
        let (kinds_served, kinds_waiting) = kind_moves(self.plan.as_ref(), &plan);
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
        .filter(|by| crate::kinds::builtin(&by.gvk.group, &by.gvk.version, &by.gvk.kind).is_none())
        .map(|by| by.gvk.clone())
        .collect()
}

/// `apiextensions.k8s.io/v1 CustomResourceDefinition`.
fn crd_gvk() -> GroupVersionKind {
    GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
}

/// The `byObject` kinds served in `new` that waited in `old`, and those waiting in `new`
/// that did not in `old`.
fn kind_moves(old: Option<&Plan>, new: &Plan) -> (Vec<GroupVersionKind>, Vec<GroupVersionKind>) {
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
            .filter(|g| served_now.contains(g))
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
