//! The pool-aware cache reload against the embedded API server: a changed `byObject` entry
//! restarts exactly that kind's informers (one LIST each), every other informer keeps running
//! (no LIST), a reload that changes nothing makes no request, lazily started informers
//! survive reloads, and a kind the API server does not serve waits without blocking the others.
//! A reload that changes `spec.sharding` is rejected at that path, as an invalid one is.

use crate::support;

use std::time::Duration;

use informant::apiserver::{TestServer, Verb};
use informant::cache::{Cache, CacheReloader};
use informant::config::{CacheConfig, CacheConfigSpec};
use informant::manager::{ConfigSource, Manager, Reload};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn options(yaml: &str) -> informant::cache::Options {
    informant::config::load_str(yaml).unwrap().cache
}

fn config(configmap_selector: &str, extra_namespace: bool) -> String {
    let namespaces = if extra_namespace {
        "{team-a: {}, team-b: {}}"
    } else {
        "{team-a: {}}"
    };
    format!(
        "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {{name: test, namespace: default}}
spec:
  byObject:
    - {{apiVersion: v1, kind: ConfigMap, labelSelector: '{configmap_selector}'}}
    - {{apiVersion: v1, kind: Secret, namespaces: {namespaces}}}
"
    )
}

fn lists(server: &TestServer, resource: &str) -> u64 {
    server.handle().request_count(Verb::List, resource)
}

fn total_requests(server: &TestServer) -> u64 {
    server.handle().requests().iter().map(|r| r.count).sum()
}

/// The shared [`support::Env`] with `ConfigMap`s and `Secret`s in `team-a` and `team-b`, a `Pod`,
/// and a reloader with no config applied yet.
struct Env {
    base: support::Env,
    reloader: CacheReloader,
}

support::wraps_env!(Env);

impl Env {
    async fn new() -> Self {
        let base = support::Env::new().await;
        let h = base.server.handle();
        for (ns, name, app) in [
            ("team-a", "a1", "a"),
            ("team-a", "b1", "b"),
            ("team-b", "b2", "b"),
        ] {
            h.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": ns, "name": name, "labels": {"app": app}}}))
                .unwrap();
            h.create(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"namespace": ns, "name": name}}))
                .unwrap();
        }
        h.create(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": "team-a", "name": "web"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))
            .unwrap();
        let reloader = base.reloader(Duration::from_secs(30));
        Self { base, reloader }
    }

    async fn names<K: kube::Resource<DynamicType = ()>>(&self) -> Vec<String> {
        support::cached_names::<K>(self.reloader.cache().as_ref()).await
    }

    async fn stop(self) {
        self.base.stop().await;
    }
}

#[tokio::test]
async fn changing_one_by_object_entry_restarts_only_that_kinds_informers() {
    let mut env = Env::new().await;
    let first = env
        .reloader
        .apply(&options(&config("app=a", false)))
        .await
        .unwrap();
    assert!(first.changed);
    assert_eq!(first.started.len(), 2, "{first:?}");
    assert!(first.unsynced.is_empty(), "{first:?}");
    assert_eq!(env.names::<ConfigMap>().await, vec!["a1"]);
    // A kind first read at run time starts lazily in the default cache.
    assert_eq!(env.names::<Pod>().await, vec!["web"]);
    let (cm, secrets, pods) = (
        lists(&env.server, "configmaps"),
        lists(&env.server, "secrets"),
        lists(&env.server, "pods"),
    );
    assert_eq!((cm, secrets, pods), (1, 1, 1));

    let change = env
        .reloader
        .apply(&options(&config("app=b", false)))
        .await
        .unwrap();
    assert_eq!(change.summary(), "started 1 informer, stopped 1, kept 2");
    assert_eq!(change.started[0].gvk.kind, "ConfigMap");
    assert_eq!(change.stopped[0].gvk.kind, "ConfigMap");
    assert_eq!(
        lists(&env.server, "configmaps"),
        cm + 1,
        "the changed kind lists once"
    );
    assert_eq!(
        lists(&env.server, "secrets"),
        secrets,
        "unchanged informers do not list"
    );
    assert_eq!(
        lists(&env.server, "pods"),
        pods,
        "the lazy informer survives the reload"
    );
    assert_eq!(env.names::<ConfigMap>().await, vec!["b1", "b2"]);
    assert_eq!(env.names::<Pod>().await, vec!["web"]);
    assert_eq!(env.reloader.pool().stats().running, 3);

    let before = total_requests(&env.server);
    let same = env
        .reloader
        .apply(&options(&config("app=b", false)))
        .await
        .unwrap();
    assert!(!same.changed);
    assert_eq!(
        total_requests(&env.server),
        before,
        "an unchanged reload makes no request"
    );
    env.stop().await;
}

