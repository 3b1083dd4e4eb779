//! `benches/soak.rs`: resource bounds under load (issue 12). The embedded API server (in this
//! process) holds `--objects` `ConfigMap`s (default 100,000) spread over `--informers`
//! namespaces (default 10); a `Manager` caches `ConfigMap`s in each of them (one informer per
//! namespace); a writer patches random objects at `--rate` writes per second (default 1,000)
//! for `--seconds` (default 60). Every 10 s it prints the process RSS (`VmRSS`), tokio's alive
//! task count, the writes done and the objects cached; at the end, the RSS and task growth
//! over the second half of the run (a plateau is ~0).
//!
//! Before the timed run every object is patched once (`--warmup 0` skips it): a first patch
//! makes an object bigger for good, which would otherwise read as growth.
//!
//! The task count leaves out the writer's in-flight patches (they are the load, not the
//! manager).
//!
//! Usage: `cargo bench --bench soak [-- --objects N --informers N --rate N
//! --seconds N --manager 0|1 --warmup 0|1]`. The API server's own memory (its store, watch history and
//! connections) is part of the RSS: the line before the manager starts is its baseline, and
//! `--manager 0` runs the same load without the manager, to tell the two apart.

#[path = "common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use informant::apiserver::TestServer;
use informant::cache::Cache;
use informant::manager::{ConfigSource, Manager, Options};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The run's settings.
#[derive(Clone, Copy)]
struct Settings {
    objects: u64,
    informers: u64,
    rate: u64,
    seconds: u64,
    /// Whether to run the manager (`--manager 0` measures the API server and writer alone).
    manager: bool,
    /// Whether to patch every object once before the timed run (`--warmup 0` skips it).
    warmup: bool,
}

impl Settings {
    fn from_args() -> Result<Self, BoxError> {
        let mut settings = Self {
            objects: 100_000,
            informers: 10,
            rate: 1_000,
            seconds: 60,
            manager: true,
            warmup: true,
        };
        // `cargo bench` passes `--bench`; it selects nothing here.
        let args: Vec<String> = std::env::args()
            .skip(1)
            .filter(|a| a != "--bench")
            .collect();
        for pair in args.chunks(2) {
            let [flag, value] = pair else {
                return Err(format!("{} needs a value", pair[0]).into());
            };
            let value: u64 = value.parse().map_err(|e| format!("{flag} {value}: {e}"))?;
            match flag.as_str() {
                "--objects" => settings.objects = value,
                "--informers" => settings.informers = value.max(1),
                "--rate" => settings.rate = value,
                "--seconds" => settings.seconds = value,
                "--manager" => settings.manager = value != 0,
                "--warmup" => settings.warmup = value != 0,
                other => return Err(format!("unknown flag {other}").into()),
            }
        }
        Ok(settings)
    }
}

/// The process's resident set size in MiB (`VmRSS` of /proc/self/status; 0 elsewhere).
fn rss_mib() -> f64 {
    let kib: u64 = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        })
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0);
    #[allow(clippy::cast_precision_loss, reason = "a KiB count far below 2^52")]
    let mib = kib as f64 / 1024.0;
    mib
}

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

fn namespace(i: u64) -> String {
    format!("soak-{i}")
}

fn config(informers: u64) -> String {
    let namespaces: Vec<String> = (0..informers)
        .map(|i| format!("{}: {{}}", namespace(i)))
        .collect();
    format!(
        "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {{name: soak, namespace: default}}
spec:
  defaultNamespaces: {{{}}}
  byObject:
    - {{apiVersion: v1, kind: ConfigMap}}
",
        namespaces.join(", ")
    )
}

/// Objects cached now, over every informer of the manager's tree, and whether all synced.
fn cached(cache: &informant::cache::SharedCache) -> (i64, bool) {
    let informers = cache.informers();
    (
        informers.iter().map(|i| i.objects).sum(),
        informers.iter().all(|i| i.synced),
    )
}

/// Most patches in flight at once; past it the writer falls behind `rate` instead of queuing
/// without bound.
const MAX_IN_FLIGHT: usize = 512;

/// Patches random objects at `rate` per second until `stop`, counting completed writes. Each
/// tick's patches run concurrently on a `JoinSet`, drained before returning.
async fn write(
    client: kube::Client,
    settings: Settings,
    done: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    in_flight_now: Arc<AtomicUsize>,
    stop: CancellationToken,
) {
    let per_ns = (settings.objects / settings.informers).max(1);
    // 100 ticks a second, `rate / 100` patches per tick.
    let batch = (settings.rate / 100).max(1);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut rng = common::Rng(0x5eed);
    let mut generation = 0u64;
    let mut in_flight = tokio::task::JoinSet::new();
    let count = |ok: bool| {
        if ok {
            done.fetch_add(1, Ordering::Relaxed);
        } else {
            failed.fetch_add(1, Ordering::Relaxed);
        }
    };
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        while let Some(finished) = in_flight.try_join_next() {
            count(finished.unwrap_or(false));
        }
        in_flight_now.store(in_flight.len(), Ordering::Relaxed);
        for _ in 0..batch {
            if in_flight.len() >= MAX_IN_FLIGHT {
                break;
            }
            generation += 1;
            let ns = namespace(rng.below(settings.informers));
            let name = format!("cm-{}", rng.below(per_ns));
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
            let patch = json!({"metadata": {"labels": {"generation": generation.to_string()}}});
            in_flight.spawn(async move {
                api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .is_ok()
            });
        }
    }
    while let Some(finished) = in_flight.join_next().await {
        count(finished.unwrap_or(false));
    }
}

