//! Namespaces chosen by label, followed while running, on the embedded API server: a namespace
//! that starts matching costs one LIST per kind the cache holds in it and nothing else is
//! listed; one that stops matching (unlabelled, deleted) has its informers stopped; reads
//! outside the set fail naming the selector; a Rust controller keeps running across the
//! changes, and objects that leave the scope are not reported as deleted.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use informant::apiserver::{TestServer, Verb};
use informant::cache::{self, CacheChange, CacheReloader};
use informant::controller::{Action, Controller, default_error_policy};
use informant::recorder::{NullSink, Options, Pipeline, SystemClock};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const GUARD: Duration = Duration::from_secs(20);

fn options(spec: &str) -> cache::Options {
    informant::config::load_str(&support::cache_config(spec))
        .unwrap()
        .cache
}

/// LIST counts per resource.
fn lists(server: &TestServer) -> BTreeMap<String, u64> {
    server
        .handle()
        .requests()
        .into_iter()
        .filter(|r| r.verb == Verb::List)
        .map(|r| (r.resource, r.count))
        .collect()
}

/// The LISTs made since `before`, per resource (only those that grew).
fn lists_since(server: &TestServer, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    lists(server)
        .into_iter()
        .filter_map(|(resource, n)| {
            let grew = n - before.get(&resource).copied().unwrap_or(0);
            (grew > 0).then_some((resource, grew))
        })
        .collect()
}

/// The shared [`support::Env`] with namespaces `a` (team=shop), `b` (team=web) and `c` (no
/// label), each with a `ConfigMap` and a Secret named after it, and a reloader with no config
/// applied yet.
struct Env {
    base: support::Env,
    reloader: CacheReloader,
}

support::wraps_env!(Env);

