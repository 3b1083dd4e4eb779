//! The `informant` binary and the config as a user meets them: validate, explain, cache, rbac,
//! simulate, the CRDs, the samples and the invalid-config corpus, hot reload of a file, and the
//! layering of the source.
//!
//! One test binary for the area (one link of the whole dependency graph, not one per
//! file); each module is one file of tests.

#[path = "../support/mod.rs"]
mod support;

mod apiserver_credentials;
mod cache_cli;
mod cli_demo;
mod cli_exit_codes;
mod cli_help;
mod cli_kinds;
mod cli_rbac;
mod cli_rbac_check;
mod cli_stdout;
mod cli_validate;
mod config_crd;
mod config_crd_descriptions;
mod config_invalid;
mod config_load;
mod config_no_panic;
mod config_samples;
mod config_watch;
mod crate_count;
mod dockerfile;
mod hooks_cli;
mod layout;
mod recorder_simulate_cli;
mod scripts_tools;
mod selector_no_panic;
