//! A `CacheConfig` resource as the manager's config, through `manager::source::ResourceWatcher`
//! against the embedded API server: absent, created, edited, status-written, invalid, deleted.
//!
//! Every wait is a channel receipt under a 10 s timeout; nothing sleeps to synchronise. That a
//! write produced no outcome is shown by the next write's outcome arriving first.

use std::sync::Arc;
use std::time::Duration;

use informant::apiserver::Verb;
use informant::config::source::{Error, Observed, ResourceWatcher};
use informant::config::watch::ReloadOutcome;
use informant::config::{CacheConfig, CacheConfigSpec, Validated};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);
const NS: &str = "default";
const NAME: &str = "config";

/// A server with the `CacheConfig` CRD installed, and a client.
use crate::support::server_with_cacheconfig_crd as server;

fn cacheconfigs(client: &Client) -> Api<CacheConfig> {
    Api::namespaced(client.clone(), NS)
}

/// A valid spec whose sync period tells versions apart.
fn spec(sync_period: &str) -> CacheConfigSpec {
    CacheConfigSpec {
        sync_period: Some(sync_period.to_owned()),
        ..CacheConfigSpec::default()
    }
}

async fn create(client: &Client, spec: CacheConfigSpec) -> CacheConfig {
    cacheconfigs(client)
        .create(&PostParams::default(), &CacheConfig::new(NAME, spec))
        .await
        .unwrap()
}

async fn patch_spec(client: &Client, spec: serde_json::Value) -> CacheConfig {
    cacheconfigs(client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec})),
        )
        .await
        .unwrap()
}

/// The field path of each of `error`'s problems.
fn paths(error: &informant::config::Error) -> Vec<String> {
    error
        .field_errors()
        .iter()
        .map(|e| e.path.to_string())
        .collect()
}

fn sync_period(config: &Validated) -> Option<String> {
    config.resource.spec.sync_period.clone()
}

/// A running watcher, with its receivers.
struct Running {
    configs: watch::Receiver<Arc<Validated>>,
    outcomes: broadcast::Receiver<ReloadOutcome>,
    observed: watch::Receiver<Option<Observed>>,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), Error>>,
}

async fn start(client: &Client) -> Running {
    let (watcher, configs) = ResourceWatcher::new(client.clone(), NS, NAME)
        .await
        .unwrap();
    let outcomes = watcher.subscribe();
    let observed = watcher.observed();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(watcher.run(shutdown.child_token()));
    Running {
        configs,
        outcomes,
        observed,
        shutdown,
        task,
    }
}

impl Running {
    async fn outcome(&mut self) -> ReloadOutcome {
        timeout(WAIT, self.outcomes.recv())
            .await
            .expect("no reload outcome within 10s")
            .expect("outcome channel")
    }

    /// The next outcome, which must be `Rejected`: its error.
    async fn rejected(&mut self) -> Arc<informant::config::Error> {
        match self.outcome().await {
            ReloadOutcome::Rejected { error } => error,
            outcome => panic!("expected Rejected, got {outcome:?}"),
        }
    }

    /// The next outcome, which must be `Applied`.
    async fn applied(&mut self) -> Arc<Validated> {
        match self.outcome().await {
            ReloadOutcome::Applied(config) => {
                assert!(
                    Arc::ptr_eq(&config, &self.configs.borrow_and_update()),
                    "the applied config is not the published one"
                );
                config
            }
            other => panic!("expected Applied, got {other:?}"),
        }
    }

    fn generation(&self) -> Option<i64> {
        self.observed.borrow().as_ref().and_then(|o| o.generation)
    }

    async fn stop(self) {
        self.shutdown.cancel();
        timeout(WAIT, self.task).await.unwrap().unwrap().unwrap();
    }
}

#[tokio::test]
async fn a_missing_cacheconfig_starts_from_the_defaults_and_creating_it_applies_it() {
    let (_server, client) = server().await;
    let mut running = start(&client).await;
    {
        let start = running.configs.borrow_and_update();
        assert_eq!(start.resource.spec, CacheConfigSpec::default());
        assert_eq!(start.resource.metadata.name.as_deref(), Some(NAME));
        assert_eq!(start.resource.metadata.namespace.as_deref(), Some(NS));
    }
    assert_eq!(*running.observed.borrow(), None);

    let created = create(&client, spec("1h")).await;
    let config = running.applied().await;
    assert_eq!(sync_period(&config).as_deref(), Some("1h"));
    let observed = running.observed.borrow().clone().unwrap();
    assert_eq!(Some(observed.uid.as_str()), created.metadata.uid.as_deref());
    assert_eq!(observed.generation, Some(1));
    assert_eq!(&*observed.object_ref().name, NAME);
    running.stop().await;
}

