//! `ByKindCache`: routes each kind listed in `byObject` to its own cache and every other kind
//! to the default cache (controller-runtime's `delegatingByGVKCache`).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use kube::core::{DynamicObject, GroupVersionKind};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::api::{Cache, ListOptions};
use super::error::Result;
use super::informer::InformerStatus;
use super::sync_periods::SyncPeriods;
use super::typed::{AnyObject, Decoder};

/// A cache per listed kind, and a default cache for the rest. Unlike an unknown namespace, an
/// unlisted kind is no error: it goes to the default cache.
#[doc(alias = "delegatingByGVKCache")]
pub struct ByKindCache {
    caches: BTreeMap<KindKey, (GroupVersionKind, Arc<dyn Cache>)>,
    default: Arc<dyn Cache>,
}

impl std::fmt::Debug for ByKindCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByKindCache")
            .field("kinds", &self.caches.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// `(group, version, kind)`: `GroupVersionKind` is not `Ord`.
type KindKey = (String, String, String);

fn key(gvk: &GroupVersionKind) -> KindKey {
    (gvk.group.clone(), gvk.version.clone(), gvk.kind.clone())
}

impl ByKindCache {
    /// Routes each `(gvk, cache)` pair's kind to its cache, everything else to `default`.
    #[must_use]
    pub fn new(caches: Vec<(GroupVersionKind, Arc<dyn Cache>)>, default: Arc<dyn Cache>) -> Self {
        let caches = caches
            .into_iter()
            .map(|(gvk, cache)| (key(&gvk), (gvk, cache)))
            .collect();
        Self { caches, default }
    }

    fn cache_for(&self, gvk: &GroupVersionKind) -> &Arc<dyn Cache> {
        self.caches
            .get(&key(gvk))
            .map_or(&self.default, |(_, cache)| cache)
    }

    fn all(&self) -> impl Iterator<Item = &Arc<dyn Cache>> {
        self.caches
            .values()
            .map(|(_, cache)| cache)
            .chain(std::iter::once(&self.default))
    }
}

impl Cache for ByKindCache {
    fn get<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Arc<DynamicObject>>> {
        self.cache_for(gvk).get(gvk, namespace, name)
    }

    fn list<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        options: &'a ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Arc<DynamicObject>>>> {
        self.cache_for(gvk).list(gvk, options)
    }

    fn get_as<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: &'a str,
        decoder: &'a dyn Decoder,
    ) -> BoxFuture<'a, Result<AnyObject>> {
        self.cache_for(gvk).get_as(gvk, namespace, name, decoder)
    }

    fn list_as<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        options: &'a ListOptions,
        decoder: &'a dyn Decoder,
    ) -> BoxFuture<'a, Result<Vec<AnyObject>>> {
        self.cache_for(gvk).list_as(gvk, options, decoder)
    }

    fn ensure_informer<'a>(&'a self, gvk: &'a GroupVersionKind) -> BoxFuture<'a, Result<()>> {
        self.cache_for(gvk).ensure_informer(gvk)
    }

    fn start(&self, tracker: &TaskTracker, shutdown: &CancellationToken) {
        for cache in self.all() {
            cache.start(tracker, shutdown);
        }
    }

    fn wait_for_sync<'a>(&'a self, cancel: &'a CancellationToken) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            for cache in self.all() {
                cache.wait_for_sync(cancel).await?;
            }
            Ok(())
        })
    }

    fn informers(&self) -> Vec<InformerStatus> {
        self.all().flat_map(|c| c.informers()).collect()
    }

    fn sync_periods(&self, gvk: &GroupVersionKind) -> SyncPeriods {
        self.cache_for(gvk).sync_periods(gvk)
    }
}
