//! The cache tree: selectors, typed options with controller-runtime's defaulting, and the caches
//! that serve reads (controller-runtime's `pkg/cache`, rebuilt on kube-rs).

pub mod error;
pub mod informer;
pub mod matching;
pub mod selector;
pub mod settings;
pub mod transform;

pub use error::{Error, Result};
pub use informer::{Informer, InformerInfo};
pub use settings::InformerSettings;
pub mod api;
pub mod by_kind;
pub mod informer_cache;
pub mod multi_namespace;
pub mod resolver;

pub use api::{Cache, Description, ListOptions};
pub use by_kind::ByKindCache;
pub use informer_cache::{Context, InformerCache};
pub use multi_namespace::MultiNamespaceCache;
