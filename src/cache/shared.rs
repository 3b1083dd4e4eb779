//! `SharedCache`: the cache tree readers use while the manager swaps trees underneath. Each
//! read takes the current tree once and finishes on it, so a reload never hands a reader a
//! half-built tree and never pulls one out from under a read in flight.

use std::sync::{Arc, PoisonError, RwLock};

use futures::future::BoxFuture;
use kube::core::{DynamicObject, GroupVersionKind};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::api::{Cache, ListOptions};
use super::error::Result;
use super::informer::InformerStatus;
use super::sync_periods::SyncPeriods;
use super::wanted::{WantedKinds, Wants};

/// A swappable pointer to the current cache tree, itself a [`Cache`] that delegates every call
/// to the tree current when the call starts.
#[doc(alias = "delegating cache")]
pub struct SharedCache {
    current: RwLock<Arc<dyn Cache>>,
    /// Whether a tree was published since [`SharedCache::not_started`].
    serving: tokio::sync::watch::Sender<bool>,
    /// Bumped at each published tree and each lookup of wanted kinds.
    changes: tokio::sync::watch::Sender<u64>,
    /// The kinds controllers want ([`SharedCache::want`]).
    wants: Wants,
}

impl std::fmt::Debug for SharedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCache").finish_non_exhaustive()
    }
}

impl SharedCache {
    /// Serves `tree` until [`SharedCache::replace`].
    #[must_use]
    pub fn new(tree: Arc<dyn Cache>) -> Self {
        Self {
            current: RwLock::new(tree),
            serving: tokio::sync::watch::Sender::new(true),
            changes: tokio::sync::watch::Sender::new(0),
            wants: Wants::default(),
        }
    }

    /// Holds `tree` (one that is not started: its reads fail with `NotStarted`) until the
    /// first [`SharedCache::replace`]; [`SharedCache::wait_for_cache_sync`] waits for it.
    #[must_use]
    pub(crate) fn not_started(tree: Arc<dyn Cache>) -> Self {
        Self {
            current: RwLock::new(tree),
            serving: tokio::sync::watch::Sender::new(false),
            changes: tokio::sync::watch::Sender::new(0),
            wants: Wants::default(),
        }
    }

    /// Waits until a tree serves (the manager published its first config's tree, whose eager
    /// informers synced first) and the informers it started synced: controller-runtime's
    /// `WaitForCacheSync`.
    ///
    /// # Errors
    /// [`super::Error::NotStarted`] when `cancel` fires first; the tree's own sync error
    /// otherwise (an informer that failed).
    #[doc(alias = "WaitForCacheSync")]
    pub async fn wait_for_cache_sync(&self, cancel: &CancellationToken) -> Result<()> {
        let mut serving = self.serving.subscribe();
        tokio::select! {
            () = cancel.cancelled() => return Err(super::Error::NotStarted),
            published = serving.wait_for(|serving| *serving) => {
                if published.is_err() {
                    return Err(super::Error::NotStarted);
                }
            }
        }
        self.wait_for_sync(cancel).await
    }

    /// The tree reads start on now.
    #[must_use]
    pub fn load(&self) -> Arc<dyn Cache> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Publishes `tree`: every read that starts after this returns reads it. Returns the
    /// previous tree (reads in flight may still hold it).
    pub fn replace(&self, tree: Arc<dyn Cache>) -> Arc<dyn Cache> {
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        let previous = std::mem::replace(&mut *current, tree);
        drop(current);
        self.serving.send_replace(true);
        self.changed();
        previous
    }

    /// Wants `kinds` from this cache until the returned [`WantedKinds`] is dropped: the
    /// reloader behind it follows each custom one (so it waits in the tree while it is not
    /// served, and starts when it is), and the [`WantedKinds`] says whether they are served
    /// and when that changes. With no reloader behind the cache every kind counts as served.
    #[must_use]
    pub fn want(self: &Arc<Self>, kinds: &[GroupVersionKind]) -> WantedKinds {
        WantedKinds::new(self, kinds)
    }

    /// A receiver that changes at each published tree and each lookup of wanted kinds.
    #[must_use]
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub(crate) fn wants(&self) -> &Wants {
        &self.wants
    }

    /// Tells every [`SharedCache::changes`] receiver that something changed.
    pub(crate) fn changed(&self) {
        self.changes.send_modify(|v| *v = v.wrapping_add(1));
    }
}

