//! The chaos suite, convergence (issue 12): a seeded, reproducible run of writes (create,
//! relabel, update, delete of `ConfigMap`s, `Secret`s and `Pod`s in 4 namespaces), faults
//! (watch drops, 410 Gone, failed lists and watches with 500, 503 or 429, throttling with
//! `Retry-After`, latency) and `CacheConfig` reloads (selectors and namespaces change) against
//! the manager on the embedded API server. Once the faults stop, every informer's store equals
//! the server's state under its scope, object by object, and so do reads through the cache
//! tree (`Cache::list`, what `informant cache list` answers).
//!
//! The other parts of the suite: `namespace_churn.rs` (namespaces chosen by label, created,
//! relabelled and deleted under the same faults), `chaos_events.rs` (event conservation under
//! sink faults),
//! `chaos_bad_input.rs` (invalid configs, malformed answers), `skip_relist.rs` (the
//! check catches an informer that skips its relist after 410).
//!
//! `cargo test --test chaos convergence:: -- --nocapture` prints the figures. `INFORMANT_CHAOS_SEED=<n>`
//! replays a run; `INFORMANT_CHAOS_ROUNDS=<n>` makes a long soak.

use crate::chaos_harness;

use std::time::Duration;

use chaos_harness::{Figures, rounds_from_env, seed_from_env};

/// How long informers may take to catch up once faults stop: kube-runtime's default watcher
/// backoff grows to 30 s and resets only after 120 s without errors.
const QUIESCE: Duration = Duration::from_secs(90);

/// The short CI run: 60 rounds (about 20 s on two cores).
const CI_ROUNDS: u32 = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_informer_converges_to_the_server_state_after_a_seeded_fault_schedule() {
    let default_seed = jiff::Timestamp::now().as_second().unsigned_abs();
    let seed = seed_from_env(default_seed);
    let rounds = rounds_from_env(CI_ROUNDS);
    let (figures, took): (Figures, Duration) =
        chaos_harness::run(seed, rounds, false, QUIESCE).await;
    println!("{}", figures.report(seed, took));
    assert!(
        figures.mismatches.is_empty(),
        "the cache diverged from the server; replay with INFORMANT_CHAOS_SEED={seed} \
         INFORMANT_CHAOS_ROUNDS={rounds}:\n{}",
        figures.mismatches.join("\n")
    );
    assert!(figures.informers_checked > 0 && figures.objects_compared > 0);
}
