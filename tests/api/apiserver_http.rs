//! HTTP-level semantics sent in-process through the router: kubectl's Table output, the
//! `/debug/faults` endpoint, injected latency on a paused clock, seeds, the streaming-list
//! preconditions.

use axum::Router;
use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use informant::apiserver::{Config, Server};
use serde_json::{Value, json};
use tower::ServiceExt;

async fn router_with(seeds: Vec<Value>) -> Router {
    let mut all =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})];
    all.extend(seeds);
    Server::bind(Config {
        seeds: all,
        ..Config::default()
    })
    .await
    .unwrap()
    .router()
}

async fn call(router: &Router, req: Request<Body>) -> (StatusCode, Value) {
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}
                ]}]
        }
    })
}

#[tokio::test]
async fn seeds_may_define_a_crd_and_its_objects_and_kubectl_tables_show_printer_columns() {
    let r = router_with(vec![
        widget_crd(),
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": "default"},
               "spec": {"size": 3}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
    ])
    .await;
    let req = Request::get("/apis/example.com/v1/namespaces/default/widgets")
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Body::empty())
        .unwrap();
    let (code, table) = call(&r, req).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Size", "Ready"]);
    assert_eq!(table["rows"][0]["cells"], json!(["w1", 3, "True"]));
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
}

#[tokio::test]
async fn debug_faults_injects_failures_over_http() {
    let r = router_with(Vec::new()).await;
    let body = json!({"failNext": {"verb": "list", "resource": "pods", "count": 1, "code": 503}});
    let req = Request::post("/debug/faults")
        .body(Body::from(body.to_string()))
        .unwrap();
    assert_eq!(call(&r, req).await.0, StatusCode::OK);
    let (code, status) = call(&r, get("/api/v1/pods")).await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(status["reason"], "ServiceUnavailable");
    assert_eq!(call(&r, get("/api/v1/pods")).await.0, StatusCode::OK);
    let bad = Request::post("/debug/faults")
        .body(Body::from("{\"nope\":1}"))
        .unwrap();
    assert_eq!(call(&r, bad).await.0, StatusCode::BAD_REQUEST);
}

#[tokio::test(start_paused = true)]
async fn injected_latency_delays_resource_requests_on_the_tokio_clock() {
    let r = router_with(Vec::new()).await;
    let body = json!({"latencyMs": 30_000});
    let req = Request::post("/debug/faults")
        .body(Body::from(body.to_string()))
        .unwrap();
    call(&r, req).await;
    let start = tokio::time::Instant::now();
    assert_eq!(call(&r, get("/api/v1/pods")).await.0, StatusCode::OK);
    assert!(
        start.elapsed() >= std::time::Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
    // Discovery is not delayed.
    let start = tokio::time::Instant::now();
    call(&r, get("/api/v1")).await;
    assert!(start.elapsed() < std::time::Duration::from_secs(1));
}

#[tokio::test]
async fn streaming_lists_require_not_older_than() {
    // apimachinery's validateWatchOptions: every error at once; allowWatchBookmarks is not
    // required (kube-apiserver 1.37 streams without it; e2e/differential compares the two).
    let r = router_with(Vec::new()).await;
    for (query, message) in [
        (
            "sendInitialEvents=true&allowWatchBookmarks=true",
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: \
             sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "resourceVersionMatch=NotOlderThan",
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: \
             resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ),
        (
            "sendInitialEvents=false&resourceVersionMatch=Exact",
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: \
             sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, \
             resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"]",
        ),
    ] {
        let (code, status) = call(&r, get(&format!("/api/v1/pods?watch=true&{query}"))).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{query}");
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(status["message"], message, "{query}");
    }
}

#[tokio::test]
async fn discovery_documents_have_the_shapes_clients_parse() {
    let r = router_with(Vec::new()).await;
    let (_, api) = call(&r, get("/api")).await;
    assert_eq!(api["kind"], "APIVersions");
    assert_eq!(api["versions"], json!(["v1"]));
    let (_, groups) = call(&r, get("/apis")).await;
    let apps = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "apps")
        .unwrap();
    assert_eq!(apps["preferredVersion"]["groupVersion"], "apps/v1");
    let (_, core) = call(&r, get("/api/v1")).await;
    let pods_status = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods/status")
        .unwrap();
    assert_eq!(pods_status["verbs"], json!(["get", "patch", "update"]));
    let (_, version) = call(&r, get("/version")).await;
    assert_eq!(version["major"], "1");
    let (unknown_group, _) = call(&r, get("/apis/nope")).await;
    assert_eq!(unknown_group, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn openapi_v3_publishes_crd_schemas_with_their_group_version_kind() {
    let mut crd = widget_crd();
    crd["spec"]["versions"][0]["schema"] = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "description": "the widget"}}}});
    let r = router_with(vec![crd]).await;
    let (_, index) = call(&r, get("/openapi/v3")).await;
    assert!(index["paths"]["apis/example.com/v1"]["serverRelativeURL"].is_string());
    let (_, doc) = call(&r, get("/openapi/v3/apis/example.com/v1")).await;
    let schema = &doc["components"]["schemas"]["com.example.v1.Widget"];
    assert_eq!(schema["properties"]["spec"]["description"], "the widget");
    assert_eq!(
        schema["x-kubernetes-group-version-kind"][0]["kind"],
        "Widget"
    );
}

#[tokio::test]
async fn aggregated_discovery_is_served_when_asked_for_with_its_media_type() {
    let r = router_with(vec![widget_crd()]).await;
    let accept =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let req = Request::get("/apis")
        .header("accept", accept)
        .body(Body::empty())
        .unwrap();
    let resp = r.clone().oneshot(req).await.unwrap();
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(
        content_type.contains("as=APIGroupDiscoveryList"),
        "{content_type}"
    );
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let doc: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(doc["kind"], "APIGroupDiscoveryList");
    let widgets = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "example.com")
        .unwrap();
    let res = &widgets["versions"][0]["resources"][0];
    assert_eq!(
        (res["resource"].as_str(), res["scope"].as_str()),
        (Some("widgets"), Some("Namespaced"))
    );
    let req = Request::get("/api")
        .header("accept", accept)
        .body(Body::empty())
        .unwrap();
    let (_, core) = call(&r, req).await;
    let names: Vec<&str> = core["items"][0]["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["resource"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"pods") && names.contains(&"namespaces"),
        "{names:?}"
    );
}
