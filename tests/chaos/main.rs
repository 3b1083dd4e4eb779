//! The seeded chaos suite: every informer converges, and no event is lost, under faults
//! (`INFORMANT_CHAOS_SEED`, `INFORMANT_CHAOS_ROUNDS`).
//!
//! One test binary for the area (one link of the whole dependency graph, not one per
//! file); each module is one file of tests.

#[path = "../chaos_harness/mod.rs"]
mod chaos_harness;
#[path = "../support/mod.rs"]
mod support;

mod chaos_events;
mod convergence;
mod namespace_churn;
mod skip_relist;
