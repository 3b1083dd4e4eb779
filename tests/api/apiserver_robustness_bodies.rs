//! No request body panics the server (issue #33, item 4): generated JSON (wrong types, huge
//! and negative numbers, nested junk, a `spec`, `status` or `metadata` that is no object) is
//! sent, in-process through the router, to every endpoint that reads a body: token requests,
//! the four reviews, namespace `PUT`, `/finalize` and `/status`, the status subresource, CRD
//! creation, and every patch type with server-side apply, each followed by `DELETE`s (which
//! mark what the bodies stored). Every answer must be below 500 and an error a `Status`; a
//! panic fails the case (proptest catches and shrinks it); the server must answer afterwards.
//! `apiserver_robustness.rs` holds the other robustness tests (random paths and methods).

use axum::Router;
use axum::body::Body;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use informant::apiserver::{Authorization, Config, Server};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Map, Value, json};
use tower::ServiceExt;

/// Cases per test: each builds a fresh server and sends a few requests, so a test stays within
/// a few seconds.
const CASES: u32 = 48;

/// A server with something for every endpoint to work on: a `ServiceAccount` to ask tokens
/// for, a namespace to rewrite, a `Deployment`, a `ConfigMap`, a CRD and one of its objects.
/// With RBAC on, requests carry the administrator's token.
struct Fixture {
    router: Router,
    token: Option<String>,
}

impl Fixture {
    async fn new(rbac: bool) -> Self {
        let server = Server::bind(Config {
            seeds: vec![
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fuzz"}}),
                json!({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "sa", "namespace": "default"}}),
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "web", "namespace": "default"},
                       "spec": {"replicas": 1}}),
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "cm", "namespace": "default"}, "data": {"a": "b"}}),
                widget_crd(),
                json!({"apiVersion": "example.com/v1", "kind": "Widget",
                       "metadata": {"name": "w1", "namespace": "default"}, "spec": {"size": 1}}),
            ],
            max_body: 64 * 1024,
            authorization: if rbac {
                Authorization::Rbac
            } else {
                Authorization::AlwaysAllow
            },
            ..Config::default()
        })
        .await
        .unwrap();
        let token = rbac.then(|| server.handle().admin_token().to_string());
        Self {
            router: server.router(),
            token,
        }
    }

    /// Sends one request; fails the case on a 5xx or an error that is no `Status`.
    async fn send(
        &self,
        method: Method,
        uri: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<StatusCode, TestCaseError> {
        let mut req = Request::builder()
            .method(method.clone())
            .uri(uri)
            .header("content-type", content_type);
        if let Some(token) = &self.token {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let sent = String::from_utf8_lossy(&body).into_owned();
        let resp = self
            .router
            .clone()
            .oneshot(req.body(Body::from(body)).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        prop_assert!(
            status.as_u16() < 500,
            "{method} {uri} ({content_type}) {sent} answered {status}: {answer}"
        );
        if status.is_client_error() {
            prop_assert_eq!(&answer["kind"], "Status", "{} {}: {}", method, uri, answer);
        }
        Ok(status)
    }

    async fn send_json(
        &self,
        method: Method,
        uri: &str,
        body: &Value,
    ) -> Result<StatusCode, TestCaseError> {
        self.send(
            method,
            uri,
            "application/json",
            serde_json::to_vec(body).unwrap(),
        )
        .await
    }

    /// The server still lists and reports healthy: nothing it holds was left broken.
    async fn still_answers(&self) -> Result<(), TestCaseError> {
        for uri in [
            "/healthz",
            "/api/v1/namespaces",
            "/api/v1/namespaces/default/configmaps",
            "/apis/apps/v1/deployments",
            "/apis",
        ] {
            let code = self
                .send(Method::GET, uri, "application/json", Vec::new())
                .await?;
            prop_assert_eq!(code, StatusCode::OK, "{}", uri);
        }
        Ok(())
    }
}

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "subresources": {"status": {}},
                          "schema": {"openAPIV3Schema": {"type": "object",
                                     "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    })
}

/// Numbers where arithmetic and conversions break: the bounds of every integer type, the
/// edges of kube's token lifetimes, and floats.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(i64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(u64::MAX)),
        Just(json!(1_i64 << 32)),
        Just(json!((1_i64 << 32) + 1)),
        Just(json!(599)),
        Just(json!(600)),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(1e308)),
        Just(json!(-1e308)),
        Just(json!(3.5)),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
    ]
}

/// Keys the handlers read, so generated objects reach past the first lookup.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "metadata",
            "spec",
            "status",
            "name",
            "namespace",
            "finalizers",
            "phase",
            "expirationSeconds",
            "audiences",
            "boundObjectRef",
            "resourceAttributes",
            "nonResourceAttributes",
            "user",
            "uid",
            "groups",
            "extra",
            "verb",
            "resource",
            "path",
            "labels",
            "annotations",
            "managedFields",
            "resourceVersion",
            "group",
            "names",
            "plural",
            "kind",
            "scope",
            "versions",
            "served",
            "storage",
            "subresources",
            "replicas",
            "data",
            "$patch",
            "$retainKeys",
        ])
        .prop_map(String::from),
        "[a-z$/.~]{0,4}",
    ]
}

