//! [`Supervisor`]: runs the set of hook controllers the `Controller` documents declare, and
//! follows its changes: a new `Controller` starts, a changed one restarts, a deleted one stops,
//! and nothing else is touched. An invalid change keeps the previous valid spec running and
//! reports `Valid=False` with every error.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::core::DynamicObject;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::controller::{HookController, Stats};
use super::metrics::HookMetrics;
use crate::config::controller::{CONTROLLER_CONDITION_READY, CONTROLLER_CONDITION_VALID};
use crate::config::{
    Controller, ControllerError, ControllerSettings, ControllerStatus, ValidatedController,
};
use crate::manager::controller::Context;
use crate::manager::metrics::ControllerMetrics;

/// How often the `Controller` statuses are recomputed; an unchanged status is not written.
const STATUS_INTERVAL: Duration = Duration::from_secs(2);

/// The `Controller` documents to run, by `namespace/name`: each valid (run it) or not (keep
/// what runs under that name, report why).
pub type Desired = BTreeMap<String, Result<ValidatedController, ControllerError>>;

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
/// # async fn demo(ctx: informant::manager::controller::Context) {
/// use informant::manager::hooks::{Desired, Supervisor};
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
    progress: watch::Sender<Progress>,
}

/// What a [`Supervisor`] has done: sent after each pass over a new [`Desired`] set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Passes over a [`Desired`] set finished.
    pub passes: u64,
    /// Hook controllers started so far (each start and each restart counts).
    pub starts: u64,
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
            progress: watch::channel(Progress::default()).0,
        }
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

    /// What the supervisor has done, updated after each pass.
    #[must_use]
    pub fn progress(&self) -> watch::Receiver<Progress> {
        self.progress.subscribe()
    }

    /// Runs until `shutdown`; stops every hook controller (their running calls finish)
    /// before returning.
    pub async fn run(mut self, ctx: Context, shutdown: CancellationToken) {
        let mut running: HashMap<String, Running> = HashMap::new();
        let mut written: HashMap<String, ControllerStatus> = HashMap::new();
        let mut tick = tokio::time::interval(STATUS_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let desired = self.desired.borrow_and_update().clone();
            self.apply(&desired, &mut running, &ctx, &shutdown).await;
            self.progress.send_modify(|p| p.passes += 1);
            if self.write_status {
                write_statuses(&ctx, &desired, &running, &mut written).await;
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
            }
        }
        for (_, r) in running.drain() {
            r.stop.cancel();
            let _ = r.task.await;
        }
    }

    async fn apply(
        &self,
        desired: &Desired,
        running: &mut HashMap<String, Running>,
        ctx: &Context,
        shutdown: &CancellationToken,
    ) {
        let gone: Vec<String> = running
            .keys()
            .filter(|name| !desired.contains_key(*name))
            .cloned()
            .collect();
        for name in gone {
            if let Some(r) = running.remove(&name) {
                tracing::info!(controller = %name, "controller deleted, stopping its hook controller");
                r.stop.cancel();
                let _ = r.task.await;
            }
        }
        for (name, wanted) in desired {
            let Ok(valid) = wanted else {
                if let Err(e) = wanted {
                    tracing::warn!(controller = %name, error = %e, "invalid controller, the previous one keeps running");
                }
                continue;
            };
            if let Some(r) = running.get_mut(name) {
                if r.settings == valid.settings {
                    r.generation = valid.resource.metadata.generation;
                    continue;
                }
                tracing::info!(controller = %name, "controller changed, restarting its hook controller");
                r.stop.cancel();
                if let Some(r) = running.remove(name) {
                    let _ = r.task.await;
                }
            }
            let hook = HookController::new(valid.settings.clone());
            let hook = match (&self.metrics, &self.hook_metrics) {
                (Some(m), Some(h)) => hook.metrics(m).hook_metrics(h),
                _ => hook,
            };
            let stats = hook.stats();
            let stop = shutdown.child_token();
            let token = stop.clone();
            let ctx = ctx.clone();
            let label = name.clone();
            let task = tokio::spawn(async move {
                if let Err(e) = hook.run(ctx, token).await {
                    tracing::error!(controller = %label, error = %e, "hook controller stopped");
                }
            });
            self.progress.send_modify(|p| p.starts += 1);
            running.insert(
                name.clone(),
                Running {
                    settings: valid.settings.clone(),
                    generation: valid.resource.metadata.generation,
                    stop,
                    task,
                    stats,
                },
            );
        }
    }
}

/// The status of the `Controller` `name`: validity from `wanted`, the rest from what runs.
fn status_of(
    wanted: &Result<ValidatedController, ControllerError>,
    running: Option<&Running>,
    previous: Option<&ControllerStatus>,
) -> ControllerStatus {
    let now = Time(jiff::Timestamp::now());
    let condition = |type_: &str, ok: bool, reason: &str, message: String| {
        let transition = previous
            .and_then(|p| p.conditions.iter().find(|c| c.type_ == type_))
            .filter(|c| (c.status == "True") == ok)
            .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
        Condition {
            type_: type_.to_owned(),
            status: if ok { "True" } else { "False" }.to_owned(),
            reason: reason.to_owned(),
            message,
            last_transition_time: transition,
            observed_generation: None,
        }
    };
    let (valid, generation) = match wanted {
        Ok(v) => (
            condition(CONTROLLER_CONDITION_VALID, true, "Valid", String::new()),
            v.resource.metadata.generation,
        ),
        Err(e) => (
            condition(
                CONTROLLER_CONDITION_VALID,
                false,
                "Invalid",
                e.errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            running.and_then(|r| r.generation),
        ),
    };
    let ready = running.is_some_and(|r| r.stats.ready());
    let ready = condition(
        CONTROLLER_CONDITION_READY,
        ready,
        if ready { "Running" } else { "NotRunning" },
        String::new(),
    );
    ControllerStatus {
        observed_generation: generation,
        conditions: vec![valid, ready],
        reconciles: running.map(|r| i64::try_from(r.stats.reconciles()).unwrap_or(i64::MAX)),
        failures: running.map(|r| i64::try_from(r.stats.failures()).unwrap_or(i64::MAX)),
        last_error: running.and_then(|r| r.stats.last_error()),
    }
}

/// Writes every `Controller`'s status that differs from the last one written.
async fn write_statuses(
    ctx: &Context,
    desired: &Desired,
    running: &HashMap<String, Running>,
    written: &mut HashMap<String, ControllerStatus>,
) {
    written.retain(|name, _| desired.contains_key(name));
    for (name, wanted) in desired {
        let status = status_of(wanted, running.get(name), written.get(name));
        if written.get(name) == Some(&status) {
            continue;
        }
        let Some((namespace, short)) = name.split_once('/') else {
            continue;
        };
        let api: Api<DynamicObject> = Api::namespaced_with(
            ctx.client().clone(),
            namespace,
            &kube::core::ApiResource::erase::<Controller>(&()),
        );
        let body = serde_json::json!({
            "apiVersion": "informant.dev/v1alpha1",
            "kind": "Controller",
            "status": status,
        });
        let params = PatchParams::apply(crate::manager::FIELD_MANAGER).force();
        match api.patch_status(short, &params, &Patch::Apply(&body)).await {
            Ok(_) => {
                written.insert(name.clone(), status);
            }
            Err(e) => {
                tracing::warn!(controller = %name, error = %e, "cannot write the controller's status");
            }
        }
    }
}
