//! A flood of the manager's two TLS endpoints, and what it costs the manager
//! (`cargo bench --bench flood`): a release `informant run` process, against the embedded API
//! server in this process, serving a `Controller`'s slow admission exec hook on its webhook
//! endpoint and secure metrics; then, at once and for `INFORMANT_BENCH_SECONDS` (default 20):
//!
//! - 512 clients posting `AdmissionReview`s to the slow hook (it sleeps 30 s; its
//!   `timeoutSeconds` is 2), each giving up after 1 s and connecting again;
//! - 300 clients that finish a TLS handshake with the webhook port and send nothing (more than
//!   the 256 connections it holds);
//! - 64 clients asking `/metrics` with a new garbage bearer token each time (a `TokenReview`
//!   of the API server each, unless the cache answers).
//!
//! Sampled every 250 ms from `/proc`: the manager's resident memory, threads, open file
//! descriptors and descendant processes (the hook processes and their children). Printed:
//! before the flood, the maximum during it, and after it (once the descendants are gone,
//! polled). The answers the clients got are counted by status.
//!
//! Linux only (it reads `/proc`); the figures are in docs/reliability.md.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::CustomResourceExt as _;
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

const NAMESPACE: &str = "default";
const HOOK_PATH: &str = "/admission/default/slowc/slow";
const REVIEW_CLIENTS: usize = 512;
const IDLE_CLIENTS: usize = 300;
const METRICS_CLIENTS: usize = 64;
/// How long a review client waits before it gives up, as the reproduction did.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(1);
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// How long the descendants may take to end after the flood: the hook's deadline is 2 s.
const SETTLE: Duration = Duration::from_mins(1);

/// The slow hook: reads its review, then sleeps past its deadline.
const SLOW_HOOK: &str = "#!/bin/sh\ncat >/dev/null\nsleep 30\nprintf '{\"allowed\": true}'\n";

/// The manager's binary: `INFORMANT_FLOOD_BIN` (e.g. `target/release/informant` when the
/// bench runs in the test profile, `cargo test --bench flood`), else the one cargo built with
/// the bench (a release build under `cargo bench`).
fn manager_binary() -> std::path::PathBuf {
    std::env::var_os("INFORMANT_FLOOD_BIN")
        .map_or_else(|| env!("CARGO_BIN_EXE_informant").into(), Into::into)
}

/// The manager process, killed when dropped.
struct Manager(std::process::Child);

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What `/proc` says of the manager at one moment.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    rss_kib: u64,
    threads: u64,
    fds: u64,
    descendants: u64,
}

impl Sample {
    fn max(self, other: Self) -> Self {
        Self {
            rss_kib: self.rss_kib.max(other.rss_kib),
            threads: self.threads.max(other.threads),
            fds: self.fds.max(other.fds),
            descendants: self.descendants.max(other.descendants),
        }
    }

    fn row(&self, when: &str) -> String {
        format!(
            "| {when} | {}.{} MiB | {} | {} | {} |",
            self.rss_kib / 1024,
            self.rss_kib % 1024 * 10 / 1024,
            self.threads,
            self.fds,
            self.descendants
        )
    }
}

fn status_field(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Every process's parent, from `/proc/*/stat` (the field after the parenthesised name).
fn parents() -> BTreeMap<u32, u32> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok());
        if let Some(parent) = parent {
            out.insert(pid, parent);
        }
    }
    out
}

fn descendants(root: u32) -> u64 {
    let parents = parents();
    let mut count = 0;
    for &pid in parents.keys() {
        let mut at = pid;
        while let Some(&up) = parents.get(&at) {
            if up == root {
                count += 1;
                break;
            }
            if up <= 1 {
                break;
            }
            at = up;
        }
    }
    count
}

fn sample(pid: u32) -> Sample {
    Sample {
        rss_kib: status_field(pid, "VmRSS:"),
        threads: status_field(pid, "Threads:"),
        fds: std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64),
        descendants: descendants(pid),
    }
}

/// A CA, and a serving certificate it signed for `localhost` and 127.0.0.1 (PEM each).
fn certificates() -> (String, String, String) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let mut leaf =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    (ca_pem, cert.pem(), key.serialize_pem())
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn review() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "web", "namespace": NAMESPACE, "operation": "CREATE",
            "userInfo": {"username": "flood"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "web", "namespace": NAMESPACE}},
            "dryRun": false
        }
    }))
    .unwrap()
}

