//! The embedded API server as real clients see it: the HTTP API, watches, selectors, fidelity to
//! kube-apiserver, robustness, and the real kubectl.
//!
//! One test binary for the area (one link of the whole dependency graph, not one per
//! file); each module is one file of tests.

#[path = "../support/mod.rs"]
mod support;

mod apiserver_admission;
mod apiserver_api;
mod apiserver_apply_force;
mod apiserver_conversion;
mod apiserver_fidelity;
mod apiserver_http;
mod apiserver_kubectl;
mod apiserver_rbac;
mod apiserver_robustness;
mod apiserver_robustness_bodies;
mod apiserver_selector_messages;
mod apiserver_selectors;
mod apiserver_sharding;
mod apiserver_token_review;
mod apiserver_unconditional;
mod apiserver_watch;
