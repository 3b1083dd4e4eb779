//! The embedded Kubernetes API server: in-memory, on loopback, for the demo, development and
//! tests.
//!
//! It speaks the real API well enough for kubectl and kube-rs's watcher: discovery, CRUD with
//! `Status` errors, list/watch with resourceVersion, selectors, pagination, bookmarks and 410
//! Gone, patches (JSON, merge, strategic, server-side apply), finalizers, CRDs and namespaces.
//! Start one in a test with [`TestServer::start`]; from the shell with `informant apiserver`.
//!
//! Layout: [`registry`] (what is served), [`store`] (objects, history, change broadcast),
//! `handlers` (one file per verb family), [`discovery`] and [`openapi`], [`faults`] (fault
//! injection and counters), [`server`] (state, router, run loop).

pub mod cli;
pub mod crd;
mod debug;
pub mod discovery;
pub mod faults;
pub mod filter;
pub(crate) mod handlers;
pub mod meta;
pub mod openapi;
pub mod protobuf;
pub mod query;
pub mod registry;
pub mod route;
pub mod seed;
pub mod server;
pub mod status;
pub mod store;
pub mod table;
mod test_server;

pub use faults::Verb;
pub use server::{Config, Error, Handle, Server};
pub use status::ApiError;
pub use test_server::{TestServer, TestServerError, kubeconfig};