async fn connect(addr: SocketAddr, tls: &TlsConnector) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").map_err(std::io::Error::other)?;
    tls.connect(name, tcp).await
}

/// One request on a new connection; its status code (0 when no answer came).
async fn request(addr: SocketAddr, tls: &TlsConnector, head: &str, body: &[u8]) -> u16 {
    let Ok(mut stream) = connect(addr, tls).await else {
        return 0;
    };
    let mut bytes = head.as_bytes().to_vec();
    bytes.extend_from_slice(body);
    if stream.write_all(&bytes).await.is_err() {
        return 0;
    }
    let mut answer = [0u8; 12];
    match stream.read_exact(&mut answer).await {
        Ok(_) => std::str::from_utf8(&answer[9..12])
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(0),
        Err(_) => 0,
    }
}

type Counts = Arc<Mutex<BTreeMap<String, u64>>>;

fn count(counts: &Counts, key: String) {
    *counts
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(key)
        .or_default() += 1;
}

#[allow(clippy::too_many_lines, reason = "one story, told in order")]
#[tokio::main]
async fn main() {
    if !Path::new("/proc/self/status").exists() {
        println!("skipped: the flood bench reads /proc (Linux only)");
        return;
    }
    let seconds: u64 = std::env::var("INFORMANT_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
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
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates();
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    std::fs::write(certs.join("tls.crt"), &cert).unwrap();
    std::fs::write(certs.join("tls.key"), &key).unwrap();
    let hook = dir.path().join("slow.sh");
    std::fs::write(&hook, SLOW_HOOK).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // The config file: the CacheConfig, and the Controller with the slow admission hook (JSON
    // is YAML).
    let command = [hook.display().to_string()];
    let controller = json!({
        "apiVersion": "informant.dev/v1alpha1", "kind": "Controller",
        "metadata": {"name": "slowc", "namespace": NAMESPACE},
        "spec": {
            "for": {"apiVersion": "v1", "kind": "ConfigMap"},
            "hook": {"exec": {"command": command}},
            "admission": [{"name": "slow", "type": "Validating", "failurePolicy": "Ignore",
                "timeoutSeconds": 2, "hook": {"exec": {"command": command}}}],
        }
    });
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!("apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: flood, namespace: default}}\nspec: {{defaultNamespaces: {{default: {{}}}}}}\n---\n{controller}\n"),
    )
    .unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        serde_json::to_string(&server.kubeconfig()).unwrap(),
    )
    .unwrap();
    let (metrics, health, webhook) = (free_port(), free_port(), free_port());
    let log = dir.path().join("run.log");
    let manager = Manager(
        std::process::Command::new(manager_binary())
            .arg("run")
            .arg("--config")
            .arg(&config)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args([
                "--metrics-addr",
                &format!("127.0.0.1:{metrics}"),
                "--metrics-secure",
            ])
            .arg("--metrics-cert-dir")
            .arg(&certs)
            .args(["--health-addr", &format!("127.0.0.1:{health}")])
            .args([
                "--webhook-service",
                "hooks",
                "--webhook-service-namespace",
                NAMESPACE,
            ])
            .args(["--webhook-addr", &format!("127.0.0.1:{webhook}")])
            .arg("--webhook-cert-dir")
            .arg(&certs)
            .arg(format!("--hook-allow-exec={}/", dir.path().display()))
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let pid = manager.0.id();

    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.as_bytes()).unwrap())
        .unwrap();
    let tls = TlsConnector::from(Arc::new(
        ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    ));
    let webhook_addr = SocketAddr::from(([127, 0, 0, 1], webhook));
    let metrics_addr = SocketAddr::from(([127, 0, 0, 1], metrics));
    let body = Arc::new(review());
    let head = format!(
        "POST {HOOK_PATH} HTTP/1.1\r\nHost: hooks\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    // Served: the hook's path answers something other than 404 (a 200 once it decided).
    let started = Instant::now();
    loop {
        let probe = tokio::time::timeout(
            Duration::from_secs(5),
            request(webhook_addr, &tls, &head, &body),
        )
        .await
        .unwrap_or(0);
        if probe != 0 && probe != 404 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_mins(1),
            "the hook was not served within 60 s; the manager said:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The probe's own hook process ends at its deadline: wait for none to be left.
    let settled = Instant::now();
    while descendants(pid) > 0 && settled.elapsed() < SETTLE {
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
    let before = sample(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let counts: Counts = Arc::default();
    let mut tasks = Vec::new();
    for _ in 0..REVIEW_CLIENTS {
        let (stop, counts, tls, head, body) = (
            Arc::clone(&stop),
            Arc::clone(&counts),
            tls.clone(),
            head.clone(),
            Arc::clone(&body),
        );
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let answer =
                    tokio::time::timeout(CLIENT_TIMEOUT, request(webhook_addr, &tls, &head, &body))
                        .await;
                count(
                    &counts,
                    match answer {
                        Ok(0) => "webhook: no answer".to_owned(),
                        Ok(code) => format!("webhook: {code}"),
                        Err(_) => "webhook: gave up after 1 s".to_owned(),
                    },
                );
            }
        }));
    }
    for _ in 0..IDLE_CLIENTS {
        let (stop, tls) = (Arc::clone(&stop), tls.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                // Held until the server closes it (its header-read timeout), then again.
                if let Ok(Ok(mut idle)) =
                    tokio::time::timeout(Duration::from_secs(5), connect(webhook_addr, &tls)).await
                {
                    let mut byte = [0u8; 1];
                    let _ =
                        tokio::time::timeout(Duration::from_secs(15), idle.read(&mut byte)).await;
                }
            }
        }));
    }
    let tokens = Arc::new(AtomicU64::new(0));
    for _ in 0..METRICS_CLIENTS {
        let (stop, counts, tls, tokens) = (
            Arc::clone(&stop),
            Arc::clone(&counts),
            tls.clone(),
            Arc::clone(&tokens),
        );
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let n = tokens.fetch_add(1, Ordering::Relaxed);
                let head = format!(
                    "GET /metrics HTTP/1.1\r\nHost: metrics\r\nAuthorization: Bearer garbage-{n:016x}\r\nConnection: close\r\n\r\n"
                );
                let answer = tokio::time::timeout(
                    Duration::from_secs(2),
                    request(metrics_addr, &tls, &head, &[]),
                )
                .await;
                count(
                    &counts,
                    match answer {
                        Ok(0) => "metrics: no answer".to_owned(),
                        Ok(code) => format!("metrics: {code}"),
                        Err(_) => "metrics: gave up after 2 s".to_owned(),
                    },
                );
            }
        }));
    }
    let flood = Instant::now();
    let mut during = Sample::default();
    let mut last = Sample::default();
    while flood.elapsed() < Duration::from_secs(seconds) {
        tokio::time::sleep(SAMPLE_EVERY).await;
        last = sample(pid);
        during = during.max(last);
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.abort();
    }
    // After: once the hook processes are gone and the connections the clients dropped are
    // closed (polled, at most a minute).
    let ended = Instant::now();
    while ended.elapsed() < SETTLE {
        let now = sample(pid);
        if now.descendants == 0 && now.fds <= before.fds + 4 {
            break;
        }
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
    let drained = ended.elapsed();
    let after = sample(pid);
    let mut manager = manager;
    let alive = matches!(manager.0.try_wait(), Ok(None));

    println!("manager: {}", manager_binary().display());
    println!(
        "flood of {seconds} s: {REVIEW_CLIENTS} review clients (1 s timeout) at {HOOK_PATH} (hook sleeps 30 s, timeoutSeconds 2), {IDLE_CLIENTS} idle TLS connections, {METRICS_CLIENTS} metrics clients with {} unique garbage tokens",
        tokens.load(Ordering::Relaxed)
    );
    println!("| when | RSS | threads | open fds | descendant processes |");
    println!("|---|---|---|---|---|");
    println!("{}", before.row("before"));
    println!("{}", during.row("during (max)"));
    println!("{}", last.row("during (last sample)"));
    println!(
        "{}",
        after.row(&format!("after ({:.1} s later)", drained.as_secs_f64()))
    );
    println!("answers:");
    for (what, n) in counts
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
    {
        println!("  {what}: {n}");
    }
    let fates: Vec<String> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("panicked"))
        .map(str::to_owned)
        .collect();
    println!(
        "manager alive after: {alive}; panics in its log: {}",
        fates.len()
    );
    let healthz = request(
        webhook_addr,
        &tls,
        "GET /healthz HTTP/1.1\r\nHost: hooks\r\nConnection: close\r\n\r\n",
        &[],
    )
    .await;
    println!("webhook /healthz after: {healthz}");
}