/// A read in flight on the old tree holds the informer only that tree used: the reload's
/// summary counts it as stopping, not kept, and the next sweep stops it once the read ends.
#[tokio::test]
async fn an_informer_a_read_in_flight_holds_is_counted_as_stopping_and_swept_after() {
    let mut env = Env::new().await;
    env.reloader
        .apply(&options(&config("app=a", false)))
        .await
        .unwrap();
    assert_eq!(env.names::<ConfigMap>().await, vec!["a1"]);
    // What a read that started before the next reload holds until it ends.
    let in_flight = env.reloader.cache().load();
    let change = env
        .reloader
        .apply(&options(&config("app=b", false)))
        .await
        .unwrap();
    assert_eq!(
        change.summary(),
        "started 1 informer, stopped 0 (1 more once the reads in flight on the old tree end), kept 1"
    );
    assert_eq!(change.stopping.len(), 1, "{change:?}");
    assert_eq!(change.stopping[0].gvk.kind, "ConfigMap");
    assert_eq!(env.reloader.pool().stats().running, 3, "not stopped yet");
    assert!(env.reloader.sweep().is_empty(), "the read still holds it");
    drop(in_flight);
    let swept = env.reloader.sweep();
    assert_eq!(swept.len(), 1, "{swept:?}");
    assert_eq!(swept[0].gvk.kind, "ConfigMap");
    assert_eq!(env.reloader.pool().stats().running, 2);
    assert_eq!(env.names::<ConfigMap>().await, vec!["b1", "b2"]);
    env.stop().await;
}

#[tokio::test]
async fn adding_a_namespace_starts_only_that_namespaces_informer() {
    let mut env = Env::new().await;
    env.reloader
        .apply(&options(&config("app=a", false)))
        .await
        .unwrap();
    assert_eq!(env.names::<Secret>().await, vec!["a1", "b1"]);
    let secrets = lists(&env.server, "secrets");
    let change = env
        .reloader
        .apply(&options(&config("app=a", true)))
        .await
        .unwrap();
    assert_eq!(change.summary(), "started 1 informer, stopped 0, kept 2");
    assert_eq!(change.started[0].namespace.as_deref(), Some("team-b"));
    assert_eq!(lists(&env.server, "secrets"), secrets + 1);
    assert_eq!(env.names::<Secret>().await, vec!["a1", "b1", "b2"]);
    env.stop().await;
}

#[tokio::test]
async fn an_unknown_eager_kind_waits_for_its_crd_and_does_not_block_the_other_kinds() {
    let mut env = Env::new().await;
    let yaml = "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: test, namespace: default}
spec:
  byObject:
    - {apiVersion: example.com/v1, kind: Widget}
    - {apiVersion: v1, kind: ConfigMap}
";
    let change = env.reloader.apply(&options(yaml)).await.unwrap();
    assert!(change.unsynced.is_empty(), "{change:?}");
    let waiting = env.reloader.plan().unwrap().waiting_kinds();
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(waiting[0].0.kind, "Widget");
    assert_eq!(env.names::<ConfigMap>().await, vec!["a1", "b1", "b2"]);
    env.stop().await;
}

/// `condition` of type `type_` in the resource's status: its status and message.
fn condition(config: &CacheConfig, type_: &str) -> Option<(String, String)> {
    config
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
        .map(|c| (c.status.clone(), c.message.clone()))
}

#[tokio::test]
async fn a_reload_that_changes_sharding_is_rejected_at_its_path_and_the_running_config_stays() {
    let (server, client) = support::server_with_cacheconfig_crd().await;
    server
        .handle()
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": "a1", "labels": {"app": "a"}}}))
        .unwrap();
    let configs: Api<CacheConfig> = Api::namespaced(client.clone(), "default");
    let spec: CacheConfigSpec = serde_json::from_value(json!({"byObject": [
        {"apiVersion": "v1", "kind": "ConfigMap", "labelSelector": "app=a"}]}))
    .unwrap();
    configs
        .create(&PostParams::default(), &CacheConfig::new("test", spec))
        .await
        .unwrap();
    let source = ConfigSource::Resource {
        namespace: "default".into(),
        name: "test".into(),
    };
    let manager = Manager::new(client.clone(), support::manager_options(source))
        .await
        .unwrap();
    let cache = manager.cache();
    let mut reloads = manager.reloads();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    support::eventually("Valid=True", || async {
        let config = configs.get("test").await.unwrap();
        condition(&config, "Valid").is_some_and(|(s, _)| s == "True")
    })
    .await;

    // A valid edit that also turns sharding on: the whole edit is refused, the selector
    // change included.
    configs
        .patch(
            "test",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"sharding": {"ring": "shop"}, "byObject": [
                {"apiVersion": "v1", "kind": "ConfigMap", "labelSelector": "app=b"}]}})),
        )
        .await
        .unwrap();
    let reload = tokio::time::timeout(support::WAIT, reloads.recv())
        .await
        .expect("a reload")
        .unwrap();
    let Reload::Rejected { errors } = reload else {
        panic!("expected a rejection, got {reload:?}");
    };
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with(
            "spec.sharding: changing sharding needs a restart of every replica; the replicas \
             run with no sharding, this config asks for sharding {ring: shop, key: namespace}"
        ),
        "{errors:?}"
    );
    support::eventually("Valid=False naming spec.sharding", || async {
        let config = configs.get("test").await.unwrap();
        condition(&config, "Valid").is_some_and(|(s, m)| {
            s == "False" && m.contains("spec.sharding: changing sharding needs a restart")
        })
    })
    .await;
    support::eventually(
        "a Warning InvalidConfig event naming spec.sharding",
        || async {
            Api::<Event>::namespaced(client.clone(), "default")
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("InvalidConfig")
                        && e.type_.as_deref() == Some("Warning")
                        && e.message
                            .as_deref()
                            .is_some_and(|m| m.contains("spec.sharding"))
                })
        },
    )
    .await;
    assert_eq!(
        support::cached_names::<ConfigMap>(cache.as_ref()).await,
        vec!["a1"],
        "the running config keeps serving"
    );
    shutdown.cancel();
    support::stopped(run).await;
}

