//! [`Supervisor`]: runs the set of hook controllers the `Controller` documents declare, and
//! follows its changes: a new `Controller` starts, a changed one restarts, a deleted one stops,
//! and nothing else is touched. An invalid change keeps the previous valid spec running and
//! reports `Valid=False` with every error.
//!
//! Each valid controller wants its kinds from the cache tree
//! ([`crate::cache::SharedCache::want`]), as a Rust controller does: the reloader follows each
//! custom one (`byObject` or not) and the tree has it wait while it is not served. A controller
//! one of whose kinds waits (its CRD is not established) does not start: its `Ready` condition
//! is `False` with reason `WaitingForKind` and why; it starts at the pass that follows the tree
//! serving its kinds (a pass runs at each published tree, and at least every 2 s), and stops
//! when one of them waits again (its CRD was deleted), without releasing anything: it comes
//! back with its CRD. Why a controller is kept back is `supervisor/kept.rs`.
//!
//! A controller that owns or watches other kinds does not start either when the cache is
//! sharded by uid ([`Supervisor::sharding`]): its children and related objects would be cached
//! on other members than the object they belong to. Its `Ready` condition is `False` with
//! reason `NeedsShardKeyNamespace`, the fix (`spec.sharding.key: namespace`, every object of a
//! namespace on one member), said in its message and logged once at warn.
//!
//! A stopped controller that held its objects with its finalizer and no longer does (gone,
//! or restarted with `finalize: false` or another `for` kind) has that finalizer released
//! from them (`release.rs`), never on shutdown. With [`Supervisor::hold_controllers`], a
//! `Controller` resource is held by [`CONTROLLER_FINALIZER`] while it holds its objects, and
//! one being deleted counts as gone until its objects are released and that finalizer is
//! removed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::controller::HookController;
use super::metrics::HookMetrics;
use super::policy::Policy;
use super::release::{self, CONTROLLER_FINALIZER, Held, Released};
use super::resource::{
    ControllerError, ControllerKey, ControllerSettings, ControllerStatus, FINALIZER_PREFIX,
    MAX_CONCURRENCY, ValidatedController,
};
use super::stats::Stats;
use crate::controller::{Context, ControllerMetrics};
use crate::manager::State;
use crate::recorder;
use crate::selector::Sharding;

mod kept;
mod status;

pub use kept::{
    REASON_ADMISSION_NOT_SERVED, REASON_CONVERSION_NOT_SERVED, REASON_NEEDS_SHARD_KEY_NAMESPACE,
};
use kept::{Waiting, Wants, want_kinds};
use status::{report, write_statuses};

/// How often the `Controller` statuses are recomputed (a pass with no change to follow); an
/// unchanged status is not written.
const STATUS_INTERVAL: Duration = Duration::from_secs(2);

/// The `Controller` documents to run, by `namespace/name`: each valid (run it) or not (keep
/// what runs under that name, report why).
pub type Desired = BTreeMap<ControllerKey, Result<ValidatedController, ControllerError>>;

/// One running hook controller.
struct Running {
    settings: ControllerSettings,
    generation: Option<i64>,
    stop: CancellationToken,
    task: JoinHandle<()>,
    stats: Stats,
}

