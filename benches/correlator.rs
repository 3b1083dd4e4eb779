//! Correlator speed: events/s and allocations/event for the three workloads of
//! `tests/data/scenarios/README.md` (unique, hot, mix), `EventCorrelate` only, pre-built events,
//! a fake clock advancing 1 ms per event, a fresh correlator per run.
//!
//! `cargo bench --bench correlator` measures 200,000 events per workload; under `cargo test`
//! (no `--bench` argument) it runs 2,000 as a smoke test.

#[path = "common/mod.rs"]
mod common;

use std::alloc::System;
use std::sync::Arc;
use std::time::{Duration, Instant};

use informant::recorder::{
    Action, Correlator, CorrelatorOptions, Event, EventType, ManualClock, ObjectRef, Source, Time,
};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const BASE: i64 = 1_700_000_000_000_000_000;
const MS: i64 = 1_000_000;

struct Objects(Vec<Arc<ObjectRef>>);

impl Objects {
    fn new(prefix: &str, n: usize) -> Self {
        Objects(common::pods(prefix, n))
    }
}

fn event(src: &Arc<Source>, obj: &Arc<ObjectRef>, reason: &str, msg: &str, i: usize) -> Event {
    let i = i64::try_from(i).unwrap();
    Event::new(
        obj.clone(),
        src.clone(),
        EventType::Normal,
        reason,
        msg,
        Time::from_unix_nanos(BASE + i * MS),
    )
}

fn unique(n: usize) -> Vec<Event> {
    let src = Arc::new(Source::new("bench-controller", "node-1"));
    let pods = Objects::new("pod", 10_000);
    (0..n)
        .map(|i| {
            event(
                &src,
                &pods.0[i % 10_000],
                "Started",
                &format!("unique message {i}"),
                i,
            )
        })
        .collect()
}

fn hot(n: usize) -> Vec<Event> {
    let src = Arc::new(Source::new("bench-controller", "node-1"));
    let pod = Objects::new("hot", 1);
    (0..n)
        .map(|i| {
            event(
                &src,
                &pod.0[0],
                "BackOff",
                "Back-off restarting failed container",
                i,
            )
        })
        .collect()
}

fn mix(n: usize) -> Vec<Event> {
    let src = Arc::new(Source::new("bench-controller", "node-1"));
    let hot = Objects::new("hot", 100);
    let mounts = Objects::new("mount", 1_000);
    let pods = Objects::new("pod", 10_000);
    let mut rng = common::Rng(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|i| {
            #[allow(clippy::cast_possible_truncation)] // Reason: below() < the object count.
            match rng.below(10) {
                0..=4 => {
                    let o = &hot.0[rng.below(100) as usize];
                    event(
                        &src,
                        o,
                        "BackOff",
                        "Back-off restarting failed container",
                        i,
                    )
                }
                5..=7 => {
                    let o = &mounts.0[rng.below(1_000) as usize];
                    let msg = format!("volume vol-{} not ready", rng.below(50));
                    event(&src, o, "FailedMount", &msg, i)
                }
                _ => {
                    let o = &pods.0[rng.below(10_000) as usize];
                    event(&src, o, "Scheduled", &format!("unique message {i}"), i)
                }
            }
        })
        .collect()
}

fn run(name: &str, events: &[Event]) {
    let clock = ManualClock::new(Time::from_unix_nanos(BASE));
    let mut correlator = Correlator::new(&CorrelatorOptions::default(), clock.clone());
    let (mut created, mut patched, mut skipped) = (0u64, 0u64, 0u64);
    let region = Region::new(GLOBAL);
    let start = Instant::now();
    for e in events {
        clock.set(e.time);
        let c = correlator.correlate(e);
        match c.action {
            Action::Create => created += 1,
            Action::Patch => patched += 1,
            Action::Skip => skipped += 1,
        }
        std::hint::black_box(&c);
    }
    let elapsed = start.elapsed();
    let stats = region.change();
    report(
        name,
        events.len(),
        elapsed,
        stats.allocations,
        stats.bytes_allocated,
    );
    println!("    outcomes: {created} created, {patched} patched, {skipped} skipped");
}

#[allow(clippy::cast_precision_loss)] // Reason: figures for humans.
fn report(name: &str, n: usize, elapsed: Duration, allocs: usize, bytes: usize) {
    let n_f = n as f64;
    let ns = elapsed.as_nanos() as f64 / n_f;
    println!(
        "{name:<7} {n:>8} events  {:>12.0} events/s  {ns:>8.1} ns/event  {:>6.2} allocs/event  {:>8.1} bytes/event",
        n_f / elapsed.as_secs_f64(),
        allocs as f64 / n_f,
        bytes as f64 / n_f,
    );
}

fn main() {
    let n = if std::env::args().any(|a| a == "--bench") {
        200_000
    } else {
        2_000
    };
    println!("correlator (EventCorrelate only, defaults, fresh correlator per workload)");
    for (name, build) in [
        ("unique", unique as fn(usize) -> Vec<Event>),
        ("hot", hot),
        ("mix", mix),
    ] {
        let events = build(n);
        run(name, &events);
    }
}