impl Env {
    async fn new() -> Self {
        let base = support::Env::new().await;
        for (ns, labels) in [
            ("a", json!({"team": "shop"})),
            ("b", json!({"team": "web"})),
            ("c", json!({})),
        ] {
            base.create(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": labels}}));
            for kind in ["ConfigMap", "Secret"] {
                base.create(json!({"apiVersion": "v1", "kind": kind,
                    "metadata": {"namespace": ns, "name": format!("{ns}-{}", kind.to_lowercase())}}));
            }
        }
        let reloader = base.reloader(GUARD);
        Self { base, reloader }
    }

    async fn names<K: kube::Resource<DynamicType = ()>>(&self) -> Vec<String> {
        support::cached_names::<K>(self.reloader.cache().as_ref()).await
    }

    async fn label(&self, namespace: &str, team: Option<&str>) {
        let patch = json!({"metadata": {"labels": {"team": team}}});
        Api::<Namespace>::all(self.client.clone())
            .patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    /// Waits for the namespace change to reach the reloader and applies it; the first change
    /// of the tree it makes.
    async fn rescoped(&mut self) -> CacheChange {
        tokio::time::timeout(GUARD, async {
            loop {
                self.reloader.scope_changed().await;
                let change = self.reloader.rescope().await.unwrap();
                if change.changed {
                    return change;
                }
            }
        })
        .await
        .expect("the namespace change replans the cache within the guard")
    }

    async fn stop(self) {
        self.base.stop().await;
    }
}

#[tokio::test]
async fn a_namespace_that_starts_matching_costs_one_list_per_cached_kind_and_nothing_else() {
    let mut env = Env::new().await;
    let first = env
        .reloader
        .apply(&options(
            "  namespaceSelector: team=shop\n  byObject: [{apiVersion: v1, kind: ConfigMap}]",
        ))
        .await
        .unwrap();
    assert!(first.unsynced.is_empty(), "{first:?}");
    assert_eq!(env.names::<ConfigMap>().await, ["a-configmap"]);
    // A kind read lazily is cached in the selected namespaces too.
    assert_eq!(env.names::<Secret>().await, ["a-secret"]);
    let outside =
        cache::typed::get::<ConfigMap>(env.reloader.cache().as_ref(), Some("b"), "b-configmap")
            .await
            .unwrap_err();
    assert!(outside.is_unknown_namespace(), "{outside}");
    assert!(
        outside
            .to_string()
            .ends_with("does not match the namespaceSelector \"team=shop\""),
        "{outside}"
    );

    let before = lists(&env.server);
    env.label("b", Some("shop")).await;
    let change = env.rescoped().await;
    assert_eq!(
        change.namespaces_summary().as_deref(),
        Some("namespaces entered: b")
    );
    // Kept: a's two informers and the namespace informer.
    assert_eq!(change.summary(), "started 2 informers, stopped 0, kept 3");
    assert!(
        change
            .started
            .iter()
            .all(|k| k.namespace.as_deref() == Some("b"))
    );
    assert_eq!(
        lists_since(&env.server, &before),
        BTreeMap::from([("configmaps".to_owned(), 1), ("secrets".to_owned(), 1)]),
        "one LIST per cached kind in the new namespace, nothing else"
    );
    assert_eq!(
        env.names::<ConfigMap>().await,
        ["a-configmap", "b-configmap"]
    );
    assert_eq!(env.names::<Secret>().await, ["a-secret", "b-secret"]);

    // A label change that does not change what matches changes nothing.
    let before = lists(&env.server);
    env.label("c", Some("web")).await;
    env.reloader.scope_changed().await;
    assert!(!env.reloader.rescope().await.unwrap().changed);
    assert_eq!(lists_since(&env.server, &before), BTreeMap::new());
    env.stop().await;
}

#[tokio::test]
async fn a_namespace_that_stops_matching_or_is_deleted_has_its_informers_stopped() {
    let mut env = Env::new().await;
    env.label("b", Some("shop")).await;
    env.reloader
        .apply(&options(
            "  namespaceSelector: team=shop\n  byObject: [{apiVersion: v1, kind: ConfigMap}]",
        ))
        .await
        .unwrap();
    assert_eq!(
        env.names::<ConfigMap>().await,
        ["a-configmap", "b-configmap"]
    );
    assert_eq!(
        env.reloader.pool().stats().running,
        3,
        "two ConfigMap informers, namespaces"
    );

    let before = lists(&env.server);
    env.label("a", None).await;
    let change = env.rescoped().await;
    assert_eq!(
        change.namespaces_summary().as_deref(),
        Some("namespaces left: a")
    );
    assert_eq!(change.summary(), "started 0 informers, stopped 1, kept 2");
    assert_eq!(change.stopped[0].namespace.as_deref(), Some("a"));
    assert_eq!(lists_since(&env.server, &before), BTreeMap::new());
    assert_eq!(env.names::<ConfigMap>().await, ["b-configmap"]);
    let gone =
        cache::typed::get::<ConfigMap>(env.reloader.cache().as_ref(), Some("a"), "a-configmap")
            .await
            .unwrap_err();
    assert!(gone.is_unknown_namespace(), "{gone}");

    Api::<Namespace>::all(env.client.clone())
        .delete("b", &DeleteParams::default())
        .await
        .unwrap();
    let change = env.rescoped().await;
    assert_eq!(
        change.namespaces_summary().as_deref(),
        Some("namespaces left: b")
    );
    assert_eq!(env.names::<ConfigMap>().await, Vec::<String>::new());
    assert_eq!(
        env.reloader.pool().stats().running,
        1,
        "only the namespace informer runs"
    );

    // A new namespace that matches enters with one LIST.
    let before = lists(&env.server);
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "d", "labels": {"team": "shop"}}}))
            .unwrap();
    Api::<Namespace>::all(env.client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let change = env.rescoped().await;
    assert_eq!(
        change.namespaces_summary().as_deref(),
        Some("namespaces entered: d")
    );
    assert_eq!(
        lists_since(&env.server, &before),
        BTreeMap::from([("configmaps".to_owned(), 1)])
    );
    env.stop().await;
}

#[tokio::test]
async fn a_rust_controller_keeps_running_and_follows_the_namespaces_in_and_out() {
    let mut env = Env::new().await;
    env.reloader
        .apply(&options("  namespaceSelector: team=shop"))
        .await
        .unwrap();
    let pipeline = Pipeline::new(&Options::default(), NullSink, Arc::new(SystemClock));
    let ctx = informant::controller::Context::new(
        env.reloader.cache(),
        Arc::clone(env.reloader.pool()),
        env.client.clone(),
        pipeline.recorder(),
    );
    let controller = Controller::<ConfigMap>::new("configmaps");
    let store = controller.store();
    let (tx, mut reconciled) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run(
        ctx,
        move |object: Arc<ConfigMap>, _ctx| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(object.name_any());
                Ok::<_, std::convert::Infallible>(Action::await_change())
            }
        },
        default_error_policy,
        stop.clone(),
    ));
    assert_eq!(next(&mut reconciled).await, "a-configmap");

    env.label("b", Some("shop")).await;
    env.rescoped().await;
    // The controller lists its kind again and reconciles what entered, not what it held.
    assert_eq!(next(&mut reconciled).await, "b-configmap");

    env.label("a", None).await;
    env.rescoped().await;
    support::eventually("a's ConfigMap leaves the controller's store", || {
        let names: Vec<String> = store.state().iter().map(|o| o.name_any()).collect();
        async move { names == ["b-configmap"] }
    })
    .await;
    // Still running: a new object in a namespace that matches is reconciled, and a's object
    // is not (leaving the scope is not a deletion to reconcile, and it was held already when
    // b entered).
    Api::<ConfigMap>::namespaced(env.client.clone(), "b")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "b-new"}})).unwrap(),
        )
        .await
        .unwrap();
    loop {
        let name = next(&mut reconciled).await;
        assert_ne!(
            name, "a-configmap",
            "an object that left the scope was reconciled"
        );
        if name == "b-new" {
            break;
        }
    }
    stop.cancel();
    tokio::time::timeout(GUARD, task)
        .await
        .expect("the controller stops")
        .unwrap()
        .unwrap();
    env.stop().await;
}