/// Runs one [`HookController`] per valid `Controller` in a [`Desired`] set that changes over
/// time (a file's documents, or the `Controller` resources of a namespace).
///
/// ```no_run
/// # async fn demo(ctx: informant::controller::Context) {
/// use informant::hooks::{Desired, Supervisor};
/// use tokio_util::sync::CancellationToken;
///
/// let (desired, receiver) = tokio::sync::watch::channel(Desired::new());
/// let supervisor = Supervisor::new(receiver);
/// tokio::spawn(supervisor.run(ctx, CancellationToken::new()));
/// desired.send_replace(Desired::new()); // later: the new set of Controllers
/// # }
/// ```
#[derive(Debug)]
pub struct Supervisor {
    desired: watch::Receiver<Desired>,
    metrics: Option<ControllerMetrics>,
    hook_metrics: Option<HookMetrics>,
    write_status: bool,
    hold_controllers: bool,
    sharding: Option<Sharding>,
    /// With sharding, whether this member leads: only the leader writes statuses, holds
    /// `Controller`s and releases finalizers.
    leader: Option<watch::Receiver<bool>>,
    /// A pass with no change to follow runs this often ([`STATUS_INTERVAL`]).
    interval: Duration,
    progress: watch::Sender<Progress>,
    report: Option<Arc<State>>,
    policy: Arc<Policy>,
    /// What the manager's webhook endpoint serves.
    endpoint: Endpoint,
    /// The most `spec.concurrency` a controller may ask for (`--hook-max-concurrency`).
    max_concurrency: u16,
    /// Whether a webhook hook may name a client certificate Secret (`--hook-allow-secrets`).
    secret_refs: SecretRefs,
}

/// Whether webhook hooks may name a client certificate Secret ([`Supervisor::secret_refs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SecretRefs {
    Allowed,
    Refused,
}

/// What a [`Supervisor`] has done: sent after each pass over a new [`Desired`] set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Passes over a [`Desired`] set finished.
    pub passes: u64,
    /// Hook controllers started so far (each start and each restart counts).
    pub starts: u64,
    /// Objects a stopped controller's finalizer was removed from.
    pub released: u64,
    /// Objects whose finalizer could not be removed (a later pass tries again).
    pub release_failures: u64,
}

impl Supervisor {
    /// A supervisor following `desired`.
    #[must_use]
    pub fn new(desired: watch::Receiver<Desired>) -> Self {
        Self {
            desired,
            metrics: None,
            hook_metrics: None,
            write_status: false,
            hold_controllers: false,
            sharding: None,
            leader: None,
            interval: STATUS_INTERVAL,
            progress: watch::channel(Progress::default()).0,
            report: None,
            policy: Arc::new(Policy::open()),
            endpoint: Endpoint::default(),
            max_concurrency: MAX_CONCURRENCY,
            secret_refs: SecretRefs::Allowed,
        }
    }

    /// Whether a controller's webhook hooks (its own, its admission and conversion hooks) may
    /// name a client certificate Secret (`tls.clientCertSecretRef`, read by the manager from
    /// the `Controller`'s namespace, where the chart's release keeps its own certificates):
    /// without it such a controller is kept back as the policy keeps them, naming
    /// `--hook-allow-secrets`. Default `true` (what [`Policy::open`] allows).
    #[must_use]
    pub fn secret_refs(mut self, allowed: bool) -> Self {
        self.secret_refs = if allowed {
            SecretRefs::Allowed
        } else {
            SecretRefs::Refused
        };
        self
    }

    /// Runs only the controllers whose `spec.concurrency` is at most `max` (at most
    /// [`MAX_CONCURRENCY`], which validation enforces); the others are kept back as the
    /// policy keeps them ([`Supervisor::policy`]), naming `--hook-max-concurrency`. Default
    /// [`MAX_CONCURRENCY`].
    #[must_use]
    pub fn max_concurrency(mut self, max: u16) -> Self {
        self.max_concurrency = max.clamp(1, MAX_CONCURRENCY);
        self
    }

    /// Runs only the controllers `policy` allows ([`Policy::refusal`]); the others are kept
    /// back with `Ready=False`, reason [`REASON_HOOK_NOT_ALLOWED`](crate::hooks::REASON_HOOK_NOT_ALLOWED), the rules they break in
    /// its message, a Warning Event of that reason on the `Controller` resource (with
    /// [`Supervisor::write_status`]) and a warning in the log. Default [`Policy::open`].
    #[must_use]
    pub fn policy(mut self, policy: Arc<Policy>) -> Self {
        self.policy = policy;
        self
    }

    /// Says the manager serves the admission hooks of `spec.admission` (its webhook endpoint
    /// is on: [`crate::manager::Options::webhook`]); without it a controller with admission
    /// hooks is kept back, reason [`REASON_ADMISSION_NOT_SERVED`].
    #[must_use]
    pub fn admission_served(mut self, served: bool) -> Self {
        self.endpoint.served = served;
        self
    }

