//! Figures for the README (`cargo bench --bench hooks`; built, not run, by the test command):
//! the hook round trip overhead (exec: a process per call, like shell-operator's per-batch
//! process; webhook: one HTTP/1.1 POST) for 1,000 calls, median and p99, with a hook doing no
//! work; and reconcile throughput of a `HookController` at concurrency 1, 4 and 16 against a
//! webhook that sleeps 10 ms. Persistent exec hooks (`exec.mode: persistent`, one process
//! answering line by line), Python and shell, beside them: their round trip, and reconciles/s
//! of a persistent Python hook over `INFORMANT_BENCH_OBJECTS` objects (default 10,000) at
//! concurrency 1 and 4 beside the per-call Python exec hook. Python is `INFORMANT_PYTHON`, else
//! `python3`; without one the Python figures say they are skipped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use informant::apiserver::TestServer;
use informant::cache::CacheReloader;
use informant::cache::{self, Discovery};
use informant::config::Origin;
use informant::controller::Context;
use informant::hooks::Hook;
use informant::hooks::contract::{API_VERSION, ControllerRef, Request};
use informant::hooks::validate_controller_value;
use informant::hooks::{HookController, Policy, Processes, call, call_under};
use informant::recorder::{NullSink, Options, Pipeline, SystemClock};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

fn request() -> Request {
    let data: serde_json::Map<String, serde_json::Value> = (0..16)
        .map(|i| (format!("key-{i}"), json!("x".repeat(48))))
        .collect();
    Request {
        api_version: API_VERSION.to_owned(),
        controller: ControllerRef {
            namespace: "default".into(),
            name: "bench".into(),
        },
        object: json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": "cm", "uid": "u"}, "data": data}),
        children: std::collections::BTreeMap::new(),
        related: Vec::new(),
        finalizing: false,
    }
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    // Nearest rank: the sample at or below which `percent` of the samples fall.
    let at = |percent: usize| samples[(samples.len() * percent).div_ceil(100).saturating_sub(1)];
    (at(50), at(99))
}

/// A webhook answering `{}` after `delay`, on loopback; returns its URL.
async fn webhook(
    delay: Duration,
    shutdown: CancellationToken,
) -> (String, tokio::task::JoinHandle<()>) {
    let app = axum::Router::new().route(
        "/sync",
        axum::routing::post(move || async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            "{}"
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/sync", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
            .unwrap();
    });
    (url, task)
}

async fn hook_round_trip_overhead() {
    let n = 1000;
    let request = request();
    let exec = Hook::Exec {
        env: Vec::new(),
        command: vec![
            "sh".into(),
            "-c".into(),
            "cat >/dev/null; printf '{}'".into(),
        ],
        timeout: Duration::from_secs(10),
    };
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        call(&exec, &request).await.unwrap();
        samples.push(start.elapsed());
    }
    let (median, p99) = percentiles(samples);
    println!("exec (sh, no work) round trip over {n} calls: median {median:?}, p99 {p99:?}");

    let shutdown = CancellationToken::new();
    let (url, server) = webhook(Duration::ZERO, shutdown.clone()).await;
    // The webhook listens on loopback, refused unless named (issue 45).
    let loopback = Arc::new(Policy::open().allow_url("127.0.0.1".parse().unwrap()));
    let hook = Hook::Webhook {
        url,
        timeout: Duration::from_secs(10),
        tls: None,
    };
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        call_under(&hook, &request, Arc::clone(&loopback))
            .await
            .unwrap();
        samples.push(start.elapsed());
    }
    let (median, p99) = percentiles(samples);
    println!("webhook (no work) round trip over {n} calls: median {median:?}, p99 {p99:?}");
    shutdown.cancel();
    server.await.unwrap();

    let persistent = |command: Vec<String>| {
        Processes::new(
            command,
            Duration::from_secs(10),
            1,
            1,
            4 << 20,
            "default/bench".into(),
        )
    };
    let shell = persistent(vec!["sh".into(), "-c".into(), PERSISTENT_SH.into()]);
    let (median, p99) = round_trips(n, &shell, &request).await;
    println!(
        "persistent exec (sh, no work) round trip over {n} calls: median {median:?}, p99 {p99:?}"
    );
    shell.stop().await;
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (per_call, persistent_py) = python_hooks(&python, dir.path());
    let exec = Hook::Exec {
        env: Vec::new(),
        command: per_call,
        timeout: Duration::from_secs(10),
    };
    let calls = 200;
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        call(&exec, &request).await.unwrap();
        samples.push(start.elapsed());
    }
    let (median, p99) = percentiles(samples);
    println!(
        "exec (python, no work) round trip over {calls} calls: median {median:?}, p99 {p99:?}"
    );
    let python_hook = persistent(persistent_py);
    let (median, p99) = round_trips(n, &python_hook, &request).await;
    println!(
        "persistent exec (python, no work) round trip over {n} calls: median {median:?}, p99 {p99:?}"
    );
    python_hook.stop().await;
}

