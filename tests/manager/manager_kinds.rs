//! Kinds that come and go, on the embedded API server: a `byObject` kind whose CRD is not
//! installed waits (`WaitingForKind`) without listing it; it starts when its CRD becomes
//! established, stops (store freed) when the CRD is deleted, and starts again when it comes
//! back, loop after loop with bounded requests.

use crate::support;

use std::time::Duration;

use informant::apiserver::{TestServer, Verb};
use informant::cache::{self, CacheChange, CacheReloader, ListOptions};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const GUARD: Duration = Duration::from_secs(20);

fn widget() -> GroupVersionKind {
    GroupVersionKind::gvk("example.com", "v1", "Widget")
}

/// The `widgets.example.com` CRD, namespaced, serving `v1`.
pub(crate) fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap()
}

fn count(server: &TestServer, verb: Verb, resource: &str) -> u64 {
    server.handle().request_count(verb, resource)
}

fn total(server: &TestServer) -> u64 {
    server.handle().requests().iter().map(|r| r.count).sum()
}

/// The shared [`support::Env`] with a `ConfigMap`, and a reloader with no config applied yet.
struct Env {
    base: support::Env,
    reloader: CacheReloader,
}

support::wraps_env!(Env);

impl Env {
    async fn new() -> Self {
        let base = support::Env::new().await;
        base.configmap("default", "cm", &json!({}));
        let reloader = base.reloader(GUARD);
        Self { base, reloader }
    }

    fn crds(&self) -> Api<CustomResourceDefinition> {
        Api::all(self.client.clone())
    }

    async fn install(&self) {
        self.crds()
            .create(&PostParams::default(), &widget_crd())
            .await
            .unwrap();
    }

    async fn uninstall(&self) {
        self.crds()
            .delete("widgets.example.com", &DeleteParams::default())
            .await
            .unwrap();
    }

    /// Waits for the next change of the tree a cluster change makes.
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
        .expect("the CRD change replans the cache within the guard")
    }

    async fn widgets(&self) -> Result<Vec<String>, cache::Error> {
        let mut names: Vec<String> = self
            .reloader
            .cache()
            .list(&widget(), &ListOptions::default())
            .await?
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        names.sort();
        Ok(names)
    }

    fn create_widget(&self, name: &str) {
        self.server
            .handle()
            .create(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"namespace": "default", "name": name}}))
            .unwrap();
    }

    async fn stop(self) {
        self.base.stop().await;
    }
}

fn config() -> cache::Options {
    informant::config::load_str(&support::cache_config(
        "  byObject:\n    - {apiVersion: example.com/v1, kind: Widget}\n    - {apiVersion: v1, kind: ConfigMap}\n",
    ))
    .unwrap()
    .cache
}

use informant::cache::Cache as _;