    /// Says the webhook endpoint requires the API server's client certificate
    /// (`--webhook-client-ca`): kube-apiserver calls conversion webhooks without one, so a
    /// controller with a conversion hook is kept back, reason [`REASON_CONVERSION_NOT_SERVED`].
    #[must_use]
    pub fn client_ca(mut self, required: bool) -> Self {
        self.endpoint.client_ca = required;
        self
    }

    /// Reports whether each controller runs or waits for its kinds to `state` (the
    /// manager's `status.controllers` and `/readyz/controllers`, as `hook namespace/name`).
    #[must_use]
    pub fn report_to(mut self, state: Arc<State>) -> Self {
        self.report = Some(state);
        self
    }

    /// Counts reconciles in controller-runtime's series.
    #[must_use]
    pub fn metrics(mut self, metrics: &ControllerMetrics, hooks: &HookMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self.hook_metrics = Some(hooks.clone());
        self
    }

    /// Writes each `Controller`'s status (the `Controller`s are resources in the cluster,
    /// not documents of a file).
    #[must_use]
    pub fn write_status(mut self, write: bool) -> Self {
        self.write_status = write;
        self
    }

    /// Holds each `Controller` resource with `finalize: true` by
    /// [`CONTROLLER_FINALIZER`](super::CONTROLLER_FINALIZER) while it runs, and treats one
    /// being deleted as gone: its objects are released, then that finalizer is removed so
    /// the `Controller` goes. Only for `Controller`s that are resources (a file's documents
    /// have nothing to hold); a `Controller` deleted while no manager led is then still
    /// released by the next leader.
    #[must_use]
    pub fn hold_controllers(mut self, hold: bool) -> Self {
        self.hold_controllers = hold;
        self
    }

    /// The sharding of the cache the controllers read (`spec.sharding` of the config the
    /// manager started with; a reload cannot change it). Sharded by uid, a controller that
    /// owns or watches other kinds does not start (`Ready=False`, reason
    /// [`REASON_NEEDS_SHARD_KEY_NAMESPACE`]).
    #[must_use]
    pub fn sharding(mut self, sharding: Option<Sharding>) -> Self {
        self.sharding = sharding;
        self
    }

    /// Runs on every member of a shard ring (each hook controller reconciling its share),
    /// leaving what must stay single to the member `is_leader` says leads: statuses are
    /// written, `Controller`s held and finalizers released only there (elsewhere a release
    /// waits, pending, until this member leads).
    #[must_use]
    pub fn leader(mut self, is_leader: watch::Receiver<bool>) -> Self {
        self.leader = Some(is_leader);
        self
    }

    /// Runs a pass every `every` when nothing changed (every 2 s unless set): the
    /// statuses are recomputed and failed releases tried again. A change of the desired set,
    /// of the cache tree or of who leads runs a pass at once.
    #[must_use]
    pub fn interval(mut self, every: Duration) -> Self {
        self.interval = every;
        self
    }

    /// Whether this supervisor does the single work (always, unless [`Supervisor::leader`]).
    fn leads(&self) -> bool {
        self.leader.as_ref().is_none_or(|l| *l.borrow())
    }

    /// What the supervisor has done, updated after each pass.
    #[must_use]
    pub fn progress(&self) -> watch::Receiver<Progress> {
        self.progress.subscribe()
    }

