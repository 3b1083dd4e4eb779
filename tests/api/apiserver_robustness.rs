//! Bad input never panics and never corrupts state: malformed JSON, unknown resources, bad
//! selectors, oversize bodies and random requests, sent in-process through the router. Generated
//! bodies for every endpoint that reads one are in `apiserver_robustness_bodies.rs`.

use axum::Router;
use axum::body::Body;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use informant::apiserver::{Config, Server};
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt;

async fn router() -> Router {
    let server = Server::bind(Config {
        seeds: vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
        ],
        max_body: 64 * 1024,
        ..Config::default()
    })
    .await
    .unwrap();
    server.router()
}

async fn send(
    router: &Router,
    method: Method,
    uri: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(Body::from(body))
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn assert_status_body(code: StatusCode, body: &Value) {
    assert_eq!(body["kind"], "Status", "{code}: {body}");
    assert_eq!(body["apiVersion"], "v1");
    assert_eq!(body["status"], "Failure");
    assert_eq!(body["code"], code.as_u16());
}

#[tokio::test]
async fn malformed_json_is_400_with_a_status_body() {
    let r = router().await;
    let (code, body) = send(
        &r,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        b"{nope".to_vec(),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_status_body(code, &body);
    let (code, body) = send(
        &r,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        b"[1,2]".to_vec(),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_status_body(code, &body);
}

#[tokio::test]
async fn unknown_resources_and_paths_are_404_with_a_status_body() {
    let r = router().await;
    for path in [
        "/api/v1/widgets",
        "/apis/nope/v1/things",
        "/apis/apps/v9/deployments",
        "/what",
        "/api/v1/namespaces/default/nodes",
    ] {
        let (code, body) = send(&r, Method::GET, path, "application/json", Vec::new()).await;
        assert_eq!(code, StatusCode::NOT_FOUND, "{path}");
        assert_status_body(code, &body);
    }
}

#[tokio::test]
async fn bad_selectors_are_400() {
    let r = router().await;
    for q in [
        "labelSelector=a%20in%20(b",
        "fieldSelector=spec.nope%3D1",
        "limit=-1",
        "resourceVersion=x",
        "resourceVersionMatch=Exact",
        "continue=garbage",
    ] {
        let (code, body) = send(
            &r,
            Method::GET,
            &format!("/api/v1/pods?{q}"),
            "application/json",
            Vec::new(),
        )
        .await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{q}: {body}");
        assert_status_body(code, &body);
    }
}

#[tokio::test]
async fn an_oversize_body_is_413_and_stores_nothing() {
    let r = router().await;
    let big = json!({"metadata": {"name": "big"}, "data": {"k": "x".repeat(100 * 1024)}});
    let (code, body) = send(
        &r,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        serde_json::to_vec(&big).unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE);
    assert_status_body(code, &body);
    let (code, _) = send(
        &r,
        Method::GET,
        "/api/v1/namespaces/default/configmaps/big",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_list_at_a_version_from_the_future_times_out_like_kube_apiserver() {
    let r = router().await;
    let (code, body) = send(
        &r,
        Method::GET,
        "/api/v1/pods?resourceVersion=99999",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(code, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(body["reason"], "Timeout");
}

#[tokio::test]
async fn protobuf_bodies_of_unsupported_kinds_are_415_and_garbage_is_400() {
    let r = router().await;
    let proto = "application/vnd.kubernetes.protobuf";
    let pods = "/api/v1/namespaces/default/pods";
    let (code, body) = send(&r, Method::POST, pods, proto, b"k8s\0junk".to_vec()).await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_status_body(code, &body);
    let junk = b"k8s\0\x12\x7f".to_vec();
    let (code, body) = send(&r, Method::POST, "/api/v1/namespaces", proto, junk).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_status_body(code, &body);
}

fn method() -> impl Strategy<Value = Method> {
    prop_oneof![
        Just(Method::GET),
        Just(Method::POST),
        Just(Method::PUT),
        Just(Method::PATCH),
        Just(Method::DELETE)
    ]
}

fn path() -> impl Strategy<Value = String> {
    let seg = prop_oneof![
        Just("api".to_string()),
        Just("apis".to_string()),
        Just("v1".to_string()),
        Just("apps".to_string()),
        Just("namespaces".to_string()),
        Just("default".to_string()),
        Just("configmaps".to_string()),
        Just("pods".to_string()),
        Just("status".to_string()),
        Just("deployments".to_string()),
        "[a-z%0-9.-]{0,6}",
    ];
    (
        prop::collection::vec(seg, 0..7),
        prop::option::of("[a-zA-Z=&%0-9,!()]{0,20}"),
    )
        .prop_map(|(segs, q)| {
            let mut p = format!("/{}", segs.join("/"));
            if let Some(q) = q {
                p.push('?');
                p.push_str(&q);
            }
            p
        })
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        Just(br#"{"metadata":{"name":"x"},"data":{"a":"b"}}"#.to_vec()),
        Just(br#"{"metadata":{"name":"x","resourceVersion":"1"}}"#.to_vec()),
        Just(br#"[{"op":"remove","path":"/metadata"}]"#.to_vec()),
        Just(br#"{"metadata":null,"spec":[1]}"#.to_vec()),
        prop::collection::vec(any::<u8>(), 0..64),
    ]
}

fn content_type() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("application/json"),
        Just("application/merge-patch+json"),
        Just("application/json-patch+json"),
        Just("application/strategic-merge-patch+json"),
        Just("application/apply-patch+yaml"),
        Just("text/plain"),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn random_requests_never_panic_and_errors_are_status_bodies(
        requests in prop::collection::vec((method(), path(), content_type(), body()), 1..8)
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let r = router().await;
            for (m, p, ct, b) in requests {
                let is_watch = p.contains("watch");
                let req = Request::builder().method(m).uri(&p).header("content-type", ct).body(Body::from(b));
                let Ok(req) = req else { continue };
                let resp = r.clone().oneshot(req).await.unwrap();
                let status = resp.status();
                if is_watch {
                    continue;
                }
                let bytes = resp.into_body().collect().await.unwrap().to_bytes();
                if status.is_client_error() || status.is_server_error() {
                    let v: Value = serde_json::from_slice(&bytes).unwrap();
                    prop_assert_eq!(&v["kind"], "Status");
                    prop_assert!(status.as_u16() < 500 || status.as_u16() == 504, "server error {} for {}: {}", status, p, v);
                }
            }
            // The store is still consistent: a list answers.
            let (code, _) = send(&r, Method::GET, "/api/v1/configmaps", "application/json", Vec::new()).await;
            prop_assert_eq!(code, StatusCode::OK);
            Ok(())
        })?;
    }
}