#[tokio::test]
async fn a_kind_waits_for_its_crd_starts_with_it_stops_when_it_goes_and_comes_back() {
    let mut env = Env::new().await;
    let first = env.reloader.apply(&config()).await.unwrap();
    assert!(first.unsynced.is_empty(), "{first:?}");
    let plan = env.reloader.plan().unwrap().clone();
    assert_eq!(
        plan.by_object_kinds(),
        [GroupVersionKind::gvk("", "v1", "ConfigMap")]
    );
    assert_eq!(plan.waiting_kinds().len(), 1);
    let rows = env.reloader.cache().informers();
    let waiting: Vec<_> = rows.iter().filter(|i| i.is_waiting_for_kind()).collect();
    assert_eq!(waiting.len(), 1, "{rows:?}");
    assert_eq!(
        waiting[0].message.as_deref(),
        Some("no CustomResourceDefinition defines Widget in group example.com")
    );
    let error = env.widgets().await.unwrap_err();
    assert!(
        matches!(error, cache::Error::WaitingForKind { .. }),
        "{error}"
    );
    assert_eq!(
        count(&env.server, Verb::List, "widgets"),
        0,
        "nothing lists a kind that is not served"
    );
    assert_eq!(
        count(&env.server, Verb::List, "customresourcedefinitions"),
        1
    );

    let mut lists_of_widgets = 0;
    for round in 1..=3 {
        let before = total(&env.server);
        env.install().await;
        let change = env.rescoped().await;
        assert_eq!(
            change.scope_summary().as_deref(),
            Some("kinds served: example.com/v1 Widget"),
            "round {round}"
        );
        assert_eq!(change.started.len(), 1, "round {round}: {change:?}");
        lists_of_widgets += 1;
        assert_eq!(count(&env.server, Verb::List, "widgets"), lists_of_widgets);
        env.create_widget(&format!("w{round}"));
        support::eventually("the new Widget is cached", || {
            let reader = env.reloader.cache();
            let name = format!("w{round}");
            async move {
                reader
                    .list(&widget(), &ListOptions::default())
                    .await
                    .is_ok_and(|all| {
                        all.iter()
                            .any(|o| o.metadata.name.as_deref() == Some(&name))
                    })
            }
        })
        .await;
        assert_eq!(env.widgets().await.unwrap(), [format!("w{round}")]);

        env.uninstall().await;
        let change = env.rescoped().await;
        assert_eq!(
            change.scope_summary().as_deref(),
            Some("kinds waiting: example.com/v1 Widget"),
            "round {round}"
        );
        assert_eq!(change.stopped.len(), 1, "round {round}: {change:?}");
        assert!(
            env.reloader.pool().keys().iter().all(|k| k.gvk != widget()),
            "the informer is gone from the pool, its store freed"
        );
        assert!(matches!(
            env.widgets().await.unwrap_err(),
            cache::Error::WaitingForKind { .. }
        ));
        let requests = total(&env.server) - before;
        // Per round: the CRD's create and delete, the Widget's create (through the handle, not
        // counted), discovery of the kind, its LIST and WATCH, and the CRD watch's events: a
        // handful, never a loop.
        assert!(
            requests <= 12,
            "round {round}: {requests} requests: {:?}",
            env.server.handle().requests()
        );
    }
    assert_eq!(
        count(&env.server, Verb::List, "widgets"),
        3,
        "one LIST per install"
    );
    assert_eq!(
        count(&env.server, Verb::List, "customresourcedefinitions"),
        1,
        "the CRD watch lists once"
    );
    assert_eq!(
        count(&env.server, Verb::List, "configmaps"),
        1,
        "the other kind never relisted"
    );
    env.stop().await;
}

/// Asks for one child `ConfigMap` named `<object>-child`.
pub(crate) const HOOK: &str = r#"
import json, sys
request = json.load(sys.stdin)
name = request["object"]["metadata"]["name"]
json.dump({"children": [{"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": name + "-child"}}]}, sys.stdout)
"#;

/// Creates the `CacheConfig` `default/test` caching Widgets, and the `Controller`
/// `default/widgets` whose hook gives each Widget a child.
async fn create_widget_controller(
    client: &Client,
    hook: &std::path::Path,
) -> Api<informant::hooks::Controller> {
    use informant::config::CacheConfig;
    let config: CacheConfig = serde_yaml::from_str(&support::cache_config(
        "  byObject: [{apiVersion: example.com/v1, kind: Widget}]\n",
    ))
    .unwrap();
    Api::<CacheConfig>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
    create_widgets_hook(client, hook).await
}

