//! The cache tree: typed options with controller-runtime's defaulting, the pure plan of a tree, and the caches
//! that serve reads (controller-runtime's `pkg/cache`, rebuilt on kube-rs).
//!
//! A [`Plan`] is the tree [`Options`] build, as data, composed as controller-runtime's
//! `cache.New` does: one [`InformerCache`]; a [`MultiNamespaceCache`] when
//! `default_namespaces` is set; wrapped in a [`ByKindCache`] when `by_object` is set.
//! [`Plan::instantiate`] builds those caches, each implementing [`Cache`]; [`build`] does both
//! with discovery.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use informant::cache::{self, Cache, ListOptions};
//! use k8s_openapi::api::core::v1::Pod;
//! use tokio_util::{sync::CancellationToken, task::TaskTracker};
//!
//! let options = informant::config::load("config/samples/multi-namespace.yaml")?.cache;
//! let tree = cache::build(&options, kube::Client::try_default().await?)?;
//! let (tracker, shutdown) = (TaskTracker::new(), CancellationToken::new());
//! tree.start(&tracker, &shutdown);
//! // The first read of a kind starts its informers and waits for them to sync.
//! let pod: Pod = cache::typed::get(tree.as_ref(), Some("team-a"), "web-1").await?;
//! let pods = tree.list(&cache::typed::gvk_of::<Pod>(), &ListOptions::default()).await?;
//! # let _ = (pod, pods);
//! shutdown.cancel();
//! tracker.close();
//! tracker.wait().await;
//! # Ok(())
//! # }
//! ```

mod api;
mod build;
mod by_kind;
mod compact;
mod crds;
mod describe;
mod error;
pub mod estimate;
mod informer;
mod informer_cache;
mod matching;
mod multi_namespace;
mod namespaces;
mod options;
mod plan;
mod pool;
pub mod projection;
mod reload;
mod resolver;
mod scope;
mod settings;
mod shard;
mod sharded_client;
mod shared;
mod store;
mod sync_periods;
mod transform;
pub mod typed;
mod waiting;
mod wanted;

pub use api::{Cache, ListOptions};
pub use build::{build, resolve_scopes};
pub use by_kind::ByKindCache;
pub use compact::{CompactObject, StoreKind, human_bytes};
pub use describe::{Description, InformerScopeDescription};
pub use error::{Error, Result};
pub(crate) use informer::is_permanent;
pub use informer::{Informer, InformerEvent, InformerStatus, Waiting};
pub use informer_cache::{Context, InformerCache};
pub use multi_namespace::MultiNamespaceCache;
pub use namespaces::{list_namespace_labels, namespace_informer_key};
pub use options::{
    ByObject, Config, DEFAULT_SYNC_PERIOD, NamespaceKey, Namespaces, Options, OptionsError, Scope,
    Transform, builtin_scope,
};
pub use plan::{InformerScope, Kinds, Layer, Plan, Selection};
pub use pool::{InformerKey, InformerPool, PoolStats, PooledInformer};
pub use reload::{CacheChange, CacheReloader, DEFAULT_CACHE_SYNC_TIMEOUT};
pub use resolver::{BuiltinKinds, Discovery, KindInfo, Resolver};
pub use scope::ClusterScope;
pub use settings::InformerSettings;
pub use shard::{InformerShard, ShardScope};
pub use sharded_client::{server_shards, sharded_client};
pub use shared::SharedCache;
pub use sync_periods::SyncPeriods;
pub use wanted::WantedKinds;
