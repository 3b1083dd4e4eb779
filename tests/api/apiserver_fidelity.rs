//! Where the embedded API server used to differ from kube-apiserver, asserted on the wire: the
//! answers of DELETE (Status or object, 200 or 202), immutable `ConfigMaps` and `Secrets`, the
//! too-large-resourceVersion timeout, `metadata.generation` and `generateName`, the reported
//! version, and `OpenAPI` v2.

use axum::Router;
use axum::body::Body;
use http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use informant::apiserver::{Config, Server, TestServer};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use std::time::Duration;

use tower::ServiceExt;

async fn router() -> Router {
    Server::bind(Config {
        seeds: vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
        ],
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

fn send(method: &str, uri: &str, body: &Value) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn merge_patch(uri: &str, body: &Value) -> Request<Body> {
    Request::builder()
        .method("PATCH")
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/merge-patch+json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn deleting_a_configmap_answers_a_success_status_with_name_kind_and_uid() {
    let r = router().await;
    let (code, created) = call(
        &r,
        send(
            "POST",
            CMS,
            &json!({"metadata": {"name": "a"}, "data": {"k": "v"}}),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, body) = call(&r, send("DELETE", &format!("{CMS}/a"), &json!({}))).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        body,
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": "a", "kind": "configmaps", "uid": created["metadata"]["uid"]},
        })
    );
}

#[tokio::test]
async fn deleting_a_deployment_answers_a_status_naming_its_group() {
    let r = router().await;
    let (code, created) = call(
        &r,
        send(
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            &json!({"metadata": {"name": "web"}, "spec": {}}),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED);
    let (_, body) = call(
        &r,
        send(
            "DELETE",
            "/apis/apps/v1/namespaces/default/deployments/web",
            &json!({}),
        ),
    )
    .await;
    assert_eq!(body["kind"], "Status");
    assert_eq!(
        body["details"],
        json!({"name": "web", "group": "apps", "kind": "deployments", "uid": created["metadata"]["uid"]})
    );
}

#[tokio::test]
async fn deleting_a_pod_answers_the_deleted_pod() {
    let r = router().await;
    let pods = "/api/v1/namespaces/default/pods";
    call(&r, send("POST", pods, &json!({"metadata": {"name": "p"}}))).await;
    let (code, body) = call(&r, send("DELETE", &format!("{pods}/p"), &json!({}))).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(body["kind"], "Pod");
    assert_eq!(body["metadata"]["name"], "p");
}

#[tokio::test]
async fn kube_rs_delete_sees_a_status_for_configmaps_and_the_object_for_pods() {
    let server = TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap(),
    )
    .await
    .unwrap();
    let answer = cms.delete("a", &DeleteParams::default()).await.unwrap();
    let status = answer.right().expect("a Status for a ConfigMap");
    assert_eq!(status.details.unwrap().name, "a");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "p"}})).unwrap(),
    )
    .await
    .unwrap();
    let answer = pods.delete("p", &DeleteParams::default()).await.unwrap();
    let pod = answer.left().expect("the deleted Pod");
    assert_eq!(pod.metadata.name.as_deref(), Some("p"));
}

#[tokio::test]
async fn delete_with_pending_finalizers_is_200_with_the_object_and_202_only_when_not_orphaning() {
    let r = router().await;
    for name in ["kept", "cascaded"] {
        call(
            &r,
            send(
                "POST",
                CMS,
                &json!({"metadata": {"name": name, "finalizers": ["x/y"]}}),
            ),
        )
        .await;
    }
    let (code, body) = call(&r, send("DELETE", &format!("{CMS}/kept"), &json!({}))).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(body["kind"], "ConfigMap");
    assert!(body["metadata"]["deletionTimestamp"].is_string(), "{body}");
    let (code, body) = call(
        &r,
        send(
            "DELETE",
            &format!("{CMS}/cascaded"),
            &json!({"kind": "DeleteOptions", "apiVersion": "v1", "orphanDependents": false}),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::ACCEPTED);
    assert_eq!(body["metadata"]["name"], "cascaded");
}

#[tokio::test]
async fn a_list_from_the_future_is_a_timeout_with_the_too_large_cause_and_a_retry_after() {
    let r = router().await;
    let resp = r
        .clone()
        .oneshot(
            Request::get(format!("{CMS}?resourceVersion=999999"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["reason"], "Timeout");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with("Timeout: Too large resource version: 999999, current: "),
        "{message}"
    );
    assert_eq!(
        body["details"],
        json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        })
    );
}

