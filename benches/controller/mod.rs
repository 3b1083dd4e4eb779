//! What the controller benches share (`#[path = "controller/mod.rs"] mod controller;`): the
//! embedded API server in a child process seeded with `ConfigMap`s, a cache tree over it, a
//! no-op Rust controller and a no-op hook `Controller`, and the figures' arithmetic.
//!
//! The API server runs in a child process (the bench's own binary with `--serve N`), so the
//! bench's process holds only what a manager holds: its resident memory is the manager's, and
//! the server's threads do not share the manager's two cores' caches with it beyond its work.
#![allow(
    dead_code,
    reason = "each controller bench uses a part of what they share"
)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use informant::apiserver::TestServer;
use informant::cache::{self, Cache as _, CacheReloader, Discovery, typed};
use informant::config::Origin;
use informant::controller::{Action, Context, Controller, default_error_policy};
use informant::hooks::{HookController, Policy, validate_controller_value};
use informant::recorder::{NullSink, Options, Pipeline, SystemClock};

/// The namespace of every seeded `ConfigMap`.
pub const NAMESPACE: &str = "bench";

/// A `ConfigMap` of about 1.2 KiB of JSON (the object of `benches/cache.rs`), `cm-<i>`.
pub fn config_map(i: usize) -> serde_json::Value {
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
            "name": name(i), "namespace": NAMESPACE,
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

/// The name of the `i`th `ConfigMap`.
pub fn name(i: usize) -> String {
    format!("cm-{i:06}")
}

/// `--serve N`: the child's part. Runs the embedded API server seeded with `N` `ConfigMap`s,
/// prints `listening <addr>` once they are in, and serves until its standard input closes.
///
/// # Errors
/// The server does not start or refuses a seed.
pub fn serve(objects: usize) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let server = TestServer::start().await.map_err(|e| e.to_string())?;
        for i in 0..objects {
            server
                .handle()
                .create(config_map(i))
                .map_err(|e| format!("seeding failed: {e}"))?;
        }
        println!("listening {}", server.addr());
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        // Standard input closes when the bench ends (or dies).
        tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {
                sink.clear();
            }
        })
        .await
        .map_err(|e| e.to_string())?;
        server.shutdown().await.map_err(|e| e.to_string())
    })
}

/// The embedded API server in a child process, which stops when this is dropped; or one
/// another process of the bench started ([`Server::at`]).
pub struct Server {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    addr: SocketAddr,
}

impl Server {
    /// Starts this bench's binary with `--serve objects` and waits until it listens.
    ///
    /// # Errors
    /// The child does not start or says nothing sensible.
    pub fn start(objects: usize) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut child = Command::new(exe)
            .args(["--serve", &objects.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the API server process: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or("the server's stdout is missing")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        let addr = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| format!("the API server process said {line:?}"))?;
        Ok(Self {
            child: Some(child),
            stdin,
            addr,
        })
    }

