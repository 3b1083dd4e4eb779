//! The reload loop: applies each config the source publishes to the cache tree and the
//! recorder, and says what it did (log, `ConfigReloaded` / `InvalidConfig` Events on the
//! leader, metrics, the state status is written from, [`Reload`] to subscribers).

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::access::{self, AccessCheck};
use super::metrics::{ManagerMetrics, ReloadResult};
use super::options::Error;
use super::state::State;
use super::status::Validity;
use crate::cache::{CacheChange, CacheReloader};
use crate::config::{Validated, source, watch::ReloadOutcome};
use crate::recorder::{self, EventType, ObjectRef, Recorder};

/// What one config change did, sent to every [`Manager::reloads`](super::Manager::reloads) receiver.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Reload {
    /// A valid, changed config is running.
    Applied {
        /// What the cache reload did.
        cache: CacheChange,
        /// The recorder options that changed.
        recorder: String,
        /// The one-line summary recorded in the `ConfigReloaded` Event.
        summary: String,
    },
    /// A valid config equal to the running one.
    Unchanged,
    /// The cluster changed what the running config caches (a namespace started or stopped
    /// matching a namespace selector, a `byObject` kind's CRD was established or deleted) and
    /// the tree was planned again.
    Rescoped {
        /// What the cache reload did.
        cache: CacheChange,
        /// The one-line summary recorded in the `ScopeChanged` Event.
        summary: String,
    },
    /// An invalid config; the last good one keeps running.
    Rejected {
        /// Every error, with its field path.
        errors: Vec<String>,
    },
}

/// Applies configs as they come, and says what each did.
pub(super) struct ReloadLoop<'a> {
    pub(super) reloader: &'a mut CacheReloader,
    pub(super) recorder_reloader: recorder::Reloader,
    pub(super) recorder: Recorder,
    pub(super) state: Arc<State>,
    pub(super) metrics: ManagerMetrics,
    pub(super) reloads: broadcast::Sender<Reload>,
    pub(super) observed: Option<watch::Receiver<Option<source::Observed>>>,
    /// Whether this replica leads: only the leader records the reload's Events (every
    /// replica reloads its caches; N replicas recording would write N copies).
    pub(super) is_leader: watch::Receiver<bool>,
    /// The permission check run before a config's informers start.
    pub(super) access: AccessCheck,
}

