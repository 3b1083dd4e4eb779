//! What the manager knows about itself, shared by the reload loop (which writes it), the probes,
//! `/debug/*` and the status writer (which read it).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use kube::core::GroupVersionKind;
use tokio::sync::watch;

use super::metrics::ShardSource;
use super::status::{ControllerReadiness, Readiness, StatusInput, Validity, desired_status};
use crate::cache::{Cache, InformerStatus, Plan, SharedCache};
use crate::config::{CacheConfigStatus, NamespaceSelectorStatus, ShardingStatus, Validated};

/// The manager's view of its config and cache, updated by every reload.
pub struct State {
    inner: Mutex<Inner>,
    cache: Arc<SharedCache>,
    changed: watch::Sender<u64>,
    /// The status as last observed ([`State::status`]): its conditions' transition times are
    /// kept until their status flips.
    observed: Mutex<Option<CacheConfigStatus>>,
    /// With `spec.sharding`, the member's view of its ring.
    shard: Mutex<Option<ShardSource>>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State").finish_non_exhaustive()
    }
}

#[derive(Clone)]
struct Inner {
    config: Arc<Validated>,
    /// Whether the source has given a valid config (readiness waits for one).
    valid_once: bool,
    invalid: Vec<String>,
    last_reload: Option<jiff::Timestamp>,
    plan: Option<Plan>,
    unsynced: Vec<(GroupVersionKind, String)>,
    missing: Vec<String>,
    controllers: BTreeMap<String, ControllerReadiness>,
}

/// A copy of the state at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The config running now (the last valid one).
    pub config: Arc<Validated>,
    /// Whether the source has given a valid config since start: false only while a
    /// `CacheConfig` resource invalid at start has not been fixed (controller-runtime's
    /// defaults run meanwhile). `/readyz` waits for it, as Prometheus waits for its first
    /// config; a later invalid edit does not take it back.
    pub valid_once: bool,
    /// Every error of the latest config seen, when it was invalid (then `config` is the last
    /// good one); empty when the latest config is the running one.
    pub invalid: Vec<String>,
    /// When a changed config was last applied.
    pub last_reload: Option<jiff::Timestamp>,
    /// The plan of the published tree (`None` before the first config's tree serves).
    pub plan: Option<Plan>,
    /// Eager kinds whose first sync failed or timed out at the last reload.
    pub unsynced: Vec<(GroupVersionKind, String)>,
    /// Every informer of the published tree.
    pub informers: Vec<InformerStatus>,
    /// With `spec.sharding`, this member's view of its ring and its share.
    pub sharding: Option<ShardingStatus>,
    /// The permissions the running config needs that the cluster does not grant, as the
    /// last check found them (see `manager::access`).
    pub missing_permissions: Vec<String>,
    /// What each controller the manager runs says of itself, by name.
    pub controllers: BTreeMap<String, ControllerReadiness>,
}

