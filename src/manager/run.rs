//! [`Manager`]: the process `informant run` is. It starts its runnable groups in
//! controller-runtime's order (`pkg/manager/internal.go`, `pkg/manager/runnable_group.go`):
//! HTTP probes, the shard ring's member (with `spec.sharding`, until it knows its share),
//! caches (until the eager informers synced), the config reload loop, then the controllers
//! (on every member when sharded) and the leader-elected runnables (controllers, the status
//! writer); it stops the groups in reverse (a member's Lease deleted once its controllers
//! stopped),
//! the recorder flushed after everything that records and the probes last, all within the
//! shutdown grace period.
//!
//! The manager knows nothing of controllers: a Rust controller adds itself with
//! `Controller::add_to(&mut manager, ...)` (controller-runtime's builder) and hook controllers
//! with `hooks::add_to_manager`; each registers its own series on
//! [`Manager::metrics_registry`] and keeps what its kind shares per manager in
//! [`Manager::shared`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use kube::Client;
use prometheus_client::registry::Registry;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::access::AccessCheck;
use super::elected::{LeaderRunnable, LeaderWork};
use super::group::{RunnableGroup, stop_in_order};
use super::http::{BindError, HttpServer, Probes, SecureMetrics, start_webhooks};
use super::leader::LeaderElector;
use super::metrics::{self, ManagerMetrics, MetricsRegistry};
use super::options::{BoxError, ConfigSource, Error, Options};
use super::probes::ManagerProbes;
use super::reload::{Reload, ReloadLoop};
use super::shard::{ShardGate, ShardRuntime};
use super::state::State;
use crate::cache::{Cache as _, CacheReloader, Context, Discovery, InformerPool, SharedCache};
use crate::config::{self, Validated, source, watch::ReloadOutcome};
use crate::recorder::{self, KubeSink, Pipeline, Recorder, SystemClock};

mod parts;

use super::http::ServingRunnable;
use super::webhook::WebhookOptions;
use crate::serving::WebhookRoutes;
use parts::{
    add_leader_elected, add_member_runnables, add_source, bind_webhook, join_ring, log_fates,
    open_source, scope_source, start_probes, status_writer,
};

/// Where the configs come from, running.
enum Source {
    File(Box<config::watch::Watcher>),
    Resource(Box<source::ResourceWatcher>),
}