impl ReloadLoop<'_> {
    /// Asks whether the cluster grants what `config` needs, and says what it does not
    /// (state, log; a Warning Event on the leader). Returns whether something is missing.
    async fn check_permissions(&self, config: &Validated) -> bool {
        let missing = self.access.missing(config).await;
        if !missing.is_empty() && *self.is_leader.borrow() {
            self.recorder.record(
                &self.config_ref(config),
                EventType::Warning,
                access::EVENT_REASON,
                &access::event_message(&missing),
            );
        }
        let any = !missing.is_empty();
        self.state.permissions_checked(missing);
        any
    }

    /// Applies the first config: the tree of its plan, its eager informers synced.
    pub(super) async fn first(&mut self, config: &Arc<Validated>) -> Result<(), Error> {
        self.check_permissions(config).await;
        let change = self.reloader.apply(&config.cache).await?;
        for (gvk, error) in &change.unsynced {
            tracing::warn!(k8s.gvk = ?gvk, error = %error, "eager informer not synced");
        }
        tracing::info!(
            informers = change.started.len(),
            took_ms = change.took.as_millis(),
            "cache tree serving"
        );
        let plan = self.reloader.plan().cloned();
        self.state
            .started(Arc::clone(config), plan, change.unsynced);
        // Prometheus's initial load sets its last-reload gauges too; a resource invalid at
        // start is not a success (the defaults run).
        self.metrics
            .last_reload(self.state.snapshot().valid_once, SystemTime::now());
        Ok(())
    }

    /// The object Events about the config are recorded against.
    fn config_ref(&self, config: &Validated) -> Arc<ObjectRef> {
        if let Some(observed) = self.observed.as_ref().and_then(|o| o.borrow().clone()) {
            return Arc::new(observed.object_ref());
        }
        let meta = &config.resource.metadata;
        Arc::new(ObjectRef::new(
            "informant.dev/v1alpha1",
            "CacheConfig",
            meta.namespace.as_deref().unwrap_or("default"),
            meta.name.as_deref().unwrap_or("informant"),
            meta.uid.as_deref().unwrap_or(""),
        ))
    }

    /// Applies a valid config, in the `config_reload` span the caller entered.
    async fn apply(&mut self, config: Arc<Validated>) {
        let began = Instant::now();
        self.check_permissions(&config).await;
        let change = match self.reloader.apply(&config.cache).await {
            Ok(change) => change,
            Err(error) => {
                self.reject(&config, vec![error.to_string()]);
                return;
            }
        };
        let recorder = self.recorder_reloader.reload(&config.recorder);
        if !change.changed && recorder.is_empty() {
            self.unchanged();
            return;
        }
        tracing::Span::current().record("reload.result", "applied");
        self.valid_again();
        let mut summary = change.summary();
        if !recorder.is_empty() {
            let _ = write!(summary, "; recorder: {recorder}");
        }
        for (gvk, error) in &change.unsynced {
            let _ = write!(
                summary,
                "; {}.{} not synced: {error}",
                gvk.kind,
                gvk.api_version()
            );
        }
        self.metrics.reload(ReloadResult::Applied);
        self.metrics.last_reload(true, SystemTime::now());
        self.metrics.informers_started(change.started.len() as u64);
        self.metrics.reload_took(began.elapsed());
        tracing::info!(summary = %summary, took_ms = change.took.as_millis(), "config reloaded");
        if *self.is_leader.borrow() {
            self.recorder.record(
                &self.config_ref(&config),
                EventType::Normal,
                "ConfigReloaded",
                &summary,
            );
        }
        let tree = if change.changed {
            let plan = self.reloader.plan().cloned();
            plan.map(|plan| (plan, change.unsynced.clone()))
        } else {
            None
        };
        self.state.applied(Arc::clone(&config), tree);
        let _ = self.reloads.send(Reload::Applied {
            cache: change,
            recorder: recorder.to_string(),
            summary,
        });
    }

    /// The cluster changed under the running config: plan again, apply the difference, say
    /// what started and stopped (log, a `ScopeChanged` Event on the leader, rate-limited by
    /// the recorder's spam filter like every Event about the config).
    #[tracing::instrument(name = "cache_rescope", skip_all)]
    async fn rescope(&mut self) {
        let change = match self.reloader.rescope().await {
            Ok(change) => change,
            Err(error) => {
                tracing::warn!(error = %crate::telemetry::error_chain(&error), "cannot plan the cache for the cluster's namespaces");
                return;
            }
        };
        if !change.changed {
            return;
        }
        let mut summary = change.scope_summary().unwrap_or_default();
        if !summary.is_empty() {
            summary.push_str(": ");
        }
        summary.push_str(&change.summary());
        for (gvk, error) in &change.unsynced {
            let _ = write!(
                summary,
                "; {}.{} not synced: {error}",
                gvk.kind,
                gvk.api_version()
            );
        }
        self.metrics.informers_started(change.started.len() as u64);
        tracing::info!(summary = %summary, took_ms = change.took.as_millis(), "cache scope changed");
        let config = Arc::clone(&self.state.snapshot().config);
        if *self.is_leader.borrow() {
            self.recorder.record(
                &self.config_ref(&config),
                EventType::Normal,
                "ScopeChanged",
                &summary,
            );
        }
        if let Some(plan) = self.reloader.plan().cloned() {
            self.state.rescoped(plan, change.unsynced.clone());
        }
        let _ = self.reloads.send(Reload::Rescoped {
            cache: change,
            summary,
        });
    }

    /// Stops the informers that reads in flight on an older tree held past that reload's own
    /// sweep (its summary said "N more once the reads in flight on the old tree end"), and
    /// says which.
    fn sweep(&self) {
        let stopped = self.reloader.sweep();
        if !stopped.is_empty() {
            let informers: Vec<String> = stopped
                .iter()
                .map(|key| match &key.namespace {
                    Some(ns) => format!("{} {} in {ns}", key.gvk.api_version(), key.gvk.kind),
                    None => format!("{} {}", key.gvk.api_version(), key.gvk.kind),
                })
                .collect();
            tracing::info!(
                stopped = stopped.len(),
                informers = %informers.join("; "),
                "informers held by reads in flight on an older cache tree stopped"
            );
        }
    }

    /// A valid config equal to the running one: counted and announced, nothing else.
    fn unchanged(&self) {
        tracing::Span::current().record("reload.result", "unchanged");
        self.valid_again();
        self.metrics.reload(ReloadResult::Unchanged);
        self.metrics.last_reload(true, SystemTime::now());
        self.state.unchanged();
        let _ = self.reloads.send(Reload::Unchanged);
    }

    /// Says at info that a valid config follows an invalid one (the warning is over).
    fn valid_again(&self) {
        if self.state.is_invalid() {
            tracing::info!("cacheconfig valid again; the rejected edit is superseded");
        }
    }

    fn reject(&mut self, running: &Validated, errors: Vec<String>) {
        tracing::Span::current().record("reload.result", "rejected");
        self.metrics.reload(ReloadResult::Rejected);
        self.metrics.last_reload(false, SystemTime::now());
        let message = format!(
            "invalid cacheconfig, keeping the last good one ({} error{}): {}",
            errors.len(),
            if errors.len() == 1 { "" } else { "s" },
            errors.join("; ")
        );
        tracing::warn!("{message}");
        if *self.is_leader.borrow() {
            self.recorder.record(
                &self.config_ref(running),
                EventType::Warning,
                "InvalidConfig",
                &message,
            );
        }
        self.state.rejected(errors.clone());
        let _ = self.reloads.send(Reload::Rejected { errors });
    }

    /// Applies every outcome until `shutdown`.
    pub(super) async fn run(
        mut self,
        mut configs: watch::Receiver<Arc<Validated>>,
        mut outcomes: broadcast::Receiver<ReloadOutcome>,
        shutdown: CancellationToken,
    ) {
        // While a permission is missing, the check runs again now and then: a grant clears
        // the condition without a reload.
        let recheck = tokio::time::sleep(self.access.recheck);
        let mut recheck = std::pin::pin!(recheck);
        // While reads in flight on an older tree hold informers only it used, the sweep runs
        // again now and then, so they stop soon after those reads end, not at the next reload.
        let sweep_again = tokio::time::sleep(SWEEP_AGAIN);
        let mut sweep_again = std::pin::pin!(sweep_again);
        loop {
            let missing = !self.state.snapshot().missing_permissions.is_empty();
            let left_over = !self.reloader.left_over().is_empty();
            let outcome = tokio::select! {
                () = shutdown.cancelled() => return,
                () = &mut sweep_again, if left_over => {
                    self.sweep();
                    sweep_again.as_mut().reset(tokio::time::Instant::now() + SWEEP_AGAIN);
                    continue;
                }
                () = &mut recheck, if missing => {
                    let running = Arc::clone(&configs.borrow());
                    self.check_permissions(&running).await;
                    recheck
                        .as_mut()
                        .reset(tokio::time::Instant::now() + self.access.recheck);
                    continue;
                }
                outcome = outcomes.recv() => outcome,
                () = self.reloader.scope_changed() => {
                    // A new scope waits for its informers to sync: not past shutdown.
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = self.rescope() => {}
                    }
                    self.sweep();
                    continue;
                }
            };
            match outcome {
                Ok(ReloadOutcome::Applied(config)) => {
                    configs.mark_unchanged();
                    self.apply(config).instrument(reload_span()).await;
                }
                Ok(ReloadOutcome::Unchanged) => {
                    let _span = reload_span().entered();
                    self.unchanged();
                }
                Ok(ReloadOutcome::Rejected { error }) => {
                    let _span = reload_span().entered();
                    let running = Arc::clone(&configs.borrow());
                    let errors = match Validity::from_error(&error) {
                        Validity::Invalid { errors } => errors,
                        Validity::Valid => vec![error.to_string()],
                    };
                    self.reject(&running, errors);
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // Outcomes were lost: the latest valid config is what counts.
                    let latest = Arc::clone(&configs.borrow_and_update());
                    self.apply(latest).instrument(reload_span()).await;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
            self.sweep();
        }
    }
}

/// How often the manager sweeps again while reads in flight on an older cache tree hold
/// informers only that tree used (a read finishes in microseconds; a second is plenty).
const SWEEP_AGAIN: Duration = Duration::from_secs(1);

/// The span of one reload: its `reload.result` (`applied`, `unchanged`, `rejected`) is
/// recorded once, by whatever decides it.
fn reload_span() -> tracing::Span {
    tracing::info_span!("config_reload", reload.result = tracing::field::Empty)
}
