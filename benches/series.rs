//! Series path speed next to the core/v1 correlator's: ns/event and allocations/event for the
//! workloads of `benches/correlator.rs` (unique, hot, mix), pre-built events, a fake clock
//! advancing 1 ms per event, a fresh engine or correlator per run. The series path is the
//! `events.k8s.io/v1` engine (`recorder::series::Engine`: key, cache, worker queue) with every
//! call answered at once, as `Correlator::correlate` is measured without its sink.
//!
//! `cargo bench --bench series` measures 200,000 events per workload; without `--bench` it
//! runs 2,000 as a smoke test.

#[path = "common/mod.rs"]
mod common;

use std::alloc::System;
use std::sync::Arc;
use std::time::{Duration, Instant};

use informant::recorder::series::Engine;
use informant::recorder::{
    Correlator, CorrelatorOptions, Event, EventNaming, EventType, Fate, ObjectRef, SeriesOptions,
    SinkOptions, Source, Time,
};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const BASE: i64 = 1_700_000_000_000_000_000;
const MS: i64 = 1_000_000;

use common::pods as objects;

fn event(obj: &Arc<ObjectRef>, reason: &str, msg: &str, i: usize) -> Event {
    let src = Arc::new(Source::new("bench-controller", "node-1"));
    let mut e = Event::new(
        obj.clone(),
        src,
        EventType::Normal,
        reason,
        msg,
        Time::from_unix_nanos(BASE + i64::try_from(i).unwrap_or(i64::MAX) * MS),
    );
    e.action = Some(reason.into());
    e
}

#[allow(clippy::cast_possible_truncation)] // Reason: below() < the object count.
fn workload(name: &str, n: usize) -> Vec<Arc<Event>> {
    let hot = objects("hot", 100);
    let mounts = objects("mount", 1_000);
    let pods = objects("pod", 10_000);
    let mut rng = common::Rng(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|i| {
            let e = match name {
                "unique" => event(
                    &pods[i % 10_000],
                    "Started",
                    &format!("unique message {i}"),
                    i,
                ),
                "hot" => event(
                    &hot[0],
                    "BackOff",
                    "Back-off restarting failed container",
                    i,
                ),
                _ => match rng.below(10) {
                    0..=4 => event(
                        &hot[rng.below(100) as usize],
                        "BackOff",
                        "Back-off restarting failed container",
                        i,
                    ),
                    5..=7 => {
                        let msg = format!("volume vol-{} not ready", rng.below(50));
                        event(&mounts[rng.below(1_000) as usize], "FailedMount", &msg, i)
                    }
                    _ => event(
                        &pods[rng.below(10_000) as usize],
                        "Scheduled",
                        &format!("unique message {i}"),
                        i,
                    ),
                },
            };
            Arc::new(e)
        })
        .collect()
}

fn series(name: &str, events: &[Arc<Event>]) {
    let mut engine: Engine<()> = Engine::new(
        &SeriesOptions::default(),
        &SinkOptions::default(),
        EventNaming::Unique,
        Time::from_unix_nanos(BASE),
        Box::new(|| 0.5),
    );
    let mut fates = [0u64; Fate::COUNT];
    let region = Region::new(GLOBAL);
    let start = Instant::now();
    for e in events {
        engine.record(e.time, e.clone(), ());
        loop {
            let calls = engine.poll(e.time);
            if calls.is_empty() {
                break;
            }
            for call in calls {
                engine.answer(e.time, call.id, &Ok(()));
            }
        }
        for f in engine.take_finished() {
            fates[f.fate.index()] += 1;
        }
    }
    let elapsed = start.elapsed();
    let stats = region.change();
    report(name, "series", events.len(), elapsed, stats.allocations);
    let done: u64 = fates.iter().sum();
    println!(
        "    outcomes: {} created, {} series_patched, {} counted into open series",
        fates[Fate::Created.index()],
        fates[Fate::SeriesPatched.index()],
        events.len() as u64 - done
    );
}

fn correlator(name: &str, events: &[Arc<Event>]) {
    let clock = informant::recorder::ManualClock::new(Time::from_unix_nanos(BASE));
    let mut correlator = Correlator::new(&CorrelatorOptions::default(), clock.clone());
    let region = Region::new(GLOBAL);
    let start = Instant::now();
    for e in events {
        clock.set(e.time);
        std::hint::black_box(correlator.correlate(e));
    }
    let elapsed = start.elapsed();
    let stats = region.change();
    report(name, "core/v1", events.len(), elapsed, stats.allocations);
}

#[allow(clippy::cast_precision_loss)] // Reason: figures for humans.
fn report(name: &str, path: &str, n: usize, elapsed: Duration, allocs: usize) {
    let n_f = n as f64;
    println!(
        "{name:<7} {path:<8} {n:>8} events  {:>8.1} ns/event  {:>6.2} allocs/event",
        elapsed.as_nanos() as f64 / n_f,
        allocs as f64 / n_f,
    );
}

fn main() {
    let n = if std::env::args().any(|a| a == "--bench") {
        200_000
    } else {
        2_000
    };
    println!(
        "series (events.k8s.io/v1 engine, calls answered at once) next to the core/v1 correlator"
    );
    for name in ["unique", "hot", "mix"] {
        let events = workload(name, n);
        correlator(name, &events);
        series(name, &events);
    }
}
