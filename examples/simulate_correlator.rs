//! Drives the `Correlator` (client-go's `EventCorrelator`) on a virtual clock: 30 similar events
//! on one Pod, one second apart, after 15 `BackOff` events on the same Pod. Prints each
//! event's action (create, patch, skip), when aggregation starts and the tokens left, first
//! with the default spam key, then with `reason` in it.
//!
//! Run it with `cargo run --example simulate_correlator` (no cluster, no server).

use std::sync::Arc;
use std::time::Duration;

use informant::recorder::{
    Action, Clock, Correlator, CorrelatorOptions, Event, EventType, ManualClock, ObjectRef, Source,
    SpamKeyField, Time,
};

fn main() {
    println!("Default spam key (source, involvedObject, type):");
    run(&CorrelatorOptions::default());

    println!("\nSpam key with the reason (source, involvedObject, type, reason):");
    let with_reason = CorrelatorOptions {
        spam_key_fields: vec![
            SpamKeyField::Source,
            SpamKeyField::InvolvedObject,
            SpamKeyField::Type,
            SpamKeyField::Reason,
        ],
        ..CorrelatorOptions::default()
    };
    run(&with_reason);
}

/// Runs the story through a fresh correlator with `options` and prints what it decides.
fn run(options: &CorrelatorOptions) {
    let clock = Arc::new(ManualClock::new(Time::from_unix_nanos(
        1_700_000_000_000_000_000,
    )));
    let mut correlator = Correlator::new(options, clock.clone());
    let pod = Arc::new(ObjectRef::new("v1", "Pod", "default", "web-0", "uid-web-0"));
    let source = Arc::new(Source::new("kubelet", "node-1"));

    // Earlier trouble on the same Pod: 15 identical BackOff events (one Event, patched).
    let mut backoff = [0_usize; 3];
    for _ in 0..15 {
        let event = Event::new(
            pod.clone(),
            source.clone(),
            EventType::Warning,
            "BackOff",
            "Back-off restarting failed container",
            clock.now(),
        );
        let correlation = correlator.correlate(&event);
        backoff[action_index(correlation.action)] += 1;
        if correlation.action != Action::Skip {
            // The sink wrote it: the correlator remembers the Event for later patches.
            correlator.update_state(&event, &correlation);
        }
        clock.advance(Duration::from_secs(1));
    }
    println!(
        "  15 BackOff first: {} create, {} patch, {} skip",
        backoff[0], backoff[1], backoff[2]
    );

    // 30 similar events: same reason, a different message each (client-go aggregates them).
    let mut totals = [0_usize; 3];
    let mut aggregation_started = None;
    for n in 1..=30 {
        let message = format!("MountVolume.SetUp failed for volume \"vol-{n}\"");
        let event = Event::new(
            pod.clone(),
            source.clone(),
            EventType::Warning,
            "FailedMount",
            &message,
            clock.now(),
        );
        let correlation = correlator.correlate(&event);
        totals[action_index(correlation.action)] += 1;
        if correlation.combined && aggregation_started.is_none() {
            aggregation_started = Some(n);
        }
        let combined = if correlation.combined {
            format!(" {}", correlation.message(&event))
        } else {
            String::new()
        };
        let line = format!(
            "  #{n:<2} {:<6} count={:<2} tokens={:>5.2} distinct={:<2}{combined}",
            correlation.action.as_str(),
            correlation.count,
            correlation.tokens_left,
            correlation.distinct_messages,
        );
        println!("{}", line.trim_end());
        if correlation.action != Action::Skip {
            correlator.update_state(&event, &correlation);
        }
        clock.advance(Duration::from_secs(1));
    }
    match aggregation_started {
        Some(n) => println!("  aggregation started at event #{n}"),
        None => println!("  aggregation never started"),
    }
    println!(
        "  FailedMount: {} create, {} patch, {} skip",
        totals[0], totals[1], totals[2]
    );
}

/// Index of `action` in the `[create, patch, skip]` tallies.
fn action_index(action: Action) -> usize {
    match action {
        Action::Create => 0,
        Action::Patch => 1,
        Action::Skip => 2,
    }
}
