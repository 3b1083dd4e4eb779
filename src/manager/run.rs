//! [`Manager`]: the process `informant run` is. It starts its parts in controller-runtime's
//! order (`pkg/manager/internal.go`): HTTP probes, caches (until the eager informers synced),
//! the config reload loop, then the leader-elected runnables (controllers, the status writer);
//! it stops them in reverse, the recorder flushed after everything that records and the probes
//! last, all within the shutdown grace period.

use std::fmt::Write as _;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use kube::Client;
use prometheus_client::registry::Registry;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::controller;
use super::http::{self, Check, Probes};
use super::leader::{self, LeaderElector};
use super::metrics::{self, ControllerMetrics, ManagerMetrics, ReloadResult};
use super::reload::{CacheChange, CacheReloader, DEFAULT_CACHE_SYNC_TIMEOUT};
use super::source::{self, ResourceWatcher};
use super::state::{Snapshot, State};
use super::status::{self, Readiness, StatusInput, StatusWriter, Validity};
use crate::cache::{Cache, Context, Discovery, InformerPool, SharedCache};
use crate::config::{self, Validated, watch::ReloadOutcome};
use crate::recorder::{self, EventType, KubeSink, ObjectRef, Pipeline, Recorder, SystemClock};

/// How long stopping may take before the manager gives up waiting.
///
/// controller-runtime's `defaultGracefulShutdownPeriod` (pkg/manager/manager.go).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// The field manager of the status the manager applies, and the component of its Events.
pub const FIELD_MANAGER: &str = "informant";

/// How often the status is recomputed even when nothing was reloaded (object counts and sync
/// state change between reloads); a status equal to the last written one makes no request.
const STATUS_INTERVAL: Duration = Duration::from_secs(10);

