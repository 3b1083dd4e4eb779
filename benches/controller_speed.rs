//! `benches/controller_speed.rs`: how fast a controller's reconcile path is, over N
//! `ConfigMap`s of ~1.2 KiB JSON in the embedded API server (a child process), with the system
//! allocator as a manager runs it (`benches/controller_memory.rs` counts memory with a counting
//! allocator, which adds atomic operations to every allocation): the latency of the cache read
//! each reconcile starts with (deep copy and `unsafeDisableDeepCopy`, median and p99) and of
//! the decode alone, the reconciles/s of a no-op Rust controller and of one whose reconcile
//! reads its object (several passes each), and the time
//! from start to the first pass over every object (cold: the cache starts with the controller;
//! warm: the cache synced).
//!
//! Usage: `cargo bench --bench controller_speed -- [--objects N] [--passes P]` (defaults
//! 100000 and 5).

#[path = "controller/mod.rs"]
mod controller;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::TypeMeta;

use informant::cache::{Cache as _, CompactObject, typed};

use controller::{Cached, NAMESPACE, Server, Work, percentiles};

/// Reads `names` through `cached`'s tree `rounds` times; the latency of each read.
async fn reads(cached: &Cached, names: &[String], rounds: usize) -> Vec<Duration> {
    let tree = cached.reloader.cache();
    let mut took = Vec::with_capacity(names.len() * rounds);
    for _ in 0..rounds {
        for name in names {
            let t = Instant::now();
            let object = typed::get_arc::<ConfigMap>(tree.as_ref(), Some(NAMESPACE), name).await;
            took.push(t.elapsed());
            drop(std::hint::black_box(object));
        }
    }
    took
}

/// Decodes each of `stored` as a `ConfigMap` `rounds` times: the decode alone.
fn decodes(stored: &[CompactObject], rounds: usize) -> Vec<Duration> {
    let types = TypeMeta {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
    };
    let mut took = Vec::with_capacity(stored.len() * rounds);
    for _ in 0..rounds {
        for object in stored {
            let t = Instant::now();
            let decoded = object.decode_as::<ConfigMap>(&types);
            took.push(t.elapsed());
            drop(std::hint::black_box(decoded));
        }
    }
    took
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or_default()
}

async fn run(server: &Server, objects: usize, passes: usize) -> Result<(), String> {
    let client = server.client().await?;
    let names: Vec<String> = (0..objects).map(controller::name).collect();
    let sample: Vec<String> = names
        .iter()
        .step_by((objects / 10_000).max(1))
        .cloned()
        .collect();

    // Cold: the cache starts with the controller (an informer's LIST, then the first pass).
    let cached = Cached::new(&client, &informant::cache::Options::default()).await?;
    let cold = controller::rust_pass(&cached, objects, Work::None).await;
    cached.stop().await;

    let cached = Cached::new(&client, &informant::cache::Options::default()).await?;
    let sync = cached.sync().await?;
    let tree = cached.reloader.cache();
    let gvk = typed::gvk_of::<ConfigMap>();
    let mut stored = Vec::with_capacity(sample.len());
    for name in &sample {
        let object = tree
            .get(&gvk, Some(NAMESPACE), name)
            .await
            .map_err(|e| e.to_string())?;
        stored.push(CompactObject::encode(&object).map_err(|e| e.to_string())?);
    }
    drop(tree);
    let deep = reads(&cached, &sample, 3).await;
    let decoded = decodes(&stored, 3);
    let mut warm = Vec::with_capacity(passes);
    for _ in 0..passes {
        warm.push(controller::rust_pass(&cached, objects, Work::None).await);
    }
    let mut reading = Vec::with_capacity(passes);
    for _ in 0..passes {
        reading.push(controller::rust_pass(&cached, objects, Work::Read).await);
    }
    cached.stop().await;

    let cached = Cached::shared(&client).await?;
    cached.sync().await?;
    // The first typed read of each object makes the typed copy the cache keeps.
    reads(&cached, &sample, 1).await;
    let shared = reads(&cached, &sample, 3).await;
    let mut shared_passes = Vec::with_capacity(passes);
    for _ in 0..passes {
        shared_passes.push(controller::rust_pass(&cached, objects, Work::None).await);
    }
    cached.stop().await;

    println!(
        "{objects} ConfigMaps of {} bytes of JSON as created; system allocator",
        serde_json::to_vec(&controller::config_map(objects / 2)).map_or(0, |v| v.len())
    );
    println!(
        "cache read per reconcile (typed::get_arc::<ConfigMap>, {} reads): deep copy {}; unsafeDisableDeepCopy {}",
        deep.len(),
        percentiles(deep),
        percentiles(shared)
    );
    println!(
        "of which the decode (CompactObject::decode_as::<ConfigMap>): {}",
        percentiles(decoded)
    );
    println!(
        "no-op Rust controller, cold (cache starts with it): first pass over {objects} objects {:.2?}, {:.0} reconciles/s",
        cold.total, cold.rate
    );
    let rates = |passes: &[controller::Pass]| {
        let best = passes.iter().map(|p| p.rate).fold(0.0, f64::max);
        let cpu = median(passes.iter().map(|p| p.cpu.as_secs_f64() * 1e9).collect());
        let each = passes
            .iter()
            .map(|p| format!("{:.0}", p.rate))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "reconciles/s median {:.0}, best {best:.0} of {} passes ({each}); CPU per reconcile median {cpu:.0} ns",
            median(passes.iter().map(|p| p.rate).collect()),
            passes.len(),
        )
    };
    println!(
        "no-op Rust controller, warm (cache synced in {sync:.2?}): first pass {:.2?}; {}",
        warm.first().map(|p| p.total).unwrap_or_default(),
        rates(&warm),
    );
    println!(
        "a Rust controller whose reconcile reads its object's data, labels and annotations: {}",
        rates(&reading),
    );
    println!(
        "the no-op one with unsafeDisableDeepCopy: {}",
        rates(&shared_passes),
    );
    Ok(())
}

fn main() -> std::process::ExitCode {
    let outcome = (|| {
        let args = controller::parse_args(&["--passes"])?;
        if let Some(objects) = args.serve {
            return controller::serve(objects);
        }
        let passes = args
            .rest
            .iter()
            .find(|(flag, _)| flag == "--passes")
            .map_or(5, |(_, n)| (*n).max(1));
        let server = Server::start(args.objects)?;
        controller::runtime()?.block_on(run(&server, args.objects, passes))
    })();
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_controller_speed: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