#[tokio::test]
async fn an_immutable_configmap_refuses_data_changes_and_unsetting_immutable() {
    let r = router().await;
    call(
        &r,
        send(
            "POST",
            CMS,
            &json!({"metadata": {"name": "frozen"}, "data": {"k": "v"}, "immutable": true}),
        ),
    )
    .await;
    let uri = format!("{CMS}/frozen");
    let (code, body) = call(&r, merge_patch(&uri, &json!({"data": {"k": "w"}}))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["reason"], "Invalid");
    assert_eq!(
        body["message"],
        "ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    assert_eq!(
        body["details"],
        json!({
            "name": "frozen",
            "kind": "ConfigMap",
            "causes": [{
                "reason": "FieldValueForbidden",
                "message": "Forbidden: field is immutable when `immutable` is set",
                "field": "data",
            }],
        })
    );
    let (code, body) = call(
        &r,
        merge_patch(
            &uri,
            &json!({"immutable": false, "binaryData": {"b": "AA=="}}),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["message"],
        "ConfigMap \"frozen\" is invalid: [immutable: Forbidden: field is immutable when `immutable` is set, \
         binaryData: Forbidden: field is immutable when `immutable` is set]"
    );
    // Labels may still change.
    let (code, _) = call(
        &r,
        merge_patch(&uri, &json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
}

#[tokio::test]
async fn an_immutable_secret_refuses_data_changes() {
    let r = router().await;
    let secrets = "/api/v1/namespaces/default/secrets";
    call(
        &r,
        send(
            "POST",
            secrets,
            &json!({"metadata": {"name": "s"}, "data": {"k": "dg=="}, "immutable": true}),
        ),
    )
    .await;
    let mut replaced = json!({"metadata": {"name": "s"}, "data": {"k": "dw=="}, "immutable": true});
    let (code, body) = call(&r, send("PUT", &format!("{secrets}/s"), &replaced)).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["message"],
        "Secret \"s\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    replaced["data"]["k"] = json!("dg==");
    let (code, _) = call(&r, send("PUT", &format!("{secrets}/s"), &replaced)).await;
    assert_eq!(code, StatusCode::OK);
}

#[tokio::test]
async fn configmaps_carry_no_generation_and_no_empty_generate_name_but_deployments_do() {
    let r = router().await;
    let (_, cm) = call(
        &r,
        send(
            "POST",
            CMS,
            &json!({"metadata": {"name": "c", "generateName": "", "generation": 7}}),
        ),
    )
    .await;
    let meta = cm["metadata"].as_object().unwrap();
    assert!(!meta.contains_key("generation"), "{cm}");
    assert!(!meta.contains_key("generateName"), "{cm}");
    let (_, updated) = call(
        &r,
        merge_patch(&format!("{CMS}/c"), &json!({"data": {"a": "b"}})),
    )
    .await;
    assert!(updated["metadata"].get("generation").is_none(), "{updated}");
    let (_, deploy) = call(
        &r,
        send(
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            &json!({"metadata": {"name": "d"}, "spec": {}}),
        ),
    )
    .await;
    assert_eq!(deploy["metadata"]["generation"], 1);
}

#[tokio::test]
async fn the_server_reports_the_newest_kubernetes_version_k8s_openapi_knows() {
    let r = router().await;
    let (_, version) = call(&r, Request::get("/version").body(Body::empty()).unwrap()).await;
    assert_eq!(version["major"], "1");
    assert_eq!(version["minor"], "37");
    assert_eq!(version["gitVersion"], "v1.37.0");
}

async fn openapi_v2(r: &Router, accept: &str) -> (StatusCode, String, Vec<u8>) {
    let resp = r
        .clone()
        .oneshot(
            Request::get("/openapi/v2")
                .header(header::ACCEPT, accept)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = resp.status();
    let ct = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, ct, bytes.to_vec())
}

#[tokio::test]
async fn openapi_v2_is_served_as_protobuf_to_kubectl_as_json_otherwise_and_406_for_the_rest() {
    let r = router().await;
    let (code, ct, body) = openapi_v2(
        &r,
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        ct,
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    // Document.swagger (field 1, length-delimited) comes first: "2.0".
    assert_eq!(&body[..5], b"\x0a\x032.0");
    let (code, ct, body) = openapi_v2(&r, "application/json").await;
    assert_eq!((code, ct.as_str()), (StatusCode::OK, "application/json"));
    let doc: Value = serde_json::from_slice(&body).unwrap();
    let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation" && p["in"] == "query"),
        "{patch}"
    );
    let (code, _, _) = openapi_v2(&r, "text/html").await;
    assert_eq!(code, StatusCode::NOT_ACCEPTABLE);
}

/// The frames of a watch response body, each with the virtual time it arrived at.
async fn watch_frames(r: &Router, uri: &str) -> Vec<(Duration, Value)> {
    let start = tokio::time::Instant::now();
    let resp = r
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let mut body = resp.into_body();
    let mut frames = Vec::new();
    while let Some(frame) = body.frame().await {
        let bytes = frame.unwrap().into_data().unwrap();
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            frames.push((start.elapsed(), serde_json::from_slice(line).unwrap()));
        }
    }
    frames.push((start.elapsed(), json!("END")));
    frames
}

#[tokio::test(start_paused = true)]
async fn a_watch_gets_a_bookmark_two_seconds_before_its_timeout_when_the_resource_changed() {
    let server = Server::bind(Config {
        seeds: vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
        ],
        ..Config::default()
    })
    .await
    .unwrap();
    let r = server.router();
    let cm = |name: &str, app: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default", "labels": {"app": app}}})
    };
    let first = server.handle().create(cm("a", "web")).unwrap();
    let first_rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let filtered = server.handle().create(cm("b", "db")).unwrap();
    let filtered_rv = filtered["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let watch = |rv: &str| {
        format!(
            "{CMS}?watch=true&allowWatchBookmarks=true&timeoutSeconds=30&labelSelector=app%3Dweb&resourceVersion={rv}"
        )
    };
    // From before the filtered change: one bookmark at 28 s carrying its resourceVersion,
    // then the end at 30 s.
    let frames = watch_frames(&r, &watch(&first_rv)).await;
    assert_eq!(frames.len(), 2, "{frames:?}");
    let (at, event) = &frames[0];
    assert_eq!(event["type"], "BOOKMARK");
    assert_eq!(
        event["object"]["metadata"]["resourceVersion"],
        filtered_rv.as_str()
    );
    assert_eq!(*at, Duration::from_secs(28));
    assert_eq!(frames[1].0, Duration::from_secs(30));
    // From after it: nothing changed, so no bookmark before the timeout.
    let frames = watch_frames(&r, &watch(&filtered_rv)).await;
    assert_eq!(frames, [(Duration::from_secs(30), json!("END"))]);
}