/// Creates the `Controller` `default/widgets`: for Widgets, owning `ConfigMap`s, calling the
/// exec hook `hook` ([`HOOK`] gives each Widget a child).
pub(crate) async fn create_widgets_hook(
    client: &Client,
    hook: &std::path::Path,
) -> Api<informant::hooks::Controller> {
    use informant::hooks::Controller;
    let controller: Controller = serde_yaml::from_str(&format!(
        "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: widgets, namespace: default}}
spec:
  for: {{apiVersion: example.com/v1, kind: Widget}}
  owns: [{{apiVersion: v1, kind: ConfigMap}}]
  hook: {{exec: {{command: [python3, {}]}}}}
",
        hook.display()
    ))
    .unwrap();
    let controllers = Api::<Controller>::namespaced(client.clone(), "default");
    controllers
        .create(&PostParams::default(), &controller)
        .await
        .unwrap();
    controllers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_controller_waits_for_its_kind_and_follows_its_crd_in_and_out() {
    use informant::config::CacheConfig;
    use informant::manager::{ConfigSource, Manager};
    use k8s_openapi::api::core::v1::ConfigMap;
    use support::{eventually, http_get};

    support::require("python3");
    let (server, client) = support::server_with_informant_crds().await;
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("hook.py");
    std::fs::write(&hook, HOOK).unwrap();
    let controllers = create_widget_controller(&client, &hook).await;
    let mut manager = Manager::new(
        client.clone(),
        support::manager_options(ConfigSource::Resource {
            namespace: "default".into(),
            name: "test".into(),
        }),
    )
    .await
    .unwrap();
    informant::hooks::add_to_manager(&mut manager);
    let health = manager.health_addr().unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));

    let ready = |want: &'static str| {
        let controllers = controllers.clone();
        move || {
            let controllers = controllers.clone();
            async move {
                let status = controllers.get("widgets").await.unwrap().status;
                status.is_some_and(|s| {
                    s.conditions.iter().any(|c| {
                        c.type_ == "Ready"
                            && (c.reason == want || (want == "Running" && c.status == "True"))
                    })
                })
            }
        }
    };
    eventually("the controller waits for its kind", ready("WaitingForKind")).await;
    let (code, body) = http_get(health, "/readyz/informers").await;
    assert_eq!(code, 500, "{body}");
    assert!(
        body.contains("waiting for kind: example.com/v1 Widget: no CustomResourceDefinition defines Widget in group example.com"),
        "{body}"
    );
    let cacheconfigs = Api::<CacheConfig>::namespaced(client.clone(), "default");
    eventually("Ready=False WaitingForKind on the CacheConfig", || async {
        cacheconfigs
            .get("test")
            .await
            .unwrap()
            .status
            .is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.reason == "WaitingForKind")
            })
    })
    .await;

    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), "default");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for round in 1..=2 {
        crds.create(&PostParams::default(), &widget_crd())
            .await
            .unwrap();
        eventually(
            "the controller runs once its kind is served",
            ready("Running"),
        )
        .await;
        let name = format!("w{round}");
        server
            .handle()
            .create(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"namespace": "default", "name": name}}))
            .unwrap();
        let child = format!("{name}-child");
        eventually("the controller reconciled the new Widget", || async {
            configmaps.get_opt(&child).await.unwrap().is_some()
        })
        .await;

        crds.delete("widgets.example.com", &DeleteParams::default())
            .await
            .unwrap();
        eventually("the controller waits again", ready("WaitingForKind")).await;
        eventually("the Widget informer stopped", || async {
            http_get(health, "/readyz/informers").await.0 == 500
        })
        .await;
    }
    assert_eq!(
        count(&server, Verb::List, "widgets"),
        2,
        "one LIST per install, none while the kind waits"
    );
    shutdown.cancel();
    support::stopped(run).await;
}

/// A `ServiceAccount` `ops/informant` that may list and watch Widgets and `ConfigMaps`
/// everywhere, and nothing of `CustomResourceDefinitions`; its client.
async fn account_without_crds(server: &TestServer) -> Client {
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "informant", "namespace": "ops"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "informant"},
               "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"],
                          "verbs": ["list", "watch"]},
                         {"apiGroups": [""], "resources": ["configmaps"],
                          "verbs": ["list", "watch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "informant"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "informant"},
               "subjects": [{"kind": "ServiceAccount", "name": "informant", "namespace": "ops"}]}),
    ] {
        server.handle().create(object).unwrap();
    }
    let token = server.token("ops", "informant").await.unwrap();
    server.client_with_token(&token).await.unwrap()
}

