//! The `CacheConfig` custom resource: wire types, YAML loading, validation and hot reload.
//!
//! A `CacheConfig` is read from the cluster or from a YAML file (the same document a user
//! would `kubectl apply`), checked against the CRD's own schema (unknown fields and wrong
//! types, all reported at once with a did-you-mean), then validated into typed
//! [`crate::cache::Options`] and [`crate::recorder::Options`].
//!
//! ```
//! let config = informant::config::load_str(
//!     "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\nspec: {}\n",
//! )?;
//! assert!(config.cache.by_object.is_empty());
//! # Ok::<(), informant::config::Error>(())
//! ```

pub mod access;
mod description;
mod duration;
mod error;
mod load;
pub(crate) mod names;
pub mod rbac;
mod restart;
mod shares;
pub mod source;
mod status;
mod structure;
mod summary;
mod types;
mod validate;
pub mod watch;

pub use description::paragraphs;
pub use duration::{DurationError, format_duration, parse_duration};
pub use error::{Error, FieldError, FieldPath, Origin, Result, Segment};
#[cfg(feature = "hooks")]
pub(crate) use load::document_schema;
pub(crate) use load::validate_json;
pub use load::{Validated, crd_yaml, load, load_str, validate};
pub(crate) use names::dns1123_subdomain_problem;
pub use restart::{reloadable, restart_needed};
pub use shares::ShardingDescription;
pub use status::{
    CONDITION_READY, CONDITION_VALID, CacheConfigStatus, ControllerReady, KindMemory,
    MAX_LISTED_NAMESPACES, NamespaceMemory, NamespaceSelectorStatus, ShardObjects, ShardingStatus,
};
#[cfg(feature = "hooks")]
pub(crate) use structure::check as check_schema;
pub use types::{
    ByObjectSpec, CacheConfig, CacheConfigSpec, CorrelatorSpec, NamespaceConfig, RecorderSpec,
    SeriesSpec, SinkSpec, TransformSpec,
};
#[cfg(feature = "hooks")]
pub(crate) use validate::api_version_problem;
