//! The steps of [`Manager::new`](super::Manager::new) and [`Manager::run`](super::Manager::run)
//! that are not the manager's own state: opening the config source, starting each runnable
//! group, and the last log line.

use std::net::SocketAddr;
use std::sync::Arc;

use kube::Client;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::super::elected::{LeaderRunnable, LeaderWork};
use super::super::group::RunnableGroup;
use super::super::http::HttpServer;
use super::super::leader::LeaderElector;
use super::super::metrics;
use super::super::options::{ConfigSource, Error, FIELD_MANAGER, Options};
use super::super::shard::ShardRuntime;
use super::super::state::State;
use super::super::status::StatusWriter;
use super::super::webhook::WebhookOptions;
use super::{Source, file_watcher};
use crate::config::{self, Validated, source, watch::ReloadOutcome};
use crate::recorder::{self, KubeSink, Pipeline, Recorder};
use crate::serving::{WebhookEndpoint, WebhookRouter, WebhookRoutes};

/// The config source's watcher, its configs and outcomes, and (for a resource) what it
/// observed of the resource.
pub(super) async fn open_source(
    client: &Client,
    options: &Options,
    watcher: Option<config::watch::Watcher>,
) -> Result<Opened, Error> {
    Ok(match (&options.source, watcher) {
        (ConfigSource::File(_), Some(watcher)) => {
            let configs = watcher.configs();
            let outcomes = watcher.subscribe();
            (Source::File(Box::new(watcher)), configs, outcomes, None)
        }
        (ConfigSource::File(path), None) => {
            let watcher = file_watcher(path, options)?;
            let configs = watcher.configs();
            let outcomes = watcher.subscribe();
            (Source::File(Box::new(watcher)), configs, outcomes, None)
        }
        (ConfigSource::Resource { namespace, name }, _) => {
            let (watcher, configs) =
                source::ResourceWatcher::new(client.clone(), namespace, name).await?;
            let outcomes = watcher.subscribe();
            let observed = watcher.observed();
            (
                Source::Resource(Box::new(watcher)),
                configs,
                outcomes,
                Some(observed),
            )
        }
    })
}

/// What [`open_source`] opens.
pub(super) type Opened = (
    Source,
    watch::Receiver<Arc<Validated>>,
    broadcast::Receiver<ReloadOutcome>,
    Option<watch::Receiver<Option<source::Observed>>>,
);

/// Each namespace selector of the published tree with how many namespaces it matches, for
/// `informant_scope_namespaces`.
pub(super) fn scope_source(state: Arc<State>) -> metrics::ScopeSource {
    Arc::new(move || {
        state
            .plan()
            .map(|plan| plan.namespace_selections())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(selector, matched)| Some((selector, matched?.len())))
            .collect()
    })
}

/// The last line of a run: the events recorded and where they ended (`events`, their sum, and
/// `fates`: each fate that some event ended in, `name=count`, in pipeline order), so that a
/// replica that stopped can still be accounted for once its `/metrics` is gone: `recorded`
/// equals `events` when no event was lost in the stop.
pub(super) fn log_fates(fates: &recorder::FateCounter) {
    let ended = recorder::Fate::ALL
        .iter()
        .zip(fates.snapshot())
        .filter(|(_, count)| *count > 0)
        .map(|(fate, count)| format!("{}={count}", fate.as_str()))
        .collect::<Vec<_>>()
        .join(",");
    tracing::info!(
        recorded = fates.recorded(),
        events = fates.total(),
        created = fates.get(recorder::Fate::Created),
        patched = fates.get(recorder::Fate::Patched),
        dropped_shutdown = fates.get(recorder::Fate::DroppedShutdown),
        fates = %ended,
        "manager stopped"
    );
}

