//! Secure metrics (`--metrics-secure`) over real sockets against the embedded API server with
//! RBAC on: HTTPS only, every request's token reviewed (401 without one, 403 without `get` on
//! the path, 200 with it), a review the API server refuses is a 500, and the serving
//! certificate replaced on disk (files renamed over, a Secret volume's `..data` symlink swap)
//! is served within seconds without a restart while a bad replacement keeps the old one.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use informant::apiserver::TestServer;
use informant::manager::{
    BindError, Check, HttpServer, ManagerMetrics, MetricsRegistry, Probes, SecureMetrics,
};
use informant::serving::{CertSource, cert};
use kube::Client;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_util::sync::CancellationToken;

use crate::support::{self, https};

struct NoProbes;

impl Probes for NoProbes {
    fn health_checks(&self) -> Vec<Check> {
        Vec::new()
    }
    fn ready_checks(&self) -> Vec<Check> {
        Vec::new()
    }
    fn debug_cache(&self) -> Value {
        json!({})
    }
    fn debug_status(&self) -> Option<Value> {
        Some(json!({"ready": true}))
    }
}

/// The endpoints served, until stopped.
struct Running {
    metrics: SocketAddr,
    health: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<std::io::Result<()>>,
}

impl Running {
    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap().unwrap();
    }
}

/// Secure metrics and plain probes on free loopback ports, reviewing with `client`.
async fn serve(client: Client, cert: CertSource) -> Result<Running, BindError> {
    let mut registry = Registry::default();
    ManagerMetrics::new().register(&mut registry);
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let server = HttpServer::bind_secure(
        Some(loopback),
        Some(loopback),
        MetricsRegistry::from(registry),
        Arc::new(NoProbes),
        Some(SecureMetrics { cert, client }),
    )
    .await?;
    let metrics = server.metrics_addr().unwrap();
    let health = server.health_addr().unwrap();
    assert_ne!(
        metrics, health,
        "the probes keep a plain listener of their own"
    );
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(server.run(shutdown.clone()));
    Ok(Running {
        metrics,
        health,
        shutdown,
        task,
    })
}

/// A `ServiceAccount` `name` in `default`, and a token of it.
async fn account(server: &TestServer, name: &str) -> String {
    server
        .handle()
        .create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": name, "namespace": "default"}}))
        .unwrap();
    server.token("default", name).await.unwrap()
}

/// A `ClusterRole` named `name` with `rules`, bound to `default/<account>`.
fn grant(server: &TestServer, name: &str, account: &str, rules: &Value) {
    let handle = server.handle();
    handle
        .create(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                       "metadata": {"name": name}, "rules": rules}),
        )
        .unwrap();
    handle
        .create(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                       "metadata": {"name": format!("{name}-{account}")},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                       "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "default"}]}))
        .unwrap();
}

/// kubebuilder's `metrics-reader`: `get` on `/metrics`.
fn metrics_reader() -> Value {
    json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])
}

