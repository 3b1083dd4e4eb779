//! informant: a declaratively configured Kubernetes operator framework.
//!
//! A manager reads a [`config::CacheConfig`] (a custom resource, or the same document as a YAML
//! file) and wires the matching cache tree and event recorder, reloads both when the config
//! changes, and traces the fate of every event.
//!
//! # Where to start
//!
//! The modules are rooms, one program each; dependencies point one way, down this list
//! (`tests/cli/layout.rs` checks it):
//!
//! - `hooks` (the `hooks` feature): operators in any language: `Controller` resources whose hook (exec or
//!   webhook) the manager calls with an object and its children, and whose answer it writes.
//! - [`controller`]: the Rust controller runtime on kube-runtime's scheduler and runner, fed
//!   by the manager's informer pool; `Controller::add_to(&mut manager, ...)` adds one.
//! - [`manager`]: the process: runnable groups started and stopped in controller-runtime's
//!   order, config reload, status, probes, metrics, leader election.
//! - [`config`]: the `CacheConfig` wire type (the CRD), YAML loading, validation into typed
//!   options, hot reload of a file and of the resource, and the RBAC a config needs.
//! - [`cache`]: the typed [`cache::Options`] with controller-runtime's defaults, the pure
//!   [`cache::Plan`] of a cache tree, the caches it instantiates (`InformerCache`,
//!   `MultiNamespaceCache`, `ByKindCache`) over one informer pool, and the reload that moves
//!   the pool from one plan to the next ([`cache::CacheReloader`]).
//! - [`serving`]: HTTPS for the manager's secure endpoints (secure metrics; webhooks next): the
//!   serving certificate reloaded when its files change, and every request authenticated and
//!   authorized by the API server; a leaf that knows none of the others.
//! - [`selector`]: label and field selectors, the vocabulary config, cache and the embedded API
//!   server share.
//! - [`recorder`]: client-go's event pipeline (broadcaster, correlator, sink), where every event
//!   ends in exactly one named fate; a leaf that knows none of the others.
//! - `apiserver`: an embedded, in-memory Kubernetes API server for the demo, development and
//!   tests (the `apiserver` feature).
//! - `samples`: sample controllers on the controller runtime (the `CronJob` story; the
//!   `samples` feature).
//! - [`telemetry`]: the tracing subscriber and OpenTelemetry export, installed only by the binary;
//!   [`yaml`]: the one place YAML is read and written; [`kinds`]: the built-in kinds.
//!
//! # Features
//!
//! All default; a Rust operator that talks to a real cluster turns off what it does not use
//! (`docs/manager.md`, "Dependencies and build size"):
//!
//! - `cli`: `manager::Args` (the flags of `informant run`) and the `informant`
//!   binary.
//! - `otlp`: spans exported over OTLP when the `OTEL_*` variables ask for it
//!   (`telemetry::init`); without it `telemetry::init` refuses those variables.
//! - `apiserver`: the embedded API server, the `apiserver` module (and the binary's
//!   `apiserver` and `demo` commands).
//! - `testing` (implies `apiserver`): `apiserver::TestServer` and the test kit's recording fake
//!   (`controller::testing::FakeApi`, `TestContext::recording`), for an operator's
//!   dev-dependencies.
//! - `hooks`: the `hooks` module, operators in any language (hook `Controller`s, exec,
//!   persistent and webhook hooks, schedules, admission and conversion hooks), with CEL and
//!   cron. Without it the manager runs Rust controllers only, and [`config::load`] refuses a
//!   file holding `Controller` documents, naming the feature.
//! - `webhook-certificates` (implied by `hooks`): webhook serving certificates the manager
//!   makes, rotates and keeps in a Secret, with their CA bundle injected (`serving::managed`,
//!   `serving::CaInjector`); without it a webhook endpoint serves a mounted certificate.
//! - `samples`: the sample controllers of the `samples` module (the `CronJob` story), which the
//!   binary's `demo` runs. The `informant` binary needs it. The rest of [`controller::testing`] (a [`controller::testing::TestContext`]
//!   over given objects, its client of the test's choice) needs no feature.

#[cfg(feature = "apiserver")]
pub mod apiserver;
pub mod cache;
pub mod config;
pub mod controller;
#[cfg(feature = "hooks")]
pub mod hooks;
pub mod kinds;
pub mod manager;
pub mod recorder;
#[cfg(feature = "samples")]
pub mod samples;
pub mod selector;
pub mod serving;
mod suggest;
pub mod telemetry;
pub mod yaml;

/// The Rust code blocks of `docs/manager.md`, compiled as doctests so that a snippet the docs
/// show cannot drift from the API (`cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../docs/manager.md")]
mod manager_md {}

/// The Rust code blocks of `README.md`, compiled as doctests (`cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme_md {}
