//! How the [`CacheReloader`] follows the cluster it plans for: the namespaces (while a
//! selector or sharding by namespace needs them), the custom kinds' CRDs (or discovery, when
//! the CRDs cannot be listed) and the kinds controllers want; each change is planned again and
//! applied by [`CacheReloader::rescope`].

use std::collections::HashMap;
use std::time::Instant;

use kube::core::GroupVersionKind;

use super::{CacheChange, CacheReloader, DISCOVERY_REFRESH, RECHECK_DELAY};
use crate::cache::crds::CrdWatch;
use crate::cache::namespaces::{NamespaceWatch, namespace_gvk};
use crate::cache::{ClusterScope, Options, OptionsError, Plan, Scope};
use crate::selector::ShardKey;

impl CacheReloader {
    /// Follows the custom kinds the tree must know about (`byObject` ones and the ones
    /// controllers want): the CRD watch runs while there are any, and discovery is asked about
    /// those the CRDs do not settle (every one with `all`, else only those followed since the
    /// last call: the others keep what discovery said). Returns why the CRDs could not be
    /// listed, if they could not.
    pub(super) async fn follow_kinds(&mut self, all: bool) -> Option<(GroupVersionKind, String)> {
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
    pub(super) fn settle(&self) {
        if self.shared.wants().settle(self.wanted_now.clone()) {
            self.shared.changed();
        }
    }

    /// The plan of the running options for the cluster as it is now: custom kinds take the
    /// scope their CRD declares, each waiting kind is forgotten by the resolver (its CRD may
    /// come back different).
    pub(super) fn plan_for_cluster(&self) -> Result<Plan, OptionsError> {
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
    pub(crate) fn cluster_scope(&self) -> ClusterScope {
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
    pub(super) async fn follow_namespaces(&mut self) -> crate::cache::Result<()> {
        let watch = self
            .namespaces
            .get_or_insert_with(|| NamespaceWatch::new(&self.context.pool));
        self.context.pool.start(&self.tracker, &self.shutdown);
        let cancel = self.shutdown.child_token();
        let wait = watch.synced(&cancel);
        match tokio::time::timeout(self.sync_timeout, wait).await {
            Ok(result) => result,
            Err(_) => Err(crate::cache::Error::Timeout {
                gvk: namespace_gvk(),
            }),
        }
    }
}

/// Whether the plan of `options` depends on the cluster's namespaces: a namespace selector
/// matches them, or the objects are sharded by namespace.
pub(super) fn follows_namespaces(options: &Options) -> bool {
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
        .filter(|by| !crate::cache::wanted::is_builtin(&by.gvk))
        .map(|by| by.gvk.clone())
        .collect()
}

/// `apiextensions.k8s.io/v1 CustomResourceDefinition`.
fn crd_gvk() -> GroupVersionKind {
    GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
}
