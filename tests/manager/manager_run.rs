//! `Manager` end to end on the embedded API server: file reloads (atomic rename and a
//! `ConfigMap` volume's symlink swap), an invalid reload that keeps the old tree serving, the
//! `ConfigReloaded` / `InvalidConfig` Events, `/readyz`, the status of a `CacheConfig`
//! resource, and graceful shutdown accounting for every recorded event.

use crate::support;

use std::net::SocketAddr;
use std::sync::Arc;

use informant::config::{CacheConfig, CacheConfigSpec};
use informant::manager::{ConfigSource, Manager, Reload};
use informant::recorder::Fate;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{WAIT, eventually, http_get, manager_options, replace, stopped};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

fn config(selector: &str) -> String {
    support::cache_config(&format!(
        "  byObject:\n    - {{apiVersion: v1, kind: ConfigMap, labelSelector: '{selector}'}}\n"
    ))
}

async fn next_reload(reloads: &mut broadcast::Receiver<Reload>) -> Reload {
    tokio::time::timeout(WAIT, reloads.recv())
        .await
        .expect("a reload within the timeout")
        .unwrap()
}

async fn names(cache: &Arc<informant::cache::SharedCache>) -> Vec<String> {
    support::cached_names::<ConfigMap>(cache.as_ref()).await
}

async fn events_with_reason(client: &Client, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// Waits until `/readyz` answers 200: the first config's tree serves, eager informers synced.
async fn ready(health: SocketAddr) {
    eventually("ready", || async {
        http_get(health, "/readyz").await.0 == 200
    })
    .await;
}

async fn seeded_server() -> (support::Server, Client) {
    let (server, client) = support::server().await;
    for (name, app) in [("a1", "a"), ("b1", "b")] {
        server.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": name, "labels": {"app": app}}}));
    }
    (server, client)
}

#[tokio::test]
async fn file_reloads_apply_invalid_ones_keep_the_old_tree_and_every_event_ends_in_a_fate() {
    let (_server, client) = seeded_server().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, config("app=a")).unwrap();
    let manager = Manager::new(
        client.clone(),
        manager_options(ConfigSource::File(path.clone())),
    )
    .await
    .unwrap();
    let cache = manager.cache();
    let health = manager.health_addr().unwrap();
    let fates = manager.recorder().fates().clone();
    let mut reloads = manager.reloads();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));

    ready(health).await;
    assert_eq!(names(&cache).await, vec!["a1"]);

    // A valid change, written as editors write: a new file renamed over the old one.
    replace(&path, &config("app=b"));
    let Reload::Applied { summary, .. } = next_reload(&mut reloads).await else {
        panic!("the change applies");
    };
    assert_eq!(summary, "started 1 informer, stopped 1, kept 0");
    assert_eq!(names(&cache).await, vec!["b1"]);
    eventually("a ConfigReloaded event", || async {
        events_with_reason(&client, "ConfigReloaded")
            .await
            .iter()
            .any(|e| {
                e.type_.as_deref() == Some("Normal")
                    && e.message.as_deref() == Some(summary.as_str())
                    && e.involved_object.kind.as_deref() == Some("CacheConfig")
            })
    })
    .await;

    // An invalid change: rejected with its field path, the last good tree keeps serving.
    replace(
        &path,
        &config("app in (b").replace("labelSelector", "labelSelecter"),
    );
    let Reload::Rejected { errors } = next_reload(&mut reloads).await else {
        panic!("the invalid change is rejected");
    };
    assert!(
        errors.iter().any(|e| e.contains("spec.byObject[0]")),
        "{errors:?}"
    );
    assert_eq!(
        names(&cache).await,
        vec!["b1"],
        "reads still answer from the old tree"
    );
    // Still ready, as Prometheus after a bad reload: the last good config serves.
    let (code, body) = http_get(health, "/readyz?verbose").await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("[+]config ok"), "{body}");
    eventually("an InvalidConfig warning", || async {
        events_with_reason(&client, "InvalidConfig")
            .await
            .iter()
            .any(|e| e.type_.as_deref() == Some("Warning"))
    })
    .await;

    // Fixing it back to the running config is an unchanged reload.
    replace(&path, &config("app=b"));
    assert!(matches!(next_reload(&mut reloads).await, Reload::Unchanged));
    assert_eq!(http_get(health, "/readyz").await.0, 200);

    shutdown.cancel();
    stopped(run).await;
    assert_eq!(
        fates.total(),
        2,
        "ConfigReloaded and InvalidConfig were recorded"
    );
    assert_eq!(
        fates.get(Fate::Created) + fates.get(Fate::Patched) + fates.get(Fate::DroppedShutdown),
        2,
        "each recorded event ends created, patched or dropped_shutdown"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_configmap_volume_symlink_swap_reloads() {
    use std::os::unix::fs::symlink;
    let (_server, client) = seeded_server().await;
    let dir = tempfile::tempdir().unwrap();
    // The layout the kubelet makes: config.yaml -> ..data/config.yaml, ..data -> ..<version>.
    std::fs::create_dir(dir.path().join("..v1")).unwrap();
    std::fs::write(dir.path().join("..v1/config.yaml"), config("app=a")).unwrap();
    symlink("..v1", dir.path().join("..data")).unwrap();
    symlink("..data/config.yaml", dir.path().join("config.yaml")).unwrap();
    let manager = Manager::new(
        client,
        manager_options(ConfigSource::File(dir.path().join("config.yaml"))),
    )
    .await
    .unwrap();
    let cache = manager.cache();
    let health = manager.health_addr().unwrap();
    let mut reloads = manager.reloads();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    ready(health).await;
    assert_eq!(names(&cache).await, vec!["a1"]);

    std::fs::create_dir(dir.path().join("..v2")).unwrap();
    std::fs::write(dir.path().join("..v2/config.yaml"), config("app=b")).unwrap();
    symlink("..v2", dir.path().join("..data_tmp")).unwrap();
    std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
    assert!(matches!(
        next_reload(&mut reloads).await,
        Reload::Applied { .. }
    ));
    assert_eq!(names(&cache).await, vec!["b1"]);
    shutdown.cancel();
    stopped(run).await;
}

#[tokio::test]
async fn a_cacheconfig_resource_gets_its_status_and_an_invalid_edit_sets_valid_false() {
    let (_server, client) = seeded_server().await;
    support::install_cacheconfig_crd(&client).await;
    let configs = Api::<CacheConfig>::namespaced(client.clone(), "default");
    let spec: CacheConfigSpec =
        serde_yaml::from_str("byObject: [{apiVersion: v1, kind: ConfigMap, labelSelector: app=a}]")
            .unwrap();
    configs
        .create(&PostParams::default(), &CacheConfig::new("test", spec))
        .await
        .unwrap();
    let source = ConfigSource::Resource {
        namespace: "default".into(),
        name: "test".into(),
    };
    let manager = Manager::new(client.clone(), manager_options(source))
        .await
        .unwrap();
    let cache = manager.cache();
    let health = manager.health_addr().unwrap();
    let mut reloads = manager.reloads();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    ready(health).await;
    assert_eq!(names(&cache).await, vec!["a1"]);

    let condition = |config: &CacheConfig, type_: &str| {
        config
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
            .map(|c| (c.status.clone(), c.message.clone()))
    };
    eventually("Valid=True, Ready=True", || async {
        let config = configs.get("test").await.unwrap();
        condition(&config, "Valid").is_some_and(|(s, _)| s == "True")
            && condition(&config, "Ready").is_some_and(|(s, _)| s == "True")
            && config.status.as_ref().and_then(|s| s.informer_count) == Some(1)
    })
    .await;

    configs
        .patch(
            "test",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"byObject": [{"apiVersion": "v1",
                "kind": "ConfigMap", "labelSelector": "app in (b"}]}})),
        )
        .await
        .unwrap();
    assert!(matches!(
        next_reload(&mut reloads).await,
        Reload::Rejected { .. }
    ));
    eventually("Valid=False naming the field", || async {
        let config = configs.get("test").await.unwrap();
        condition(&config, "Valid")
            .is_some_and(|(s, m)| s == "False" && m.contains("spec.byObject[0].labelSelector"))
    })
    .await;
    assert_eq!(
        names(&cache).await,
        vec!["a1"],
        "the last good config keeps serving"
    );
    shutdown.cancel();
    stopped(run).await;
}

