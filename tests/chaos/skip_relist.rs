//! The chaos suite can fail: with the test-only switch that makes the manager's informers
//! skip the relist after 410 Gone (`InformerPool::skip_relist_after_gone`, a switch of that
//! manager's pool, not of the process), a fixed seed whose schedule expires the watch history
//! makes the invariant check report mismatches.

use std::time::Duration;

use crate::chaos_harness;

/// The seed of the schedule; the run ends with a round that blocks watches, writes 40 times,
/// expires the history (410) and lets the informers resume.
const SEED_WITH_410: u64 = 7;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipping_the_relist_after_410_makes_the_invariant_check_fail() {
    let (figures, took) =
        chaos_harness::run_faulty(SEED_WITH_410, 6, true, Duration::from_secs(10), None, true)
            .await;
    println!("{}", figures.report(SEED_WITH_410, took));
    assert!(
        figures
            .faults
            .get("watch-blocked-then-410")
            .copied()
            .unwrap_or(0)
            > 0,
        "the seed's schedule must include a 410: {:?}",
        figures.faults
    );
    assert!(
        figures
            .mismatches
            .iter()
            .any(|m| m.contains(": informer ") && !m.contains("sentinel")),
        "stores that skipped the relist after 410 must differ from the server: {:?}",
        figures.mismatches
    );
    // The informers that skipped the relist do not catch up with the server either (the
    // sentinels written at quiescence stay missing), hence the short wait.
    println!(
        "first mismatches: {:#?}",
        &figures.mismatches[..figures.mismatches.len().min(5)]
    );
}
