//! The cache tree: selectors, typed options with controller-runtime's defaulting, and the caches
//! that serve reads (controller-runtime's `pkg/cache`, rebuilt on kube-rs).

pub mod options;
pub mod selector;

pub use options::Options;