#[tokio::test]
async fn a_cacheconfig_invalid_at_start_is_not_ready_until_a_valid_spec_runs() {
    let (server, client) = seeded_server().await;
    support::install_cacheconfig_crd(&client).await;
    // Stored through the server's handle (no admission): a spec only informant's own
    // validation rejects.
    server
        .handle()
        .create(
            json!({"apiVersion": "informant.dev/v1alpha1", "kind": "CacheConfig",
            "metadata": {"namespace": "default", "name": "test"},
            "spec": {"syncPeriod": "90 minutes"}}),
        )
        .unwrap();
    let source = ConfigSource::Resource {
        namespace: "default".into(),
        name: "test".into(),
    };
    let manager = Manager::new(client.clone(), manager_options(source))
        .await
        .unwrap();
    let health = manager.health_addr().unwrap();
    let metrics = manager.metrics_addr().unwrap();
    let mut reloads = manager.reloads();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    assert!(matches!(
        next_reload(&mut reloads).await,
        Reload::Rejected { .. }
    ));
    // The defaults run, but they are not what was asked for: not ready, said on the check.
    let (code, body) = http_get(health, "/readyz/config").await;
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("no valid cacheconfig yet"), "{body}");
    assert!(body.contains("spec.syncPeriod"), "{body}");
    let (_, text) = http_get(metrics, "/metrics").await;
    assert!(
        text.contains("\ninformant_config_last_reload_successful 0\n"),
        "{text}"
    );
    assert!(
        text.contains("\ninformant_config_last_reload_success_timestamp_seconds 0.0\n"),
        "{text}"
    );

    Api::<CacheConfig>::namespaced(client.clone(), "default")
        .patch(
            "test",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"syncPeriod": "5h"}})),
        )
        .await
        .unwrap();
    assert!(matches!(
        next_reload(&mut reloads).await,
        Reload::Applied { .. }
    ));
    ready(health).await;
    let (_, text) = http_get(metrics, "/metrics").await;
    assert!(
        text.contains("\ninformant_config_last_reload_successful 1\n"),
        "{text}"
    );
    shutdown.cancel();
    stopped(run).await;
}