    /// The server another process of the bench started on loopback port `port`.
    pub fn at(port: u16) -> Self {
        Self {
            child: None,
            stdin: None,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A client of the server.
    ///
    /// # Errors
    /// kube-rs refuses the configuration.
    pub async fn client(&self) -> Result<Client, String> {
        let config = kube::Config::from_custom_kubeconfig(
            informant::apiserver::kubeconfig(self.addr),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| e.to_string())?;
        Client::try_from(config).map_err(|e| e.to_string())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if let Some(child) = &mut self.child {
            let _ = child.wait();
        }
    }
}

/// A cache tree over a server built from `options`, with its informers on their own tracker.
pub struct Cached {
    pub reloader: CacheReloader,
    client: Client,
    tracker: TaskTracker,
    shutdown: CancellationToken,
}

impl Cached {
    /// A cache tree of `options` over `client`'s server.
    ///
    /// # Errors
    /// The options do not apply.
    pub async fn new(client: &Client, options: &cache::Options) -> Result<Self, String> {
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

    /// A cache tree that shares its objects (`defaultUnsafeDisableDeepCopy: true`).
    ///
    /// # Errors
    /// As [`Cached::new`].
    pub async fn shared(client: &Client) -> Result<Self, String> {
        let options = informant::config::load_str(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\n\
             metadata: {name: bench, namespace: default}\nspec:\n  defaultUnsafeDisableDeepCopy: true\n",
        )
        .map_err(|e| e.to_string())?
        .cache;
        Self::new(client, &options).await
    }

    /// Starts the `ConfigMap` informer and waits until it synced; returns how long that took.
    ///
    /// # Errors
    /// The informer does not sync.
    pub async fn sync(&self) -> Result<Duration, String> {
        let started = Instant::now();
        self.reloader
            .cache()
            .ensure_informer(&typed::gvk_of::<ConfigMap>())
            .await
            .map_err(|e| e.to_string())?;
        Ok(started.elapsed())
    }

    /// A reconcile context over this tree.
    pub fn context(&self) -> Context {
        let pipeline = Pipeline::new(&Options::default(), NullSink, Arc::new(SystemClock));
        Context::new(
            self.reloader.cache(),
            Arc::clone(self.reloader.pool()),
            self.client.clone(),
            pipeline.recorder(),
        )
    }

    /// Stops the informers and waits for them.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.tracker.close();
        self.tracker.wait().await;
        drop(self.reloader);
    }
}

/// The CPU time every thread of this process has run so far (`/proc/self/task/*/schedstat`);
/// zero where that is not readable.
pub fn cpu_time() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let nanos: u64 = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// Counts reconciles; wakes the bench when `n` ran.
#[derive(Clone)]
pub struct Counter {
    n: usize,
    done: Arc<AtomicUsize>,
    /// When the first reconcile ran, and the process's CPU time then.
    first: Arc<std::sync::Mutex<Option<(Instant, Duration)>>>,
    all: Arc<Notify>,
}

impl Counter {
    /// A counter of `n` reconciles.
    pub fn new(n: usize) -> Self {
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
                .unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some((Instant::now(), cpu_time()));
        }
        if done == self.n {
            self.all.notify_one();
        }
    }

    fn first(&self) -> Option<(Instant, Duration)> {
        *self
            .first
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

/// What a bench's Rust controller does with its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// Nothing.
    None,
    /// Reads it: the length of every key and value of its data, labels and annotations (what
    /// a reconcile that looks at its object at all pays for the object's memory).
    Read,
}

/// How many bytes of keys and values `object`'s data, labels and annotations hold.
fn read(object: &ConfigMap) -> usize {
    let meta = &object.metadata;
    [&object.data, &meta.labels, &meta.annotations]
        .into_iter()
        .flatten()
        .flat_map(|map| map.iter())
        .map(|(k, v)| k.len() + v.len())
        .sum()
}

/// A Rust controller over `ConfigMap`s doing `work`, running until `stop`; `counter` counts
/// its reconciles.
pub fn rust_controller(
    ctx: Context,
    counter: Counter,
    stop: CancellationToken,
    work: Work,
) -> tokio::task::JoinHandle<informant::controller::Result<()>> {
    tokio::spawn(Controller::<ConfigMap>::new("noop").run(
        ctx,
        move |object: Arc<ConfigMap>, _ctx| {
            let counter = counter.clone();
            async move {
                if work == Work::Read {
                    std::hint::black_box(read(&object));
                }
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
pub struct Pass {
    /// From the controller's start to its last first reconcile.
    pub total: Duration,
    /// Reconciles per second from its first reconcile to its last.
    pub rate: f64,
    /// CPU time of the whole process per reconcile, from the first reconcile to the last
    /// (what a loaded machine's other work does not change much).
    pub cpu: Duration,
}

/// Waits until `counter` counted all its reconciles.
pub async fn first_pass(started: Instant, counter: &Counter) -> Pass {
    counter.all.notified().await;
    let (last, cpu_last) = (Instant::now(), cpu_time());
    let (first, cpu_first) = counter.first().unwrap_or((started, cpu_last));
    #[allow(clippy::cast_precision_loss, reason = "figures for humans")]
    let rate = counter.n as f64 / (last - first).as_secs_f64().max(1e-9);
    Pass {
        total: last - started,
        rate,
        cpu: (cpu_last.saturating_sub(cpu_first)) / u32::try_from(counter.n).unwrap_or(u32::MAX),
    }
}

/// Runs a Rust controller doing `work` over the `objects` objects `cached` holds until its
/// first pass is over, then stops it.
pub async fn rust_pass(cached: &Cached, objects: usize, work: Work) -> Pass {
    let counter = Counter::new(objects);
    let stop = CancellationToken::new();
    let started = Instant::now();
    let task = rust_controller(cached.context(), counter.clone(), stop.clone(), work);
    let pass = first_pass(started, &counter).await;
    stop.cancel();
    let _ = task.await;
    pass
}

/// A webhook answering `{}` on loopback until `shutdown`; returns its URL.
///
/// # Errors
/// It can not listen.
pub async fn webhook(shutdown: CancellationToken) -> Result<String, String> {
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

/// A no-op hook `Controller` for `ConfigMap`s calling `url` (concurrency 16).
///
/// # Errors
/// The resource does not validate (a bug of the bench).
pub fn hook_controller(url: &str) -> Result<HookController, String> {
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
    // The webhook listens on loopback, refused unless named (issue 45).
    let policy = Policy::open().allow_url("127.0.0.1".parse().map_err(|e| format!("{e}"))?);
    Ok(HookController::new(controller.settings).policy(Arc::new(policy)))
}

/// Runs `hook` until it reconciled `objects` objects; returns how long that took and a stop.
pub async fn hook_pass(
    hook: HookController,
    cached: &Cached,
    objects: usize,
) -> (Duration, CancellationToken, tokio::task::JoinHandle<()>) {
    let stats = hook.stats();
    let stop = CancellationToken::new();
    let started = Instant::now();
    let task = tokio::spawn({
        let run = hook.run(cached.context(), stop.clone());
        async move {
            let _ = run.await;
        }
    });
    while stats.reconciles() < objects as u64 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (started.elapsed(), stop, task)
}

/// `median N ns, p99 N ns` of `xs`.
pub fn percentiles(mut xs: Vec<Duration>) -> String {
    xs.sort();
    let at = |q: usize| {
        let i = (xs.len() * q / 100).min(xs.len().saturating_sub(1));
        xs.get(i).map_or(0, Duration::as_nanos)
    };
    format!("median {} ns, p99 {} ns", at(50), at(99))
}

/// `--objects N` (default 100,000) and `--serve N` from the command line, and the other
/// flags' values by name.
pub struct Args {
    pub objects: usize,
    pub serve: Option<usize>,
    pub rest: Vec<(String, usize)>,
}

/// Parses `--name N` pairs; `known` are the flags besides `--objects` and `--serve`.
///
/// # Errors
/// An unknown flag or a value that is not a number.
pub fn parse_args(known: &[&str]) -> Result<Args, String> {
    let mut args = Args {
        objects: 100_000,
        serve: None,
        rest: Vec::new(),
    };
    // `cargo bench` passes `--bench`; it selects nothing here.
    let mut it = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = it.next() {
        let value = || -> Result<usize, String> { Err(format!("{flag} needs a number")) };
        let n = match it.next().and_then(|v| v.parse().ok()) {
            Some(n) => n,
            None => value()?,
        };
        match flag.as_str() {
            "--objects" => args.objects = n,
            "--serve" => args.serve = Some(n),
            other if known.contains(&other) => args.rest.push((other.to_owned(), n)),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

/// The runtime every bench runs on: two workers, as the machine's two cores.
///
/// # Errors
/// The runtime does not build.
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}
