//! `benches/controller_memory.rs`: what a controller costs in memory on top of the cache, over N
//! `ConfigMap`s of ~1.2 KiB JSON in the embedded API server (a child process): counted heap
//! bytes per object of the cache alone, of one Rust controller and of one hook `Controller` (a
//! no-op webhook) added to it, and of kube-runtime's `Store` per entry (full typed objects, and
//! the stubs a runner's store holds); then the resident memory (`VmRSS`) per object of the
//! same three set-ups, each in a fresh process of its own.
//!
//! Usage: `cargo bench --bench controller_memory -- [--objects N]` (default 100000).
//! Heap is counted by a counting global allocator (requested bytes, without the allocator's own
//! overhead): live bytes after minus live bytes before, once the controller's first pass is
//! over and its queue is empty. Resident memory is `VmRSS` of `/proc/self/status` after minus
//! before the cache started, in a process that runs nothing else (this bench's binary with
//! `--rss cache|rust|hook`): it adds what the allocator keeps (its headers, free memory it does
//! not return). Timings are `benches/controller_speed.rs`'s (the counting allocator slows every
//! allocation).

#[path = "controller/mod.rs"]
mod controller;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{reflector, watcher};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};
use tokio_util::sync::CancellationToken;

use informant::cache::{Options, typed};
use informant::controller::Stub;

use controller::{Cached, Counter, NAMESPACE, Server, Work};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

fn live_bytes() -> i64 {
    let s = GLOBAL.stats();
    i64::try_from(s.bytes_allocated).unwrap_or(i64::MAX)
        - i64::try_from(s.bytes_deallocated).unwrap_or(i64::MAX)
}

/// This process's resident memory in bytes (`VmRSS`); 0 where `/proc` has none.
fn rss() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse::<i64>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}

#[allow(clippy::cast_precision_loss, reason = "figures for humans")]
fn per(bytes: i64, n: usize) -> f64 {
    bytes as f64 / n.max(1) as f64
}

/// Lets the tasks that finished their work drop what they held before memory is counted.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(500)).await;
}

/// The set-ups whose resident memory is measured, each in a process of its own.
const SETUPS: [&str; 3] = ["cache", "rust", "hook"];

/// `--rss <set-up>`: the child's part. Prints `rss <before> <cache> <after>` (bytes): before
/// the cache started, once it synced, and once the set-up's controller (if any) finished its
/// first pass, still running.
async fn rss_child(server: &Server, objects: usize, setup: &str) -> Result<(), String> {
    let client = server.client().await?;
    settle().await;
    let before = rss();
    let cached = Cached::new(&client, &Options::default()).await?;
    cached.sync().await?;
    settle().await;
    let with_cache = rss();
    // What keeps the set-up's controller running until its memory is read.
    let mut stops = Vec::new();
    match setup {
        "cache" => {}
        "rust" => {
            let counter = Counter::new(objects);
            let stop = CancellationToken::new();
            drop(controller::rust_controller(
                cached.context(),
                counter.clone(),
                stop.clone(),
                Work::None,
            ));
            controller::first_pass(Instant::now(), &counter).await;
            stops.push(stop);
        }
        "hook" => {
            let shutdown = CancellationToken::new();
            let url = controller::webhook(shutdown.clone()).await?;
            let hook = controller::hook_controller(&url)?;
            let (_, stop, _task) = controller::hook_pass(hook, &cached, objects).await;
            stops.extend([stop, shutdown]);
        }
        other => return Err(format!("unknown set-up {other:?}")),
    }
    settle().await;
    println!("rss {before} {with_cache} {}", rss());
    for stop in stops {
        stop.cancel();
    }
    Ok(())
}