/// POSTs the namespace `name`.
async fn create_namespace(router: &Router, name: &str) {
    let (code, _) = call(
        router,
        send(
            "POST",
            "/api/v1/namespaces",
            &json!({"metadata": {"name": name}}),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "namespace {name}");
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}

#[tokio::test]
async fn a_deleted_namespace_terminates_refuses_new_content_and_goes_once_its_content_is_gone() {
    let r = router().await;
    let (_, ns) = call(
        &r,
        send(
            "POST",
            "/api/v1/namespaces",
            &json!({"metadata": {"name": "t"}}),
        ),
    )
    .await;
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(ns["status"]["phase"], "Active");
    let cms = "/api/v1/namespaces/t/configmaps";
    call(
        &r,
        send(
            "POST",
            cms,
            &json!({"metadata": {"name": "held", "finalizers": ["x/y"]}}),
        ),
    )
    .await;
    call(
        &r,
        send("POST", cms, &json!({"metadata": {"name": "free"}})),
    )
    .await;

    let (code, ns) = call(&r, send("DELETE", "/api/v1/namespaces/t", &json!({}))).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(ns["kind"], "Namespace");
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert!(ns["metadata"]["deletionTimestamp"].is_string(), "{ns}");
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));

    let (code, _) = call(&r, get(&format!("{cms}/free"))).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let (_, held) = call(&r, get(&format!("{cms}/held"))).await;
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    let (_, ns) = call(&r, get("/api/v1/namespaces/t")).await;
    assert_eq!(ns["status"]["phase"], "Terminating");

    let (code, refused) = call(
        &r,
        send("POST", cms, &json!({"metadata": {"name": "late"}})),
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        refused,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "configmaps \"late\" is forbidden: unable to create new content in namespace t because it is being terminated",
            "reason": "Forbidden",
            "details": {"name": "late", "kind": "configmaps", "causes": [{
                "reason": "NamespaceTerminating",
                "message": "namespace t is being terminated",
                "field": "metadata.namespace",
            }]},
            "code": 403,
        })
    );

    // The last finalizer goes: the object, then the namespace.
    let (code, _) = call(
        &r,
        merge_patch(
            &format!("{cms}/held"),
            &json!({"metadata": {"finalizers": null}}),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = call(&r, get("/api/v1/namespaces/t")).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_empty_namespace_is_gone_when_its_delete_answers_and_can_be_created_again() {
    let r = router().await;
    let body = json!({"metadata": {"name": "e"}});
    call(&r, send("POST", "/api/v1/namespaces", &body)).await;
    let (code, ns) = call(&r, send("DELETE", "/api/v1/namespaces/e", &json!({}))).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(ns["status"]["phase"], "Terminating");
    let (code, _) = call(&r, get("/api/v1/namespaces/e")).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let (code, _) = call(&r, send("POST", "/api/v1/namespaces", &body)).await;
    assert_eq!(code, StatusCode::CREATED);
}

#[tokio::test]
async fn a_namespace_update_cannot_drop_the_kubernetes_finalizer() {
    let r = router().await;
    create_namespace(&r, "f").await;
    let (_, ns) = call(
        &r,
        merge_patch("/api/v1/namespaces/f", &json!({"spec": {"finalizers": []}})),
    )
    .await;
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
}

#[tokio::test]
async fn a_terminating_namespace_refuses_a_second_delete_and_finalize_forces_it_out() {
    let r = router().await;
    create_namespace(&r, "stuck").await;
    let cms = "/api/v1/namespaces/stuck/configmaps";
    call(
        &r,
        send(
            "POST",
            cms,
            &json!({"metadata": {"name": "held", "finalizers": ["x/y"]}}),
        ),
    )
    .await;
    let (_, ns) = call(&r, send("DELETE", "/api/v1/namespaces/stuck", &json!({}))).await;
    assert_eq!(ns["status"]["phase"], "Terminating");
    let (code, again) = call(&r, send("DELETE", "/api/v1/namespaces/stuck", &json!({}))).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(
        again["message"],
        "Operation cannot be fulfilled on namespaces \"stuck\": The system is ensuring all content \
         is removed from this namespace.  Upon completion, this namespace will automatically be \
         purged by the system."
    );
    // `kubectl replace --raw /api/v1/namespaces/stuck/finalize` with the finalizers emptied.
    let mut finalized = ns.clone();
    finalized["spec"]["finalizers"] = json!([]);
    let (code, _) = call(
        &r,
        send("PUT", "/api/v1/namespaces/stuck/finalize", &finalized),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = call(&r, get("/api/v1/namespaces/stuck")).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn every_namespace_carries_its_name_label_which_an_update_cannot_remove() {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{ListParams, Patch, PatchParams};
    let (_s, client) = crate::support::server().await;
    let api: Api<Namespace> = Api::all(client);
    let shop = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "shop", "labels": {"team": "a"}}}))
                .unwrap(),
        )
        .await
        .unwrap();
    let label = |ns: &Namespace| {
        ns.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("kubernetes.io/metadata.name").cloned())
    };
    assert_eq!(label(&shop).as_deref(), Some("shop"));
    let generated = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"generateName": "gen-"}})).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        label(&generated),
        generated.metadata.name,
        "the generated name"
    );
    // A merge patch removing it, or changing it, leaves it as kube-apiserver's Canonicalize does.
    for value in [Value::Null, json!("other")] {
        let patched = api
            .patch(
                "shop",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"labels": {"kubernetes.io/metadata.name": value}}}),
                ),
            )
            .await
            .unwrap();
        assert_eq!(label(&patched).as_deref(), Some("shop"));
    }
    let selected = api
        .list(&ListParams::default().labels("kubernetes.io/metadata.name in (shop,nope)"))
        .await
        .unwrap();
    let names: Vec<_> = selected
        .items
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    assert_eq!(names, ["shop"]);
}

