//! `benches/controller_memory.rs`: what a controller costs on top of the cache, over N
//! `ConfigMap`s of ~1.2 KiB JSON in the embedded API server: counted heap bytes per object of
//! the cache alone, of one Rust controller and of one hook `Controller` (a no-op webhook) added
//! to it, of kube-runtime's `Store` per entry (full typed objects, and the stubs a runner's
//! store holds), the latency of
//! the cache read each reconcile starts with (deep copy and `unsafeDisableDeepCopy`, median and
//! p99), the reconciles/s of a no-op Rust controller, and the time from start to the first pass
//! over every object (cold: the cache starts with the controller; warm: the cache synced).
//!
//! Usage: `cargo bench --bench controller_memory -- [--objects N]` (default 100000).
//! Memory is counted by a counting global allocator (requested bytes, without the allocator's
//! own overhead): live bytes after minus live bytes before, once the controller's first pass
//! is over and its queue is empty. Latencies are measured under that allocator, which adds a
//! few atomic operations to every allocation.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::runtime::{reflector, watcher};
use serde_json::json;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use informant::apiserver::TestServer;
use informant::cache::{self, Cache as _, CacheReloader, Discovery, typed};
use informant::config::Origin;
use informant::controller::{Action, Context, Controller, Stub, default_error_policy};
use informant::hooks::{HookController, validate_controller_value};
use informant::recorder::{NullSink, Options, Pipeline, SystemClock};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

const NAMESPACE: &str = "bench";

fn live_bytes() -> i64 {
    let s = GLOBAL.stats();
    i64::try_from(s.bytes_allocated).unwrap_or(i64::MAX)
        - i64::try_from(s.bytes_deallocated).unwrap_or(i64::MAX)
}

fn parse_args() -> Result<usize, String> {
    let mut objects = 100_000;
    // `cargo bench` passes `--bench`; it selects nothing here.
    let mut it = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--objects" => {
                objects = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--objects needs a number")?;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(objects)
}

/// A `ConfigMap` of about 1.2 KiB of JSON (the object of `benches/cache.rs`).
fn config_map(i: usize) -> serde_json::Value {
    let data: serde_json::Map<String, serde_json::Value> = (0..6)
        .map(|k| {
            (
                format!("key-{k}"),
                json!(format!("{i:08}-{}", "v".repeat(80))),
            )
        })
        .collect();
    let fields: serde_json::Map<String, serde_json::Value> =
        (0..6).map(|k| (format!("f:key-{k}"), json!({}))).collect();
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": format!("cm-{i:06}"), "namespace": NAMESPACE,
            "labels": {"app": "bench"},
            "annotations": {"bench.informant.dev/index": i.to_string()},
            "managedFields": [{"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "bench",
                "operation": "Apply", "fieldsV1": {"f:data": fields,
                "f:metadata": {"f:labels": {"f:app": {}},
                    "f:annotations": {"f:bench.informant.dev/index": {}}}}}]
        },
        "data": data,
    })
}

#[allow(clippy::cast_precision_loss, reason = "figures for humans")]
fn per(bytes: i64, n: usize) -> f64 {
    bytes as f64 / n.max(1) as f64
}

/// `median N ns, p99 N ns` of `xs`.
fn percentiles(mut xs: Vec<Duration>) -> String {
    xs.sort();
    let at = |q: usize| {
        let i = (xs.len() * q / 100).min(xs.len().saturating_sub(1));
        xs.get(i).map_or(0, Duration::as_nanos)
    };
    format!("median {} ns, p99 {} ns", at(50), at(99))
}

/// Lets the tasks that finished their work drop what they held before memory is counted.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(500)).await;
}

/// A cache tree over `server` built from `options`, with its informers on their own tracker.
struct Cached {
    reloader: CacheReloader,
    client: Client,
    tracker: TaskTracker,
    shutdown: CancellationToken,
}

impl Cached {
    async fn new(client: &Client, options: &cache::Options) -> Result<Self, String> {
        let tracker = TaskTracker::new();
        let shutdown = CancellationToken::new();
        let context = cache::Context::new(client.clone(), Arc::new(Discovery::new(client.clone())));
        let mut reloader = CacheReloader::new(context, tracker.clone(), shutdown.clone());
        reloader.apply(options).await.map_err(|e| e.to_string())?;
        Ok(Self {
            reloader,
            client: client.clone(),
            tracker,
            shutdown,
        })
    }

    fn context(&self) -> Context {
        let pipeline = Pipeline::new(&Options::default(), NullSink, Arc::new(SystemClock));
        Context::new(
            self.reloader.cache(),
            Arc::clone(self.reloader.pool()),
            self.client.clone(),
            pipeline.recorder(),
        )
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.tracker.close();
        self.tracker.wait().await;
        drop(self.reloader);
    }
}

/// Counts reconciles; wakes the bench when `n` ran.
#[derive(Clone)]
struct Counter {
    n: usize,
    done: Arc<AtomicUsize>,
    first: Arc<std::sync::Mutex<Option<Instant>>>,
    all: Arc<Notify>,
}