impl Snapshot {
    /// What the status says about this snapshot, for the object at `generation`.
    #[must_use]
    pub(crate) fn status_input(&self, generation: Option<i64>) -> StatusInput {
        let validity = if self.invalid.is_empty() {
            Validity::Valid
        } else {
            Validity::Invalid {
                errors: self.invalid.clone(),
            }
        };
        let readiness = if self.missing_permissions.is_empty() {
            self.readiness()
        } else {
            Readiness::Forbidden {
                missing: self.missing_permissions.clone(),
            }
        };
        StatusInput {
            generation,
            validity,
            readiness,
            informers: self.informers.clone(),
            namespace_selectors: self.namespace_selectors(),
            controllers: self
                .controllers
                .iter()
                .map(|(name, readiness)| readiness.row(name))
                .collect(),
            sharding: self.sharding.clone(),
            last_reload_time: self
                .last_reload
                .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time),
            now: jiff::Timestamp::now(),
        }
    }

    /// Each namespace selector of the published tree with the namespaces it matches now.
    #[must_use]
    pub fn namespace_selectors(&self) -> Vec<NamespaceSelectorStatus> {
        self.plan
            .as_ref()
            .map(Plan::namespace_selections)
            .unwrap_or_default()
            .iter()
            .map(|(selector, matched)| {
                let matched = matched.clone().unwrap_or_default();
                NamespaceSelectorStatus::new(selector, matched.iter())
            })
            .collect()
    }

    /// Whether the published tree is ready, for `/readyz` and the `Ready` condition: its
    /// eager informers (those of `byObject` kinds) synced, an unsynced one with an error
    /// failed, and an eager kind without any informer (unknown kind, sync timeout at the
    /// reload) failed with the reload's reason. Before the first config's tree serves, it is
    /// syncing.
    #[must_use]
    pub fn readiness(&self) -> Readiness {
        if self.last_reload.is_none() {
            return Readiness::Syncing {
                pending: vec!["the cache tree of the first config".into()],
            };
        }
        let eager_kinds = self
            .plan
            .as_ref()
            .map(Plan::by_object_kinds)
            .unwrap_or_default();
        let is_eager = |api_version: &str, kind: &str| {
            eager_kinds
                .iter()
                .any(|g| g.kind == kind && g.api_version() == api_version)
        };
        let eager: Vec<&InformerStatus> = self
            .informers
            .iter()
            .filter(|i| is_eager(&i.api_version, &i.kind))
            .collect();
        let started = |gvk: &GroupVersionKind| {
            eager
                .iter()
                .any(|i| i.kind == gvk.kind && i.api_version == gvk.api_version())
        };
        let missing: Vec<String> = self
            .unsynced
            .iter()
            .filter(|(gvk, _)| !started(gvk))
            .map(|(gvk, e)| format!("{} {}: {e}", gvk.api_version(), gvk.kind))
            .collect();
        let readiness = Readiness::of(eager);
        let waiting: Vec<String> = self
            .informers
            .iter()
            .filter(|i| i.is_waiting_for_kind())
            .map(|i| {
                format!(
                    "{} {}: {}",
                    i.api_version,
                    i.kind,
                    i.message.as_deref().unwrap_or("not served")
                )
            })
            .collect();
        if missing.is_empty() {
            return match readiness {
                Readiness::Synced if !waiting.is_empty() => Readiness::WaitingForKind { waiting },
                readiness => readiness,
            };
        }
        match readiness {
            Readiness::Failed { mut failed } => {
                failed.extend(missing);
                Readiness::Failed { failed }
            }
            _ => Readiness::Failed { failed: missing },
        }
    }
}

impl State {
    /// The state of a manager running `config` over `cache`.
    #[must_use]
    pub fn new(config: Arc<Validated>, cache: Arc<SharedCache>) -> Self {
        let (changed, _) = watch::channel(0);
        Self {
            inner: Mutex::new(Inner {
                config,
                valid_once: true,
                invalid: Vec::new(),
                last_reload: None,
                plan: None,
                unsynced: Vec::new(),
                missing: Vec::new(),
                controllers: BTreeMap::new(),
            }),
            cache,
            changed,
            observed: Mutex::new(None),
            shard: Mutex::new(None),
        }
    }

