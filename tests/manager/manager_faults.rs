//! Bad input from the cluster never stops the manager: a 403 on one kind leaves every other
//! kind serving and heals once access is granted; an API server that goes away and comes back
//! is caught up with (the cache converges, an event recorded while it was away is delivered).

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use informant::apiserver::TestServer;
use informant::manager::{ConfigSource, Manager, Options, Reload};
use informant::recorder::Fate;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;
use support::{
    Proxy, WAIT, cache_config, cached_names, eventually, http_get, manager_options, replace,
    stopped,
};
use tokio_util::sync::CancellationToken;

fn options(path: &std::path::Path) -> Options {
    Options {
        cache_sync_timeout: Duration::from_secs(5),
        ..manager_options(ConfigSource::File(path.to_path_buf()))
    }
}

fn create(server: &TestServer, kind: &str, name: &str) {
    server
        .handle()
        .create(json!({"apiVersion": "v1", "kind": kind,
            "metadata": {"namespace": "default", "name": name}}))
        .unwrap();
}

#[tokio::test]
async fn a_403_on_one_kind_leaves_the_other_kinds_serving_and_heals_when_access_is_granted() {
    let server = TestServer::start().await.unwrap();
    create(&server, "ConfigMap", "c1");
    create(&server, "Secret", "s1");
    // The manager's service account may not list Secrets (a Role without them).
    server
        .handle()
        .fail_next(None, Some("secrets"), u32::MAX, 403);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        cache_config(
            "  byObject:\n    - {apiVersion: v1, kind: ConfigMap}\n    - {apiVersion: v1, kind: Secret}\n",
        ),
    )
    .unwrap();
    let manager = Manager::new(server.client().await.unwrap(), options(&path))
        .await
        .unwrap();
    let cache = manager.cache();
    let state = manager.state();
    let health = manager.health_addr().unwrap();
    let metrics = manager.metrics_addr().unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));

    // The first tree serves although one eager kind is forbidden: the sync of Secrets fails
    // fast (403 is not retried into a timeout) and ConfigMaps answer.
    tokio::time::timeout(WAIT, state.serving()).await.unwrap();
    assert_eq!(cached_names::<ConfigMap>(cache.as_ref()).await, ["c1"]);
    let (code, body) = http_get(health, "/readyz?verbose").await;
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("[-]informers"), "{body}");
    let (code, reason) = http_get(health, "/readyz/informers").await;
    assert_eq!(code, 500);
    assert!(
        reason.contains("Secret"),
        "the failing kind is named: {reason}"
    );
    assert_eq!(
        http_get(health, "/healthz").await.0,
        200,
        "alive, not ready"
    );
    let (_, status) = http_get(metrics, "/debug/status").await;
    assert!(status.contains("403"), "status says why: {status}");
    assert!(!run.is_finished(), "the manager keeps running");

    // RBAC is fixed: the informer, still retrying with backoff, syncs; the manager is ready
    // without a restart or a reload.
    server.handle().clear_faults();
    eventually("ready once Secrets may be listed", || async {
        http_get(health, "/readyz").await.0 == 200
    })
    .await;
    assert_eq!(cached_names::<Secret>(cache.as_ref()).await, ["s1"]);

    shutdown.cancel();
    stopped(run).await;
}

#[tokio::test]
async fn an_api_server_that_goes_away_and_comes_back_is_caught_up_with() {
    let server = TestServer::start().await.unwrap();
    create(&server, "ConfigMap", "a1");
    create(&server, "ConfigMap", "b1");
    let direct = server.client().await.unwrap();
    let proxy = Proxy::start(SocketAddr::from(([127, 0, 0, 1], 0)), server.addr()).await;
    let client = proxy.client().await;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    // The sink retries every 300 ms, 30 times: an event recorded while the server is away
    // outlives the outage.
    let config = |burst: u32| {
        cache_config(&format!(
            "  byObject:
    - {{apiVersion: v1, kind: ConfigMap}}
  recorder:
    correlator: {{burst: {burst}}}
    sink: {{maxRetries: 30, retryInterval: 300ms}}
"
        ))
    };
    std::fs::write(&path, config(25)).unwrap();
    let manager = Manager::new(client, options(&path)).await.unwrap();
    let cache = manager.cache();
    let state = manager.state();
    let health = manager.health_addr().unwrap();
    let fates = manager.recorder().fates().clone();
    let mut reloads = manager.reloads();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    tokio::time::timeout(WAIT, state.serving()).await.unwrap();
    assert_eq!(
        cached_names::<ConfigMap>(cache.as_ref()).await,
        ["a1", "b1"]
    );

    // The API server goes away. Meanwhile the cluster changes, and the config is edited
    // (a recorder-only change: it applies without the server and records ConfigReloaded).
    let (proxy_addr, upstream) = proxy.take_away().await;
    create(&server, "ConfigMap", "c1");
    Api::<ConfigMap>::namespaced(direct.clone(), "default")
        .delete("a1", &DeleteParams::default())
        .await
        .unwrap();
    replace(&path, &config(50));
    let reload = tokio::time::timeout(WAIT, reloads.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(&reload, Reload::Applied { summary, .. } if summary.contains("burst 25→50")),
        "{reload:?}"
    );
    assert_eq!(
        cached_names::<ConfigMap>(cache.as_ref()).await,
        ["a1", "b1"],
        "while the server is away, reads answer from the last state seen"
    );
    assert_eq!(http_get(health, "/healthz").await.0, 200);
    assert!(!run.is_finished(), "the manager keeps running");

    // It comes back on the same address: the informer catches up, the event is delivered.
    let _proxy = Proxy::start(proxy_addr, upstream).await;
    eventually("the cache to catch up with the server", || async {
        cached_names::<ConfigMap>(cache.as_ref()).await == ["b1", "c1"]
    })
    .await;
    eventually("the ConfigReloaded event to reach the server", || async {
        Api::<Event>::namespaced(direct.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("ConfigReloaded"))
    })
    .await;

    shutdown.cancel();
    stopped(run).await;
    assert_eq!(fates.total(), 1, "one event recorded, one fate");
    assert_eq!(fates.get(Fate::Created), 1, "{:?}", fates.snapshot());
}