/// Patches every object once, `MAX_IN_FLIGHT` at a time, as fast as the server answers: an
/// object's first patch makes it bigger for good (the server adds its `managedFields` entry),
/// so without this the timed run's RSS grows with the share of objects patched so far
/// (1 - e^(-writes/objects)) instead of showing what steady load costs.
async fn warm_up(client: &kube::Client, settings: Settings) -> Result<(), BoxError> {
    let per_ns = (settings.objects / settings.informers).max(1);
    let mut in_flight = tokio::task::JoinSet::new();
    for i in 0..settings.informers {
        for j in 0..per_ns {
            while in_flight.len() >= MAX_IN_FLIGHT {
                if let Some(done) = in_flight.join_next().await {
                    done??;
                }
            }
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace(i));
            let name = format!("cm-{j}");
            let patch = json!({"metadata": {"labels": {"generation": "1"}}});
            in_flight.spawn(async move {
                api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map(drop)
            });
        }
    }
    while let Some(done) = in_flight.join_next().await {
        done??;
    }
    Ok(())
}

/// A running manager over the soak's namespaces.
struct Running {
    cache: Arc<informant::cache::SharedCache>,
    shutdown: CancellationToken,
    run: tokio::task::JoinHandle<Result<(), informant::manager::Error>>,
    dir: std::path::PathBuf,
}

impl Running {
    async fn start(client: kube::Client, settings: Settings) -> Result<Self, BoxError> {
        let dir = std::env::temp_dir().join(format!("bench_soak-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("config.yaml");
        std::fs::write(&path, config(settings.informers))?;
        let options = Options {
            health_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            cache_sync_timeout: Duration::from_mins(5),
            ..Options::new(ConfigSource::File(path))
        };
        let manager = Manager::new(client, options).await?;
        let cache = manager.cache();
        let state = manager.state();
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run(shutdown.clone()));
        let began = Instant::now();
        state.serving().await;
        let (objects, synced) = cached(&cache);
        println!(
            "manager serving after {:.1}s: {} informers, {objects} objects cached, \
             synced={synced}; rss {:.0} MiB, tasks {}",
            began.elapsed().as_secs_f64(),
            cache.informers().len(),
            rss_mib(),
            alive_tasks()
        );
        Ok(Self {
            cache,
            shutdown,
            run,
            dir,
        })
    }

    async fn stop(self) -> Result<(), BoxError> {
        self.shutdown.cancel();
        self.run.await??;
        std::fs::remove_dir_all(&self.dir)?;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let settings = Settings::from_args()?;
    let server = TestServer::start().await?;
    let began = Instant::now();
    let per_ns = (settings.objects / settings.informers).max(1);
    for i in 0..settings.informers {
        for j in 0..per_ns {
            server
                .handle()
                .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": namespace(i), "name": format!("cm-{j}"),
                    "labels": {"app": "soak", "generation": "0"}},
                "data": {"key": "value-of-about-sixty-bytes-to-look-like-a-small-config-map"}}))?;
        }
    }
    println!(
        "seeded {} ConfigMaps in {} namespaces in {:.1}s; rss {:.0} MiB (api server only), \
         tasks {}",
        per_ns * settings.informers,
        settings.informers,
        began.elapsed().as_secs_f64(),
        rss_mib(),
        alive_tasks()
    );
    let client = server.client().await?;
    let manager = if settings.manager {
        Some(Running::start(client.clone(), settings).await?)
    } else {
        None
    };

    if settings.warmup {
        let began = Instant::now();
        warm_up(&client, settings).await?;
        println!(
            "warm-up: every object patched once in {:.1}s; rss {:.0} MiB, tasks {}",
            began.elapsed().as_secs_f64(),
            rss_mib(),
            alive_tasks()
        );
    }
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let stop = CancellationToken::new();
    let writer = tokio::spawn(write(
        client,
        settings,
        Arc::clone(&done),
        Arc::clone(&failed),
        Arc::clone(&in_flight),
        stop.clone(),
    ));
    let start = Instant::now();
    let mut samples: Vec<(u64, f64, usize)> = Vec::new();
    let mut report = tokio::time::interval_at(
        tokio::time::Instant::now() + Duration::from_secs(10),
        Duration::from_secs(10),
    );
    let mut last = 0;
    while start.elapsed() < Duration::from_secs(settings.seconds) {
        report.tick().await;
        let seconds = start.elapsed().as_secs();
        let written = done.load(Ordering::Relaxed);
        let (objects, synced) = manager.as_ref().map_or((0, true), |m| cached(&m.cache));
        let writing = in_flight.load(Ordering::Relaxed);
        // The writer's in-flight patches are tasks too; they are not the manager's.
        let (rss, tasks) = (rss_mib(), alive_tasks().saturating_sub(writing));
        println!(
            "t={seconds:>3}s writes={written} ({}/s) failed={} in-flight={writing} \
             cached={objects} synced={synced} rss={rss:.0} MiB tasks={tasks}",
            (written - last) / 10,
            failed.load(Ordering::Relaxed),
        );
        last = written;
        samples.push((seconds, rss, tasks));
    }
    stop.cancel();
    writer.await?;
    if let (Some(mid), Some(end)) = (
        samples.get(samples.len().saturating_sub(1) / 2),
        samples.last(),
    ) {
        #[allow(clippy::cast_possible_wrap, reason = "task counts are small")]
        let task_growth = end.2 as i64 - mid.2 as i64;
        println!(
            "plateau: rss {:+.1} MiB and tasks {task_growth:+} from t={}s to t={}s",
            end.1 - mid.1,
            mid.0,
            end.0
        );
    }
    if let Some(manager) = manager {
        manager.stop().await?;
    }
    server.shutdown().await?;
    Ok(())
}
