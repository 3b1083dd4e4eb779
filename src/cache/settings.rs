//! `InformerSettings`: the resolved settings of every informer one `InformerCache` starts
//! (controller-runtime's `cache.Config` after defaulting).

use std::time::Duration;

use super::options::{DEFAULT_ENABLE_WATCH_BOOKMARKS, DEFAULT_SYNC_PERIOD, Transform};
use super::shard::InformerShard;
use crate::selector::{FieldSelector, LabelSelector};

/// The settings an `InformerCache` applies to each informer it starts. Every value is already
/// resolved (per-object, then per-namespace, then global precedence happens before this).
/// Equal settings mean equal informers: the identity a reload compares.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InformerSettings {
    /// Only objects matching this label selector are listed and watched.
    pub label_selector: Option<LabelSelector>,
    /// Only objects matching this field selector are listed and watched.
    pub field_selector: Option<FieldSelector>,
    /// Applied to each object before it is stored.
    pub transform: Transform,
    /// Reads hand out the cached `Arc` instead of a copy. This also changes how objects are
    /// stored: parsed (several times their JSON size) instead of compact (about their JSON
    /// size, decoded on each read); see [`super::CompactObject`].
    pub unsafe_disable_deep_copy: bool,
    /// Ask the API server for watch bookmarks (default true, as controller-runtime).
    pub enable_watch_bookmarks: bool,
    /// controller-runtime's resync period: how often every controller of a kind reconciles
    /// each object this cache serves again ([`super::Cache::sync_periods`]). The informer
    /// itself never resyncs (kube-runtime's watcher does not, and its store is always
    /// current); each controller resyncs from its own store, so informers that differ only in
    /// this period hold the same objects and the pool keeps one.
    pub sync_period: Duration,
    /// Cache only metadata (`PartialObjectMetadata`), via metadata-only list and watch.
    pub metadata_only: bool,
    /// With `spec.sharding` by uid: the member's share of each namespaced kind (ignored for
    /// cluster-scoped kinds, which every member caches whole).
    pub shard: Option<InformerShard>,
}

impl Default for InformerSettings {
    fn default() -> Self {
        Self {
            label_selector: None,
            field_selector: None,
            transform: Transform::default(),
            unsafe_disable_deep_copy: false,
            enable_watch_bookmarks: DEFAULT_ENABLE_WATCH_BOOKMARKS,
            sync_period: DEFAULT_SYNC_PERIOD,
            metadata_only: false,
            shard: None,
        }
    }
}

impl InformerSettings {
    /// The settings of a defaulted [`Config`](super::options::Config), built-in defaults for
    /// anything still unset. An everything selector is no selector.
    #[must_use]
    pub(crate) fn from_config(config: &super::options::Config, metadata_only: bool) -> Self {
        Self {
            label_selector: config.label_selector.clone().filter(|s| !s.is_empty()),
            field_selector: config.field_selector.clone().filter(|s| !s.is_empty()),
            transform: config.transform.clone().unwrap_or_default(),
            unsafe_disable_deep_copy: config.effective_unsafe_disable_deep_copy(),
            enable_watch_bookmarks: config.effective_enable_watch_bookmarks(),
            sync_period: config.effective_sync_period(),
            metadata_only,
            shard: None,
        }
    }
}