/// The manager stops an informer a read in flight on the old tree held past the reload soon
/// after that read ends, without waiting for another reload.
#[tokio::test]
async fn the_manager_stops_an_informer_a_read_held_past_the_reload_once_the_read_ends() {
    let (server, client) = support::server().await;
    server
        .handle()
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "team-a", "name": "a1", "labels": {"app": "a"}}}))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, config("app=a", false)).unwrap();
    let manager = Manager::new(
        client.clone(),
        support::manager_options(ConfigSource::File(path.clone())),
    )
    .await
    .unwrap();
    let (cache, pool) = (manager.cache(), manager.pool());
    let mut reloads = manager.reloads();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    tokio::time::timeout(
        support::WAIT,
        cache.wait_for_cache_sync(&CancellationToken::new()),
    )
    .await
    .expect("the first config serves")
    .unwrap();
    assert_eq!(
        support::cached_names::<ConfigMap>(cache.as_ref()).await,
        vec!["a1"]
    );

    let in_flight = cache.load();
    support::replace(&path, &config("app=b", false));
    let reload = tokio::time::timeout(support::WAIT, reloads.recv())
        .await
        .expect("a reload")
        .unwrap();
    let Reload::Applied { summary, .. } = reload else {
        panic!("expected an applied reload, got {reload:?}");
    };
    assert!(
        summary.starts_with(
            "started 1 informer, stopped 0 (1 more once the reads in flight on the old tree end)"
        ),
        "{summary}"
    );
    let stopped = pool.stats().stopped_total;
    drop(in_flight);
    support::eventually("the held informer stops with no other reload", || async {
        pool.stats().stopped_total == stopped + 1
    })
    .await;
    assert!(
        reloads.try_recv().is_err(),
        "no other reload happened meanwhile"
    );
    shutdown.cancel();
    support::stopped(run).await;
}

/// Changing only a projection (`transform.keepFields`) is an ordinary reload: that kind's
/// informer restarts (one LIST) and holds the projected objects; the others keep running.
#[tokio::test]
async fn changing_only_a_projection_restarts_only_that_informer() {
    let mut env = Env::new().await;
    let with = |keep: &str| {
        format!(
            "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {{name: test, namespace: default}}
spec:
  byObject:
    - {{apiVersion: v1, kind: ConfigMap, transform: {{keepFields: [{keep}]}}}}
    - {{apiVersion: v1, kind: Secret, namespaces: {{team-a: {{}}}}}}
"
        )
    };
    env.reloader.apply(&options(&with("data"))).await.unwrap();
    let (cm, secrets) = (
        lists(&env.server, "configmaps"),
        lists(&env.server, "secrets"),
    );
    let change = env
        .reloader
        .apply(&options(&with("metadata.annotations")))
        .await
        .unwrap();
    assert_eq!(change.summary(), "started 1 informer, stopped 1, kept 1");
    assert_eq!(change.started[0].gvk.kind, "ConfigMap");
    assert_eq!(lists(&env.server, "configmaps"), cm + 1);
    assert_eq!(
        lists(&env.server, "secrets"),
        secrets,
        "the other kind does not list"
    );
    let projections: Vec<_> = env
        .reloader
        .cache()
        .informers()
        .into_iter()
        .map(|i| (i.kind, i.projection))
        .collect();
    assert!(
        projections.contains(&(
            "ConfigMap".to_owned(),
            Some("keepFields[metadata.annotations]".to_owned())
        )),
        "{projections:?}"
    );
    assert!(
        projections.contains(&("Secret".to_owned(), None)),
        "{projections:?}"
    );
    env.stop().await;
}
