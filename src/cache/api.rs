//! The `Cache` trait every layer of the tree implements, and its list options.

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::core::{DynamicObject, GroupVersionKind};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::error::{Error, Result};
use super::informer::InformerStatus;
use super::sync_periods::SyncPeriods;
use super::typed::{AnyObject, Decoder};
use crate::selector::{FieldSelector, LabelSelector};

/// Options of a list through the cache (controller-runtime's `client.ListOptions` as far as the
/// cache honours them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// Only this namespace; `None` lists every namespace the cache holds.
    pub namespace: Option<String>,
    /// Only objects whose labels match.
    pub label_selector: Option<LabelSelector>,
    /// Only objects whose fields match; only exact matches (`=`, `==`) are supported.
    pub field_selector: Option<FieldSelector>,
    /// At most this many objects (0 or `None`: no limit).
    pub limit: Option<usize>,
    /// A continue token; always rejected by the cache.
    pub continue_token: Option<String>,
}

/// A read-through cache of Kubernetes objects (controller-runtime's `cache.Cache`), served from
/// informers. Implemented by [`super::InformerCache`], [`super::MultiNamespaceCache`] and
/// [`super::ByKindCache`]; a [`super::Plan`] composes them from the options.
///
/// Reads hand out `Arc`s: a fresh copy per read, decoded from the compact stored form
/// (mutate it with `Arc::make_mut` at no extra cost), or, with `unsafeDisableDeepCopy`, the
/// cached parsed object itself (then `Arc::make_mut` copies on write, so the cache can never
/// be corrupted). `docs/cache-bench.md` has the memory and latency of both.
pub trait Cache: Send + Sync {
    /// Reads one object. `namespace` is ignored for cluster-scoped kinds.
    ///
    /// # Errors
    /// `NotFound`, or why the cache can not answer (see [`super::Error`]).
    fn get<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Arc<DynamicObject>>>;

    /// Lists objects.
    ///
    /// # Errors
    /// Why the cache can not answer (see [`super::Error`]); an empty result is not an error.
    fn list<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        options: &'a ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Arc<DynamicObject>>>>;

    /// Reads one object as `decoder`'s type (what [`super::typed::get`] calls): decoded once
    /// by the informer holding it. Caches that route reads forward this as they forward
    /// [`Cache::get`]; the default converts the result of [`Cache::get`] (correct, but it
    /// decodes twice with deep-copying reads).
    ///
    /// # Errors
    /// As [`Cache::get`], or [`super::Error::Convert`] when the object does not fit the type.
    fn get_as<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: &'a str,
        decoder: &'a dyn Decoder,
    ) -> BoxFuture<'a, Result<AnyObject>> {
        Box::pin(async move {
            let obj = self.get(gvk, namespace, name).await?;
            decoder
                .convert(&obj, None)
                .map_err(|source| Error::Convert {
                    gvk: gvk.clone(),
                    source,
                })
        })
    }

    /// Lists objects as `decoder`'s type (what [`super::typed::list`] calls); the same
    /// selection and order as [`Cache::list`]. Forwarded as [`Cache::get_as`] is.
    ///
    /// # Errors
    /// As [`Cache::list`], or [`super::Error::Convert`] when an object does not fit the type.
    fn list_as<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        options: &'a ListOptions,
        decoder: &'a dyn Decoder,
    ) -> BoxFuture<'a, Result<Vec<AnyObject>>> {
        Box::pin(async move {
            self.list(gvk, options)
                .await?
                .iter()
                .map(|obj| {
                    decoder.convert(obj, None).map_err(|source| Error::Convert {
                        gvk: gvk.clone(),
                        source,
                    })
                })
                .collect()
        })
    }

    /// Makes sure informers for `gvk` exist (controller-runtime's `GetInformer`), and once the
    /// cache is started, waits for them to sync.
    ///
    /// # Errors
    /// The kind is unknown, the informer failed, or waiting timed out.
    #[doc(alias = "GetInformer")]
    fn ensure_informer<'a>(&'a self, gvk: &'a GroupVersionKind) -> BoxFuture<'a, Result<()>>;

    /// Starts every informer created so far, and every later one as it is created, on
    /// `tracker`; they stop when `shutdown` is cancelled.
    fn start(&self, tracker: &TaskTracker, shutdown: &CancellationToken);

    /// Runs the cache until `shutdown`, in the shape of every long-running component
    /// (controller-runtime's blocking `Cache.Start(ctx)`): starts every informer, and every
    /// later one, on a tracker of its own, and returns once `shutdown` is cancelled and every
    /// informer has stopped. [`Cache::start`] instead shares a tracker with other components
    /// (the manager's reload does, to move informers from one tree to the next).
    ///
    /// ```no_run
    /// # async fn demo(tree: std::sync::Arc<dyn informant::cache::Cache>) -> informant::cache::Result<()> {
    /// let shutdown = tokio_util::sync::CancellationToken::new();
    /// let running = tokio::spawn(tree.clone().run(shutdown.clone()));
    /// // ... read through `tree` ...
    /// shutdown.cancel();
    /// running.await.expect("the cache task ends")?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// None today: an informer's errors are in its status and fail
    /// [`Cache::wait_for_sync`]; the `Result` keeps the components' common shape.
    fn run(self: Arc<Self>, shutdown: CancellationToken) -> BoxFuture<'static, Result<()>>
    where
        Self: 'static,
    {
        Box::pin(async move {
            let tracker = TaskTracker::new();
            self.start(&tracker, &shutdown);
            shutdown.cancelled().await;
            tracker.close();
            tracker.wait().await;
            Ok(())
        })
    }

    /// Waits until every informer started so far has synced.
    ///
    /// # Errors
    /// [`super::Error::Timeout`] when `cancel` fires first; [`super::Error::InformerFailed`]
    /// when an informer can not list its kind.
    #[doc(alias = "WaitForCacheSync")]
    fn wait_for_sync<'a>(&'a self, cancel: &'a CancellationToken) -> BoxFuture<'a, Result<()>>;

    /// The informers of this cache (and of the caches below it).
    fn informers(&self) -> Vec<InformerStatus>;

    /// The effective `syncPeriod` of each cache that serves `gvk`, by namespace: how often a
    /// controller of the kind gets each of its objects again. Pure routing: no informer is
    /// started or read.
    fn sync_periods(&self, gvk: &GroupVersionKind) -> SyncPeriods;
}
