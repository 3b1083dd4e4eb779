//! The one switch of the test support: which API server the tests talk to.
//!
//! By default every test starts an embedded API server of its own ([`Server`] wraps
//! `informant::apiserver::TestServer`). With `INFORMANT_TEST_KUBECONFIG` naming the kubeconfig
//! of a real cluster (`bash e2e/cluster/rust-suites.sh` sets it, inside the network namespace of
//! the control plane of `e2e/cluster/cluster.sh`), the same helpers hand the tests a client of
//! that cluster instead:
//!
//! - tests run one at a time (a lock the [`Server`] holds), and each starts on a clean cluster:
//!   the objects an earlier test left in `default` (and in the namespaces tests made), webhook
//!   configurations, CRDs other than informant's and the instances of every CRD are removed
//!   (their finalizers first), so what a test sees is what it made;
//! - a webhook a test serves listens on [`webhook_bind`] and is published as a Service with an
//!   `EndpointSlice` ([`Server::publish_service`]): kube-apiserver, run with
//!   `--enable-aggregator-routing`, calls the endpoint with the Service's DNS name as the TLS
//!   server name, as the embedded server does with `resolve_service`;
//! - what only the embedded server has (fault injection, request counts, `/debug`, its address,
//!   restarting it, RBAC set-ups with its tokens) ends the test with a panic whose message
//!   starts with `skipped:` and says what it needed: never a silent pass. `cargo test` shows such
//!   a test as failed; the runner counts it as skipped.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;

/// The switch: the path of a real cluster's kubeconfig.
pub const SWITCH: &str = "INFORMANT_TEST_KUBECONFIG";

/// The address webhooks listen on under the switch (default `10.200.0.1`, the address of
/// `e2e/cluster/cluster.sh` on its namespace's loopback: an `EndpointSlice` may not name 127.0.0.0/8).
pub const WEBHOOK_IP: &str = "INFORMANT_TEST_WEBHOOK_IP";

/// The namespaces a reset keeps (besides `default`, which it empties).
const SYSTEM_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// How long a reset waits for the namespaces and CRDs of earlier tests to be gone.
const NAMESPACES_GONE: Duration = Duration::from_mins(2);

/// The CRDs the support installs (kept across tests, their instances removed).
const INFORMANT_CRDS: [&str; 2] = ["cacheconfigs.informant.dev", "controllers.informant.dev"];

/// The kubeconfig of the real cluster, when the switch is on.
pub fn real_kubeconfig() -> Option<PathBuf> {
    std::env::var_os(SWITCH)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Ends the test as skipped under the switch: `what` exists only on the embedded API server.
#[track_caller]
pub fn embedded_only(what: &str) -> ! {
    panic!("skipped: {what} exists only on the embedded API server ({SWITCH} names a real one)")
}

/// Ends the test as skipped under the switch (and does nothing otherwise): for a test whose
/// subject is the embedded server itself, or that needs what a real server cannot give.
#[allow(dead_code, reason = "not every test binary skips on a real server")]
#[track_caller]
pub fn skip_on_real(why: &str) {
    if real_kubeconfig().is_some() {
        embedded_only(why);
    }
}

/// Where a test's webhook listens: a free loopback port, or under the switch a free port on
/// [`WEBHOOK_IP`], which the real kube-apiserver reaches through an `EndpointSlice`.
#[allow(dead_code, reason = "not every test binary serves webhooks")]
pub fn webhook_bind() -> SocketAddr {
    if real_kubeconfig().is_none() {
        return SocketAddr::from(([127, 0, 0, 1], 0));
    }
    let ip = std::env::var(WEBHOOK_IP)
        .ok()
        .and_then(|v| v.parse::<IpAddr>().ok())
        .unwrap_or(IpAddr::from([10, 200, 0, 1]));
    SocketAddr::new(ip, 0)
}

/// Serialises the tests of a process under the switch: they share one cluster. Tokio's mutex:
/// each test has a runtime of its own, and a test that panics releases it as it unwinds.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The API server of one test: an embedded one of its own, or (under the switch) the real
/// cluster, reset for it and held by it alone. Derefs to the embedded server, and under the
/// switch that ends the test as skipped (what the embedded server alone has).
#[allow(
    dead_code,
    reason = "not every test binary uses every part of a Server"
)]
pub struct Server {
    embedded: Option<informant::apiserver::TestServer>,
    real: Option<(PathBuf, tokio::sync::MutexGuard<'static, ()>)>,
}

impl std::ops::Deref for Server {
    type Target = informant::apiserver::TestServer;
    #[track_caller]
    fn deref(&self) -> &informant::apiserver::TestServer {
        match &self.embedded {
            Some(server) => server,
            None => embedded_only("the embedded server's handle (faults, counts, its address)"),
        }
    }
}

#[allow(
    dead_code,
    reason = "not every test binary uses every part of a Server"
)]
impl Server {
    /// An embedded server with `config`, or the reset real cluster under the switch (where
    /// `config` must be the default: faults and timings are the embedded server's).
    pub async fn start(config: Option<informant::apiserver::Config>) -> Self {
        let Some(path) = real_kubeconfig() else {
            let server = informant::apiserver::TestServer::start_with(config.unwrap_or_default())
                .await
                .unwrap();
            return Self {
                embedded: Some(server),
                real: None,
            };
        };
        if config.is_some() {
            embedded_only("a configured server (faults, watch timings)");
        }
        let serial = SERIAL.lock().await;
        let client = real_client(&path).await;
        // Boxed: the reset's many requests would make every test's future large.
        Box::pin(reset(&client)).await;
        Self {
            embedded: None,
            real: Some((path, serial)),
        }
    }

