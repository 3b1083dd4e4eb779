//! The webhook HTTPS endpoint and its certificates (managed in a Secret, or mounted), on the
//! embedded API server.
//!
//! One test binary for the area; each module is one file of tests.

#[path = "../support/mod.rs"]
mod support;

mod harness;
mod webhook_certs;
mod webhook_endpoint;
mod webhook_limits;