#[tokio::test]
async fn editing_the_spec_applies_it_and_a_status_write_reloads_nothing() {
    let (_server, client) = server().await;
    create(&client, spec("1h")).await;
    let mut running = start(&client).await;
    assert_eq!(
        sync_period(&running.configs.borrow_and_update()).as_deref(),
        Some("1h")
    );
    assert_eq!(running.generation(), Some(1));

    patch_spec(&client, json!({"syncPeriod": "2h"})).await;
    assert_eq!(
        sync_period(running.applied().await.as_ref()).as_deref(),
        Some("2h")
    );
    assert_eq!(running.generation(), Some(2));

    // The manager's own status write, and a label: neither is a spec change.
    cacheconfigs(&client)
        .patch_status(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"informerCount": 3}})),
        )
        .await
        .unwrap();
    cacheconfigs(&client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await
        .unwrap();
    patch_spec(&client, json!({"syncPeriod": "3h"})).await;
    // Had either write produced an outcome, it would have come first.
    assert_eq!(
        sync_period(running.applied().await.as_ref()).as_deref(),
        Some("3h")
    );
    assert_eq!(running.generation(), Some(3));
    running.stop().await;
}

#[tokio::test]
async fn an_invalid_edit_is_rejected_with_field_paths_and_the_last_good_config_stays() {
    let (_server, client) = server().await;
    create(&client, spec("1h")).await;
    let mut running = start(&client).await;
    let good = Arc::clone(&running.configs.borrow_and_update());

    patch_spec(
        &client,
        json!({"syncPeriod": "soon", "defaultLabelSelector": "a in (b"}),
    )
    .await;
    let error = running.rejected().await;
    let paths = paths(&error);
    assert_eq!(
        paths,
        ["spec.syncPeriod", "spec.defaultLabelSelector"],
        "{error}"
    );
    assert!(!running.configs.has_changed().unwrap());
    assert!(Arc::ptr_eq(&good, &running.configs.borrow()));
    // The status writer reports the rejected generation.
    assert_eq!(running.generation(), Some(2));

    // A status write on the invalid version does not reject it again.
    cacheconfigs(&client)
        .patch_status(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"informerCount": 1}})),
        )
        .await
        .unwrap();
    // Back to the good spec: valid again, and equal to the config in use.
    patch_spec(
        &client,
        json!({"syncPeriod": "1h", "defaultLabelSelector": null}),
    )
    .await;
    let outcome = running.outcome().await;
    assert!(matches!(outcome, ReloadOutcome::Unchanged), "{outcome:?}");
    assert!(!running.configs.has_changed().unwrap());
    assert_eq!(running.generation(), Some(3));
    running.stop().await;
}

#[tokio::test]
async fn deleting_the_cacheconfig_goes_back_to_the_defaults() {
    let (_server, client) = server().await;
    create(&client, spec("1h")).await;
    let mut running = start(&client).await;
    assert!(running.observed.borrow().is_some());

    cacheconfigs(&client)
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    let config = running.applied().await;
    assert_eq!(config.resource.spec, CacheConfigSpec::default());
    assert_eq!(*running.observed.borrow(), None);

    // Recreated with a new uid: applied again.
    let created = create(&client, spec("4h")).await;
    assert_eq!(
        sync_period(running.applied().await.as_ref()).as_deref(),
        Some("4h")
    );
    assert_eq!(
        running.observed.borrow().as_ref().map(|o| o.uid.clone()),
        created.metadata.uid
    );
    running.stop().await;
}

#[tokio::test]
async fn sharding_is_kept_until_a_restart_whether_edited_or_deleted() {
    let (_server, client) = server().await;
    let sharded: CacheConfigSpec =
        serde_json::from_value(json!({"syncPeriod": "1h", "sharding": {"ring": "shop"}})).unwrap();
    create(&client, sharded).await;
    let mut running = start(&client).await;
    let good = Arc::clone(&running.configs.borrow_and_update());
    assert!(good.cache.sharding.is_some(), "the first config may shard");
    let rejected_at_sharding = |outcome: ReloadOutcome, asks: &str| {
        let ReloadOutcome::Rejected { error } = outcome else {
            panic!("expected Rejected, got {outcome:?}");
        };
        let errors = error.field_errors();
        assert_eq!(errors.len(), 1, "{error}");
        assert_eq!(errors[0].path.to_string(), "spec.sharding", "{error}");
        assert!(
            errors[0].message.contains(&format!(
                "the replicas run with sharding {{ring: shop, key: namespace}}, this config \
                 asks for {asks}"
            )),
            "{error}"
        );
        assert!(
            error
                .to_string()
                .starts_with("cacheconfig default/config: "),
            "{error}"
        );
    };

    patch_spec(&client, json!({"sharding": {"ring": "shop", "key": "uid"}})).await;
    rejected_at_sharding(running.outcome().await, "sharding {ring: shop, key: uid}");
    patch_spec(&client, json!({"sharding": null, "syncPeriod": "2h"})).await;
    rejected_at_sharding(running.outcome().await, "no sharding");
    // Deleted: the defaults would stop sharding, so the running config stays.
    cacheconfigs(&client)
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    rejected_at_sharding(running.outcome().await, "no sharding");
    assert!(!running.configs.has_changed().unwrap());
    assert!(Arc::ptr_eq(&good, &running.configs.borrow()));

    // The default key written out is the same sharding: applied with the new period.
    let same: CacheConfigSpec = serde_json::from_value(
        json!({"syncPeriod": "3h", "sharding": {"ring": "shop", "key": "namespace"}}),
    )
    .unwrap();
    create(&client, same).await;
    assert_eq!(
        sync_period(running.applied().await.as_ref()).as_deref(),
        Some("3h")
    );
    running.stop().await;
}