async fn next(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(GUARD, rx.recv())
        .await
        .expect("a reconcile within the guard")
        .expect("the controller runs")
}

#[tokio::test]
async fn the_manager_says_what_a_namespace_change_did_in_its_status_events_and_metrics() {
    use informant::manager::{ConfigSource, Manager, Reload};
    use k8s_openapi::api::core::v1::Event;
    use support::{eventually, http_get, manager_options};

    let env = Env::new().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        support::cache_config(
            "  namespaceSelector: team=shop\n  byObject: [{apiVersion: v1, kind: ConfigMap}]\n",
        ),
    )
    .unwrap();
    let manager = Manager::new(
        env.client.clone(),
        manager_options(ConfigSource::File(path)),
    )
    .await
    .unwrap();
    let cache = manager.cache();
    let metrics = manager.metrics_addr().unwrap();
    let mut reloads = manager.reloads();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    cache.wait_for_cache_sync(&shutdown).await.unwrap();
    assert_eq!(
        support::cached_names::<ConfigMap>(cache.as_ref()).await,
        ["a-configmap"]
    );

    env.label("b", Some("shop")).await;
    let summary = loop {
        let reload = tokio::time::timeout(GUARD, reloads.recv())
            .await
            .expect("a rescope within the guard")
            .unwrap();
        if let Reload::Rescoped { summary, .. } = reload {
            break summary;
        }
    };
    assert_eq!(
        summary,
        "namespaces entered: b: started 1 informer, stopped 0, kept 2"
    );
    assert_eq!(
        support::cached_names::<ConfigMap>(cache.as_ref()).await,
        ["a-configmap", "b-configmap"]
    );

    let (code, body) = http_get(metrics, "/debug/status").await;
    assert_eq!(code, 200, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        status["namespaceSelectors"],
        json!([{"selector": "team=shop", "namespaces": ["a", "b"], "count": 2}]),
        "{body}"
    );
    let (_, body) = http_get(metrics, "/debug/cache").await;
    let debug: serde_json::Value = serde_json::from_str(&body).unwrap();
    let text = debug["tree"].to_string();
    assert!(
        text.contains("\"namespaceSelector\":\"team=shop\"")
            && text.contains("\"matching\":[\"a\",\"b\"]"),
        "{body}"
    );
    let (_, body) = http_get(metrics, "/metrics").await;
    assert!(
        body.contains("informant_scope_namespaces{selector=\"team=shop\"} 2\n"),
        "{body}"
    );
    let client = env.client.clone();
    eventually("the ScopeChanged Event", || {
        let client = client.clone();
        async move {
            Api::<Event>::namespaced(client, "default")
                .list(&kube::api::ListParams::default())
                .await
                .unwrap()
                .items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("ScopeChanged")
                        && e.type_.as_deref() == Some("Normal")
                        && e.message
                            .as_deref()
                            .is_some_and(|m| m.starts_with("namespaces entered: b"))
                })
        }
    })
    .await;
    shutdown.cancel();
    support::stopped(run).await;
    env.stop().await;
}