    /// Stops the embedded server and waits for it to end; the real cluster is only let go.
    pub async fn shutdown(self) -> Result<(), informant::apiserver::TestServerError> {
        match self.embedded {
            Some(server) => server.shutdown().await,
            None => Ok(()),
        }
    }

    /// Whether this is the real cluster of the switch.
    pub fn is_real(&self) -> bool {
        self.real.is_some()
    }

    /// A client of the server (the administrator's).
    pub async fn client(&self) -> Result<Client, Box<dyn std::error::Error + Send + Sync>> {
        match (&self.embedded, &self.real) {
            (Some(server), _) => Ok(server.client().await?),
            (None, Some((path, _))) => Ok(real_client(path).await),
            (None, None) => unreachable!("a Server is embedded or real"),
        }
    }

    /// A kubeconfig of the server (the administrator's).
    pub fn kubeconfig(&self) -> kube::config::Kubeconfig {
        match (&self.embedded, &self.real) {
            (Some(server), _) => server.kubeconfig(),
            (None, Some((path, _))) => kube::config::Kubeconfig::read_from(path).unwrap(),
            (None, None) => unreachable!("a Server is embedded or real"),
        }
    }

    /// Reaches the webhooks that name Service `namespace/name` port `port` at `addr`: the
    /// embedded server is told so; on the real cluster a Service without selector and an
    /// `EndpointSlice` naming `addr` are created (`addr` must then be [`webhook_bind`]'s address).
    pub async fn publish_service(&self, namespace: &str, name: &str, port: u16, addr: SocketAddr) {
        if let Some(server) = &self.embedded {
            server.handle().resolve_service(namespace, name, port, addr);
            return;
        }
        let client = self.client().await.unwrap();
        let family = if addr.is_ipv4() { "IPv4" } else { "IPv6" };
        for object in [
            serde_json::json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"ports": [{"name": "https", "port": port, "targetPort": addr.port()}]}}),
            serde_json::json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {"kubernetes.io/service-name": name}},
                "addressType": family,
                "endpoints": [{"addresses": [addr.ip().to_string()], "conditions": {"ready": true}}],
                "ports": [{"name": "https", "port": addr.port(), "protocol": "TCP"}]}),
        ] {
            create(&client, object).await;
        }
    }

    /// Creates `object` (its `apiVersion` and `kind` say where): straight in the embedded
    /// server's store, or through the real cluster's API (where namespaces must exist and a
    /// status is not stored on create). The stored object.
    pub fn create(&self, object: serde_json::Value) -> serde_json::Value {
        match (&self.embedded, &self.real) {
            (Some(server), _) => server.handle().create(object).unwrap(),
            (None, Some((path, _))) => {
                // The caller's runtime is single-threaded and busy with the caller: one of its
                // own on a thread of its own, with a client of its own.
                std::thread::scope(|scope| {
                    scope
                        .spawn(|| {
                            tokio::runtime::Builder::new_current_thread()
                                .enable_all()
                                .build()
                                .unwrap()
                                .block_on(async { create(&real_client(path).await, object).await })
                        })
                        .join()
                        .unwrap()
                })
            }
            (None, None) => unreachable!("a Server is embedded or real"),
        }
    }
}

/// A client from the kubeconfig at `path`.
async fn real_client(path: &std::path::Path) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    Client::try_from(config).unwrap()
}

/// The resource of `object`'s kind, and whether it is namespaced.
async fn resource_of(client: &Client, object: &serde_json::Value) -> (ApiResource, bool) {
    let (group, version) = match object["apiVersion"].as_str().unwrap().split_once('/') {
        Some((g, v)) => (g.to_owned(), v.to_owned()),
        None => (
            String::new(),
            object["apiVersion"].as_str().unwrap().to_owned(),
        ),
    };
    let gvk = GroupVersionKind::gvk(&group, &version, object["kind"].as_str().unwrap());
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    (resource, capabilities.scope == Scope::Namespaced)
}

/// The API of `object`'s kind, in its namespace when namespaced.
async fn api_of(client: &Client, object: &serde_json::Value) -> Api<DynamicObject> {
    let (resource, namespaced) = resource_of(client, object).await;
    match (namespaced, object["metadata"]["namespace"].as_str()) {
        (true, Some(namespace)) => Api::namespaced_with(client.clone(), namespace, &resource),
        _ => Api::all_with(client.clone(), &resource),
    }
}

