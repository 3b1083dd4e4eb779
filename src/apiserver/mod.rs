//! The embedded Kubernetes API server: in-memory, on loopback, for the demo, development and
//! tests.

pub mod registry;
pub mod status;
pub mod store;
pub mod meta;
pub mod query;
pub mod route;