/// An error a runnable ends with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Where the manager's `CacheConfig` comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// A YAML file, watched for changes (atomic renames and `ConfigMap` symlink swaps too).
    File(PathBuf),
    /// A `CacheConfig` resource in the cluster, watched; absent means controller-runtime's
    /// defaults.
    Resource {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// How the manager runs: where its config comes from, where it serves, how it elects a leader
/// and how long it may take to stop.
#[derive(Clone, Debug)]
pub struct Options {
    /// Where the config comes from.
    pub source: ConfigSource,
    /// Where `/metrics` and `/debug/*` are served; `None` disables them.
    pub metrics_addr: Option<SocketAddr>,
    /// Where `/healthz` and `/readyz` are served; `None` disables them.
    pub health_addr: Option<SocketAddr>,
    /// Campaign for a Lease before running leader-elected runnables; `None` runs them at once.
    pub leader_election: Option<leader::Options>,
    /// How long stopping may take.
    pub shutdown_grace: Duration,
    /// How long a reload waits for new eager informers to sync before publishing anyway.
    pub cache_sync_timeout: Duration,
    /// How long a burst of file changes is folded into one reload (file source only).
    pub debounce: Duration,
}

impl Options {
    /// controller-runtime's defaults for a manager reading its config from `source`: no
    /// listener (the CLI sets kubebuilder's `:8080`/`:8081`), no leader election, 30 s grace.
    #[must_use]
    pub fn new(source: ConfigSource) -> Self {
        Self {
            source,
            metrics_addr: None,
            health_addr: None,
            leader_election: None,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            cache_sync_timeout: DEFAULT_CACHE_SYNC_TIMEOUT,
            debounce: config::watch::DEFAULT_DEBOUNCE,
        }
    }
}

/// Why the manager could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The config file could not be loaded or watched.
    #[error(transparent)]
    ConfigFile(#[from] config::watch::Error),
    /// The `CacheConfig` resource could not be read or watched.
    #[error(transparent)]
    ConfigResource(#[from] source::Error),
    /// The first config could not be planned.
    #[error("cannot plan the cache tree of the config")]
    Plan(#[from] crate::cache::OptionsError),
    /// A listener could not be bound or failed.
    #[error(transparent)]
    Http(#[from] std::io::Error),
    /// Leader election could not start, or this leader lost its Lease.
    #[error(transparent)]
    LeaderElection(#[from] leader::Error),
    /// A runnable ended with an error.
    #[error("runnable {name} failed")]
    Runnable {
        /// The runnable.
        name: String,
        /// Its error.
        #[source]
        source: BoxError,
    },
    /// Stopping took longer than the grace period; some tasks were abandoned.
    #[error("stopping took longer than the shutdown grace period of {}s", .0.as_secs_f64())]
    GracePeriodExceeded(Duration),
}

/// What one config change did, sent to every [`Manager::reloads`] receiver.
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
    /// An invalid config; the last good one keeps running.
    Rejected {
        /// Every error, with its field path.
        errors: Vec<String>,
    },
}

type LeaderRunnable =
    Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> + Send>;

enum Source {
    File(Box<config::watch::Watcher>),
    Resource(Box<ResourceWatcher>),
}

/// The manager: caches, recorder, reload, status, probes, leader election and controllers.
///
/// ```no_run
/// use informant::manager::{ConfigSource, Manager, Options};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kube::Client::try_default().await?;
/// let options = Options::new(ConfigSource::File("config/samples/minimal.yaml".into()));
/// let manager = Manager::new(client, options).await?;
/// let cache = manager.cache(); // reads through the live cache tree
/// manager.run(CancellationToken::new()).await?;
/// # let _ = cache;
/// # Ok(())
/// # }
/// ```
#[doc(alias = "runnable")]
pub struct Manager {
    client: Client,
    options: Options,
    source: Source,
    configs: watch::Receiver<Arc<Validated>>,
    outcomes: broadcast::Receiver<ReloadOutcome>,
    observed: Option<watch::Receiver<Option<source::Observed>>>,
    reloader: CacheReloader,
    pipeline: Pipeline<KubeSink>,
    recorder_reloader: recorder::Reloader,
    state: Arc<State>,
    metrics: ManagerMetrics,
    controller_metrics: ControllerMetrics,
    hook_metrics: super::hooks::HookMetrics,
    server: http::Server,
    reloads: broadcast::Sender<Reload>,
    runnables: Vec<(String, LeaderRunnable)>,
    elector: Option<LeaderElector>,
    caches: (TaskTracker, CancellationToken),
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// Loads the first config (a file is read and validated; a resource is read once, absent
    /// meaning defaults) and prepares every part. Nothing runs until [`Manager::run`].
    ///
    /// # Errors
    /// [`Error::ConfigFile`] when the file is missing, unreadable or invalid;
    /// [`Error::ConfigResource`] when the resource cannot be read; [`Error::LeaderElection`]
    /// for invalid leader election options; [`Error::Http`] when a listener cannot be bound
    /// (the listeners are bound here, so a taken address fails before anything runs).
    pub async fn new(client: Client, options: Options) -> Result<Self, Error> {
        let (source, configs, outcomes, observed) = match &options.source {
            ConfigSource::File(path) => {
                let watch_options = config::watch::Options::default().debounce(options.debounce);
                let (watcher, configs) = config::watch::Watcher::new(path, watch_options)?;
                let outcomes = watcher.subscribe();
                (Source::File(Box::new(watcher)), configs, outcomes, None)
            }
            ConfigSource::Resource { namespace, name } => {
                let (watcher, configs) =
                    ResourceWatcher::new(client.clone(), namespace, name).await?;
                let outcomes = watcher.subscribe();
                let observed = watcher.observed();
                (
                    Source::Resource(Box::new(watcher)),
                    configs,
                    outcomes,
                    Some(observed),
                )
            }
        };
        let first = Arc::clone(&configs.borrow());
        let context = Context::new(client.clone(), Arc::new(Discovery::new(client.clone())));
        let caches = (TaskTracker::new(), CancellationToken::new());
        let reloader = CacheReloader::new(context, caches.0.clone(), caches.1.clone())
            .with_sync_timeout(options.cache_sync_timeout);
        let pipeline = Pipeline::new(
            &first.recorder,
            KubeSink::new(client.clone()),
            Arc::new(SystemClock),
        )
        .with_shutdown_grace(options.shutdown_grace);
        let recorder_reloader = pipeline.reloader();
        let state = Arc::new(State::new(first, reloader.cache()));
        let metrics = ManagerMetrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let live = reloader.cache();
        metrics::register_informers(&mut registry, Arc::new(move || live.informers()));
        pipeline.register(&mut registry);
        let controller_metrics = ControllerMetrics::new();
        controller_metrics.register(&mut registry);
        let hook_metrics = super::hooks::HookMetrics::new();
        hook_metrics.register(&mut registry);
        let elector = match &options.leader_election {
            Some(lease) => {
                lease.validate()?;
                let elector = LeaderElector::new(client.clone(), lease.clone());
                elector.register(&mut registry);
                Some(elector)
            }
            None => None,
        };
        let probes: Arc<dyn Probes> = Arc::new(ManagerProbes {
            state: Arc::clone(&state),
            cache: reloader.cache(),
            pool: Arc::clone(reloader.pool()),
            observed: observed.clone(),
        });
        let server = http::Server::bind(
            options.metrics_addr,
            options.health_addr,
            Arc::new(registry),
            probes,
        )
        .await?;
        let (reloads, _) = broadcast::channel(64);
        Ok(Self {
            client,
            options,
            source,
            configs,
            outcomes,
            observed,
            reloader,
            pipeline,
            recorder_reloader,
            state,
            metrics,
            controller_metrics,
            hook_metrics,
            server,
            reloads,
            runnables: Vec::new(),
            elector,
            caches,
        })
    }

    /// Where the config comes from (the hook controllers read their `Controller`s from the
    /// same file, or from the same namespace).
    #[must_use]
    pub fn config_source(&self) -> &ConfigSource {
        &self.options.source
    }

    /// The live cache tree: every read goes to the tree current when it starts.
    #[must_use]
    pub fn cache(&self) -> Arc<SharedCache> {
        self.reloader.cache()
    }

    /// A recorder whose events go through the manager's pipeline (client-go's correlator,
    /// the config's options, every fate counted).
    #[must_use]
    pub fn recorder(&self) -> Recorder {
        self.pipeline.recorder()
    }

    /// The client the manager lists, watches and writes with.
    #[must_use]
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The manager's state: running config, validity, informers.
    #[must_use]
    pub fn state(&self) -> Arc<State> {
        Arc::clone(&self.state)
    }

    /// A receiver of what every config change did from now on.
    #[must_use]
    pub fn reloads(&self) -> broadcast::Receiver<Reload> {
        self.reloads.subscribe()
    }

    /// The informer pool every tree of this manager shares.
    #[must_use]
    pub fn pool(&self) -> Arc<InformerPool> {
        Arc::clone(self.reloader.pool())
    }

    /// The metrics controllers record into (controller-runtime's names, served on
    /// `/metrics`).
    #[must_use]
    pub fn controller_metrics(&self) -> &ControllerMetrics {
        &self.controller_metrics
    }

    /// The hook controllers' own series (`informant_hook_calls_total`, served on
    /// `/metrics`).
    #[must_use]
    pub fn hook_metrics(&self) -> &super::hooks::HookMetrics {
        &self.hook_metrics
    }

    /// Where `/metrics` and `/debug/*` are served (the bound address, with its port).
    #[must_use]
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.server.metrics_addr()
    }

    /// Where `/healthz` and `/readyz` are served.
    #[must_use]
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.server.health_addr()
    }

    /// Whether this replica leads: always true without leader election.
    #[must_use]
    pub fn is_leader(&self) -> watch::Receiver<bool> {
        match &self.elector {
            Some(elector) => elector.is_leader(),
            None => watch::channel(true).1,
        }
    }

    /// Adds a runnable that runs only on the leader (a controller): started once this replica
    /// leads and the caches synced, stopped first.
    pub fn add_leader_runnable<F, Fut>(&mut self, name: &str, run: F)
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.runnables.push((
            name.to_string(),
            Box::new(move |token| Box::pin(run(token))),
        ));
    }

    /// What a reconcile of a controller of this manager gets: reads through the manager's
    /// cache tree, follows its informer pool, writes with its client, records with its
    /// recorder.
    #[must_use]
    pub fn controller_context(&self) -> controller::Context {
        controller::Context::new(self.cache(), self.pool(), self.client(), self.recorder())
    }

    /// Adds a controller (controller-runtime's `ctrl.NewControllerManagedBy(mgr)...Complete`):
    /// it runs on the leader once the caches synced, reconciles with `reconcile` through
    /// [`Manager::controller_context`], retries failures as `error_policy` says
    /// ([`controller::default_error_policy`] is controller-runtime's backoff), and is counted
    /// in [`Manager::controller_metrics`] under its name.
    ///
    /// ```no_run
    /// # async fn demo(mut manager: informant::manager::Manager) -> Result<(), informant::manager::Error> {
    /// use std::sync::Arc;
    /// use informant::manager::controller::{Action, Context, Controller, default_error_policy};
    /// use k8s_openapi::api::batch::v1::{CronJob, Job};
    ///
    /// async fn reconcile(cronjob: Arc<CronJob>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
    ///     Ok(Action::await_change())
    /// }
    ///
    /// manager.add_controller(
    ///     Controller::<CronJob>::new("cronjob").owns::<Job>(),
    ///     reconcile,
    ///     default_error_policy,
    /// );
    /// manager.run(tokio_util::sync::CancellationToken::new()).await
    /// # }
    /// ```
    pub fn add_controller<K, R, Fut, E, P>(
        &mut self,
        controller: controller::Controller<K>,
        reconcile: R,
        error_policy: P,
    ) -> &mut Self
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
        R: Fn(Arc<K>, Arc<controller::Context>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<controller::Action, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
        P: Fn(Arc<K>, &E, Arc<controller::Context>) -> controller::Action + Send + Sync + 'static,
    {
        let ctx = self.controller_context();
        let controller = controller.metrics(&self.controller_metrics);
        let name = controller.name().to_owned();
        self.add_leader_runnable(&name, move |shutdown| async move {
            controller
                .run(ctx, reconcile, error_policy, shutdown)
                .await
                .map_err(Into::into)
        });
        self
    }

    /// Applies the first config, then runs until `shutdown` is cancelled
    /// or a part fails (leader election lost, a watcher ended), and stops every part in
    /// reverse order within the grace period.
    ///
    /// # Errors
    /// The first failure: [`Error::Http`] if a listener fails, [`Error::LeaderElection`] when this leader lost its Lease, [`Error::Runnable`],
    /// [`Error::GracePeriodExceeded`] if stopping took too long.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Error> {
        let Self {
            client,
            options,
            source,
            configs,
            outcomes,
            observed,
            mut reloader,
            pipeline,
            recorder_reloader,
            state,
            metrics,
            controller_metrics: _,
            hook_metrics: _,
            server,
            reloads,
            runnables,
            elector,
            caches,
        } = self;
        let root = CancellationToken::new();
        let (failures, mut failed) = mpsc::unbounded_channel::<Error>();
        let stage = || (TaskTracker::new(), root.child_token());
        let probes_stage = stage();
        let recorder_stage = stage();
        let reload_stage = stage();
        let leader_stage = stage();

        // 1. Probes.
        let probes_token = probes_stage.1.clone();
        spawn(&probes_stage, "http", &failures, async move {
            server.run(probes_token).await.map_err(Error::Http)
        });
        let recorder = pipeline.recorder();
        let fates = pipeline.fates();
        let recorder_token = recorder_stage.1.clone();
        recorder_stage
            .0
            .spawn(async move { pipeline.run(recorder_token).await });

        // 2. Caches, until the eager informers synced.
        let first = Arc::clone(&configs.borrow());
        let mut reload = ReloadLoop {
            reloader: &mut reloader,
            recorder_reloader,
            recorder: recorder.clone(),
            state: Arc::clone(&state),
            metrics: metrics.clone(),
            reloads: reloads.clone(),
            observed: observed.clone(),
            is_leader: elector
                .as_ref()
                .map_or_else(|| watch::channel(true).1, LeaderElector::is_leader),
        };
        reload.first(&first).await?;

        // 3. Config reload.
        spawn_source(&reload_stage, &failures, source);
        let reload_token = reload_stage.1.clone();
        let reload_done = reload.run(configs, outcomes, reload_token);

        // 4. Leader election and leader-elected runnables.
        start_leader_elected(
            &leader_stage,
            &failures,
            elector,
            LeaderWork {
                is_leader: watch::channel(true).1,
                runnables,
                writer: status_writer(&options.source, &client),
                state: Arc::clone(&state),
                observed,
            },
        );

        // Run until asked to stop or a part fails.
        let mut reload_done = std::pin::pin!(reload_done);
        let failure = tokio::select! {
            () = shutdown.cancelled() => None,
            failure = failed.recv() => failure,
            () = &mut reload_done => None,
        };
        if let Some(error) = &failure {
            tracing::error!(error = %crate::telemetry::error_chain(error), "stopping the manager");
        } else {
            tracing::info!("stopping the manager");
        }

        // Stop in reverse: leader-elected runnables, reload, caches, recorder, probes.
        let deadline = tokio::time::Instant::now() + options.shutdown_grace;
        let mut late = false;
        leader_stage.1.cancel();
        late |= !wait(&leader_stage.0, deadline).await;
        reload_stage.1.cancel();
        late |= tokio::time::timeout_at(deadline, &mut reload_done)
            .await
            .is_err();
        drop(recorder);
        late |= !stop_in_order(
            &[&reload_stage, &caches, &recorder_stage, &probes_stage],
            deadline,
        )
        .await;
        root.cancel();
        log_fates(&fates);
        match failure {
            Some(error) => Err(error),
            None if late => Err(Error::GracePeriodExceeded(options.shutdown_grace)),
            None => Ok(()),
        }
    }
}

/// The last line of a run: where every recorded event ended.
fn log_fates(fates: &recorder::FateCounter) {
    tracing::info!(
        events = fates.total(),
        created = fates.get(recorder::Fate::Created),
        patched = fates.get(recorder::Fate::Patched),
        dropped_shutdown = fates.get(recorder::Fate::DroppedShutdown),
        "manager stopped"
    );
}

/// The status writer of a resource source; a file has no status to write.
fn status_writer(source: &ConfigSource, client: &Client) -> Option<StatusWriter> {
    match source {
        ConfigSource::Resource { namespace, name } => Some(StatusWriter::new(
            client.clone(),
            namespace,
            name,
            FIELD_MANAGER,
        )),
        ConfigSource::File(_) => None,
    }
}

/// Runs the config source's watcher on the reload stage.
fn spawn_source(
    stage: &(TaskTracker, CancellationToken),
    failures: &mpsc::UnboundedSender<Error>,
    source: Source,
) {
    let token = stage.1.clone();
    match source {
        Source::File(watcher) => spawn(stage, "config-file", failures, async move {
            watcher.run(token).await.map_err(Error::from)
        }),
        Source::Resource(watcher) => spawn(stage, "config-resource", failures, async move {
            watcher.run(token).await.map_err(Error::from)
        }),
    }
}

/// Starts leader election (when configured) and the task that runs `work` once leading.
fn start_leader_elected(
    stage: &(TaskTracker, CancellationToken),
    failures: &mpsc::UnboundedSender<Error>,
    elector: Option<LeaderElector>,
    mut work: LeaderWork,
) {
    if let Some(elector) = elector {
        work.is_leader = elector.is_leader();
        let token = stage.1.clone();
        spawn(stage, "leader-election", failures, async move {
            elector.run(token).await.map_err(Error::from)
        });
    }
    let (tracker, token, failures) = (stage.0.clone(), stage.1.clone(), failures.clone());
    stage
        .0
        .spawn(async move { work.run(&tracker, &failures, token).await });
}

/// Cancels each stage and waits for its tasks, in order, until `deadline`; false if some did
/// not end in time.
async fn stop_in_order(
    stages: &[&(TaskTracker, CancellationToken)],
    deadline: tokio::time::Instant,
) -> bool {
    let mut in_time = true;
    for (tracker, token) in stages {
        token.cancel();
        in_time &= wait(tracker, deadline).await;
    }
    in_time
}

/// Closes `tracker` and waits for its tasks until `deadline`; false if they did not end.
async fn wait(tracker: &TaskTracker, deadline: tokio::time::Instant) -> bool {
    tracker.close();
    tokio::time::timeout_at(deadline, tracker.wait())
        .await
        .is_ok()
}

/// Runs `task` on the stage's tracker; its error is reported as the manager's failure.
fn spawn<F>(
    stage: &(TaskTracker, CancellationToken),
    name: &'static str,
    failures: &mpsc::UnboundedSender<Error>,
    task: F,
) where
    F: Future<Output = Result<(), Error>> + Send + 'static,
{
    let failures = failures.clone();
    stage.0.spawn(async move {
        if let Err(error) = task.await {
            tracing::error!(runnable = name, error = %crate::telemetry::error_chain(&error), "runnable failed");
            let _ = failures.send(error);
        }
    });
}

/// Applies configs as they come, and says what each did.
struct ReloadLoop<'a> {
    reloader: &'a mut CacheReloader,
    recorder_reloader: recorder::Reloader,
    recorder: Recorder,
    state: Arc<State>,
    metrics: ManagerMetrics,
    reloads: broadcast::Sender<Reload>,
    observed: Option<watch::Receiver<Option<source::Observed>>>,
    /// Whether this replica leads: only the leader records the reload's Events (every
    /// replica reloads its caches; N replicas recording would write N copies).
    is_leader: watch::Receiver<bool>,
}

