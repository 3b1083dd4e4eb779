//! The embedded Kubernetes API server: in-memory, on loopback, for the demo, development and
//! tests.