    /// Runs until `shutdown`; stops every hook controller (their running calls finish)
    /// before returning.
    pub async fn run(mut self, ctx: Context, shutdown: CancellationToken) {
        let mut running: HashMap<ControllerKey, Running> = HashMap::new();
        let mut waiting = Waiting::new();
        let mut wants = Wants::new();
        let mut reported: HashSet<String> = HashSet::new();
        let mut published = ctx.cache().changes();
        let mut written: HashMap<ControllerKey, ControllerStatus> = HashMap::new();
        // Releases that failed for some objects, tried again at each pass.
        let mut pending: Vec<Held> = Vec::new();
        // The first pass runs now, not also at a first tick.
        let first = tokio::time::Instant::now() + self.interval;
        let mut tick = tokio::time::interval_at(first, self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let desired = self.desired.borrow_and_update().clone();
            published.mark_unchanged();
            want_kinds(&desired, &mut wants, ctx.cache());
            self.apply(
                &desired,
                &mut running,
                &mut pending,
                &wants,
                &ctx,
                &shutdown,
            )
            .await;
            self.keep_back(&ctx, &desired, &mut running, &mut waiting, &wants)
                .await;
            self.progress.send_modify(|p| p.passes += 1);
            if self.write_status && self.leads() {
                write_statuses(&ctx, &desired, &running, &waiting, &wants, &mut written).await;
            }
            if let Some(state) = &self.report {
                report(state, &desired, &running, &waiting, &mut reported);
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                changed = self.desired.changed() => {
                    if changed.is_err() {
                        // The source is gone: keep what runs until shutdown.
                        shutdown.cancelled().await;
                        break;
                    }
                }
                _ = tick.tick() => {}
                // A tree was published (a kind may be served, or wait, now).
                _ = published.changed() => {}
                // This member came to lead (a finalizing controller may start, a pending
                // release go) or stopped leading (its statuses are no longer its to write).
                () = leadership_changed(self.leader.as_mut()) => {}
            }
        }
        if let Some(state) = &self.report {
            for name in reported {
                state.controller(&name, None);
            }
        }
        for (_, r) in running.drain() {
            r.stop.cancel();
            let _ = r.task.await;
        }
    }

    /// One pass over `desired`: stops what went (releasing its finalizer), restarts what
    /// changed, starts what is new. Returns early, releasing nothing more, once `shutdown` is
    /// cancelled.
    async fn apply(
        &self,
        desired: &Desired,
        running: &mut HashMap<ControllerKey, Running>,
        pending: &mut Vec<Held>,
        wants: &Wants,
        ctx: &Context,
        shutdown: &CancellationToken,
    ) {
        // A finalizer held again (the Controller came back as it was) is not to be released.
        let holding: Vec<Held> = desired
            .values()
            .filter_map(|wanted| wanted.as_ref().ok())
            .filter(|valid| !deleting(valid))
            .filter_map(|valid| held(&valid.settings))
            .collect();
        pending.retain(|h| !holding.contains(h));
        for h in std::mem::take(pending) {
            match self.release(ctx, &h, shutdown).await {
                None => {
                    pending.push(h);
                    return;
                }
                Some(released) if released.failed > 0 => pending.push(h),
                Some(_) => {}
            }
        }
        let gone: Vec<ControllerKey> = running
            .keys()
            .filter(|name| match desired.get(*name) {
                None => true,
                Some(wanted) => wanted.as_ref().is_ok_and(deleting),
            })
            .cloned()
            .collect();
        for name in gone {
            if let Some(r) = running.remove(&name) {
                tracing::info!(controller = %name, "controller deleted, stopping its hook controller");
                r.stop.cancel();
                let _ = r.task.await;
                let Some(released) = self.release_held(ctx, &r.settings, pending, shutdown).await
                else {
                    return;
                };
                if self.hold_controllers && released.failed == 0 && !desired.contains_key(&name) {
                    // Gone from the set without passing through a deletion this pass saw
                    // (an invalid Controller being deleted): let its resource go too.
                    release::let_go_of_controller(ctx.client(), &name.namespace, &name.name).await;
                }
            }
        }
        for (name, wanted) in desired {
            let Ok(valid) = wanted else {
                if let Err(e) = wanted {
                    tracing::warn!(controller = %name, error = %e, "invalid controller, the previous one keeps running");
                }
                continue;
            };
            if deleting(valid) {
                if self.hold_controllers && !self.let_go(ctx, valid, shutdown).await {
                    return;
                }
                continue;
            }
            if let Some(r) = running.get_mut(name) {
                if r.settings == valid.settings {
                    r.generation = valid.resource.metadata.generation;
                    if self.hold_controllers && !self.hold(ctx, valid, shutdown).await {
                        return;
                    }
                    continue;
                }
                tracing::info!(controller = %name, "controller changed, restarting its hook controller");
                r.stop.cancel();
                if let Some(r) = running.remove(name) {
                    let _ = r.task.await;
                    if held(&r.settings) != held(&valid.settings)
                        && self
                            .release_held(ctx, &r.settings, pending, shutdown)
                            .await
                            .is_none()
                    {
                        return;
                    }
                }
            }
            if self.kept_back(wants.get(name), &valid.settings).is_some() {
                // Started by a later pass, once its kinds are served (never, while the
                // sharding refuses it).
                continue;
            }
            if self.waits_for_the_leaders_hold(valid) {
                // Started by the pass that sees the leader's finalizer on the Controller.
                continue;
            }
            // Hold the Controller before its hook controller holds any object.
            if shutdown.is_cancelled()
                || self.hold_controllers && !self.hold(ctx, valid, shutdown).await
            {
                return;
            }
            running.insert(name.clone(), self.start(name, valid, ctx, shutdown));
        }
    }