/// A JSON patch `test` of a member missing from an existing object holds against `null`, as in
/// kube-apiserver (evanphx/json-patch), so kube-runtime's `finalizer` can add the first
/// finalizer; a present value, or a missing parent, still fails the test.
#[tokio::test]
async fn a_json_patch_test_of_a_missing_member_against_null_holds() {
    use kube::api::{Patch, PatchParams};
    let server = TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "held"}, "data": {"a": "1"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let patch = |ops: Value| {
        let ops: json_patch_v4::Patch = serde_json::from_value(ops).unwrap();
        Patch::<()>::Json(ops)
    };
    let added = api
        .patch(
            "held",
            &PatchParams::default(),
            &patch(json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/cleanup"]}
            ])),
        )
        .await
        .unwrap();
    assert_eq!(
        added.metadata.finalizers,
        Some(vec!["example.com/cleanup".to_owned()])
    );
    for (ops, failed) in [
        // Present now: not null.
        (
            json!([{"op": "test", "path": "/metadata/finalizers", "value": null}]),
            "operation '/0'",
        ),
        // A missing parent is no member to compare.
        (
            json!([{"op": "add", "path": "/data/b", "value": "2"},
            {"op": "test", "path": "/spec/replicas", "value": null}]),
            "operation '/1'",
        ),
    ] {
        let error = api
            .patch("held", &PatchParams::default(), &patch(ops))
            .await
            .unwrap_err();
        let kube::Error::Api(status) = error else {
            panic!("{error}")
        };
        assert_eq!(status.code, 422, "{status:?}");
        assert!(status.message.contains(failed), "{}", status.message);
    }
    let kept = api.get("held").await.unwrap();
    assert_eq!(
        kept.data.unwrap().get("b"),
        None,
        "a failed patch changes nothing"
    );
}