#[tokio::test(flavor = "multi_thread")]
async fn secure_metrics_answer_401_without_a_token_403_without_the_grant_and_200_with_it() {
    let server = TestServer::start_with_rbac().await.unwrap();
    let reader = account(&server, "reader").await;
    let stranger = account(&server, "stranger").await;
    grant(&server, "metrics-reader", "reader", &metrics_reader());
    // The manager's client is the administrator's: its own reviews are allowed.
    let running = serve(server.client().await.unwrap(), CertSource::self_signed([]))
        .await
        .unwrap();
    let m = running.metrics;

    let none = https::get(m, "/metrics", None).await.unwrap();
    assert_eq!(none.code, 401, "{none:?}");
    assert!(
        none.head
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer realm=\"informant\""),
        "{none:?}"
    );
    assert!(!none.body.contains("informant_"), "{none:?}");
    let forged = https::get(m, "/metrics", Some("not-a-token"))
        .await
        .unwrap();
    assert_eq!(forged.code, 401, "{forged:?}");
    assert!(forged.head.contains("invalid_token"), "{forged:?}");

    let denied = https::get(m, "/metrics", Some(&stranger)).await.unwrap();
    assert_eq!(denied.code, 403, "{denied:?}");
    assert!(
        denied
            .body
            .contains("Authorization denied for user system:serviceaccount:default:stranger"),
        "{denied:?}"
    );

    let allowed = https::get(m, "/metrics", Some(&reader)).await.unwrap();
    assert_eq!(allowed.code, 200, "{allowed:?}");
    assert!(allowed.body.contains("informant_"), "{allowed:?}");
    assert_eq!(
        allowed.alpn.as_deref(),
        Some(&b"http/1.1"[..]),
        "HTTP/2 is off even when the client offers it"
    );
    // The same token is reviewed per path: metrics-reader grants /metrics only.
    let debug = https::get(m, "/debug/status", Some(&reader)).await.unwrap();
    assert_eq!(debug.code, 403, "{debug:?}");
    let unknown = https::get(m, "/nothing", None).await.unwrap();
    assert_eq!(unknown.code, 401, "unknown paths are guarded too");

    // Plain HTTP to the secure port: Go's answer, never the metrics.
    let plain = https::plain_get(m, "/metrics").await;
    assert!(
        plain.starts_with("HTTP/1.0 400 Bad Request")
            && plain.contains("Client sent an HTTP request to an HTTPS server."),
        "{plain:?}"
    );
    assert!(!plain.contains("informant_"), "{plain:?}");
    // The probes stay plain HTTP for the kubelet.
    assert_eq!(support::http_get(running.health, "/healthz").await.0, 200);
    assert!(https::get(running.health, "/healthz", None).await.is_err());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_review_the_api_server_refuses_is_a_500_until_the_manager_is_granted_it() {
    let server = TestServer::start_with_rbac().await.unwrap();
    let reader = account(&server, "reader").await;
    grant(&server, "metrics-reader", "reader", &metrics_reader());
    let manager = server
        .client_with_token(&account(&server, "informant").await)
        .await
        .unwrap();
    let running = serve(manager, CertSource::self_signed([])).await.unwrap();
    let m = running.metrics;

    let refused = https::get(m, "/metrics", Some(&reader)).await.unwrap();
    assert_eq!(refused.code, 500, "{refused:?}");
    assert!(
        refused.body.contains("Authentication failed") && refused.body.contains("TokenReview"),
        "{refused:?}"
    );
    let asked = server.handle().refusals();
    assert!(
        asked
            .iter()
            .any(|r| r.user == "system:serviceaccount:default:informant"
                && r.verb == "create"
                && r.resource == "tokenreviews"),
        "{asked:#?}"
    );

    grant(
        &server,
        "token-reviewer",
        "informant",
        &json!([{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}]),
    );
    // A failure is not cached: the next request asks again.
    let half = https::get(m, "/metrics", Some(&reader)).await.unwrap();
    assert_eq!(half.code, 500, "{half:?}");
    assert!(
        half.body.contains("Authorization failed") && half.body.contains("SubjectAccessReview"),
        "{half:?}"
    );

    grant(
        &server,
        "access-reviewer",
        "informant",
        &json!([{"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]),
    );
    let granted = https::get(m, "/metrics", Some(&reader)).await.unwrap();
    assert_eq!(granted.code, 200, "{granted:?}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_api_server_that_does_not_answer_is_a_500_saying_so() {
    // Nothing listens on port 1: every review attempt (five, with controller-runtime's
    // backoff) is refused at connect.
    let nowhere = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let client = Client::try_from(nowhere).unwrap();
    let running = serve(client, CertSource::self_signed([])).await.unwrap();
    let reply = https::get(running.metrics, "/metrics", Some("some-token"))
        .await
        .unwrap();
    assert_eq!(reply.code, 500, "{reply:?}");
    assert!(
        reply.body.contains("Authentication failed")
            && reply.body.contains("did not answer")
            && reply.body.contains("TokenReview"),
        "{reply:?}"
    );
    running.stop().await;
}

/// A new self-signed pair for `localhost`; its PEM (certificate, key) and the certificate's DER.
fn pair() -> (String, String, Vec<u8>) {
    let (cert_pem, key_pem) = cert::generate(&["localhost".to_owned()]).unwrap();
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
        .unwrap()
        .to_vec();
    (cert_pem, key_pem, der)
}

/// Writes `text` to `dir/name` as a new file renamed over the old one.
fn replace(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// Whether the certificate `der` is the one presented within [`support::WAIT`].
async fn presented_within(addr: SocketAddr, der: &[u8]) -> bool {
    support::holds_within_every(support::WAIT, Duration::from_millis(50), || async {
        https::get(addr, "/metrics", None)
            .await
            .is_ok_and(|r| r.certificate == der)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_certificate_replaced_on_disk_is_served_within_seconds_and_a_bad_one_is_not() {
    let server = TestServer::start_with_rbac().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (first_cert, first_key, first) = pair();
    std::fs::write(dir.path().join("tls.crt"), &first_cert).unwrap();
    std::fs::write(dir.path().join("tls.key"), &first_key).unwrap();
    let running = serve(
        server.client().await.unwrap(),
        CertSource::files(dir.path()),
    )
    .await
    .unwrap();
    let m = running.metrics;
    assert!(presented_within(m, &first).await, "the mounted certificate");

    let (second_cert, second_key, second) = pair();
    replace(dir.path(), "tls.key", &second_key);
    replace(dir.path(), "tls.crt", &second_cert);
    assert!(
        presented_within(m, &second).await,
        "the replaced certificate is served without a restart"
    );

    // A certificate whose key is another's: refused, the second stays served. Observed for a
    // while, as nothing else says the watcher has looked.
    let (third_cert, _, third) = pair();
    let (_, other_key, _) = pair();
    replace(dir.path(), "tls.key", &other_key);
    replace(dir.path(), "tls.crt", &third_cert);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(1500);
    while tokio::time::Instant::now() < deadline {
        let reply = https::get(m, "/metrics", None).await.unwrap();
        assert_eq!(
            reply.certificate, second,
            "a bad pair must keep the old one"
        );
        assert_ne!(reply.certificate, third);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    running.stop().await;
}

/// Publishes `cert` and `key` as the kubelet updates a Secret volume: a new timestamped
/// directory, `..data` swapped to it by renaming a new symlink over it.
fn publish(dir: &Path, version: u32, cert: &str, key: &str) {
    let data = dir.join(format!("..2026_11_26_{version}"));
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("tls.crt"), cert).unwrap();
    std::fs::write(data.join("tls.key"), key).unwrap();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(data.file_name().unwrap(), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_volume_updated_by_its_data_symlink_swap_is_served_without_a_restart() {
    let server = TestServer::start_with_rbac().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (first_cert, first_key, first) = pair();
    publish(dir.path(), 1, &first_cert, &first_key);
    for name in ["tls.crt", "tls.key"] {
        std::os::unix::fs::symlink(format!("..data/{name}"), dir.path().join(name)).unwrap();
    }
    let running = serve(
        server.client().await.unwrap(),
        CertSource::files(dir.path()),
    )
    .await
    .unwrap();
    assert!(presented_within(running.metrics, &first).await);
    let (second_cert, second_key, second) = pair();
    publish(dir.path(), 2, &second_cert, &second_key);
    assert!(
        presented_within(running.metrics, &second).await,
        "the swapped-in certificate is served without a restart"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_missing_certificate_directory_fails_before_anything_is_served() {
    let server = TestServer::start_with_rbac().await.unwrap();
    let missing = std::env::temp_dir().join("informant-no-such-cert-dir");
    let error = serve(server.client().await.unwrap(), CertSource::files(&missing))
        .await
        .err()
        .expect("no certificate to serve");
    let chain = informant::telemetry::error_chain(&error);
    assert!(chain.contains("tls.crt"), "{chain}");
}