impl Counter {
    fn new(n: usize) -> Self {
        Self {
            n,
            done: Arc::default(),
            first: Arc::default(),
            all: Arc::new(Notify::new()),
        }
    }

    fn reconciled(&self) {
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        if done == 1 {
            *self
                .first
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
        }
        if done == self.n {
            self.all.notify_one();
        }
    }

    fn first(&self) -> Option<Instant> {
        *self
            .first
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

/// A no-op Rust controller over `ConfigMap`s, running until `stop`; `counter` counts its
/// reconciles.
fn rust_controller(
    ctx: Context,
    counter: Counter,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<informant::controller::Result<()>> {
    tokio::spawn(Controller::<ConfigMap>::new("noop").run(
        ctx,
        move |object: Arc<ConfigMap>, _ctx| {
            let counter = counter.clone();
            async move {
                std::hint::black_box(&object);
                counter.reconciled();
                Ok::<_, Never>(Action::await_change())
            }
        },
        default_error_policy,
        stop,
    ))
}

/// What one pass of a controller over every object took.
struct Pass {
    /// From the controller's start to its last first reconcile.
    total: Duration,
    /// Reconciles per second from its first reconcile to its last.
    rate: f64,
}

async fn first_pass(started: Instant, counter: &Counter) -> Pass {
    counter.all.notified().await;
    let last = Instant::now();
    let first = counter.first().unwrap_or(started);
    #[allow(clippy::cast_precision_loss, reason = "figures for humans")]
    let rate = counter.n as f64 / (last - first).as_secs_f64().max(1e-9);
    Pass {
        total: last - started,
        rate,
    }
}

/// A webhook answering `{}` on loopback; returns its URL.
async fn webhook(shutdown: CancellationToken) -> Result<String, String> {
    let app = axum::Router::new().route("/sync", axum::routing::post(|| async { "{}" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let url = format!(
        "http://{}/sync",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
    });
    Ok(url)
}

fn configmap_gvk() -> kube::core::GroupVersionKind {
    typed::gvk_of::<ConfigMap>()
}

#[allow(clippy::too_many_lines, reason = "one linear report")]
async fn run(server: &TestServer, objects: usize) -> Result<(), String> {
    let client = server.client().await.map_err(|e| e.to_string())?;
    let seeded = serde_json::to_vec(&config_map(objects / 2)).map_or(0, |v| v.len());
    println!("{objects} ConfigMaps of {seeded} bytes of JSON as created");

    // Cold: the cache starts with the controller (an informer's LIST, then the first pass).
    let cached = Cached::new(&client, &cache::Options::default()).await?;
    let counter = Counter::new(objects);
    let stop = CancellationToken::new();
    let started = Instant::now();
    let task = rust_controller(cached.context(), counter.clone(), stop.clone());
    let cold = first_pass(started, &counter).await;
    stop.cancel();
    let _ = task.await;
    cached.stop().await;

    // Memory, each part counted on top of the previous one.
    let before_cache = live_bytes();
    let cached = Cached::new(&client, &cache::Options::default()).await?;
    let tree = cached.reloader.cache();
    let sync_started = Instant::now();
    tree.ensure_informer(&configmap_gvk())
        .await
        .map_err(|e| e.to_string())?;
    let sync = sync_started.elapsed();
    settle().await;
    let cache_bytes = live_bytes() - before_cache;

    let before_rust = live_bytes();
    let counter = Counter::new(objects);
    let stop = CancellationToken::new();
    let started = Instant::now();
    let task = rust_controller(cached.context(), counter.clone(), stop.clone());
    let warm = first_pass(started, &counter).await;
    settle().await;
    let rust_bytes = live_bytes() - before_rust;
    stop.cancel();
    let _ = task.await;
    settle().await;

    let shutdown = CancellationToken::new();
    let url = webhook(shutdown.clone()).await?;
    let yaml = format!(
        "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: noop, namespace: default}}
spec:
  for: {{apiVersion: v1, kind: ConfigMap}}
  hook: {{webhook: {{url: '{url}'}}}}
  concurrency: 16
"
    );
    let value = serde_yaml::from_str(&yaml).map_err(|e| e.to_string())?;
    let controller =
        validate_controller_value(value, &Origin::Text, None).map_err(|e| format!("{e:?}"))?;
    let before_hook = live_bytes();
    let hook = HookController::new(controller.settings);
    let stats = hook.stats();
    let stop = CancellationToken::new();
    let hook_started = Instant::now();
    let task = tokio::spawn(hook.run(cached.context(), stop.clone()));
    while stats.reconciles() < objects as u64 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let hook_pass = hook_started.elapsed();
    settle().await;
    let hook_bytes = live_bytes() - before_hook;
    stop.cancel();
    let _ = task.await;
    shutdown.cancel();

    // What kube-runtime's `Store` costs per entry holding full typed objects (what a runner's
    // store held before it held stubs).
    let names: Vec<String> = (0..objects).map(|i| format!("cm-{i:06}")).collect();
    let before_store = live_bytes();
    let (store, mut writer) = reflector::store::<ConfigMap>();
    for name in &names {
        let object: Arc<ConfigMap> = typed::get_arc(tree.as_ref(), Some(NAMESPACE), name)
            .await
            .map_err(|e| e.to_string())?;
        writer.apply_watcher_event(&watcher::Event::Apply(Arc::unwrap_or_clone(object)));
    }
    let full_store_bytes = live_bytes() - before_store;
    drop((store, writer));
    // And per stub: what a runner's store holds now, the floor of what a controller adds.
    let before_stubs = live_bytes();
    let (stubs, mut writer) = reflector::store::<Stub<ConfigMap>>();
    for name in &names {
        writer.apply_watcher_event(&watcher::Event::Apply(Stub::new(name, Some(NAMESPACE))));
    }
    let stub_store_bytes = live_bytes() - before_stubs;
    drop((stubs, writer));
    let as_served =
        typed::get_arc::<ConfigMap>(tree.as_ref(), Some(NAMESPACE), &names[objects / 2])
            .await
            .map_err(|e| e.to_string())?;
    let json = serde_json::to_vec(as_served.as_ref()).map_or(0, |v| v.len());
    println!("as served (uid, resourceVersion, creationTimestamp added): {json} bytes of JSON");
    println!();

    // The read each reconcile starts with, deep copy.
    let sample: Vec<&String> = names.iter().step_by((objects / 10_000).max(1)).collect();
    let mut deep = Vec::with_capacity(sample.len());
    for name in &sample {
        let t = Instant::now();
        let object = typed::get_arc::<ConfigMap>(tree.as_ref(), Some(NAMESPACE), name).await;
        deep.push(t.elapsed());
        drop(std::hint::black_box(object));
    }
    drop(tree);
    cached.stop().await;

    // And with unsafeDisableDeepCopy: the cache's own `Arc` (after the first typed read of
    // each object made the typed copy it keeps).
    let shared = informant::config::load_str(
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\n\
         metadata: {name: bench, namespace: default}\nspec:\n  defaultUnsafeDisableDeepCopy: true\n",
    )
    .map_err(|e| e.to_string())?
    .cache;
    let cached = Cached::new(&client, &shared).await?;
    let tree = cached.reloader.cache();
    tree.ensure_informer(&configmap_gvk())
        .await
        .map_err(|e| e.to_string())?;
    for name in &sample {
        let _ = typed::get_arc::<ConfigMap>(tree.as_ref(), Some(NAMESPACE), name).await;
    }
    let mut shared_reads = Vec::with_capacity(sample.len());
    for name in &sample {
        let t = Instant::now();
        let object = typed::get_arc::<ConfigMap>(tree.as_ref(), Some(NAMESPACE), name).await;
        shared_reads.push(t.elapsed());
        drop(std::hint::black_box(object));
    }
    drop(tree);
    cached.stop().await;

    #[allow(clippy::cast_precision_loss, reason = "figures for humans")]
    let row = |what: &str, bytes: i64| {
        let b = per(bytes, objects);
        println!("| {what} | {b:.0} | {:.2} |", b / json as f64);
    };
    println!("| counted heap | bytes/object | x JSON |");
    println!("| --- | ---: | ---: |");
    row("cache only (compact store, default config)", cache_bytes);
    row("one Rust controller added (no-op reconcile)", rust_bytes);
    row("one hook Controller added (no-op webhook)", hook_bytes);
    row("cache + Rust controller", cache_bytes + rust_bytes);
    row("cache + hook Controller", cache_bytes + hook_bytes);
    row(
        "kube-runtime Store<ConfigMap>, full typed objects",
        full_store_bytes,
    );
    row(
        "kube-runtime Store<Stub<ConfigMap>>, name and namespace",
        stub_store_bytes,
    );
    println!();
    println!(
        "cache read per reconcile (typed::get_arc::<ConfigMap>, {} reads): deep copy {}; unsafeDisableDeepCopy {}",
        sample.len(),
        percentiles(deep),
        percentiles(shared_reads)
    );
    println!(
        "no-op Rust controller, cold (cache starts with it): first pass over {objects} objects {:.2?}, {:.0} reconciles/s",
        cold.total, cold.rate
    );
    println!(
        "no-op Rust controller, warm (cache synced in {sync:.2?}): first pass {:.2?}, {:.0} reconciles/s",
        warm.total, warm.rate
    );
    println!("no-op hook Controller (webhook, concurrency 16), warm: first pass {hook_pass:.2?}");
    Ok(())
}

fn main() -> std::process::ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("bench_controller_memory: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        let objects = parse_args()?;
        let server = TestServer::start().await.map_err(|e| e.to_string())?;
        for i in 0..objects {
            server
                .handle()
                .create(config_map(i))
                .map_err(|e| format!("seeding failed: {e}"))?;
        }
        run(&server, objects).await
    });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_controller_memory: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
