//! Hook controllers wired into the manager (`informant run --config FILE`): a multi-document
//! file with one `CacheConfig` and a `Controller` runs the controller on the leader, and an
//! edit of the `Controller` document in the file restarts it with the new spec; with
//! `--cache-config NS/NAME`, the `Controller` resources of `NS` run, with their status written,
//! and an invalid edit keeps the previous spec running with `Valid=False`.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use informant::apiserver::TestServer;
use informant::config::{CacheConfig, Controller};
use informant::manager::{ConfigSource, Manager, Options};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::CustomResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// Asks for one child named `<object>-<suffix>` (the suffix is the hook's first argument).
const HOOK: &str = r#"
import json, sys
request = json.load(sys.stdin)
name = request["object"]["metadata"]["name"]
json.dump({"children": [{"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": name + "-" + sys.argv[1]}}]}, sys.stdout)
"#;

async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn file(hook: &Path, suffix: &str) -> String {
    format!(
        "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {{name: test, namespace: default}}
spec: {{}}
---
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: copies, namespace: default}}
spec:
  for: {{apiVersion: v1, kind: Secret}}
  owns: [{{apiVersion: v1, kind: ConfigMap}}]
  hook: {{exec: {{command: [python3, {}, {suffix}]}}}}
",
        hook.display()
    )
}

/// Writes `text` to `path` with an atomic rename, as editors and `kubectl cp` do.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_document_config_file_runs_its_controllers_and_an_edit_restarts_them() {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: python3 is not installed; the exec hook tests need it");
        return;
    }
    let server = TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("hook.py");
    std::fs::write(&hook, HOOK).unwrap();
    let path = dir.path().join("informant.yaml");
    std::fs::write(&path, file(&hook, "v1")).unwrap();
    informant::config::load(&path).expect("the CacheConfig of a multi-document file loads");

    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let options = Options {
        metrics_addr: Some(loopback),
        health_addr: None,
        debounce: Duration::ZERO,
        shutdown_grace: Duration::from_secs(10),
        ..Options::new(ConfigSource::File(path.clone()))
    };
    let mut manager = Manager::new(client.clone(), options).await.unwrap();
    informant::manager::hooks::add_to_manager(&mut manager);
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));

    let secret = |name: &str| {
        server
            .handle()
            .create(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"namespace": "default", "name": name}}))
            .unwrap();
    };
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), "default");
    secret("first");
    eventually("the controller of the file applied a child", || async {
        configmaps.get_opt("first-v1").await.unwrap().is_some()
    })
    .await;

    replace(&path, &file(&hook, "v2"));
    eventually("the edited controller re-applied the child", || async {
        configmaps.get_opt("first-v2").await.unwrap().is_some()
            && configmaps.get_opt("first-v1").await.unwrap().is_none()
    })
    .await;

    shutdown.cancel();
    tokio::time::timeout(WAIT, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_of_the_cacheconfigs_namespace_run_with_their_status_written() {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: python3 is not installed; the exec hook tests need it");
        return;
    }
    let server = TestServer::start().await.unwrap();
    for crd in [CacheConfig::crd(), Controller::crd()] {
        server
            .handle()
            .create(serde_json::to_value(crd).unwrap())
            .unwrap();
    }
    let client = server.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("hook.py");
    std::fs::write(&hook, HOOK).unwrap();
    let options = Options {
        metrics_addr: None,
        health_addr: None,
        shutdown_grace: Duration::from_secs(10),
        ..Options::new(ConfigSource::Resource {
            namespace: "default".into(),
            name: "test".into(),
        })
    };
    let mut manager = Manager::new(client.clone(), options).await.unwrap();
    informant::manager::hooks::add_to_manager(&mut manager);
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));

    let controllers = Api::<Controller>::namespaced(client.clone(), "default");
    let document = file(&hook, "v1");
    let controller: Controller =
        serde_yaml::from_str(document.split("---").nth(1).unwrap()).unwrap();
    controllers
        .create(&PostParams::default(), &controller)
        .await
        .unwrap();
    let secret = |name: &str| {
        server
            .handle()
            .create(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"namespace": "default", "name": name}}))
            .unwrap();
    };
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), "default");
    secret("first");
    eventually("the Controller resource applied a child", || async {
        configmaps.get_opt("first-v1").await.unwrap().is_some()
    })
    .await;
    let condition =
        |status: &Option<informant::config::ControllerStatus>, type_: &str, value: &str| {
            status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == type_ && c.status == value)
            })
        };
    eventually(
        "Valid and Ready, with reconciles counted, in the status",
        || async {
            let status = controllers.get("copies").await.unwrap().status;
            condition(&status, "Valid", "True")
                && condition(&status, "Ready", "True")
                && status.as_ref().and_then(|s| s.reconciles).unwrap_or(0) >= 1
        },
    )
    .await;

    // An invalid edit: the previous spec keeps running, Valid=False says why.
    controllers
        .patch(
            "copies",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"hook": {"exec": {"command": []}}}})),
        )
        .await
        .unwrap();
    eventually("Valid=False in the status", || async {
        condition(
            &controllers.get("copies").await.unwrap().status,
            "Valid",
            "False",
        )
    })
    .await;
    secret("second");
    eventually("the previous spec still reconciles", || async {
        configmaps.get_opt("second-v1").await.unwrap().is_some()
    })
    .await;

    shutdown.cancel();
    tokio::time::timeout(WAIT, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