impl Cache for SharedCache {
    fn get<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Arc<DynamicObject>>> {
        let tree = self.load();
        Box::pin(async move { tree.get(gvk, namespace, name).await })
    }

    fn list<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        options: &'a ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Arc<DynamicObject>>>> {
        let tree = self.load();
        Box::pin(async move { tree.list(gvk, options).await })
    }

    fn get_as<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: &'a str,
        decoder: &'a dyn super::typed::Decoder,
    ) -> BoxFuture<'a, Result<super::typed::AnyObject>> {
        let tree = self.load();
        Box::pin(async move { tree.get_as(gvk, namespace, name, decoder).await })
    }

    fn list_as<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        options: &'a ListOptions,
        decoder: &'a dyn super::typed::Decoder,
    ) -> BoxFuture<'a, Result<Vec<super::typed::AnyObject>>> {
        let tree = self.load();
        Box::pin(async move { tree.list_as(gvk, options, decoder).await })
    }

    fn ensure_informer<'a>(&'a self, gvk: &'a GroupVersionKind) -> BoxFuture<'a, Result<()>> {
        let tree = self.load();
        Box::pin(async move { tree.ensure_informer(gvk).await })
    }

    fn start(&self, tracker: &TaskTracker, shutdown: &CancellationToken) {
        self.load().start(tracker, shutdown);
    }

    fn wait_for_sync<'a>(&'a self, cancel: &'a CancellationToken) -> BoxFuture<'a, Result<()>> {
        let tree = self.load();
        Box::pin(async move { tree.wait_for_sync(cancel).await })
    }

    fn informers(&self) -> Vec<InformerStatus> {
        self.load().informers()
    }

    fn sync_periods(&self, gvk: &GroupVersionKind) -> SyncPeriods {
        self.load().sync_periods(gvk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{Context, Informer, InformerCache, InformerSettings};
    use futures::stream;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::ApiResource;
    use kube::runtime::watcher;

    async fn tree_with(name: &str) -> Arc<dyn Cache> {
        let context = Context::offline(false);
        let cache = InformerCache::new(context, None, InformerSettings::default());
        let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
        let informer = Arc::new(Informer::new(
            gvk,
            ApiResource::erase::<ConfigMap>(&()),
            true,
            None,
            InformerSettings::default(),
        ));
        let mut obj = DynamicObject::new(name, &ApiResource::erase::<ConfigMap>(&())).within("a");
        obj.types = None;
        let writer = informer.take_writer().unwrap();
        informer
            .run_events(
                stream::iter(vec![
                    Ok(watcher::Event::Init),
                    Ok(watcher::Event::InitApply(obj)),
                    Ok(watcher::Event::InitDone),
                ]),
                writer,
                CancellationToken::new(),
            )
            .await;
        cache.insert_informer(informer);
        cache.start(&TaskTracker::new(), &CancellationToken::new());
        Arc::new(cache)
    }

    #[tokio::test]
    async fn reads_after_a_replace_see_the_new_tree_and_a_read_in_flight_keeps_the_old() {
        let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
        let shared = SharedCache::new(tree_with("old").await);
        let in_flight = shared.get(&gvk, Some("a"), "old");
        let previous = shared.replace(tree_with("new").await);
        assert!(in_flight.await.is_ok(), "the read started on the old tree");
        assert!(shared.get(&gvk, Some("a"), "new").await.is_ok());
        assert!(
            shared
                .get(&gvk, Some("a"), "old")
                .await
                .unwrap_err()
                .is_not_found()
        );
        assert!(previous.get(&gvk, Some("a"), "old").await.is_ok());
    }

    #[tokio::test]
    async fn wait_for_cache_sync_waits_for_the_first_published_tree_and_ends_on_cancel() {
        let shared = Arc::new(SharedCache::not_started(tree_with("before").await));
        let cancel = CancellationToken::new();
        let waiting = tokio::spawn({
            let (shared, cancel) = (Arc::clone(&shared), cancel.clone());
            async move { shared.wait_for_cache_sync(&cancel).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "nothing was published yet");
        shared.replace(tree_with("first").await);
        let waited = tokio::time::timeout(std::time::Duration::from_secs(10), waiting).await;
        assert!(matches!(waited, Ok(Ok(Ok(())))), "{waited:?}");

        let never = SharedCache::not_started(tree_with("never").await);
        cancel.cancel();
        assert!(matches!(
            never.wait_for_cache_sync(&cancel).await,
            Err(crate::cache::Error::NotStarted)
        ));
    }
}