#[tokio::test]
async fn a_selector_matching_nearly_every_namespace_uses_one_watch_and_a_new_namespace_costs_no_list()
 {
    let mut env = Env::new().await;
    // 120 more namespaces labelled team=shop (with a, 121 of 124 match: over 90%).
    for i in 0..120 {
        let ns = format!("s-{i:03}");
        env.create(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"team": "shop"}}}));
        env.configmap(&ns, "cm", &json!({}));
    }
    env.reloader
        .apply(&options(
            "  namespaceSelector: team=shop\n  byObject: [{apiVersion: v1, kind: ConfigMap}]",
        ))
        .await
        .unwrap();
    let plan = env.reloader.plan().unwrap().clone();
    assert_eq!(
        plan.wide_selections().len(),
        1,
        "{}",
        plan.describe().to_text()
    );
    let configmap_informers: Vec<_> = env
        .reloader
        .pool()
        .keys()
        .into_iter()
        .filter(|k| k.gvk.kind == "ConfigMap")
        .collect();
    assert_eq!(
        configmap_informers.len(),
        1,
        "one watch over every namespace"
    );
    assert_eq!(configmap_informers[0].namespace, None);
    assert_eq!(
        env.names::<ConfigMap>().await.len(),
        121,
        "a's and the 120 others'"
    );
    let outside =
        cache::typed::get::<ConfigMap>(env.reloader.cache().as_ref(), Some("b"), "b-configmap")
            .await
            .unwrap_err();
    assert!(
        outside.is_unknown_namespace(),
        "filtered in the process: {outside}"
    );

    let before = lists(&env.server);
    env.label("b", Some("shop")).await;
    let change = env.rescoped().await;
    assert_eq!(
        change.namespaces_summary().as_deref(),
        Some("namespaces entered: b")
    );
    assert_eq!(change.started.len(), 0, "{change:?}");
    assert_eq!(
        lists_since(&env.server, &before),
        BTreeMap::new(),
        "the cluster-wide informer holds b already"
    );
    let read =
        cache::typed::get::<ConfigMap>(env.reloader.cache().as_ref(), Some("b"), "b-configmap")
            .await
            .unwrap();
    assert_eq!(read.metadata.name.as_deref(), Some("b-configmap"));
    env.stop().await;
}

/// The RBAC `informant rbac` derives for a namespace selector, proven on a server that enforces
/// RBAC: the manager, holding a `ServiceAccount`'s token bound to exactly those objects, gets
/// ready and follows a namespace into the selector with nothing refused.
#[tokio::test(flavor = "multi_thread")]
async fn the_derived_rbac_of_a_namespace_selector_is_enough_to_follow_the_namespaces() {
    use informant::config::{CacheConfig, rbac};
    use informant::manager::{ConfigSource, Manager};

    let (server, admin) = support::server_with_informant_crds_rbac().await;
    let document = "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\n\
        metadata: {name: informant, namespace: ops}\n\
        spec:\n  namespaceSelector: team=shop\n  byObject: [{apiVersion: v1, kind: ConfigMap}]\n";
    let valid = informant::config::load_str(document).unwrap();
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}}),
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": "a", "labels": {"team": "shop"}}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "informant", "namespace": "ops"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "a"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y", "namespace": "b"}}),
        serde_json::to_value(&valid.resource).unwrap(),
    ]
    .into_iter()
    .chain(
        rbac::Rules::derive(&valid, &rbac::Options::new("ops"))
            .objects("informant", "informant", "ops")
            .to_values()
            .unwrap(),
    ) {
        server.handle().create(object).unwrap();
    }
    let token = server.token("ops", "informant").await.unwrap();
    let client = server.client_with_token(&token).await.unwrap();
    let manager = Manager::new(
        client,
        support::manager_options(ConfigSource::Resource {
            namespace: "ops".into(),
            name: "informant".into(),
        }),
    )
    .await
    .unwrap();
    let cache = manager.cache();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    let configs: Api<CacheConfig> = Api::namespaced(admin.clone(), "ops");
    let matched = |n: i32| {
        let configs = configs.clone();
        move || {
            let configs = configs.clone();
            async move {
                let status = configs.get("informant").await.unwrap().status;
                status.is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                        && s.namespace_selectors
                            .first()
                            .is_some_and(|sel| sel.count == n)
                })
            }
        }
    };
    support::eventually("Ready, the selector matching a", matched(1)).await;
    Api::<Namespace>::all(admin.clone())
        .patch(
            "b",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "shop"}}})),
        )
        .await
        .unwrap();
    support::eventually("Ready, the selector matching a and b", matched(2)).await;
    assert_eq!(
        support::cached_names::<ConfigMap>(cache.as_ref()).await,
        ["x", "y"]
    );
    assert_eq!(
        server.handle().refusals(),
        Vec::new(),
        "nothing the manager asked for was refused"
    );
    shutdown.cancel();
    support::stopped(run).await;
}
