//! Where the `Controller`s come from: the documents of the manager's config file (re-read at
//! each reload of the file), or the `Controller` resources of the `CacheConfig`'s namespace
//! (watched); both validated against the manager's running cache config, and wired into the
//! manager as one leader-elected runnable with [`add_to_manager`]. A `Controller` resource
//! being deleted stays in the set, with its `deletionTimestamp`, for the supervisor to release
//! its objects; an invalid one is left out and let go at once.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::admission::{AdmissionRoutes, OwnedConfigurations, report_registered};
use super::conversion::{ConversionRoutes, OwnedCrds};
use super::metrics::HookMetrics;
use super::policy::Policy;
use super::release;
use super::resource::{Controller, MAX_CONCURRENCY, controllers_key, validate_controller_value};
use super::supervisor::{Desired, Supervisor};
use crate::config::Origin;
use crate::controller::{Context, ControllerMetrics};
use crate::manager::{ConfigSource, Manager, Reload, State};
use crate::yaml::{document_kind, documents};

/// The `Controller` documents of a YAML text, validated against the running cache config.
/// `None` when the text is not YAML (the last good set stays).
#[must_use]
pub fn desired_from_text(text: &str, origin: &Origin, state: &State) -> Option<Desired> {
    let documents = match documents(text) {
        Ok(d) => d,
        Err(message) => {
            tracing::warn!(%origin, %message, "cannot read the controllers of the config file");
            return None;
        }
    };
    let config = state.snapshot().config;
    Some(
        documents
            .into_iter()
            .filter(|d| document_kind(d) == Some("Controller"))
            .map(|d| {
                let key = controllers_key(&d);
                (
                    key,
                    validate_controller_value(d, origin, Some(&config.cache)),
                )
            })
            .collect(),
    )
}

/// Follows the `Controller` documents of `path`: read now, and again after each reload of the
/// file (`reloads`), until `shutdown`.
pub async fn follow_file(
    path: PathBuf,
    mut reloads: broadcast::Receiver<Reload>,
    state: Arc<State>,
    desired: watch::Sender<Desired>,
    shutdown: CancellationToken,
) {
    let read = |path: &Path| {
        let origin = Origin::File(path.to_owned());
        match std::fs::read_to_string(path) {
            Ok(text) => desired_from_text(&text, &origin, &state),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %crate::telemetry::error_chain(&e), "cannot read the controllers of the config file");
                None
            }
        }
    };
    loop {
        if let Some(next) = read(&path) {
            desired.send_if_modified(|current| {
                let changed = *current != next;
                *current = next;
                changed
            });
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            reload = reloads.recv() => {
                if matches!(reload, Err(broadcast::error::RecvError::Closed)) {
                    shutdown.cancelled().await;
                    return;
                }
            }
        }
    }
}

/// Where [`follow_namespace`] reads `Controller`s from and validates them against.
#[allow(missing_debug_implementations, reason = "kube::Client has no Debug")]
pub struct NamespaceSource {
    /// The client to watch with.
    pub client: kube::Client,
    /// The namespace whose `Controller`s run.
    pub namespace: String,
    /// The manager's state: the running cache config the kinds are checked against.
    pub state: Arc<State>,
    /// The manager's reloads: each one validates every `Controller` again.
    pub reloads: broadcast::Receiver<Reload>,
}

/// Follows the `Controller` resources of a namespace with a kube-rs watcher until
/// `shutdown`, validating them again after each reload of the cache config.
pub async fn follow_namespace(
    source: NamespaceSource,
    desired: watch::Sender<Desired>,
    shutdown: CancellationToken,
) {
    let NamespaceSource {
        client,
        namespace,
        state,
        mut reloads,
    } = source;
    let resource = ApiResource::erase::<Controller>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
    let writer = kube::runtime::reflector::store::Writer::<DynamicObject>::new(resource.clone());
    let reader = writer.as_reader();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer);
    let mut stream = std::pin::pin!(stream);
    let mut listed = false;
    let mut missing_crd_said = false;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            event = stream.next() => match event {
                None => return,
                Some(Err(e)) => {
                    if crd_missing(&e) {
                        // Running without hook controllers is a normal set-up: say it once.
                        if !missing_crd_said {
                            tracing::info!(%namespace, "the controllers.informant.dev CRD is not installed; no hook controllers run until it is");
                            missing_crd_said = true;
                        }
                    } else {
                        tracing::warn!(%namespace, error = %crate::telemetry::error_chain(&e), "watching controllers failed, retrying");
                    }
                    continue;
                }
                Some(Ok(watcher::Event::InitDone)) => listed = true,
                Some(Ok(_)) => {}
            },
            reload = reloads.recv() => {
                if matches!(reload, Err(broadcast::error::RecvError::Closed)) {
                    shutdown.cancelled().await;
                    return;
                }
            }
        }
        if !listed {
            continue;
        }
        let config = state.snapshot().config;
        let mut next = Desired::new();
        for object in reader.state() {
            let mut value = serde_json::to_value(object.as_ref()).unwrap_or(Value::Null);
            let key = controllers_key(&value);
            let origin = Origin::Resource {
                namespace: object.metadata.namespace.clone().unwrap_or_default(),
                name: object.metadata.name.clone().unwrap_or_default(),
            };
            // What the API server adds is not the user's to validate.
            if let Some(meta) = value["metadata"].as_object_mut() {
                meta.remove("managedFields");
            }
            let validated =
                validate_controller_value(value, &origin, Some(&config.cache)).map(|mut v| {
                    v.resource.metadata = object.metadata.clone();
                    v
                });
            if validated.is_err() && object.metadata.deletion_timestamp.is_some() {
                // An invalid Controller being deleted is gone: the supervisor stops what ran
                // under its name (its last valid spec) and releases that spec's objects. An
                // invalid spec says nothing reliable to release, so nothing holds it back.
                let_go_of_invalid(&client, &object).await;
                continue;
            }
            next.insert(key, validated);
        }
        desired.send_if_modified(|current| {
            let changed = *current != next;
            *current = next;
            changed
        });
    }
}

