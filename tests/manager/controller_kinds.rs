//! Controllers whose kinds come and go, on the embedded API server with a whole manager: a Rust
//! controller and a hook `Controller` on a custom kind that is not in the `CacheConfig`'s
//! `byObject` wait for its CRD (`WaitingForKind` in `status.controllers`, the `Controller`'s
//! status and `/readyz/controllers`), start when it is established, stop when it is deleted
//! and start again when it comes back, loop after loop, with bounded requests.

use crate::support;

use std::sync::Arc;

use informant::apiserver::{TestServer, Verb};
use informant::config::CacheConfig;
use informant::controller::{Action, Context, Controller, default_error_policy};
use informant::manager::{ConfigSource, Manager};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use support::{eventually, http_get};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::manager_kinds::{HOOK, create_widgets_hook, widget_crd};

/// The custom kind the controllers reconcile; its CRD is [`widget_crd`].
#[derive(
    kube::CustomResource, Clone, Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[kube(group = "example.com", version = "v1", kind = "Widget", namespaced)]
struct WidgetSpec {}

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

fn count(server: &TestServer, verb: Verb, resource: &str) -> u64 {
    server.handle().request_count(verb, resource)
}

/// Every request but the GETs (the test's own polling of statuses and children).
fn total(server: &TestServer) -> u64 {
    server
        .handle()
        .requests()
        .iter()
        .filter(|r| r.verb != Verb::Get)
        .map(|r| r.count)
        .sum()
}

/// Creates the `CacheConfig` `default/test`, which lists no custom kind in `byObject`.
async fn create_cache_config(client: &Client) {
    let config: CacheConfig = serde_yaml::from_str(&support::cache_config(
        "  byObject: [{apiVersion: v1, kind: ConfigMap}]\n",
    ))
    .unwrap();
    Api::<CacheConfig>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
}

/// A manager reading `default/test`, on both listeners.
async fn manager(client: &Client) -> Manager {
    Manager::new(
        client.clone(),
        support::manager_options(ConfigSource::Resource {
            namespace: "default".into(),
            name: "test".into(),
        }),
    )
    .await
    .unwrap()
}

/// The `status.controllers` row of `name` has `reason`.
async fn controller_reason(client: &Client, name: &str, reason: &str) -> bool {
    Api::<CacheConfig>::namespaced(client.clone(), "default")
        .get("test")
        .await
        .unwrap()
        .status
        .is_some_and(|s| {
            s.controllers
                .iter()
                .any(|c| c.name == name && c.reason == reason)
        })
}