/// A persistent shell hook answering `{}` to every line (the id is the envelope's first field).
const PERSISTENT_SH: &str = r#"while IFS= read -r line; do id=${line#'{"id":'}; id=${id%%,*}; printf '{"id":%s,"response":{}}\n' "$id"; done"#;

/// A persistent Python hook answering `{}` to every line.
const PERSISTENT_PY: &str = r#"
import json, sys
for line in sys.stdin:
    sys.stdout.write(json.dumps({"id": json.loads(line)["id"], "response": {}}) + "\n")
    sys.stdout.flush()
"#;

/// A per-call Python hook answering `{}`.
const PER_CALL_PY: &str = r#"
import json, sys
json.load(sys.stdin)
sys.stdout.write("{}")
"#;

/// The Python of the Python figures: `INFORMANT_PYTHON`, else `python3`.
fn python() -> Option<String> {
    let python = std::env::var("INFORMANT_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let found = std::process::Command::new(&python)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!("skipped: the Python figures (no {python}; set INFORMANT_PYTHON)");
    }
    found.then_some(python)
}

/// The commands of the per-call and the persistent Python hook, written to `dir`.
fn python_hooks(python: &str, dir: &std::path::Path) -> (Vec<String>, Vec<String>) {
    let per_call = dir.join("per_call.py");
    let persistent = dir.join("persistent.py");
    std::fs::write(&per_call, PER_CALL_PY).unwrap();
    std::fs::write(&persistent, PERSISTENT_PY).unwrap();
    let command = |script: &std::path::Path| vec![python.to_owned(), script.display().to_string()];
    (command(&per_call), command(&persistent))
}

async fn round_trips(n: usize, hook: &Processes, request: &Request) -> (Duration, Duration) {
    // The first call starts the process: not a round trip.
    hook.call(request).await.unwrap();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        hook.call(request).await.unwrap();
        samples.push(start.elapsed());
    }
    assert_eq!(hook.starts(), 1);
    percentiles(samples)
}