/// Any JSON value, up to a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number(),
        "[a-zA-Z0-9:/._-]{0,8}".prop_map(Value::from),
        Just(json!("kubernetes")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An object whose fields the handlers read (each present or not), each a value of any type.
fn fields() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(key(), json_value(), 0..5)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// A request body: any JSON, or an object shaped like the endpoint's (`metadata`, `spec`,
/// `status`, each any JSON or an object of known fields), its name set to `name` or not.
fn body(name: &'static str) -> impl Strategy<Value = Value> {
    let part = || prop::option::of(prop_oneof![json_value(), fields()]);
    let shaped =
        (part(), part(), part(), any::<bool>()).prop_map(move |(metadata, spec, status, named)| {
            let mut obj = Map::new();
            let mut metadata = metadata.unwrap_or(Value::Null);
            if named {
                match &mut metadata {
                    Value::Object(m) => drop(m.insert("name".into(), json!(name))),
                    other => *other = json!({"name": name}),
                }
            }
            for (field, value) in [
                ("metadata", Some(metadata)),
                ("spec", spec),
                ("status", status),
            ] {
                if let Some(value) = value.filter(|v| !v.is_null()) {
                    obj.insert(field.into(), value);
                }
            }
            Value::Object(obj)
        });
    prop_oneof![1 => json_value(), 4 => shaped]
}

/// A JSON patch: operations on the paths handlers care about, with any values.
fn json_patch() -> impl Strategy<Value = Value> {
    let path = prop::sample::select(vec![
        "",
        "/spec",
        "/status",
        "/metadata",
        "/metadata/name",
        "/metadata/managedFields",
        "/spec/finalizers",
        "/spec/finalizers/0",
        "/spec/finalizers/-",
        "/status/phase",
        "/data/a",
        "/a~1b",
        "/kind",
        "/apiVersion",
    ]);
    let op = prop::sample::select(vec![
        "add", "remove", "replace", "move", "copy", "test", "x",
    ]);
    prop::collection::vec((op, path.clone(), path, json_value()), 0..4).prop_map(|ops| {
        Value::Array(
            ops.into_iter()
                .map(|(op, path, from, value)| {
                    json!({"op": op, "path": path, "from": from, "value": value})
                })
                .collect(),
        )
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

const REVIEWS: [&str; 4] = [
    "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
    "/apis/authentication.k8s.io/v1/selfsubjectreviews",
];

/// Where a write of each kind of patch goes, and its content type.
const PATCH_TYPES: [&str; 4] = [
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/json-patch+json",
];

/// An object a patch or status write may address: its path and name.
const OBJECTS: [(&str, &str); 4] = [
    ("/api/v1/namespaces/fuzz", "fuzz"),
    ("/apis/apps/v1/namespaces/default/deployments/web", "web"),
    ("/api/v1/namespaces/default/configmaps/cm", "cm"),
    ("/apis/example.com/v1/namespaces/default/widgets/w1", "w1"),
];

/// The case the fuzzing below found: a JSON patch whose `move` fails after removing its source
/// made json-patch's undo of the earlier operations panic.
#[tokio::test]
async fn a_json_patch_failing_half_way_is_422_and_changes_nothing() {
    let f = Fixture::new(false).await;
    let ops = json!([
        {"op": "add", "path": "/metadata/name", "value": null},
        {"op": "move", "from": "/metadata", "path": "/data/a"},
    ]);
    let bytes = serde_json::to_vec(&ops).unwrap();
    let uri = "/api/v1/namespaces/fuzz";
    let code = f
        .send(Method::PATCH, uri, "application/json-patch+json", bytes)
        .await
        .unwrap();
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    let code = f
        .send(Method::GET, uri, "application/json", Vec::new())
        .await;
    assert_eq!(code.unwrap(), StatusCode::OK);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn token_requests_never_panic(
        rbac in any::<bool>(),
        bodies in prop::collection::vec(
            prop_oneof![
                body("sa"),
                // Mostly well-formed but for the lifetime, so the lifetime is what is tested.
                (
                    number(),
                    prop_oneof![3 => Just(Value::Null), 1 => json_value()],
                    prop_oneof![3 => Just(Value::Null), 1 => json_value()],
                )
                    .prop_map(|(s, a, b)| json!({
                        "spec": {"expirationSeconds": s, "audiences": a, "boundObjectRef": b}
                    })),
            ],
            1..4,
        ),
    ) {
        runtime().block_on(async {
            let f = Fixture::new(rbac).await;
            let uri = "/api/v1/namespaces/default/serviceaccounts/sa/token";
            for body in &bodies {
                f.send_json(Method::POST, uri, body).await?;
            }
            f.still_answers().await
        })?;
    }

    #[test]
    fn reviews_never_panic(
        rbac in any::<bool>(),
        requests in prop::collection::vec((0..REVIEWS.len(), body("")), 1..5),
    ) {
        runtime().block_on(async {
            let f = Fixture::new(rbac).await;
            for (review, body) in &requests {
                f.send_json(Method::POST, REVIEWS[*review], body).await?;
            }
            f.still_answers().await
        })?;
    }

    /// `PUT` of a namespace, its `/finalize` and its `/status`, then `DELETE`s with any delete
    /// options: a namespace stored with a status of another type once panicked when marked
    /// `Terminating`.
    #[test]
    fn namespace_writes_never_panic(
        requests in prop::collection::vec(
            (prop::sample::select(vec!["", "/finalize", "/status", "delete"]), body("fuzz")),
            1..6,
        ),
    ) {
        runtime().block_on(async {
            let f = Fixture::new(false).await;
            for (sub, body) in &requests {
                if *sub == "delete" {
                    f.send_json(Method::DELETE, "/api/v1/namespaces/fuzz", body).await?;
                } else {
                    let uri = format!("/api/v1/namespaces/fuzz{sub}");
                    f.send_json(Method::PUT, &uri, body).await?;
                }
            }
            f.send_json(Method::DELETE, "/api/v1/namespaces/fuzz", &json!({})).await?;
            f.still_answers().await
        })?;
    }

    #[test]
    fn status_writes_never_panic(
        requests in prop::collection::vec(
            (0..OBJECTS.len(), any::<bool>(), prop::sample::select(PATCH_TYPES.to_vec()), body("")),
            1..6,
        ),
    ) {
        runtime().block_on(async {
            let f = Fixture::new(false).await;
            for (object, put, patch_type, body) in &requests {
                let (path, name) = OBJECTS[*object];
                let mut body = body.clone();
                if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.insert("name".into(), json!(name));
                }
                let uri = format!("{path}/status?fieldManager=fuzz");
                if *put {
                    f.send_json(Method::PUT, &uri, &body).await?;
                } else {
                    let bytes = serde_json::to_vec(&body).unwrap();
                    f.send(Method::PATCH, &uri, patch_type, bytes).await?;
                }
            }
            for (path, _) in OBJECTS {
                f.send_json(Method::DELETE, path, &json!({})).await?;
            }
            f.still_answers().await
        })?;
    }

    #[test]
    fn crd_creates_never_panic(
        crds in prop::collection::vec(
            prop_oneof![
                body("widgets.example.com"),
                (json_value(), json_value(), json_value(), json_value()).prop_map(
                    |(names, scope, versions, group)| json!({
                        "metadata": {"name": "things.example.org"},
                        "spec": {"group": group, "names": names, "scope": scope,
                                 "versions": versions},
                    })
                ),
            ],
            1..4,
        ),
    ) {
        runtime().block_on(async {
            let f = Fixture::new(false).await;
            let uri = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
            for crd in &crds {
                f.send_json(Method::POST, uri, crd).await?;
                let name = crd["metadata"]["name"].as_str().unwrap_or("x").to_string();
                f.send_json(Method::PUT, &format!("{uri}/{name}"), crd).await?;
            }
            f.send_json(Method::DELETE, &format!("{uri}/widgets.example.com"), &json!({})).await?;
            f.still_answers().await
        })?;
    }

    #[test]
    fn patches_and_applies_never_panic(
        requests in prop::collection::vec(
            (0..OBJECTS.len(), 0..PATCH_TYPES.len(), body(""), json_patch(), any::<bool>()),
            1..6,
        ),
    ) {
        runtime().block_on(async {
            let f = Fixture::new(false).await;
            for (object, patch_type, body, ops, force) in &requests {
                let (path, name) = OBJECTS[*object];
                let content_type = PATCH_TYPES[*patch_type];
                let mut body = body.clone();
                if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.insert("name".into(), json!(name));
                }
                let sent = if content_type == "application/json-patch+json" { ops } else { &body };
                let uri = format!("{path}?fieldManager=fuzz&force={force}");
                f.send(Method::PATCH, &uri, content_type, serde_json::to_vec(sent).unwrap())
                    .await?;
                f.send_json(Method::PUT, path, &body).await?;
            }
            // Creates through apply and plain POST of the same bodies.
            for (object, _, body, _, _) in &requests {
                let (path, _) = OBJECTS[*object];
                let collection = &path[..path.rfind('/').unwrap_or(0)];
                f.send_json(Method::POST, collection, body).await?;
            }
            f.still_answers().await
        })?;
    }
}