fn create_widget(server: &TestServer, name: &str) {
    server
        .handle()
        .create(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"namespace": "default", "name": name}, "spec": {}}))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_controller_waits_for_its_crd_runs_with_it_stops_when_it_goes_and_comes_back() {
    let (server, client) = support::server_with_informant_crds().await;
    create_cache_config(&client).await;
    let mut manager = manager(&client).await;
    let (seen, mut reconciled) = mpsc::unbounded_channel::<String>();
    let controller = Controller::<Widget>::new("widgets");
    let store = controller.store();
    controller.add_to(
        &mut manager,
        move |widget: Arc<Widget>, _: Arc<Context>| {
            let seen = seen.clone();
            async move {
                let _ = seen.send(widget.metadata.name.clone().unwrap_or_default());
                Ok::<_, Never>(Action::await_change())
            }
        },
        default_error_policy,
    );
    let health = manager.health_addr().unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));

    eventually("status.controllers says the controller waits", || {
        controller_reason(&client, "widgets", "WaitingForKind")
    })
    .await;
    // As below: readiness may lag the status by a lookup.
    let why = "waiting for kind: widgets: example.com/v1 Widget: no CustomResourceDefinition defines Widget in group example.com";
    eventually("readyz names the missing CRD", || async {
        let (code, body) = http_get(health, "/readyz/controllers").await;
        code == 500 && body.contains(why)
    })
    .await;
    let status = Api::<CacheConfig>::namespaced(client.clone(), "default")
        .get("test")
        .await
        .unwrap()
        .status
        .unwrap();
    let row = status.controllers.iter().find(|c| c.name == "widgets");
    assert_eq!(
        row.and_then(|r| r.message.as_deref()),
        Some(
            "not started until its kinds are served: example.com/v1 Widget: no CustomResourceDefinition defines Widget in group example.com"
        ),
        "{status:?}"
    );
    assert!(row.is_some_and(|r| !r.ready));
    assert_eq!(count(&server, Verb::List, "widgets"), 0, "nothing lists it");

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for round in 1..=3 {
        let before = total(&server);
        crds.create(&PostParams::default(), &widget_crd())
            .await
            .unwrap();
        eventually("the controller runs once its kind is served", || {
            controller_reason(&client, "widgets", "Running")
        })
        .await;
        assert_eq!(http_get(health, "/readyz/controllers").await.0, 200);
        let name = format!("w{round}");
        create_widget(&server, &name);
        let got = tokio::time::timeout(support::WAIT, async {
            while let Some(got) = reconciled.recv().await {
                if got == name {
                    return;
                }
            }
        })
        .await;
        assert!(got.is_ok(), "round {round}: {name} was not reconciled");
        assert!(
            store.state().iter().any(|w| w.name() == name),
            "the runner's store follows"
        );

        crds.delete("widgets.example.com", &DeleteParams::default())
            .await
            .unwrap();
        eventually("the controller waits again", || {
            controller_reason(&client, "widgets", "WaitingForKind")
        })
        .await;
        assert!(store.is_empty(), "its objects left the store with the kind");
        assert_eq!(http_get(health, "/readyz/controllers").await.0, 500);
        let requests = total(&server) - before;
        // Per round (about 10 here): the CRD's create and delete, the kind's LIST and WATCH,
        // the CacheConfig's status writes and the ScopeChanged Events as the controller starts
        // and stops: a bounded handful, never a loop.
        assert!(
            requests <= 20,
            "round {round}: {requests} requests: {:?}",
            server.handle().requests()
        );
    }
    assert_eq!(
        count(&server, Verb::List, "widgets"),
        3,
        "one LIST per install, none while the kind waits"
    );
    assert_eq!(
        count(&server, Verb::List, "customresourcedefinitions"),
        1,
        "the CRD watch lists once"
    );
    shutdown.cancel();
    support::stopped(run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_controller_on_a_kind_not_in_by_object_follows_its_crd_in_and_out() {
    support::require("python3");
    let (server, client) = support::server_with_informant_crds().await;
    create_cache_config(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("hook.py");
    std::fs::write(&hook, HOOK).unwrap();
    let controllers = create_widgets_hook(&client, &hook).await;
    let mut manager = manager(&client).await;
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
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.reason == want)
                })
            }
        }
    };
    eventually("the controller waits for its kind", ready("WaitingForKind")).await;
    eventually("status.controllers has it waiting", || {
        controller_reason(&client, "hook default/widgets", "WaitingForKind")
    })
    .await;
    // The readiness check reads the controller's own wait, which may still say "not looked up
    // yet" when the status already says WaitingForKind (CI saw it once, under load).
    let why = "hook default/widgets: example.com/v1 Widget: no CustomResourceDefinition defines Widget in group example.com";
    eventually("readyz names the missing CRD", || async {
        let (code, body) = http_get(health, "/readyz/controllers").await;
        code == 500 && body.contains(why)
    })
    .await;
    assert_eq!(count(&server, Verb::List, "widgets"), 0);

    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), "default");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for round in 1..=2 {
        let before = total(&server);
        crds.create(&PostParams::default(), &widget_crd())
            .await
            .unwrap();
        eventually(
            "the controller runs once its kind is served",
            ready("Running"),
        )
        .await;
        let name = format!("w{round}");
        create_widget(&server, &name);
        let child = format!("{name}-child");
        eventually("the controller reconciled the new Widget", || async {
            configmaps.get_opt(&child).await.unwrap().is_some()
        })
        .await;

        crds.delete("widgets.example.com", &DeleteParams::default())
            .await
            .unwrap();
        eventually("the controller waits again", ready("WaitingForKind")).await;
        let requests = total(&server) - before;
        // About 15 here: as for a Rust controller, plus the child's apply and the
        // `Controller`'s status writes.
        assert!(
            requests <= 25,
            "round {round}: {requests} requests: {:?}",
            server.handle().requests()
        );
    }
    assert_eq!(
        count(&server, Verb::List, "widgets"),
        2,
        "one LIST per install, none while the kind waits"
    );
    shutdown.cancel();
    support::stopped(run).await;
}
