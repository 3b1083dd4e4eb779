//! `InformerSettings`: the resolved settings of every informer one `InformerCache` starts
//! (controller-runtime's `cache.Config` after defaulting).

use std::time::Duration;

use super::selector::{FieldSelector, LabelSelector};
use super::transform::Transform;

/// controller-runtime's `defaultSyncPeriod` (`pkg/cache/cache.go`: 10 hours).
pub const DEFAULT_SYNC_PERIOD: Duration = Duration::from_secs(10 * 60 * 60);

/// The settings an `InformerCache` applies to each informer it starts. Every value is already
/// resolved (per-object, then per-namespace, then global precedence happens before this).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InformerSettings {
    /// Only objects matching this label selector are listed and watched.
    pub label_selector: Option<LabelSelector>,
    /// Only objects matching this field selector are listed and watched.
    pub field_selector: Option<FieldSelector>,
    /// Applied to each object before it is stored.
    pub transform: Transform,
    /// Reads hand out the cached `Arc` instead of a copy.
    pub unsafe_disable_deep_copy: bool,
    /// Ask the API server for watch bookmarks (default true, as controller-runtime).
    pub enable_watch_bookmarks: bool,
    /// controller-runtime's resync period. kube-runtime's watcher does not resync (the store
    /// is always current and the cache has no handlers), so this is reported, not acted on.
    pub sync_period: Duration,
    /// Cache only metadata (`PartialObjectMetadata`), via metadata-only list and watch.
    pub metadata_only: bool,
}

impl Default for InformerSettings {
    fn default() -> Self {
        Self {
            label_selector: None,
            field_selector: None,
            transform: Transform::default(),
            unsafe_disable_deep_copy: false,
            // controller-runtime `pkg/cache/cache.go` newCache: EnableWatchBookmarks defaults to true.
            enable_watch_bookmarks: true,
            sync_period: DEFAULT_SYNC_PERIOD,
            metadata_only: false,
        }
    }
}
