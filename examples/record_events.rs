//! Records the `CronJob` story (a job every minute for 30 minutes) through the recorder
//! pipeline into the embedded API server, then prints the fates, the stored Events and the
//! `informant_events_total` metric.
//!
//! Run it with `cargo run --example record_events` (no cluster needed).

use std::collections::BTreeMap;
use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use informant::apiserver::TestServer;
use informant::recorder::{
    EventType, Fate, FateCounter, KubeSink, ManualClock, ObjectRef, Options, Pipeline, Time,
};
use k8s_openapi::api::core::v1 as corev1;
use kube::api::{Api, ListParams};
use prometheus_client::{encoding::text::encode, registry::Registry};
use tokio_util::sync::CancellationToken;

/// Each event, and the pipeline's end, must be reached within this long.
const GUARD: Duration = Duration::from_secs(30);

/// When the story starts (2023-11-14T22:13:20Z), on the virtual clock.
const START: Time = Time::from_unix_nanos(1_700_000_000_000_000_000);

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let server = TestServer::start().await?;
    let client = server.client().await?;

    // The story spans 30 minutes: a virtual clock stamps and correlates the events.
    let clock = Arc::new(ManualClock::new(START));
    let options = Options {
        component: "cronjob-controller".into(),
        ..Options::default()
    };
    let pipeline = Pipeline::new(&options, KubeSink::new(client.clone()), clock.clone());
    let recorder = pipeline.recorder();
    let fates = pipeline.fates();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(pipeline.run(shutdown.clone()));

    let cronjob = Arc::new(ObjectRef::new(
        "batch/v1",
        "CronJob",
        "default",
        "hello",
        "6f1f2ab4-0000-4000-8000-00000000c0de",
    ));
    let story = story();
    let mut last_delivered: BTreeMap<&str, Duration> = BTreeMap::new();
    for (n, (at, reason, message)) in story.iter().enumerate() {
        clock.set(START.saturating_add(*at));
        let delivered_before = delivered(&fates);
        recorder.record(&cronjob, EventType::Normal, reason, message);
        // One event at a time, so each is correlated at its own virtual time.
        wait_for(&fates, n as u64 + 1).await?;
        if delivered(&fates) > delivered_before {
            last_delivered.insert(reason, *at);
        }
    }
    drop(recorder);
    tokio::time::timeout(GUARD, running).await??;

    println!("Recorded {} events of the CronJob story.", story.len());
    println!("Fates:");
    for fate in Fate::ALL {
        let count = fates.get(fate);
        if count > 0 {
            println!("  {fate:<14} {count}");
        }
    }
    println!("Last delivered (create or patch), by reason:");
    for (reason, at) in &last_delivered {
        let secs = at.as_secs();
        println!("  {reason:<17} t={secs} s (minute {})", secs / 60);
    }

    let events = Api::<corev1::Event>::namespaced(client, "default")
        .list(&ListParams::default())
        .await?
        .items;
    println!("\nEvents stored in the server: {}", events.len());
    println!(
        "(a patched Event's count also counts the repeats skipped before the patch, as in client-go)"
    );
    // Per reason: Event objects, sum of their counts, and the newest Event's message.
    let mut by_reason: BTreeMap<String, (usize, i32, Option<&corev1::Event>)> = BTreeMap::new();
    for event in &events {
        let entry = by_reason
            .entry(event.reason.clone().unwrap_or_default())
            .or_default();
        entry.0 += 1;
        entry.1 += event.count.unwrap_or(1);
        let stamp = |e: &corev1::Event| e.last_timestamp.as_ref().map(|t| t.0);
        if entry.2.is_none_or(|newest| stamp(event) > stamp(newest)) {
            entry.2 = Some(event);
        }
    }
    for (reason, (objects, count, newest)) in &by_reason {
        let message = newest.and_then(|e| e.message.as_deref()).unwrap_or("");
        println!(
            "  {reason:<17} objects={objects:<3} sum(count)={count:<3} newest message: {message}"
        );
    }

    let mut registry = Registry::default();
    fates.register(&mut registry);
    let mut text = String::new();
    encode(&mut text, &registry)?;
    println!("\nPrometheus exposition:\n{text}");

    server.shutdown().await?;
    Ok(())
}

/// Events that reached the API server (created or patched).
fn delivered(fates: &FateCounter) -> u64 {
    fates.get(Fate::Created) + fates.get(Fate::Patched)
}

/// Waits until `total` events have reached their fate, or fails after [`GUARD`].
async fn wait_for(fates: &FateCounter, total: u64) -> Result<(), tokio::time::error::Elapsed> {
    tokio::time::timeout(GUARD, async {
        while fates.total() < total {
            tokio::task::yield_now().await;
        }
    })
    .await
}

/// The `CronJob` story: every minute `SuccessfulCreate`, 7 s later `SawCompletedJob`, and from
/// the fourth job on `SuccessfulDelete` of the job three before (history limit 3).
///
/// The delete comes 1 ms after `SawCompletedJob`: an Event's name is the object's name and the
/// time in nanoseconds (as in client-go), so two events stamped at the same instant would get
/// the same name and the second create would be rejected with 409 `AlreadyExists`.
fn story() -> Vec<(Duration, &'static str, String)> {
    let mut events = Vec::new();
    for job in 1..=30_u64 {
        let minute = Duration::from_secs((job - 1) * 60);
        events.push((
            minute,
            "SuccessfulCreate",
            format!("Created job hello-{job}"),
        ));
        let completed = minute + Duration::from_secs(7);
        events.push((
            completed,
            "SawCompletedJob",
            format!("Saw completed job: hello-{job}, status: Complete"),
        ));
        if job > 3 {
            events.push((
                completed + Duration::from_millis(1),
                "SuccessfulDelete",
                format!("Deleted job hello-{}", job - 3),
            ));
        }
    }
    events
}