#[tokio::test]
async fn an_invalid_cacheconfig_at_start_gives_the_defaults_and_a_rejection_when_run_starts() {
    let (_server, client) = server().await;
    create(&client, spec("soon")).await;
    let mut running = start(&client).await;
    assert_eq!(
        running.configs.borrow_and_update().resource.spec,
        CacheConfigSpec::default()
    );
    let error = running.rejected().await;
    assert_eq!(error.field_errors()[0].path.to_string(), "spec.syncPeriod");
    assert_eq!(running.generation(), Some(1));

    patch_spec(&client, json!({"syncPeriod": "5h"})).await;
    assert_eq!(
        sync_period(running.applied().await.as_ref()).as_deref(),
        Some("5h")
    );
    running.stop().await;
}

#[tokio::test]
async fn a_cacheconfig_invalid_at_start_keeps_its_valid_sharding_so_fixing_it_needs_no_restart() {
    let (_server, client) = server().await;
    let invalid: CacheConfigSpec =
        serde_json::from_value(json!({"syncPeriod": "soon", "sharding": {"ring": "shop"}}))
            .unwrap();
    create(&client, invalid).await;
    let mut running = start(&client).await;
    let first = Arc::clone(&running.configs.borrow_and_update());
    assert_eq!(
        first.resource.spec.sharding,
        Some(serde_json::from_value(json!({"ring": "shop"})).unwrap()),
        "the defaults run in the ring the invalid config asks for"
    );
    assert_eq!(
        first.resource.spec.sync_period, None,
        "and nothing else of it"
    );
    let error = running.rejected().await;
    let paths = paths(&error);
    assert_eq!(paths, ["spec.syncPeriod"], "{error}");

    // Fixing the rest is a reload: the sharding is the one running.
    patch_spec(&client, json!({"syncPeriod": "5h"})).await;
    let fixed = running.applied().await;
    assert_eq!(sync_period(fixed.as_ref()).as_deref(), Some("5h"));
    assert_eq!(fixed.cache.sharding, first.cache.sharding);
    running.stop().await;
}

#[tokio::test]
async fn a_cacheconfig_whose_sharding_is_invalid_at_start_runs_the_defaults_unsharded() {
    let (_server, client) = server().await;
    let invalid: CacheConfigSpec =
        serde_json::from_value(json!({"sharding": {"ring": "Not A Ring"}})).unwrap();
    create(&client, invalid).await;
    let mut running = start(&client).await;
    assert_eq!(
        running.configs.borrow_and_update().resource.spec,
        CacheConfigSpec::default()
    );
    let error = running.rejected().await;
    assert_eq!(
        error.field_errors()[0].path.to_string(),
        "spec.sharding.ring",
        "{error}"
    );
    // The ring it asks for once fixed is a change of sharding: a restart applies it.
    patch_spec(&client, json!({"sharding": {"ring": "shop"}})).await;
    let error = running.rejected().await;
    assert!(
        error
            .to_string()
            .contains("changing sharding needs a restart"),
        "{error}"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_field_this_version_does_not_know_is_rejected_at_its_path() {
    let (server, client) = server().await;
    // As a newer CRD would let through: the embedded server stores it unpruned.
    server
        .handle()
        .create(json!({
            "apiVersion": "informant.dev/v1alpha1", "kind": "CacheConfig",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {"syncPeriod": "1h", "byObjects": []},
        }))
        .unwrap();
    let mut running = start(&client).await;
    let error = running.rejected().await;
    let first = &error.field_errors()[0];
    assert_eq!(first.path.to_string(), "spec.byObjects", "{error}");
    assert!(first.message.contains("byObject"), "{error}");
    running.stop().await;
}

#[tokio::test]
async fn a_server_error_at_start_is_an_error_not_the_defaults() {
    let (server, client) = server().await;
    server
        .handle()
        .fail_next(Some(Verb::Get), Some("cacheconfigs"), 1, 500);
    let error = ResourceWatcher::new(client, NS, NAME).await.unwrap_err();
    assert!(matches!(error, Error::Get { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "cannot read cacheconfig default/config to start from it"
    );
}
