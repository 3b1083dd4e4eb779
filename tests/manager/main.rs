//! The manager, the cache tree it serves, leader election, and the Rust and hook controllers it
//! runs, on the embedded API server.
//!
//! One test binary for the area (one link of the whole dependency graph, not one per
//! file); each module is one file of tests.

#[path = "../shard_harness/mod.rs"]
mod shard_harness;
#[path = "../support/mod.rs"]
mod support;

mod cache_behaviour;
mod cache_estimate;
mod controller_finalizer;
mod controller_kinds;
mod controller_runtime;
mod controller_timeout;
mod example_configmap_secret;
mod hooks_admission;
mod hooks_admission_entries;
mod hooks_conversion;
mod hooks_exec;
mod hooks_finalize;
mod hooks_manager;
mod hooks_policy;
mod hooks_refused;
mod hooks_schedule;
mod leader_election;
mod manager_access;
mod manager_cli_file;
mod manager_faults;
mod manager_http;
mod manager_kinds;
mod manager_leader;
mod manager_otel;
mod manager_reload;
mod manager_run;
mod manager_scope;
mod manager_secure_metrics;
mod manager_source;
mod manager_status;
mod shard_cache;
mod shard_manager;
mod shard_membership;
mod shard_processes;
mod shard_rust_member;
