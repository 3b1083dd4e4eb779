//! Updates without a `resourceVersion`, as kube-apiserver answers them: unconditional for the
//! built-in kinds whose strategy allows it (a `ConfigMap`), 422 `must be specified for an update`
//! for custom resources, whose strategy does not (apiextensions-apiserver
//! `pkg/registry/customresource/strategy.go`, `AllowUnconditionalUpdate`). A JSON merge patch
//! that sets `metadata.resourceVersion` to null is such an update (found on the real
//! kube-apiserver: the embedded server used to take it).

use informant::apiserver::TestServer;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

async fn request(
    client: &Client,
    method: &str,
    uri: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(body.to_string().into_bytes())
        .unwrap();
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

async fn with_a_widget() -> (TestServer, Client) {
    let server = TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}}}]
        }
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let (code, body) = request(&client, "POST", WIDGETS, "application/json",
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}})).await;
    assert_eq!(code, 201, "{body}");
    (server, client)
}

fn assert_must_be_specified(code: u16, body: &Value) {
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["reason"], "Invalid", "{body}");
    assert_eq!(
        body["message"],
        "widgets.example.com \"w\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
        "{body}"
    );
    assert_eq!(
        body["details"]["causes"][0]["field"], "metadata.resourceVersion",
        "{body}"
    );
}

#[tokio::test]
async fn a_merge_patch_that_nulls_the_resource_version_of_a_custom_resource_is_refused() {
    let (_server, client) = with_a_widget().await;
    let (code, body) = request(
        &client,
        "PATCH",
        &format!("{WIDGETS}/w"),
        "application/merge-patch+json",
        &json!({"metadata": {"resourceVersion": null}, "spec": {"size": 2}}),
    )
    .await;
    assert_must_be_specified(code, &body);
    // Nothing was written; the same patch without the null applies.
    let (code, body) = request(
        &client,
        "PATCH",
        &format!("{WIDGETS}/w"),
        "application/merge-patch+json",
        &json!({"spec": {"size": 2}}),
    )
    .await;
    assert_eq!((code, &body["spec"]["size"]), (200, &json!(2)), "{body}");
}

#[tokio::test]
async fn a_put_without_a_resource_version_is_refused_for_a_custom_resource_and_its_status() {
    let (_server, client) = with_a_widget().await;
    let unversioned = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 3}, "status": {"ready": true}});
    let (code, body) = request(
        &client,
        "PUT",
        &format!("{WIDGETS}/w"),
        "application/json",
        &unversioned,
    )
    .await;
    assert_must_be_specified(code, &body);
    let (code, body) = request(
        &client,
        "PUT",
        &format!("{WIDGETS}/w/status"),
        "application/json",
        &unversioned,
    )
    .await;
    assert_must_be_specified(code, &body);
}

#[tokio::test]
async fn a_configmap_takes_an_unconditional_update() {
    const CMS: &str = "/api/v1/namespaces/default/configmaps";
    let server = TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    let cm = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": v}});
    let (code, body) = request(&client, "POST", CMS, "application/json", &cm("1")).await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = request(
        &client,
        "PUT",
        &format!("{CMS}/c"),
        "application/json",
        &cm("2"),
    )
    .await;
    assert_eq!((code, &body["data"]["k"]), (200, &json!("2")), "{body}");
    let (code, body) = request(
        &client,
        "PATCH",
        &format!("{CMS}/c"),
        "application/merge-patch+json",
        &json!({"metadata": {"resourceVersion": null}, "data": {"k": "3"}}),
    )
    .await;
    assert_eq!((code, &body["data"]["k"]), (200, &json!("3")), "{body}");
}