/// Lets an invalid `Controller` being deleted go: removes
/// [`CONTROLLER_FINALIZER`](super::CONTROLLER_FINALIZER) from it.
async fn let_go_of_invalid(client: &kube::Client, object: &DynamicObject) {
    let carries = object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == release::CONTROLLER_FINALIZER);
    let (Some(namespace), Some(name)) = (
        object.metadata.namespace.as_deref(),
        object.metadata.name.as_deref(),
    ) else {
        return;
    };
    if !carries {
        return;
    }
    tracing::warn!(controller = %format!("{namespace}/{name}"),
        "an invalid controller is being deleted: only the objects of a valid spec this manager ran are released");
    release::let_go_of_controller(client, namespace, name).await;
}

/// Whether a watch error means the `Controller` kind is not served (404).
fn crd_missing(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status)) => status.code == 404,
        _ => false,
    }
}

/// Runs the manager's `Controller`s as one controller runnable (`hooks`, on the leader, or on
/// every member of a shard ring with the leader alone writing statuses and releasing
/// finalizers; see [`Supervisor::leader`]): the documents
/// of its config file (`--config`), or the `Controller` resources of its `CacheConfig`'s
/// namespace (`--cache-config`, with each `Controller`'s status written, and each one with
/// `finalize: true` held by [`CONTROLLER_FINALIZER`](super::CONTROLLER_FINALIZER) until its
/// objects are released; see [`Supervisor::hold_controllers`]), under [`Policy::open`]: any
/// command, any URL but link-local addresses. [`add_to_manager_with`] sets the policy.
pub fn add_to_manager(manager: &mut Manager) {
    add_to_manager_with(manager, Policy::open());
}

/// [`add_to_manager`], running only the `Controller`s `policy` allows (the others are kept
/// back: [`Supervisor::policy`]), each called under it.
pub fn add_to_manager_with(manager: &mut Manager, policy: Policy) {
    add_to_manager_limited(manager, policy, MAX_CONCURRENCY, true);
}

/// [`add_to_manager_with`], running only the `Controller`s whose `spec.concurrency` is at
/// most `max_concurrency` (`--hook-max-concurrency`) and, unless `secret_refs`
/// (`--hook-allow-secrets`), whose webhook hooks name no client certificate Secret (the
/// others are kept back: [`Supervisor::max_concurrency`], [`Supervisor::secret_refs`]).
pub fn add_to_manager_limited(
    manager: &mut Manager,
    policy: Policy,
    max_concurrency: u16,
    secret_refs: bool,
) {
    let policy = Arc::new(policy);
    // On every replica, from the start: admission and conversion hooks run on followers too.
    manager.add_serving("hook-reaper", |_leads, shutdown| async move {
        super::process::reap_orphans(shutdown).await;
        Ok(())
    });
    let hook_metrics = HookMetrics::of(manager);
    let admission_served = serve_webhooks(manager, Arc::clone(&policy), hook_metrics.clone());
    let client_ca = manager
        .webhook_options()
        .is_some_and(|o| o.client_ca.is_some());
    let follower = Follower::of(manager);
    let ctx = Context::of(manager);
    let metrics = ControllerMetrics::of(manager);
    let state = manager.state();
    // The config the manager starts with: a reload cannot change its sharding.
    let sharding = state.snapshot().config.cache.sharding.clone();
    // Sharded, the hook controllers run on every member; what must stay single stays with
    // the leader.
    let leader = manager.is_sharded().then(|| manager.is_leader());
    manager.add_controller("hooks", move |shutdown| async move {
        let (send, receive) = watch::channel(Desired::new());
        let in_cluster = matches!(follower.source, ConfigSource::Resource { .. });
        let mut supervisor = Supervisor::new(receive)
            .metrics(&metrics, &hook_metrics)
            .write_status(in_cluster)
            .hold_controllers(in_cluster)
            .sharding(sharding)
            .policy(policy)
            .max_concurrency(max_concurrency)
            .secret_refs(secret_refs)
            .admission_served(admission_served)
            .client_ca(client_ca)
            .report_to(state);
        if let Some(leader) = leader {
            supervisor = supervisor.leader(leader);
        }
        tokio::join!(
            follower.follow(send, shutdown.clone()),
            supervisor.run(ctx, shutdown.clone())
        );
        Ok(())
    });
}