/// The status writer of a resource source; a file has no status to write.
pub(super) fn status_writer(source: &ConfigSource, client: &Client) -> Option<StatusWriter> {
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

/// Runs the config source's watcher in the reload group.
pub(super) fn add_source(
    group: &RunnableGroup,
    failures: &mpsc::UnboundedSender<Error>,
    source: Source,
) {
    let token = group.token().clone();
    match source {
        Source::File(watcher) => group.add("config-file", failures, async move {
            watcher.run(token).await.map_err(Error::from)
        }),
        Source::Resource(watcher) => group.add("config-resource", failures, async move {
            watcher.run(token).await.map_err(Error::from)
        }),
    }
}

/// Starts the HTTP listeners in `probes` and the recorder's pipeline in `recording`; the
/// recorder and its fate counts.
pub(super) fn start_probes(
    probes: &RunnableGroup,
    recording: &RunnableGroup,
    failures: &mpsc::UnboundedSender<Error>,
    server: HttpServer,
    pipeline: Pipeline<KubeSink>,
) -> (Recorder, recorder::FateCounter) {
    let token = probes.token().clone();
    probes.add("http", failures, async move {
        server.run(token).await.map_err(Error::Http)
    });
    let recorder = pipeline.recorder();
    let fates = pipeline.fates();
    let token = recording.token().clone();
    recording.add_quiet(async move {
        let _ = pipeline.run(token).await;
    });
    (recorder, fates)
}

/// Starts the member of a shard ring in `group` (after asking the server whether it selects
/// a uid share itself) and waits until it knows its share: the first config's tree is planned
/// for it.
pub(super) async fn join_ring(
    shard: ShardRuntime,
    group: &RunnableGroup,
    failures: &mpsc::UnboundedSender<Error>,
    client: &Client,
    options: &Options,
    shutdown: &CancellationToken,
) {
    shard.probe(client, &options.shard.lease_namespace).await;
    let mut known = shard.share();
    let token = group.token().clone();
    group.add("shard-member", failures, async move {
        shard.run(token).await.map_err(Error::from)
    });
    if options.leader_election.is_none() {
        tracing::warn!(
            "sharded without leader election: every member writes the status and records the config's Events"
        );
    }
    tokio::select! {
        _ = known.wait_for(Option::is_some) => {}
        () = shutdown.cancelled() => {}
    }
}

/// Starts each controller of a sharded manager on every member.
pub(super) fn add_member_runnables(
    group: &RunnableGroup,
    failures: &mpsc::UnboundedSender<Error>,
    runnables: Vec<(String, LeaderRunnable)>,
) {
    for (name, run) in runnables {
        let token = group.token().child_token();
        let failures = failures.clone();
        group.add_quiet(async move {
            if let Err(source) = run(token).await {
                let _ = failures.send(Error::Runnable { name, source });
            }
        });
    }
}

/// Starts leader election (when configured) and the task that runs `work` once leading.
pub(super) fn add_leader_elected(
    group: &RunnableGroup,
    failures: &mpsc::UnboundedSender<Error>,
    elector: Option<LeaderElector>,
    mut work: LeaderWork,
) {
    // The elector stops (and, with --leader-elect-release-on-cancel, releases the Lease) only
    // once the leader-elected runnables have returned: a standby that takes the Lease over
    // never runs beside a reconcile of the old leader that is still finishing. So does
    // controller-runtime's manager (pkg/manager/internal.go, engageStopProcedure: the leader
    // election is cancelled after the LeaderElection runnables stopped).
    let release = CancellationToken::new();
    if let Some(elector) = elector {
        work.is_leader = elector.is_leader();
        let release = release.clone();
        group.add("leader-election", failures, async move {
            elector.run(release).await.map_err(Error::from)
        });
    }
    let (token, failures) = (group.token().clone(), failures.clone());
    group.add_quiet(async move {
        work.run(&failures, token).await;
        release.cancel();
    });
}

/// Binds the webhook endpoint of `options`, if any: the endpoint, and the routes it serves
/// with the address it bound.
pub(super) async fn bind_webhook(
    client: &Client,
    options: Option<&WebhookOptions>,
) -> Result<(Vec<WebhookEndpoint>, Option<(WebhookRoutes, SocketAddr)>), Error> {
    let Some(options) = options else {
        return Ok((Vec::new(), None));
    };
    let routes = WebhookRoutes::new();
    let endpoint = WebhookEndpoint::bind(
        client.clone(),
        options.addr,
        &options.certificates,
        options.inject_targets(),
        WebhookRouter::new().with_routes(routes.clone()),
    )
    .await
    .map_err(|e| match e {
        crate::serving::Error::Bind { source, .. } => Error::Http(source),
        other => Error::Webhook(other),
    })?
    .limits(options.connections);
    let endpoint = match &options.client_ca {
        Some(path) => crate::serving::ClientCa::read(path)
            .and_then(|ca| endpoint.verify_clients(ca))
            .map_err(Error::Webhook)?,
        None => endpoint,
    };
    let addr = endpoint.local_addr();
    Ok((vec![endpoint], Some((routes, addr))))
}
