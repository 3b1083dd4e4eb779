//! The chaos suite, namespace churn: the configs choose namespaces by label
//! (`namespaceSelector`, beside listed namespaces and per-kind ones), and each round creates,
//! labels, unlabels or deletes namespaces while the writer churns objects in them, under the
//! faults of the convergence run (watch drops, 410 Gone, failed lists and watches, throttling,
//! latency, config reloads). Once the faults stop, the cache holds exactly the objects of the
//! namespaces that match now, object by object, and refuses reads of the others; the check
//! is shown able to fail by a run in which the manager cannot see namespace changes.
//!
//! `INFORMANT_CHAOS_SEED=<n>` replays a run; `INFORMANT_CHAOS_ROUNDS=<n>` makes a long soak;
//! `cargo test --test chaos namespace_churn:: -- --nocapture` prints the figures.

use crate::chaos_harness;

use std::time::Duration;

use chaos_harness::{Churn, rounds_from_env, seed_from_env};

/// How long informers may take to catch up once faults stop (as in the convergence run).
const QUIESCE: Duration = Duration::from_secs(90);

/// The short CI run.
const CI_ROUNDS: u32 = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_holds_exactly_the_matching_namespaces_after_churn_under_faults() {
    let default_seed = jiff::Timestamp::now().as_second().unsigned_abs();
    let seed = seed_from_env(default_seed);
    let rounds = rounds_from_env(CI_ROUNDS);
    let (figures, took) =
        chaos_harness::run_with(seed, rounds, false, QUIESCE, Some(Churn::default())).await;
    println!("{}", figures.report(seed, took));
    assert!(
        figures.mismatches.is_empty(),
        "the cache diverged from the namespaces that match; replay with \
         INFORMANT_CHAOS_SEED={seed} INFORMANT_CHAOS_ROUNDS={rounds}:\n{}",
        figures.mismatches.join("\n")
    );
    let churned: u64 = [
        "namespace-created",
        "namespace-labelled",
        "namespace-unlabelled",
        "namespace-deleted",
    ]
    .iter()
    .map(|k| figures.faults.get(k).copied().unwrap_or(0))
    .sum();
    assert!(
        churned > 0,
        "the schedule changed no namespace: {:?}",
        figures.faults
    );
    assert!(figures.informers_checked > 0 && figures.objects_compared > 0);
}

/// The seed of the blind run: its schedule labels, creates or deletes churn namespaces.
const BLIND_SEED: u64 = 11;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_blind_to_namespace_changes_fails_the_check() {
    let (figures, took) = chaos_harness::run_with(
        BLIND_SEED,
        12,
        false,
        Duration::from_secs(5),
        Some(Churn { blind: true }),
    )
    .await;
    println!("{}", figures.report(BLIND_SEED, took));
    assert!(
        figures
            .mismatches
            .iter()
            .any(|m| m.contains("informers over")),
        "a cache that does not follow the namespaces must be reported: {:?}",
        figures.mismatches
    );
    println!(
        "first mismatches: {:#?}",
        &figures.mismatches[..figures.mismatches.len().min(5)]
    );
}