/// The manager: caches, recorder, reload, status, probes, leader election, and the
/// leader-elected runnables added to it.
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
/// let shutdown = CancellationToken::new();
/// let run = tokio::spawn(manager.run(shutdown.clone()));
/// cache.wait_for_cache_sync(&shutdown).await?; // the first config's tree serves
/// # shutdown.cancel();
/// run.await??;
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
    registry: MetricsRegistry,
    shared: http::Extensions,
    server: HttpServer,
    reloads: broadcast::Sender<Reload>,
    runnables: Vec<(String, LeaderRunnable)>,
    /// Controllers of a sharded manager: they run on every member, each for its share.
    member_runnables: Vec<(String, LeaderRunnable)>,
    elector: Option<LeaderElector>,
    /// Webhook endpoints, served on every replica from the start.
    webhooks: Vec<crate::serving::WebhookEndpoint>,
    /// The paths of the endpoint of [`Options::webhook`], which hooks add and remove, and
    /// the address it bound.
    webhook_routes: Option<(WebhookRoutes, SocketAddr)>,
    /// Runnables of every replica, started with the webhook endpoints.
    serving: Vec<(String, ServingRunnable)>,
    /// The membership of the ring the first config names (`spec.sharding`).
    shard: Option<ShardRuntime>,
    gate: ShardGate,
    root: CancellationToken,
    caches: RunnableGroup,
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
        say_logs_are_off();
        let watcher = match &options.source {
            ConfigSource::File(path) => Some(file_watcher(path, &options)?),
            ConfigSource::Resource { .. } => None,
        };
        Self::with_file_watcher(client, options, watcher).await
    }

    /// As [`Manager::new`], with the file source's watcher already made by
    /// [`file_watcher`] (the CLI makes it before it connects, so a bad file is the first
    /// error a user hears of, and the file is read once).
    ///
    /// # Errors
    /// As [`Manager::new`].
    pub async fn with_file_watcher(
        client: Client,
        options: Options,
        watcher: Option<config::watch::Watcher>,
    ) -> Result<Self, Error> {
        let (source, configs, outcomes, observed) = open_source(&client, &options, watcher).await?;
        let first = Arc::clone(&configs.borrow());
        let context = Context::new(client.clone(), Arc::new(Discovery::new(client.clone())));
        let root = CancellationToken::new();
        let caches = RunnableGroup::new(&root);
        let (shard, gate) =
            ShardRuntime::for_config(&client, first.cache.sharding.as_ref(), &options.shard)?;
        let mut reloader =
            CacheReloader::new(context, caches.tracker().clone(), caches.token().clone())
                .with_sync_timeout(options.cache_sync_timeout);
        if let Some(shard) = &shard {
            reloader = reloader.with_shard(shard.share());
        }
        let pipeline = Pipeline::new(
            &first.recorder,
            KubeSink::new(client.clone()),
            Arc::new(SystemClock),
        )
        .with_shutdown_grace(options.shutdown_grace);
        let recorder_reloader = pipeline.reloader();
        let state = Arc::new(State::new(first, reloader.cache()));
        if let Source::Resource(watcher) = &source
            && watcher.rejected_at_start()
        {
            state.invalid_at_start();
        }
        let metrics = ManagerMetrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let live = reloader.cache();
        metrics::register_informers(&mut registry, Arc::new(move || live.informers()));
        metrics::register_scope(&mut registry, scope_source(Arc::clone(&state)));
        if let Some(shard) = &shard {
            let source = super::shard::status_source(shard, Arc::clone(reloader.pool()));
            metrics::register_shard(&mut registry, Arc::clone(&source));
            state.sharded(source);
        }
        pipeline.register(&mut registry);
        let elector = match &options.leader_election {
            Some(lease) => {
                lease.validate()?;
                let elector = LeaderElector::new(client.clone(), lease.clone());
                elector.register(&mut registry);
                Some(elector)
            }
            None => None,
        };
        let registry = MetricsRegistry::from(registry);
        let probes: Arc<dyn Probes> = Arc::new(ManagerProbes {
            state: Arc::clone(&state),
            cache: reloader.cache(),
            pool: Arc::clone(reloader.pool()),
            observed: observed.clone(),
        });
        let secure = options.secure_metrics.clone().map(|cert| SecureMetrics {
            cert,
            client: client.clone(),
        });
        let server = HttpServer::bind_secure(
            options.metrics_addr,
            options.health_addr,
            registry.clone(),
            probes,
            secure,
        )
        .await
        .map_err(|e| match e {
            BindError::Io(e) => Error::Http(e),
            BindError::Certificate(e) => Error::MetricsCertificate(e),
        })?;
        let (webhooks, webhook_routes) = bind_webhook(&client, options.webhook.as_ref()).await?;
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
            registry,
            shared: http::Extensions::new(),
            server,
            reloads: broadcast::channel(64).0,
            runnables: Vec::new(),
            member_runnables: Vec::new(),
            elector,
            webhooks,
            webhook_routes,
            serving: Vec::new(),
            shard,
            gate,
            root,
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
    /// [`SharedCache::wait_for_cache_sync`] waits for the first config's tree to serve
    /// (controller-runtime's `WaitForCacheSync`).
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

    /// The value of type `T` shared by everything added to this manager, made by `init` the
    /// first time it is asked for: every Rust controller of a manager counts into the same
    /// controller-runtime series this way, registered once.
    pub fn shared<T, F>(&mut self, init: F) -> T
    where
        T: Clone + Send + Sync + 'static,
        F: FnOnce(&MetricsRegistry) -> T,
    {
        if let Some(value) = self.shared.get::<T>() {
            return value.clone();
        }
        let value = init(&self.registry);
        self.shared.insert(value.clone());
        value
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

    /// Whether this manager is a member of a shard ring (its first config has
    /// `spec.sharding`): its controllers then run on every member, each for its share.
    #[must_use]
    pub fn is_sharded(&self) -> bool {
        self.shard.is_some()
    }

    /// The gate every reconcile of this manager's controllers asks first: whether this member
    /// may act on the object now (always, unsharded), and the reconcile log.
    #[must_use]
    pub fn shard_gate(&self) -> ShardGate {
        self.gate.clone()
    }

    /// Adds a controller: a runnable that runs on the leader, or, with `spec.sharding`, on
    /// every member of the ring, each reconciling its share (what must stay single, status
    /// writes and `ConfigReloaded`, stays with the leader). Started once the caches synced,
    /// stopped first.
    pub fn add_controller<F, Fut>(&mut self, name: &str, run: F)
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        if self.shard.is_none() {
            self.add_leader_runnable(name, run);
            return;
        }
        self.member_runnables.push((
            name.to_string(),
            Box::new(move |token| Box::pin(run(token))),
        ));
    }

    /// Adds a webhook endpoint: served on every replica right after the probes (before the
    /// caches sync, as controller-runtime starts its webhook server) and stopped with them,
    /// last; with managed certificates its Secret is written and its bundle injected while
    /// this replica leads ([`Manager::is_leader`]). A listener failure stops the manager
    /// ([`Error::Http`]).
    pub fn add_webhook_endpoint(&mut self, endpoint: crate::serving::WebhookEndpoint) {
        self.webhooks.push(endpoint);
    }

    /// The paths of the manager's own webhook endpoint ([`Options::webhook`]), served on every
    /// replica: the hooks a reload declares are added to it and removed from it.
    #[must_use]
    pub fn webhook_routes(&self) -> Option<WebhookRoutes> {
        self.webhook_routes
            .as_ref()
            .map(|(routes, _)| routes.clone())
    }

    /// The address the webhook endpoint of [`Options::webhook`] bound (its port when it was
    /// given port 0).
    #[must_use]
    pub fn webhook_addr(&self) -> Option<SocketAddr> {
        self.webhook_routes.as_ref().map(|(_, addr)| *addr)
    }

    /// The manager's own webhook endpoint's options ([`Options::webhook`]).
    #[must_use]
    pub fn webhook_options(&self) -> Option<&WebhookOptions> {
        self.options.webhook.as_ref()
    }

    /// Adds a runnable that runs on every replica, leader or not, from the start (with the
    /// webhook endpoints: what they serve must be there before the caches sync), told whether
    /// this replica leads: what serves webhooks, and what the leader alone writes for them.
    pub fn add_serving<F, Fut>(&mut self, name: &str, run: F)
    where
        F: FnOnce(watch::Receiver<bool>, CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.serving.push((
            name.to_string(),
            Box::new(move |leads, token| Box::pin(run(leads, token))),
        ));
    }

    /// Adds a runnable that runs only on the leader: started once this replica leads and the
    /// caches synced, stopped first.
    pub(crate) fn add_leader_runnable<F, Fut>(&mut self, name: &str, run: F)
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.runnables.push((
            name.to_string(),
            Box::new(move |token| Box::pin(run(token))),
        ));
    }

    /// Applies the first config, then runs until `shutdown` is cancelled
    /// or a part fails (leader election lost, a watcher ended), and stops every part in
    /// reverse order within the grace period.
    ///
    /// # Errors
    /// The first failure: [`Error::Http`] if a listener fails, [`Error::LeaderElection`] when this leader lost its Lease, [`Error::Runnable`],
    /// [`Error::GracePeriodExceeded`] if stopping took too long.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Error> {
        // A running manager's state is some 16 KiB: on the heap, so the futures of callers
        // (`tokio::spawn`, `main`) stay small.
        Box::pin(self.run_parts(shutdown)).await
    }

    /// [`Manager::run`]'s work.
    async fn run_parts(self, shutdown: CancellationToken) -> Result<(), Error> {
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
            registry: _,
            shared: _,
            server,
            reloads,
            runnables,
            member_runnables,
            elector,
            webhooks,
            webhook_routes: _,
            serving,
            shard,
            gate: _,
            root,
            caches,
        } = self;
        let (failures, mut failed) = mpsc::unbounded_channel::<Error>();
        let probes = RunnableGroup::new(&root);
        let recording = RunnableGroup::new(&root);
        let reloading = RunnableGroup::new(&root);
        let leading = RunnableGroup::new(&root);
        let membership = RunnableGroup::new(&root);

        // 1. Probes, webhooks, and the recorder.
        let (recorder, fates) = start_probes(&probes, &recording, &failures, server, pipeline);
        start_webhooks(&probes, &failures, webhooks, serving, elector.as_ref());

        // 2. The shard ring's membership, until this member knows its share; then caches,
        //    until the eager informers synced.
        if let Some(shard) = shard {
            join_ring(shard, &membership, &failures, &client, &options, &shutdown).await;
        }
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
            access: AccessCheck::new(client.clone(), &options),
        };
        reload.first(&first).await?;

        // 3. Config reload.
        add_source(&reloading, &failures, source);
        let reload_done = reload.run(configs, outcomes, reloading.token().clone());

        // 4. Controllers of a sharded manager (every member), leader election and
        //    leader-elected runnables.
        add_member_runnables(&leading, &failures, member_runnables);
        add_leader_elected(
            &leading,
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

        // Stop in reverse: controllers and leader-elected runnables, the ring membership (its
        // Lease deleted once nothing reconciles), reload, caches, recorder, probes.
        let deadline = tokio::time::Instant::now() + options.shutdown_grace;
        let mut late = !leading.stop(deadline).await;
        late |= !membership.stop(deadline).await;
        reloading.token().cancel();
        late |= tokio::time::timeout_at(deadline, &mut reload_done)
            .await
            .is_err();
        drop(recorder);
        late |= !stop_in_order(&[&reloading, &caches, &recording, &probes], deadline).await;
        root.cancel();
        log_fates(&fates);
        match failure {
            Some(error) => Err(error),
            None if late => Err(Error::GracePeriodExceeded(options.shutdown_grace)),
            None => Ok(()),
        }
    }
}

/// The watcher of a config file, with the manager's debounce: it reads and validates the file
/// once, then follows it.
///
/// # Errors
/// [`Error::ConfigFile`] when the file is missing, unreadable or invalid, or cannot be watched.
pub fn file_watcher(
    path: &std::path::Path,
    options: &Options,
) -> Result<config::watch::Watcher, Error> {
    let watch_options = config::watch::Options::default().debounce(options.debounce);
    Ok(config::watch::Watcher::new(path, watch_options)?.0)
}

/// Says once on standard error, when no `tracing` subscriber is installed, that the manager's
/// logs go nowhere and which call shows them: a library user would otherwise see a silent
/// operator. controller-runtime warns the same way when its logger was never set
/// (`pkg/log/log.go`, `eventuallyFulfillRoot`).
fn say_logs_are_off() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if tracing::dispatcher::has_been_set() {
        return;
    }
    ONCE.call_once(|| {
        eprintln!(
            "informant: no tracing subscriber is installed, so the manager logs nothing; \
             call informant::telemetry::init_default() at the top of main"
        );
    });
}