    fn update(&self, f: impl FnOnce(&mut Inner)) {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner));
        // A reload's flip is timed when it happens, not when the status is next asked for.
        self.status(None);
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// The status now, for the object at `generation` (`/debug/status` serves it for a
    /// file): each condition's `lastTransitionTime` is when the manager first saw its status
    /// flip (a reload's flip at the reload; an informer's failure or sync when next observed,
    /// at the latest at this call), as apimachinery's `meta.SetStatusCondition` keeps it, not
    /// the time of the call.
    pub fn status(&self, generation: Option<i64>) -> CacheConfigStatus {
        let snapshot = self.snapshot();
        let mut observed = self.observed.lock().unwrap_or_else(PoisonError::into_inner);
        let previous = observed
            .clone()
            .or_else(|| snapshot.config.resource.status.clone());
        let status = desired_status(previous.as_ref(), &snapshot.status_input(generation));
        *observed = Some(status.clone());
        status
    }

    /// Where the member's view of its shard ring is read from, once the manager joined one.
    pub(crate) fn sharded(&self, source: ShardSource) {
        *self.shard.lock().unwrap_or_else(PoisonError::into_inner) = Some(source);
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// The source's config at start is invalid (a `CacheConfig` resource): the defaults run,
    /// and the manager is not ready until a valid config comes.
    pub(crate) fn invalid_at_start(&self) {
        self.update(|s| s.valid_once = false);
    }

    /// The first config's tree serves (the source's config, or the defaults when it was
    /// invalid at start; see `State::invalid_at_start`).
    pub fn started(
        &self,
        config: Arc<Validated>,
        plan: Option<Plan>,
        unsynced: Vec<(GroupVersionKind, String)>,
    ) {
        self.update(|s| {
            s.config = config;
            s.last_reload = Some(jiff::Timestamp::now());
            s.plan = plan;
            s.unsynced = unsynced;
        });
    }

    /// A valid config was applied. `tree` is the plan of the tree it published and the eager
    /// kinds that did not sync, or `None` when the cache tree stayed as it was (only recorder
    /// options changed).
    pub fn applied(
        &self,
        config: Arc<Validated>,
        tree: Option<(Plan, Vec<(GroupVersionKind, String)>)>,
    ) {
        self.update(|s| {
            s.config = config;
            s.valid_once = true;
            s.invalid.clear();
            if let Some((plan, unsynced)) = tree {
                s.last_reload = Some(jiff::Timestamp::now());
                s.plan = Some(plan);
                s.unsynced = unsynced;
            }
        });
    }

    /// The cluster changed what the running config caches: `plan` is the tree published for
    /// it, `unsynced` the eager kinds that did not sync. The config and the last reload time
    /// stay (the spec did not change).
    pub fn rescoped(&self, plan: Plan, unsynced: Vec<(GroupVersionKind, String)>) {
        self.update(|s| {
            s.plan = Some(plan);
            s.unsynced = unsynced;
        });
    }

    /// What the controller `name` says of itself now; `None` when it is gone (stopped for
    /// good, or its `Controller` deleted). An unchanged state changes nothing.
    pub fn controller(&self, name: &str, readiness: Option<ControllerReadiness>) {
        {
            let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            if inner.controllers.get(name) == readiness.as_ref() {
                return;
            }
        }
        self.update(|s| match readiness {
            Some(readiness) => {
                s.controllers.insert(name.to_owned(), readiness);
            }
            None => {
                s.controllers.remove(name);
            }
        });
    }

    /// What the last permission check found missing (empty: all granted).
    pub(crate) fn permissions_checked(&self, missing: Vec<String>) {
        self.update(|s| s.missing = missing);
    }

    /// The latest config seen is invalid; the running one stays.
    pub fn rejected(&self, errors: Vec<String>) {
        self.update(|s| s.invalid = errors);
    }

    /// The latest config seen is valid and equal to the running one.
    pub fn unchanged(&self) {
        self.update(|s| {
            s.valid_once = true;
            s.invalid.clear();
        });
    }

    /// Whether the latest config seen is invalid (the last good one runs).
    #[must_use]
    pub(crate) fn is_invalid(&self) -> bool {
        !self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .invalid
            .is_empty()
    }

    /// Waits until the first config's tree serves; reads before it fail with `NotStarted`.
    pub async fn serving(&self) {
        let mut changes = self.subscribe();
        loop {
            let serving = self
                .inner
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .last_reload
                .is_some();
            if serving || changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// A receiver that changes on every update (the status writer's nudge).
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The plan of the published tree (`None` before the first config's tree serves).
    #[must_use]
    pub fn plan(&self) -> Option<Plan> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .plan
            .clone()
    }

    /// The state now, with the informers of the published tree.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Snapshot {
            config: inner.config,
            valid_once: inner.valid_once,
            invalid: inner.invalid,
            last_reload: inner.last_reload,
            plan: inner.plan,
            unsynced: inner.unsynced,
            informers: self.cache.informers(),
            missing_permissions: inner.missing,
            controllers: inner.controllers,
            sharding: self
                .shard
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .map(|source| source()),
        }
    }
}
