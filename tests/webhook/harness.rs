//! What the webhook tests share: a clock the test sets, a client that trusts only a CA bundle,
//! replicas serving the managed Secret, and the webhook configurations and CRDs the bundle
//! goes into.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use informant::serving::managed::{Clock, SecretWatcher, Settings};
use informant::serving::{CertificateCell, WebhookRouter, WebhookServer};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::time_provider::TimeProvider;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_util::sync::CancellationToken;

use crate::support;

/// A wall clock the test sets: the leader dates and judges certificates by it, and the
/// client verifies them by it, so a year of rotation passes in a test.
#[derive(Debug)]
pub(crate) struct FakeClock(Mutex<SystemTime>);

impl FakeClock {
    pub(crate) fn at(now: SystemTime) -> Arc<Self> {
        Arc::new(Self(Mutex::new(now)))
    }

    pub(crate) fn set(&self, at: SystemTime) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = at;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl TimeProvider for FakeClock {
    fn current_time(&self) -> Option<UnixTime> {
        Some(UnixTime::since_unix_epoch(
            self.now().duration_since(SystemTime::UNIX_EPOCH).ok()?,
        ))
    }
}

pub(crate) const SERVICE: &str = "hooks";
pub(crate) const NAMESPACE: &str = "default";
/// The name the client asks for: the Service's, as the API server calls it.
pub(crate) const SERVER_NAME: &str = "hooks.default.svc";

/// `GET /healthz` on `addr` trusting only `bundle` (PEM) at `clock`'s time; the status code.
pub(crate) async fn trusted_get(
    addr: SocketAddr,
    bundle: &[u8],
    clock: Arc<FakeClock>,
) -> Result<u16, String> {
    let mut roots = RootCertStore::empty();
    let (added, _) = roots
        .add_parsable_certificates(CertificateDer::pem_slice_iter(bundle).filter_map(Result::ok));
    if added == 0 {
        return Err("no CA in the bundle".to_owned());
    }
    let config = ClientConfig::builder_with_details(Arc::new(ring::default_provider()), clock)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from(SERVER_NAME).map_err(|e| e.to_string())?;
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake: {e}"))?;
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: hooks\r\nConnection: close\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    let _ = tls.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw);
    text.get(9..12)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no HTTP answer: {text:?}"))
}

/// One replica: its Secret watcher and webhook server, until the shutdown.
pub(crate) struct Replica {
    pub(crate) addr: SocketAddr,
    pub(crate) cell: Arc<CertificateCell>,
}

pub(crate) async fn replica(
    client: Client,
    settings: &Settings,
    shutdown: &CancellationToken,
) -> Replica {
    let watcher = SecretWatcher::new(client, settings).unwrap();
    let cell = watcher.cell();
    let mut ready = watcher.ready();
    tokio::spawn(watcher.run(shutdown.child_token()));
    let server = WebhookServer::bind(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        Arc::clone(&cell),
        WebhookRouter::new(),
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    tokio::spawn(server.run(shutdown.child_token()));
    tokio::time::timeout(support::WAIT, ready.wait_for(|r| *r))
        .await
        .expect("the replica serves the Secret's certificate")
        .unwrap();
    Replica { addr, cell }
}

pub(crate) fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

pub(crate) fn serves(replica: &Replica, pem: &str) -> bool {
    replica.cell.current().cert[0].as_ref() == der(pem).as_slice()
}

pub(crate) fn settings() -> Settings {
    Settings::new(SERVICE, NAMESPACE)
}

/// Serves the two webhook configuration kinds on the embedded API server, which does not
/// serve `admissionregistration.k8s.io` yet (issue #36 part 5 adds them as built-ins): as
/// CRDs of the same group, kind and scope, so kube's typed API reaches them at the same
/// paths. Without the built-ins there is no schema, and the objects are stored as sent.
pub(crate) async fn serve_webhook_configurations(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    if discovery.has_group("admissionregistration.k8s.io") {
        return;
    }
    for (kind, plural) in [
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
    ] {
        let crd = json!({
            "metadata": {"name": format!("{plural}.admissionregistration.k8s.io")},
            "spec": {
                "group": "admissionregistration.k8s.io",
                "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
                "scope": "Cluster",
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
            }
        });
        crds.create(
            &PostParams::default(),
            &serde_json::from_value(crd).unwrap(),
        )
        .await
        .unwrap();
    }
}

pub(crate) fn webhook_configuration(name: &str) -> serde_json::Value {
    let webhook = |n: &str| {
        json!({
            "name": format!("{n}.hooks.informant.dev"),
            "clientConfig": {"service": {"name": SERVICE, "namespace": NAMESPACE, "path": "/validate", "port": 9443}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        })
    };
    json!({
        "metadata": {"name": name},
        "webhooks": [webhook("first"), webhook("second")],
    })
}

pub(crate) fn crd(plural: &str, strategy: &str) -> CustomResourceDefinition {
    let mut conversion = json!({"strategy": strategy});
    if strategy == "Webhook" {
        conversion["webhook"] = json!({
            "clientConfig": {"service": {"name": SERVICE, "namespace": NAMESPACE, "path": "/convert"}},
            "conversionReviewVersions": ["v1"],
        });
    }
    serde_json::from_value(json!({
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {
            "group": "example.com",
            "names": {"plural": plural, "singular": plural.trim_end_matches('s'), "kind": "Widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "conversion": conversion,
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        }
    }))
    .unwrap()
}