/// Creates `object` through `client`; the stored object.
async fn create(client: &Client, object: serde_json::Value) -> serde_json::Value {
    let api = api_of(client, &object).await;
    let dynamic: DynamicObject = serde_json::from_value(object).unwrap();
    let stored = api.create(&PostParams::default(), &dynamic).await.unwrap();
    serde_json::to_value(stored).unwrap()
}

/// Installs informant's CRDs (server-side apply: what an earlier test changed of them is put
/// back) and waits until both are established.
pub async fn install_informant_crds(client: &Client) {
    use kube::CustomResourceExt;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [
        informant::config::CacheConfig::crd(),
        informant::hooks::Controller::crd(),
    ] {
        let name = crd.metadata.name.clone().unwrap();
        crds.patch(
            &name,
            &PatchParams::apply("informant-tests").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
    }
    super::eventually("informant's CRDs established", || async {
        let mut established = 0;
        for name in INFORMANT_CRDS {
            if let Ok(crd) = crds.get(name).await {
                let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
                if conditions
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
                {
                    established += 1;
                }
            }
        }
        established == INFORMANT_CRDS.len()
    })
    .await;
}

/// Puts the real cluster back to what a fresh embedded server has (and its own system
/// objects): see the module's documentation.
async fn reset(client: &Client) {
    // The webhooks first: a failing one of an earlier test would refuse what follows.
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        let probe =
            serde_json::json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind});
        let (resource, _) = resource_of(client, &probe).await;
        remove_all(client, &resource, None, |_| true).await;
    }
    // The instances of every CRD, then the CRDs that are not informant's.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds.list(&ListParams::default()).await.unwrap() {
        let Some(version) = crd.spec.versions.iter().find(|v| v.storage) else {
            continue;
        };
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&crd.spec.group, &version.name, &crd.spec.names.kind),
            &crd.spec.names.plural,
        );
        remove_all(client, &resource, None, |_| true).await;
        let name = crd.metadata.name.clone().unwrap();
        if !INFORMANT_CRDS.contains(&name.as_str()) {
            crds.delete(&name, &DeleteParams::default()).await.unwrap();
        }
    }
    // The namespaces tests made.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for ns in namespaces.list(&ListParams::default()).await.unwrap() {
        let name = ns.metadata.name.unwrap_or_default();
        if !SYSTEM_NAMESPACES.contains(&name.as_str()) && ns.metadata.deletion_timestamp.is_none() {
            namespaces
                .delete(&name, &DeleteParams::default())
                .await
                .unwrap();
        }
    }
    // What tests make in `default`, but the cluster's own objects there.
    for (api_version, kind) in [
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "Service"),
        ("v1", "ServiceAccount"),
        ("v1", "Pod"),
        ("discovery.k8s.io/v1", "EndpointSlice"),
        ("coordination.k8s.io/v1", "Lease"),
        ("events.k8s.io/v1", "Event"),
        ("apps/v1", "Deployment"),
        ("batch/v1", "CronJob"),
        ("batch/v1", "Job"),
    ] {
        let probe = serde_json::json!({"apiVersion": api_version, "kind": kind});
        let (resource, _) = resource_of(client, &probe).await;
        remove_all(client, &resource, Some("default"), |name| {
            !matches!(name, "kubernetes" | "kube-root-ca.crt" | "default")
        })
        .await;
    }
    // Gone, not only deleting: a test making the same name again must not meet the old one.
    // The namespace controller empties a namespace before it goes: a test that made a hundred
    // takes longer than a test's usual wait.
    let gone = super::holds_within_every(NAMESPACES_GONE, Duration::from_millis(200), || async {
        let left_ns = namespaces
            .list(&ListParams::default())
            .await
            .map_or(usize::MAX, |l| l.items.len());
        let left_crds = crds
            .list(&ListParams::default())
            .await
            .map_or(usize::MAX, |l| l.items.len());
        left_ns <= SYSTEM_NAMESPACES.len() && left_crds <= INFORMANT_CRDS.len()
    })
    .await;
    assert!(
        gone,
        "the earlier tests' namespaces and CRDs not gone within {NAMESPACES_GONE:?}"
    );
}

/// Deletes every `resource` (of `namespace`, or of all) whose name is `removable`, its
/// finalizers removed first so that nothing waits on a controller that is gone.
async fn remove_all(
    client: &Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    removable: impl Fn(&str) -> bool,
) {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let Ok(list) = api.list(&ListParams::default()).await else {
        return; // the kind is not served (a CRD being deleted): nothing of it to remove.
    };
    for object in list.items {
        let name = object.metadata.name.clone().unwrap_or_default();
        if !removable(&name) {
            continue;
        }
        let scoped = match &object.metadata.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
            None => api.clone(),
        };
        if object
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty())
        {
            let _ = scoped
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
                )
                .await;
        }
        let _ = scoped.delete(&name, &DeleteParams::default()).await;
    }
}