/// Reconciles/s of a persistent Python hook over `INFORMANT_BENCH_OBJECTS` `ConfigMap`s (default
/// 10,000) at concurrency 1 and 4, beside the per-call Python hook at concurrency 4.
async fn reconcile_throughput_of_a_persistent_python_hook() {
    let Some(python) = python() else { return };
    let objects: u32 = std::env::var("INFORMANT_BENCH_OBJECTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::tempdir().unwrap();
    let (per_call, persistent) = python_hooks(&python, dir.path());
    let server = TestServer::start().await.unwrap();
    for i in 0..objects {
        server
            .handle()
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": "default", "name": format!("bulk-{i}"),
                    "labels": {"bench": "bulk"}}, "data": {"key": "value"}}))
            .unwrap();
    }
    let client = server.client().await.unwrap();
    let tracker = TaskTracker::new();
    let shutdown = CancellationToken::new();
    let context = cache::Context::new(client.clone(), Arc::new(Discovery::new(client.clone())));
    let mut reloader = CacheReloader::new(context, tracker.clone(), shutdown.clone());
    reloader.apply(&cache::Options::default()).await.unwrap();
    let pipeline = Pipeline::new(&Options::default(), NullSink, Arc::new(SystemClock));
    let ctx = Context::new(
        reloader.cache(),
        Arc::clone(reloader.pool()),
        client,
        pipeline.recorder(),
    );
    let quote = |command: &[String]| {
        command
            .iter()
            .map(|c| format!("'{c}'"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let runs = [
        (
            "persistent python",
            1u16,
            format!("{{command: [{}], mode: persistent}}", quote(&persistent)),
        ),
        (
            "persistent python",
            4,
            format!("{{command: [{}], mode: persistent}}", quote(&persistent)),
        ),
        (
            "per-call python",
            4,
            format!("{{command: [{}]}}", quote(&per_call)),
        ),
    ];
    for (i, (what, concurrency, exec)) in runs.into_iter().enumerate() {
        let yaml = format!(
            "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: bulk-{i}, namespace: default}}
spec:
  for: {{apiVersion: v1, kind: ConfigMap, labelSelector: bench=bulk}}
  hook: {{exec: {exec}}}
  concurrency: {concurrency}
"
        );
        let value = serde_yaml::from_str(&yaml).unwrap();
        let controller = validate_controller_value(value, &Origin::Text, None).unwrap();
        let hook = HookController::new(controller.settings);
        let stats = hook.stats();
        let stop = shutdown.child_token();
        let start = Instant::now();
        let task = tokio::spawn(hook.run(ctx.clone(), stop.clone()));
        while stats.reconciles() < u64::from(objects) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let elapsed = start.elapsed();
        stop.cancel();
        task.await.unwrap().unwrap();
        println!(
            "{what} exec hook, concurrency {concurrency}: {objects} reconciles in {elapsed:?} = {:.0}/s",
            f64::from(objects) / elapsed.as_secs_f64(),
        );
    }
    shutdown.cancel();
    tracker.close();
    tracker.wait().await;
    drop(reloader);
}

async fn reconcile_throughput_against_a_10ms_webhook() {
    let objects: u32 = 400;
    let server = TestServer::start().await.unwrap();
    for i in 0..objects {
        server
            .handle()
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": "default", "name": format!("cm-{i}")}}))
            .unwrap();
    }
    let client = server.client().await.unwrap();
    let tracker = TaskTracker::new();
    let shutdown = CancellationToken::new();
    let context = cache::Context::new(client.clone(), Arc::new(Discovery::new(client.clone())));
    let mut reloader = CacheReloader::new(context, tracker.clone(), shutdown.clone());
    reloader.apply(&cache::Options::default()).await.unwrap();
    let pipeline = Pipeline::new(&Options::default(), NullSink, Arc::new(SystemClock));
    let ctx = Context::new(
        reloader.cache(),
        Arc::clone(reloader.pool()),
        client,
        pipeline.recorder(),
    );
    let (url, web) = webhook(Duration::from_millis(10), shutdown.clone()).await;
    for concurrency in [1u16, 4, 16] {
        let yaml = format!(
            "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: bench-{concurrency}, namespace: default}}
spec:
  for: {{apiVersion: v1, kind: ConfigMap}}
  hook: {{webhook: {{url: '{url}'}}}}
  concurrency: {concurrency}
"
        );
        let value = serde_yaml::from_str(&yaml).unwrap();
        let controller = validate_controller_value(value, &Origin::Text, None).unwrap();
        let loopback = Policy::open().allow_url("127.0.0.1".parse().unwrap());
        let hook = HookController::new(controller.settings).policy(Arc::new(loopback));
        let stats = hook.stats();
        let stop = shutdown.child_token();
        let start = Instant::now();
        let task = tokio::spawn(hook.run(ctx.clone(), stop.clone()));
        while stats.reconciles() < u64::from(objects) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let elapsed = start.elapsed();
        stop.cancel();
        task.await.unwrap().unwrap();
        println!(
            "concurrency {concurrency}: {objects} reconciles in {elapsed:?} = {:.0}/s (ideal {:.0}/s)",
            f64::from(objects) / elapsed.as_secs_f64(),
            f64::from(concurrency) * 100.0
        );
    }
    shutdown.cancel();
    web.await.unwrap();
    tracker.close();
    tracker.wait().await;
    drop(reloader);
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        hook_round_trip_overhead().await;
        reconcile_throughput_against_a_10ms_webhook().await;
        reconcile_throughput_of_a_persistent_python_hook().await;
    });
}