/// Runs `--rss <setup>` against the running `server` in a fresh process; its three figures.
fn rss_of(server: &Server, objects: usize, setup: &str) -> Result<[i64; 3], String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let output = Command::new(exe)
        .args([
            "--objects",
            &objects.to_string(),
            "--rss",
            &SETUPS
                .iter()
                .position(|s| *s == setup)
                .unwrap_or(0)
                .to_string(),
            "--port",
            &server.addr().port().to_string(),
        ])
        .output()
        .map_err(|e| format!("cannot start the {setup} process: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let figures: Vec<i64> = stdout
        .lines()
        .find_map(|l| l.strip_prefix("rss "))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    <[i64; 3]>::try_from(figures).map_err(|_| {
        format!(
            "the {setup} process said {stdout:?} ({})",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[allow(clippy::too_many_lines, reason = "one linear report")]
async fn run(server: &Server, objects: usize) -> Result<(), String> {
    let client = server.client().await?;
    let seeded = serde_json::to_vec(&controller::config_map(objects / 2)).map_or(0, |v| v.len());
    println!("{objects} ConfigMaps of {seeded} bytes of JSON as created");

    // Heap, each part counted on top of the previous one.
    let before_cache = live_bytes();
    let cached = Cached::new(&client, &Options::default()).await?;
    cached.sync().await?;
    settle().await;
    let cache_bytes = live_bytes() - before_cache;

    let before_rust = live_bytes();
    let counter = Counter::new(objects);
    let stop = CancellationToken::new();
    let task =
        controller::rust_controller(cached.context(), counter.clone(), stop.clone(), Work::None);
    controller::first_pass(Instant::now(), &counter).await;
    settle().await;
    let rust_bytes = live_bytes() - before_rust;
    stop.cancel();
    let _ = task.await;
    settle().await;

    let shutdown = CancellationToken::new();
    let url = controller::webhook(shutdown.clone()).await?;
    let hook = controller::hook_controller(&url)?;
    let before_hook = live_bytes();
    let (_, stop, task) = controller::hook_pass(hook, &cached, objects).await;
    settle().await;
    let hook_bytes = live_bytes() - before_hook;
    stop.cancel();
    let _ = task.await;
    shutdown.cancel();

    // What kube-runtime's `Store` costs per entry holding full typed objects (what a runner's
    // store held before it held stubs).
    let tree = cached.reloader.cache();
    let names: Vec<String> = (0..objects).map(controller::name).collect();
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
    for (i, name) in names.iter().enumerate() {
        // A resourceVersion as long as the server's for this many objects.
        let version = (1_000_000 + i).to_string();
        let stub = Stub::new(name, Some(NAMESPACE)).at_version(Some(&version));
        writer.apply_watcher_event(&watcher::Event::Apply(stub));
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
        "kube-runtime Store<Stub<ConfigMap>>, name, namespace and resourceVersion",
        stub_store_bytes,
    );
    println!();

    let measured: Vec<[i64; 3]> = SETUPS
        .iter()
        .map(|setup| rss_of(server, objects, setup))
        .collect::<Result<_, _>>()?;
    println!("| resident memory (VmRSS), a process per set-up | bytes/object | x JSON |");
    println!("| --- | ---: | ---: |");
    let [cache_rss, rust_rss, hook_rss] = [0, 1, 2].map(|i| measured[i][2] - measured[i][0]);
    row("cache only", cache_rss);
    row("cache + one Rust controller", rust_rss);
    row(
        "cache + one hook Controller (in the process, webhook on loopback)",
        hook_rss,
    );
    row(
        "of which the Rust controller (its process's RSS after minus once synced)",
        measured[1][2] - measured[1][1],
    );
    row(
        "of which the hook Controller",
        measured[2][2] - measured[2][1],
    );
    #[allow(clippy::cast_precision_loss, reason = "figures for humans")]
    let mib = |b: i64| b as f64 / f64::from(1 << 20);
    println!();
    println!(
        "VmRSS before the cache {:.1} MiB; cache only {:.1} MiB; with the Rust controller {:.1} MiB; with the hook Controller {:.1} MiB",
        mib(measured[0][0]),
        mib(measured[0][2]),
        mib(measured[1][2]),
        mib(measured[2][2]),
    );
    Ok(())
}

fn main() -> std::process::ExitCode {
    let outcome = (|| {
        let args = controller::parse_args(&["--rss", "--port"])?;
        if let Some(objects) = args.serve {
            return controller::serve(objects);
        }
        let flag = |name: &str| args.rest.iter().find(|(f, _)| f == name).map(|(_, n)| *n);
        if let (Some(setup), Some(port)) = (flag("--rss"), flag("--port")) {
            let server = Server::at(u16::try_from(port).map_err(|e| e.to_string())?);
            let setup = SETUPS.get(setup).ok_or("no such set-up")?;
            return controller::runtime()?.block_on(rss_child(&server, args.objects, setup));
        }
        let server = Server::start(args.objects)?;
        controller::runtime()?.block_on(run(&server, args.objects))
    })();
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_controller_memory: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
