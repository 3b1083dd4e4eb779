//! Pipeline speed: `record()` → broadcaster → correlator → null sink with 1, 2 and 8 producer
//! threads. Prints events/s of the producers, p50/p99/max latency of `record()` (it never
//! blocks), the fates (conservation: recorded = sum of fates, checked) and peak memory.
//!
//! `cargo bench --bench pipeline` records 1,000,000 events per run; under `cargo test`
//! (no `--bench` argument) 20,000.

#[path = "common/mod.rs"]
mod common;

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use informant::recorder::{EventType, Fate, NullSink, ObjectRef, Options, Pipeline, SystemClock};
use tokio_util::sync::CancellationToken;

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[allow(clippy::cast_precision_loss)] // Reason: figures for humans.
fn run(producers: usize, total: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let pipeline = Pipeline::new(&Options::default(), NullSink, Arc::new(SystemClock));
    let fates = pipeline.fates();
    let recorder = pipeline.recorder();
    let running = rt.spawn(pipeline.run(CancellationToken::new()));
    let objects: Arc<Vec<Arc<ObjectRef>>> = Arc::new(common::pods("pod", 10_000));
    let messages: Arc<Vec<String>> = Arc::new((0..20).map(|i| format!("message {i}")).collect());
    let per = total / producers;
    let start = Instant::now();
    let threads: Vec<_> = (0..producers)
        .map(|t| {
            let recorder = recorder.clone();
            let objects = objects.clone();
            let messages = messages.clone();
            std::thread::spawn(move || {
                let mut latencies = Vec::with_capacity(per);
                for i in 0..per {
                    let obj = &objects[(i * producers + t) % objects.len()];
                    let msg = &messages[i % messages.len()];
                    let t0 = Instant::now();
                    recorder.record(obj, EventType::Normal, "Sync", msg);
                    latencies.push(u32::try_from(t0.elapsed().as_nanos()).unwrap_or(u32::MAX));
                }
                latencies
            })
        })
        .collect();
    let mut latencies: Vec<u32> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let elapsed = start.elapsed();
    drop(recorder);
    rt.block_on(running).unwrap();
    latencies.sort_unstable();
    let percentile = |per_mille: usize| latencies[(latencies.len() - 1) * per_mille / 1000];
    let events_recorded = (per * producers) as u64;
    assert_eq!(fates.total(), events_recorded, "conservation law broken");
    println!(
        "{producers} producer(s): {events_recorded} events in {:.3} s = {:>10.0} events/s; record() p50 {} ns, p99 {} ns, max {} ns",
        elapsed.as_secs_f64(),
        events_recorded as f64 / elapsed.as_secs_f64(),
        percentile(500),
        percentile(990),
        latencies.last().copied().unwrap_or(0),
    );
    let mut line = String::from("    fates:");
    for f in Fate::ALL {
        let n = fates.get(f);
        if n > 0 {
            let _ = write!(line, " {f}={n}");
        }
    }
    println!("{line} (sum {} = recorded)", fates.total());
}

fn main() {
    let total = if std::env::args().any(|a| a == "--bench") {
        1_000_000
    } else {
        20_000
    };
    println!(
        "pipeline: record() -> broadcaster -> correlator -> null sink (defaults, 2 runtime threads)"
    );
    for producers in [1, 2, 8] {
        run(producers, total);
    }
    if let Some(kib) = peak_rss_kib() {
        println!("peak RSS of the whole run: {} MiB", kib / 1024);
    }
}