/// How often the admission and conversion hooks served, the webhook configurations and the
/// CRD conversions are gone over with no change to follow (an edit by hand of a
/// configuration or of a CRD's conversion is put back within this).
const WEBHOOKS_RESYNC: Duration = Duration::from_secs(10);

/// With the manager's webhook endpoint on ([`Manager::webhook_routes`]), serves the admission
/// and conversion hooks of the `Controller`s on every replica ([`AdmissionRoutes`],
/// [`ConversionRoutes`]) and, on the leader, keeps the webhook configurations that name the
/// admission hooks ([`OwnedConfigurations`]) and the conversion of the CRDs the conversion
/// hooks convert ([`OwnedCrds`]); whether it does.
fn serve_webhooks(manager: &mut Manager, policy: Arc<Policy>, metrics: HookMetrics) -> bool {
    let (Some(routes), Some(options)) =
        (manager.webhook_routes(), manager.webhook_options().cloned())
    else {
        return false;
    };
    let follower = Follower::of(manager);
    let resources = matches!(follower.source, ConfigSource::Resource { .. });
    manager.add_serving("webhooks", move |mut leads, shutdown| async move {
        let client = follower.client.clone();
        let state = Arc::clone(&follower.state);
        let (send, mut receive) = watch::channel(Desired::new());
        let serve = async {
            let mut admission = AdmissionRoutes::new(
                routes.clone(),
                Arc::clone(&policy),
                Some(client.clone()),
                Some(metrics.clone()),
            )
            .max_body(options.max_admission_bytes)
            .max_in_flight(options.max_in_flight);
            let mut conversion =
                ConversionRoutes::new(routes, policy, Some(client.clone()), Some(metrics))
                    .max_body(options.max_conversion_bytes)
                    .max_in_flight(options.max_in_flight);
            let mut configurations = OwnedConfigurations::new(client.clone(), options.clone());
            let mut statuses = std::collections::BTreeMap::new();
            let mut crds = OwnedCrds::new(client.clone(), options);
            let mut tick = tokio::time::interval(WEBHOOKS_RESYNC);
            let mut leadership_settled = false;
            loop {
                let desired = receive.borrow_and_update().clone();
                admission.follow(&desired).await;
                conversion.follow(&desired).await;
                if *leads.borrow_and_update() {
                    let snapshot = state.snapshot();
                    match configurations.keep(admission.served(), &snapshot.config.cache).await {
                        Ok(pass) => {
                            for written in &pass.written {
                                tracing::info!(configuration = %written, "webhook configuration written");
                            }
                            for left_out in &pass.left_out {
                                tracing::debug!(hook = %left_out, "admission hook not registered yet");
                            }
                            report_registered(&client, &pass, resources, &mut statuses).await;
                        }
                        Err(error) => {
                            tracing::warn!(%error, "cannot keep the webhook configurations; retrying");
                        }
                    }
                    if let Err(error) = crds.keep(conversion.served(), &desired).await {
                        tracing::warn!(%error, "cannot keep the CRD conversions; retrying");
                    }
                } else {
                    crds.lost_leadership();
                }
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    changed = receive.changed() => if changed.is_err() { break },
                    // A sender gone means leadership never changes again.
                    changed = leads.changed(), if !leadership_settled => {
                        leadership_settled = changed.is_err();
                    }
                    _ = tick.tick() => {}
                }
            }
            admission.stop().await;
            conversion.stop().await;
        };
        tokio::join!(follower.follow(send, shutdown.clone()), serve);
        Ok(())
    });
    true
}

/// What follows the manager's `Controller`s: its config file, or its namespace's resources.
struct Follower {
    source: ConfigSource,
    client: kube::Client,
    state: Arc<State>,
    reloads: broadcast::Receiver<Reload>,
}

impl Follower {
    fn of(manager: &Manager) -> Self {
        Self {
            source: manager.config_source().clone(),
            client: manager.client(),
            state: manager.state(),
            reloads: manager.reloads(),
        }
    }

    /// Sends each new set of `Controller`s to `desired` until `shutdown`.
    async fn follow(self, desired: watch::Sender<Desired>, shutdown: CancellationToken) {
        match self.source {
            ConfigSource::File(path) => {
                follow_file(path, self.reloads, self.state, desired, shutdown).await;
            }
            ConfigSource::Resource { namespace, .. } => {
                let source = NamespaceSource {
                    client: self.client,
                    namespace,
                    state: self.state,
                    reloads: self.reloads,
                };
                follow_namespace(source, desired, shutdown).await;
            }
        }
    }
}