impl ReloadLoop<'_> {
    /// Applies the first config: the tree of its plan, its eager informers synced.
    async fn first(&mut self, config: &Arc<Validated>) -> Result<(), Error> {
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
            .applied(Arc::clone(config), plan.map(|plan| (plan, change.unsynced)));
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

    #[tracing::instrument(name = "config_reload", skip_all, fields(reload.result))]
    async fn apply(&mut self, config: Arc<Validated>) {
        let began = Instant::now();
        let change = match self.reloader.apply(&config.cache).await {
            Ok(change) => change,
            Err(error) => {
                self.reject(&config, vec![error.to_string()]);
                return;
            }
        };
        let recorder = self.recorder_reloader.reload(&config.recorder);
        if !change.changed && recorder.is_empty() {
            tracing::Span::current().record("reload.result", "unchanged");
            self.unchanged();
            return;
        }
        tracing::Span::current().record("reload.result", "applied");
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

    /// A valid config equal to the running one: counted and announced, nothing else.
    fn unchanged(&self) {
        self.metrics.reload(ReloadResult::Unchanged);
        self.state.unchanged();
        let _ = self.reloads.send(Reload::Unchanged);
    }

    fn reject(&mut self, running: &Validated, errors: Vec<String>) {
        tracing::Span::current().record("reload.result", "rejected");
        self.metrics.reload(ReloadResult::Rejected);
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
    async fn run(
        mut self,
        mut configs: watch::Receiver<Arc<Validated>>,
        mut outcomes: broadcast::Receiver<ReloadOutcome>,
        shutdown: CancellationToken,
    ) {
        loop {
            let outcome = tokio::select! {
                () = shutdown.cancelled() => return,
                outcome = outcomes.recv() => outcome,
            };
            match outcome {
                Ok(ReloadOutcome::Applied(config)) => {
                    configs.mark_unchanged();
                    self.apply(config).await;
                }
                Ok(ReloadOutcome::Unchanged) => {
                    let _span =
                        tracing::info_span!("config_reload", reload.result = "unchanged").entered();
                    self.unchanged();
                }
                Ok(ReloadOutcome::Rejected { error }) => {
                    let _span =
                        tracing::info_span!("config_reload", reload.result = "rejected").entered();
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
                    self.apply(latest).await;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
            // Informers a read in flight held past the reload's sweep stop now.
            let _ = self.reloader.sweep();
        }
    }
}

/// The leader-elected part: waits to lead, then runs the status writer and the runnables.
struct LeaderWork {
    is_leader: watch::Receiver<bool>,
    runnables: Vec<(String, LeaderRunnable)>,
    writer: Option<StatusWriter>,
    state: Arc<State>,
    observed: Option<watch::Receiver<Option<source::Observed>>>,
}

impl LeaderWork {
    async fn run(
        mut self,
        tracker: &TaskTracker,
        failures: &mpsc::UnboundedSender<Error>,
        shutdown: CancellationToken,
    ) {
        tokio::select! {
            () = shutdown.cancelled() => return,
            led = self.is_leader.wait_for(|leader| *leader) => if led.is_err() { return },
        }
        tracing::info!("leading: starting leader-elected runnables");
        for (name, run) in self.runnables {
            let token = shutdown.child_token();
            let failures = failures.clone();
            tracker.spawn(async move {
                if let Err(source) = run(token).await {
                    let _ = failures.send(Error::Runnable { name, source });
                }
            });
        }
        if let Some(writer) = self.writer {
            write_status(writer, &self.state, self.observed, shutdown).await;
        }
    }
}

/// Writes the status whenever the state changes, and every [`STATUS_INTERVAL`].
async fn write_status(
    mut writer: StatusWriter,
    state: &State,
    observed: Option<watch::Receiver<Option<source::Observed>>>,
    shutdown: CancellationToken,
) {
    let mut changes = state.subscribe();
    let mut observed = observed;
    let mut tick = tokio::time::interval(STATUS_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut uid = None;
    loop {
        let seen = observed.as_ref().and_then(|o| o.borrow().clone());
        let generation = seen.as_ref().and_then(|o| o.generation);
        let seen_uid = seen.map(|o| o.uid);
        if seen_uid != uid {
            // A recreated object has no status: write it even if equal to the last one.
            writer.forget();
            uid = seen_uid;
        }
        let snapshot = state.snapshot();
        let previous = writer
            .last_written()
            .cloned()
            .or_else(|| snapshot.config.resource.status.clone());
        let desired = status::desired(previous.as_ref(), &status_input(&snapshot, generation));
        if let Err(error) = writer.write(&desired).await {
            tracing::warn!(error = %crate::telemetry::error_chain(&error), "cannot write the cacheconfig status");
        }
        let observed_changed = async {
            match observed.as_mut() {
                Some(o) => o.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = changes.changed() => {}
            _ = observed_changed => {}
            _ = tick.tick() => {}
        }
    }
}

/// What the status says about `snapshot`.
fn status_input(snapshot: &Snapshot, generation: Option<i64>) -> StatusInput {
    let validity = if snapshot.invalid.is_empty() {
        Validity::Valid
    } else {
        Validity::Invalid {
            errors: snapshot.invalid.clone(),
        }
    };
    let readiness = snapshot.readiness();
    StatusInput {
        generation,
        validity,
        readiness,
        informers: snapshot.informers.clone(),
        last_reload_time: snapshot
            .last_reload
            .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time),
        now: jiff::Timestamp::now(),
    }
}

/// `/healthz`, `/readyz`, `/debug/cache` and `/debug/status` from the manager's state.
struct ManagerProbes {
    state: Arc<State>,
    cache: Arc<SharedCache>,
    pool: Arc<crate::cache::InformerPool>,
    observed: Option<watch::Receiver<Option<source::Observed>>>,
}

impl Probes for ManagerProbes {
    fn health_checks(&self) -> Vec<Check> {
        vec![Check::ok("ping")]
    }

    fn ready_checks(&self) -> Vec<Check> {
        let snapshot = self.state.snapshot();
        let config = if snapshot.invalid.is_empty() {
            Check::ok("config")
        } else {
            Check::failed(
                "config",
                format!(
                    "the latest cacheconfig is invalid (the last good one runs): {}",
                    snapshot.invalid.join("; ")
                ),
            )
        };
        let informers = match snapshot.readiness() {
            Readiness::Synced => Check::ok("informers"),
            Readiness::Syncing { pending } => {
                Check::failed("informers", format!("syncing: {}", pending.join("; ")))
            }
            Readiness::Failed { failed } => {
                Check::failed("informers", format!("failed: {}", failed.join("; ")))
            }
        };
        vec![Check::ok("ping"), config, informers]
    }

    fn debug_cache(&self) -> serde_json::Value {
        let snapshot = self.state.snapshot();
        let tree = snapshot.plan.as_ref().map(crate::cache::Plan::describe);
        let stats = self.pool.stats();
        serde_json::json!({
            "tree": tree,
            "readerFailOnMissingInformer": snapshot.config.cache.reader_fail_on_missing_informer,
            "informers": self.cache.informers(),
            "pool": {
                "running": stats.running,
                "startedTotal": stats.started_total,
                "stoppedTotal": stats.stopped_total,
            },
        })
    }

    fn debug_status(&self) -> Option<serde_json::Value> {
        let snapshot = self.state.snapshot();
        let generation = self
            .observed
            .as_ref()
            .and_then(|o| o.borrow().as_ref().and_then(|o| o.generation));
        let status = status::desired(
            snapshot.config.resource.status.as_ref(),
            &status_input(&snapshot, generation),
        );
        serde_json::to_value(status).ok()
    }
}
