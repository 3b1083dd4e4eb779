//! `examples/configmap_secret.rs`, the operator a new user writes, run as its `main` would run
//! it (its own flags parsed, the manager's options from them) against the embedded API server:
//! the `Secret` and the `Synced` Event appear, and deleting the `Secret` brings it back.

use crate::support::{self, eventually};

use clap::Parser;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use tokio_util::sync::CancellationToken;

#[allow(
    dead_code,
    reason = "the test runs the example's `run`, not its `main`"
)]
#[path = "../../examples/configmap_secret.rs"]
mod example;

fn configmap(name: &str, app: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "data": {"user": "demo", "port": "5432"},
    }))
    .unwrap()
}

#[tokio::test]
async fn the_example_operator_applies_the_owned_secret_records_synced_and_restores_it() {
    let (server, client) = support::server().await;
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/configmap_secret.yaml"
    );
    let cli = example::Cli::parse_from([
        "configmap_secret",
        "--config",
        config,
        "--metrics-addr=127.0.0.1:0",
        "--health-addr=127.0.0.1:0",
        "--leader-elect",
        "--lease-namespace=default",
        "--shard-identity=example-1",
    ]);
    let options = cli.manager.options().unwrap();
    let shutdown = CancellationToken::new();
    let settings = cli.settings();
    assert_eq!(
        settings.requeue,
        std::time::Duration::from_mins(5),
        "the default"
    );
    let run = tokio::spawn(example::run(
        client.clone(),
        options,
        settings,
        shutdown.clone(),
    ));

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let owner = configmaps
        .create(&PostParams::default(), &configmap("db", "demo"))
        .await
        .unwrap();

    let applied = || async {
        let secret = secrets.get_opt("db").await.unwrap()?;
        let data = secret.data.clone().unwrap_or_default();
        let keys: Vec<(&str, &[u8])> = data.iter().map(|(k, v)| (k.as_str(), &v.0[..])).collect();
        let controlled = secret
            .owner_references()
            .iter()
            .any(|o| o.uid == owner.uid().unwrap_or_default() && o.controller == Some(true));
        let manager = secret
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .any(|m| m.manager.as_deref() == Some(example::NAME));
        (keys == [("port", &b"5432"[..]), ("user", &b"demo"[..])] && controlled && manager)
            .then(|| secret.uid().unwrap_or_default())
    };
    eventually(
        "the Secret db, with the ConfigMap's keys and owned by it",
        || async { applied().await.is_some() },
    )
    .await;
    let first = applied().await.unwrap();
    eventually("a Synced Event on the ConfigMap db", || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("Synced")
                    && e.involved_object.name.as_deref() == Some("db")
                    && e.involved_object.kind.as_deref() == Some("ConfigMap")
                    && e.source.as_ref().and_then(|s| s.component.as_deref()) == Some(example::NAME)
                    && e.reporting_component.as_deref() == Some(example::NAME)
            })
    })
    .await;

    secrets
        .delete("db", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deleted Secret db applied again", || async {
        applied().await.is_some_and(|uid| uid != first)
    })
    .await;

    shutdown.cancel();
    tokio::time::timeout(support::WAIT, run)
        .await
        .expect("the operator stops")
        .unwrap()
        .unwrap();
    server.shutdown().await.unwrap();
}

/// The example's RBAC, printed by `--print-rules`, is what `informant rbac --extra-rules`
/// adds to the manager's own rules.
#[test]
fn the_example_rules_go_into_informant_rbac() {
    let rules = example::controller().unwrap().rules();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yaml");
    std::fs::write(&file, informant::yaml::to_string(&rules).unwrap()).unwrap();
    let output = support::informant(&[
        "rbac",
        "--config",
        "examples/configmap_secret.yaml",
        "--extra-rules",
        file.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{output:?}");
    let printed = String::from_utf8(output.stdout).unwrap();
    let secrets: Vec<&str> = printed
        .split("- apiGroups:")
        .filter(|rule| rule.contains("- secrets"))
        .collect();
    assert!(
        secrets.iter().any(|rule| rule.contains("- patch")),
        "patch on secrets in:\n{printed}"
    );
}