    /// Whether `valid` must not start on this member yet: it holds its objects with a
    /// finalizer, this member does not lead, and the leader has not held the `Controller`
    /// resource with [`CONTROLLER_FINALIZER`] yet. Started before that, its objects could carry
    /// the finalizer of a `Controller` deleted without it, which no member would then release.
    fn waits_for_the_leaders_hold(&self, valid: &ValidatedController) -> bool {
        self.hold_controllers
            && valid.settings.finalizer.is_some()
            && !self.leads()
            && !carries_controller_finalizer(valid)
    }

    /// Releases the finalizer a stopped controller of `settings` held, if any; one that could
    /// not be removed from every object goes to `pending`, tried again at the next passes.
    /// `None` when `shutdown` came first.
    async fn release_held(
        &self,
        ctx: &Context,
        settings: &ControllerSettings,
        pending: &mut Vec<Held>,
        shutdown: &CancellationToken,
    ) -> Option<Released> {
        let Some(held) = held(settings) else {
            return Some(Released::default());
        };
        let released = self.release(ctx, &held, shutdown).await?;
        if released.failed > 0 {
            pending.push(held);
        }
        Some(released)
    }

    /// [`release::release`], counted in [`Progress`].
    async fn release(
        &self,
        ctx: &Context,
        held: &Held,
        shutdown: &CancellationToken,
    ) -> Option<Released> {
        if !self.leads() {
            // The leader releases; this member keeps it pending until it leads.
            return Some(Released {
                released: 0,
                failed: 1,
            });
        }
        let released = release::release(ctx, held, shutdown).await?;
        self.progress.send_modify(|p| {
            p.released += released.released as u64;
            p.release_failures += released.failed as u64;
        });
        Some(released)
    }

    /// Starts the hook controller of `valid`.
    fn start(
        &self,
        name: &ControllerKey,
        valid: &ValidatedController,
        ctx: &Context,
        shutdown: &CancellationToken,
    ) -> Running {
        let hook = HookController::new(valid.settings.clone()).policy(Arc::clone(&self.policy));
        let hook = match (&self.metrics, &self.hook_metrics) {
            (Some(m), Some(h)) => hook.metrics(m).hook_metrics(h),
            _ => hook,
        };
        let stats = hook.stats();
        let stop = shutdown.child_token();
        let token = stop.clone();
        let ctx = ctx.clone();
        let label = name.to_owned();
        let task = tokio::spawn(async move {
            if let Err(e) = hook.run(ctx, token).await {
                tracing::error!(controller = %label, error = %crate::telemetry::error_chain(&e), "hook controller stopped");
            }
        });
        self.progress.send_modify(|p| p.starts += 1);
        Running {
            settings: valid.settings.clone(),
            generation: valid.resource.metadata.generation,
            stop,
            task,
            stats,
        }
    }