/// How many times the server refused to list or watch `CustomResourceDefinitions`.
fn crd_refusals(server: &TestServer) -> usize {
    server
        .handle()
        .refusals()
        .iter()
        .filter(|r| r.resource == "customresourcedefinitions")
        .count()
}

/// Drives `reloader` (its discovery refresh on) until a cluster change changes the tree, or
/// `refreshes` more refreshes made none.
async fn drive(reloader: &mut CacheReloader, refreshes: u64) -> Option<CacheChange> {
    let until = reloader.discovery_refreshes() + refreshes;
    tokio::time::timeout(GUARD, async {
        while reloader.discovery_refreshes() < until {
            reloader.scope_changed().await;
            let change = reloader.rescope().await.unwrap();
            if change.changed {
                return Some(change);
            }
        }
        None
    })
    .await
    .expect("the discovery refresh runs at its period")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_rbac_for_crds_a_kind_is_learned_by_a_periodic_discovery_refresh_never_a_list_loop()
{
    use informant::cache::{Context, Discovery};
    use std::sync::Arc;

    let (server, admin) = support::server_with_informant_crds_rbac().await;
    let client = account_without_crds(&server).await;
    let (tracker, shutdown) = (
        tokio_util::task::TaskTracker::new(),
        CancellationToken::new(),
    );
    // The period is injected: each refresh is counted, not timed.
    let period = Duration::from_millis(100);
    let context = Context {
        sync_timeout: Some(GUARD),
        ..Context::new(client.clone(), Arc::new(Discovery::new(client)))
    };
    let mut reloader = CacheReloader::new(context, tracker.clone(), shutdown.clone())
        .with_sync_timeout(GUARD)
        .with_discovery_refresh(period);
    let first = reloader.apply(&config()).await.unwrap();
    assert!(
        first.unsynced.is_empty(),
        "a refused CRD watch is no unsynced informer: {first:?}"
    );
    assert_eq!(reloader.plan().unwrap().waiting_kinds().len(), 1);
    assert_eq!(crd_refusals(&server), 1, "the CRDs' LIST, refused once");

    // Waiting: a handful of refreshes, each one discovery request or two, no LIST.
    let discovery = server.handle().discovery_requests();
    assert!(drive(&mut reloader, 5).await.is_none(), "nothing changed");
    let asked = server.handle().discovery_requests() - discovery;
    assert!(
        (5..=10).contains(&asked),
        "{asked} discovery requests over 5 refreshes of one kind"
    );
    assert_eq!(crd_refusals(&server), 1, "the CRDs' LIST is never retried");
    assert_eq!(count(&server, Verb::List, "widgets"), 0);

    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for round in 1..=2 {
        crds.create(&PostParams::default(), &widget_crd())
            .await
            .unwrap();
        let refreshes = reloader.discovery_refreshes();
        let change = drive(&mut reloader, 3)
            .await
            .expect("the next refresh sees the kind served");
        assert_eq!(
            change.scope_summary().as_deref(),
            Some("kinds served: example.com/v1 Widget"),
            "round {round}"
        );
        assert!(
            reloader.discovery_refreshes() - refreshes <= 2,
            "learned at the next refresh"
        );
        assert_eq!(count(&server, Verb::List, "widgets"), round);

        crds.delete("widgets.example.com", &DeleteParams::default())
            .await
            .unwrap();
        let change = drive(&mut reloader, 3)
            .await
            .expect("the next refresh sees the kind gone");
        assert_eq!(
            change.scope_summary().as_deref(),
            Some("kinds waiting: example.com/v1 Widget"),
            "round {round}"
        );
    }
    assert_eq!(crd_refusals(&server), 1, "the CRDs' LIST is never retried");
    shutdown.cancel();
    tracker.close();
    tokio::time::timeout(GUARD, tracker.wait()).await.unwrap();
}