    /// Keeps the `Controller` resource of a running `valid` held by
    /// [`CONTROLLER_FINALIZER`] exactly while it holds its objects (`finalize: true`). One
    /// that carries it but no longer holds them (edited to `finalize: false`, perhaps while
    /// no manager led) has its objects released first. `false` when `shutdown` came first.
    async fn hold(
        &self,
        ctx: &Context,
        valid: &ValidatedController,
        shutdown: &CancellationToken,
    ) -> bool {
        if !self.leads() {
            return true;
        }
        let carries = carries_controller_finalizer(valid);
        match (valid.settings.finalizer.is_some(), carries) {
            (true, false) => release::hold_controller(ctx.client(), &valid.resource).await,
            (false, true) => return self.let_go(ctx, valid, shutdown).await,
            _ => {}
        }
        true
    }

    /// Releases the objects the `Controller` `valid` held (with its finalizer, even when it
    /// no longer says `finalize: true`), then removes [`CONTROLLER_FINALIZER`] from it.
    /// `false` when `shutdown` came first.
    async fn let_go(
        &self,
        ctx: &Context,
        valid: &ValidatedController,
        shutdown: &CancellationToken,
    ) -> bool {
        if !carries_controller_finalizer(valid) {
            return true;
        }
        let meta = &valid.resource.metadata;
        let (Some(namespace), Some(name)) = (meta.namespace.as_deref(), meta.name.as_deref())
        else {
            return true;
        };
        let held = Held {
            controller: valid.settings.key.to_string(),
            for_kind: valid.settings.for_kind.clone(),
            finalizer: valid
                .settings
                .finalizer
                .clone()
                .unwrap_or_else(|| format!("{FINALIZER_PREFIX}{namespace}.{name}")),
        };
        let Some(released) = self.release(ctx, &held, shutdown).await else {
            return false;
        };
        if released.failed == 0 {
            release::let_go_of_controller(ctx.client(), namespace, name).await;
        }
        true
    }
}

/// The recorder's reference to the `Controller` resource of `valid`.
fn controller_ref(valid: &ValidatedController) -> Arc<recorder::ObjectRef> {
    let meta = &valid.resource.metadata;
    Arc::new(recorder::ObjectRef::new(
        "informant.dev/v1alpha1",
        "Controller",
        &valid.settings.key.namespace,
        &valid.settings.key.name,
        meta.uid.as_deref().unwrap_or_default(),
    ))
}

/// Whether the `Controller` of `valid` is being deleted.
fn deleting(valid: &ValidatedController) -> bool {
    valid.resource.metadata.deletion_timestamp.is_some()
}

/// Whether the `Controller` resource of `valid` carries [`CONTROLLER_FINALIZER`].
fn carries_controller_finalizer(valid: &ValidatedController) -> bool {
    valid
        .resource
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == CONTROLLER_FINALIZER)
}

/// The finalizer a controller of `settings` holds its objects with, and on which kind.
fn held(settings: &ControllerSettings) -> Option<Held> {
    settings.finalizer.as_ref().map(|finalizer| Held {
        controller: settings.key.to_string(),
        for_kind: settings.for_kind.clone(),
        finalizer: finalizer.clone(),
    })
}

/// Resolves when `leader` says another thing; never without a leader to follow, or once its
/// sender is gone (the member's leadership ended with the manager).
async fn leadership_changed(leader: Option<&mut watch::Receiver<bool>>) {
    if let Some(leader) = leader
        && leader.changed().await.is_ok()
    {
        return;
    }
    std::future::pending::<()>().await;
}

#[cfg(test)]
mod tests;

/// The manager's webhook endpoint, as the supervisor judges controllers by it.
#[derive(Clone, Copy, Debug, Default)]
struct Endpoint {
    /// Whether it is on: admission and conversion hooks are served.
    served: bool,
    /// Whether it requires the API server's client certificate (`--webhook-client-ca`),
    /// which conversion calls never carry.
    client_ca: bool,
}
