//! `MultiNamespaceCache`: an `InformerCache` per namespace, a cluster cache for cluster-scoped
//! kinds, and the `""` entry as fallback for every other namespace (controller-runtime's
//! `multiNamespaceCache`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::future::BoxFuture;
use kube::core::{DynamicObject, GroupVersionKind};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::api::{Cache, ListOptions};
use super::error::{Error, Result};
use super::informer::InformerStatus;
use super::informer_cache::{Context, InformerCache};
use super::options::NamespaceKey;
use super::settings::InformerSettings;
use super::sync_periods::SyncPeriods;
use super::typed::{AnyObject, Decoder};

/// Routes reads by namespace to per-namespace `InformerCache`s.
#[doc(alias = "multiNamespaceCache")]
pub struct MultiNamespaceCache {
    context: Context,
    namespaces: BTreeMap<NamespaceKey, InformerCache>,
    cluster: Option<InformerCache>,
    /// The namespace selector that chose some of `namespaces`, named by unknown-namespace
    /// errors.
    selector: Option<String>,
    /// The namespaces a selector adds, served by one informer over every namespace whose
    /// reads are filtered to them (when it matches nearly every namespace).
    wide: Option<Wide>,
}

/// One cache over every namespace, read only for `namespaces`.
struct Wide {
    cache: InformerCache,
    namespaces: BTreeSet<String>,
}

impl std::fmt::Debug for MultiNamespaceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiNamespaceCache")
            .field("namespaces", &self.namespaces.keys().collect::<Vec<_>>())
            .field("cluster", &self.cluster.is_some())
            .finish_non_exhaustive()
    }
}

impl MultiNamespaceCache {
    /// One `InformerCache` per entry of `namespaces`, and a cluster cache with `cluster`
    /// settings when given (controller-runtime creates it only for `defaultNamespaces`, not for
    /// `byObject[].namespaces`).
    ///
    /// The settings are taken as they are: the [`NamespaceKey::AllOthers`] entry's field
    /// selector must already exclude the listed namespaces, as a [`super::Plan`] makes it.
    #[must_use]
    pub fn new(
        context: Context,
        namespaces: BTreeMap<NamespaceKey, InformerSettings>,
        cluster: Option<InformerSettings>,
    ) -> Self {
        let caches = namespaces
            .into_iter()
            .map(|(key, settings)| {
                let namespace = match &key {
                    NamespaceKey::Named(ns) => Some(ns.clone()),
                    NamespaceKey::AllOthers => None,
                };
                let cache = InformerCache::new(context.clone(), namespace, settings);
                (key, cache)
            })
            .collect();
        let cluster = cluster.map(|settings| InformerCache::new(context.clone(), None, settings));
        Self {
            context,
            namespaces: caches,
            cluster,
            selector: None,
            wide: None,
        }
    }

    /// This cache, serving `namespaces` (those a selector adds) from one informer cache over
    /// every namespace with `settings`, its reads filtered to them.
    #[must_use]
    pub(crate) fn with_wide(
        mut self,
        settings: InformerSettings,
        namespaces: BTreeSet<String>,
    ) -> Self {
        let cache = InformerCache::new(self.context.clone(), None, settings);
        self.wide = Some(Wide { cache, namespaces });
        self
    }

    /// This cache, whose namespaces a namespace selector (`selector`, as text) chose in part:
    /// a read of another namespace fails naming it.
    #[must_use]
    pub(crate) fn with_selector(mut self, selector: String) -> Self {
        self.selector = Some(selector);
        self
    }

    /// Takes over the pool's informers for each namespace's cache (and the cluster cache)
    /// whose kind `wanted` accepts; see [`InformerCache::adopt`].
    pub(crate) fn adopt(&self, wanted: &dyn Fn(&GroupVersionKind) -> bool) {
        for cache in self.all_caches() {
            cache.adopt(wanted);
        }
    }

    async fn namespaced(&self, gvk: &GroupVersionKind) -> Result<bool> {
        Ok(self.context.resolver.resolve(gvk).await?.namespaced)
    }

    fn cluster(&self, gvk: &GroupVersionKind) -> Result<&InformerCache> {
        self.cluster
            .as_ref()
            .ok_or_else(|| Error::ClusterScopedNotCached { gvk: gvk.clone() })
    }

    /// The cache for `namespace`: its own, the cluster-wide one of the namespaces a selector
    /// adds, or the [`NamespaceKey::AllOthers`] fallback.
    fn for_namespace(&self, namespace: &str) -> Option<&InformerCache> {
        self.namespaces
            .get(&NamespaceKey::named(namespace))
            .or_else(|| {
                self.wide
                    .as_ref()
                    .filter(|w| w.namespaces.contains(namespace))
                    .map(|w| &w.cache)
            })
            .or_else(|| self.namespaces.get(&NamespaceKey::AllOthers))
    }

    fn all_caches(&self) -> impl Iterator<Item = &InformerCache> {
        self.namespaces
            .values()
            .chain(self.cluster.iter())
            .chain(self.wide.iter().map(|w| &w.cache))
    }

    /// The cache serving a get, and the namespace to read in (none for cluster-scoped kinds).
    async fn cache_for_get<'n>(
        &self,
        gvk: &GroupVersionKind,
        namespace: Option<&'n str>,
        name: &str,
    ) -> Result<(&InformerCache, Option<&'n str>)> {
        if !self.namespaced(gvk).await? {
            return Ok((self.cluster(gvk)?, None));
        }
        let namespace = namespace.unwrap_or_default();
        match self.for_namespace(namespace) {
            Some(cache) => Ok((cache, Some(namespace))),
            None => Err(Error::UnknownNamespaceGet {
                namespace: namespace.to_string(),
                name: name.to_string(),
                selector: self.selector.clone(),
            }),
        }
    }

    /// Lists with `list` from the caches serving `options`: the cluster cache, the namespace's
    /// cache, or every namespace's cache, merged until the limit is reached.
    async fn list_with<'a, T>(
        &'a self,
        gvk: &'a GroupVersionKind,
        options: &'a ListOptions,
        list: impl Fn(&'a InformerCache, ListOptions) -> BoxFuture<'a, Result<Vec<T>>>,
    ) -> Result<Vec<T>> {
        if options
            .continue_token
            .as_deref()
            .is_some_and(|c| !c.is_empty())
        {
            return Err(Error::ContinueNotSupported);
        }
        if !self.namespaced(gvk).await? {
            return list(self.cluster(gvk)?, options.clone()).await;
        }
        if let Some(namespace) = options.namespace.as_deref().filter(|ns| !ns.is_empty()) {
            return match self.for_namespace(namespace) {
                Some(cache) => list(cache, options.clone()).await,
                None => Err(Error::UnknownNamespaceList {
                    namespace: namespace.to_string(),
                    selector: self.selector.clone(),
                }),
            };
        }
        // Every namespace: merge, and stop once the limit is reached. The cluster-wide cache of
        // a selector is read one added namespace at a time (it holds the others too).
        let mut remaining = options.limit.filter(|l| *l > 0);
        let mut all = Vec::new();
        let mut reads: Vec<(&InformerCache, Option<String>)> = self
            .namespaces
            .values()
            .map(|cache| (cache, options.namespace.clone()))
            .collect();
        if let Some(wide) = &self.wide {
            for ns in &wide.namespaces {
                reads.push((&wide.cache, Some(ns.clone())));
            }
        }
        for (cache, namespace) in reads {
            let per_cache = ListOptions {
                limit: remaining,
                namespace,
                ..options.clone()
            };
            let items = list(cache, per_cache).await?;
            if let Some(left) = remaining.as_mut() {
                *left = left.saturating_sub(items.len());
            }
            all.extend(items);
            if remaining == Some(0) {
                break;
            }
        }
        Ok(all)
    }
}

impl Cache for MultiNamespaceCache {
    fn get<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Arc<DynamicObject>>> {
        Box::pin(async move {
            let (cache, namespace) = self.cache_for_get(gvk, namespace, name).await?;
            cache.get(gvk, namespace, name).await
        })
    }

    fn list<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        options: &'a ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Arc<DynamicObject>>>> {
        Box::pin(self.list_with(gvk, options, move |cache, options| {
            Box::pin(async move { cache.list(gvk, &options).await })
        }))
    }

    fn get_as<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: &'a str,
        decoder: &'a dyn Decoder,
    ) -> BoxFuture<'a, Result<AnyObject>> {
        Box::pin(async move {
            let (cache, namespace) = self.cache_for_get(gvk, namespace, name).await?;
            cache.get_as(gvk, namespace, name, decoder).await
        })
    }

    fn list_as<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        options: &'a ListOptions,
        decoder: &'a dyn Decoder,
    ) -> BoxFuture<'a, Result<Vec<AnyObject>>> {
        Box::pin(self.list_with(gvk, options, move |cache, options| {
            Box::pin(async move { cache.list_as(gvk, &options, decoder).await })
        }))
    }

    fn ensure_informer<'a>(&'a self, gvk: &'a GroupVersionKind) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            if !self.namespaced(gvk).await? {
                return self.cluster(gvk)?.ensure_informer(gvk).await;
            }
            for cache in self
                .namespaces
                .values()
                .chain(self.wide.iter().map(|w| &w.cache))
            {
                cache.ensure_informer(gvk).await?;
            }
            Ok(())
        })
    }

    fn start(&self, tracker: &TaskTracker, shutdown: &CancellationToken) {
        for cache in self.all_caches() {
            cache.start(tracker, shutdown);
        }
    }

    fn wait_for_sync<'a>(&'a self, cancel: &'a CancellationToken) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            for cache in self.all_caches() {
                cache.wait_for_sync(cancel).await?;
            }
            Ok(())
        })
    }

    fn informers(&self) -> Vec<InformerStatus> {
        let mut rows: Vec<InformerStatus> = Vec::new();
        for row in self.all_caches().flat_map(Cache::informers) {
            // The cluster cache and a selector's cluster-wide cache over the same settings
            // share their informers: report each once.
            if !rows.contains(&row) {
                rows.push(row);
            }
        }
        rows
    }

    fn sync_periods(&self, _gvk: &GroupVersionKind) -> SyncPeriods {
        let mut periods = SyncPeriods::default();
        for (key, cache) in &self.namespaces {
            let period = cache.settings().sync_period;
            periods = match key {
                NamespaceKey::Named(namespace) => periods.with_namespace(namespace, period),
                NamespaceKey::AllOthers => periods.with_others(period),
            };
        }
        if let Some(wide) = &self.wide {
            let period = wide.cache.settings().sync_period;
            for namespace in &wide.namespaces {
                periods = periods.with_namespace(namespace, period);
            }
        }
        if let Some(cluster) = &self.cluster {
            periods = periods.with_cluster(cluster.settings().sync_period);
        }
        periods
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::informer::Informer;
    use crate::cache::{BuiltinKinds, Resolver};
    use futures::stream;
    use kube::core::ApiResource;
    use kube::runtime::watcher;

    fn pods() -> GroupVersionKind {
        GroupVersionKind::gvk("", "v1", "Pod")
    }

    fn pod(ns: &str, name: &str) -> DynamicObject {
        DynamicObject::new(name, &ApiResource::from_gvk(&pods())).within(ns)
    }

    /// Puts a synced Pod informer holding `objects` into `cache`.
    async fn seed(cache: &InformerCache, namespace: Option<&str>, objects: Vec<DynamicObject>) {
        let kind = BuiltinKinds.resolve(&pods()).await.unwrap();
        let informer = Arc::new(Informer::new(
            pods(),
            kind.resource,
            true,
            namespace.map(str::to_string),
            cache.settings().clone(),
        ));
        let mut events = vec![Ok(watcher::Event::Init)];
        events.extend(
            objects
                .into_iter()
                .map(|o| Ok(watcher::Event::InitApply(o))),
        );
        events.push(Ok(watcher::Event::InitDone));
        let writer = informer.take_writer().unwrap();
        informer
            .run_events(stream::iter(events), writer, CancellationToken::new())
            .await;
        cache.insert_informer(informer);
    }

    async fn two_namespaces(fallback: bool) -> MultiNamespaceCache {
        let mut namespaces = BTreeMap::from([
            (NamespaceKey::named("a"), InformerSettings::default()),
            (NamespaceKey::named("b"), InformerSettings::default()),
        ]);
        if fallback {
            namespaces.insert(NamespaceKey::AllOthers, InformerSettings::default());
        }
        let cache = MultiNamespaceCache::new(
            Context::offline(false),
            namespaces,
            Some(InformerSettings::default()),
        );
        cache.start(&TaskTracker::new(), &CancellationToken::new());
        seed(
            &cache.namespaces[&NamespaceKey::named("a")],
            Some("a"),
            vec![pod("a", "p1"), pod("a", "p2")],
        )
        .await;
        seed(
            &cache.namespaces[&NamespaceKey::named("b")],
            Some("b"),
            vec![pod("b", "p1")],
        )
        .await;
        if fallback {
            seed(
                &cache.namespaces[&NamespaceKey::AllOthers],
                None,
                vec![pod("c", "p1")],
            )
            .await;
        }
        cache
    }

    #[tokio::test]
    async fn unknown_namespace_is_its_own_error_for_get_and_list() {
        let cache = two_namespaces(false).await;
        let get = cache.get(&pods(), Some("c"), "x").await.unwrap_err();
        assert_eq!(
            get.to_string(),
            "unable to get: c/x because of unknown namespace for the cache"
        );
        let list = cache
            .list(
                &pods(),
                &ListOptions {
                    namespace: Some("c".into()),
                    ..ListOptions::default()
                },
            )
            .await
            .unwrap_err();
        assert_eq!(
            list.to_string(),
            "unable to list: c because of unknown namespace for the cache"
        );
        assert!(!get.is_not_found() && !list.is_not_found());
    }

    #[tokio::test]
    async fn unlisted_namespaces_fall_back_to_the_empty_entry() {
        let cache = two_namespaces(true).await;
        assert_eq!(
            cache
                .get(&pods(), Some("c"), "p1")
                .await
                .unwrap()
                .metadata
                .namespace
                .as_deref(),
            Some("c")
        );
    }

    #[tokio::test]
    async fn list_across_namespaces_merges_and_honours_the_limit() {
        let cache = two_namespaces(false).await;
        let all = cache.list(&pods(), &ListOptions::default()).await.unwrap();
        assert_eq!(all.len(), 3);
        let two = cache
            .list(
                &pods(),
                &ListOptions {
                    limit: Some(2),
                    ..ListOptions::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(two.len(), 2);
        let err = cache
            .list(
                &pods(),
                &ListOptions {
                    continue_token: Some("x".into()),
                    ..ListOptions::default()
                },
            )
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "continue list option is not supported by the cache"
        );
    }

    #[tokio::test]
    async fn typed_reads_route_as_dynamic_reads() {
        use crate::cache::typed;
        use k8s_openapi::api::core::v1::Pod;
        let cache = two_namespaces(true).await;
        let limited = ListOptions {
            limit: Some(2),
            ..ListOptions::default()
        };
        for options in [ListOptions::default(), limited] {
            let dynamic: Vec<Pod> = cache
                .list(&pods(), &options)
                .await
                .unwrap()
                .into_iter()
                .map(|o| typed::from_cached(&pods(), o).unwrap())
                .collect();
            let listed: Vec<Pod> = typed::list(&cache, &options).await.unwrap();
            assert_eq!(listed, dynamic);
        }
        let fallback: Pod = typed::get(&cache, Some("c"), "p1").await.unwrap();
        assert_eq!(fallback.metadata.namespace.as_deref(), Some("c"));
        let strict = two_namespaces(false).await;
        let err = typed::get::<Pod>(&strict, Some("c"), "p1")
            .await
            .unwrap_err();
        assert!(matches!(err, Error::UnknownNamespaceGet { .. }), "{err}");
    }

    #[tokio::test]
    async fn cluster_scoped_kinds_without_a_cluster_cache_are_their_own_error() {
        let without = MultiNamespaceCache::new(
            Context::offline(false),
            BTreeMap::from([(NamespaceKey::named("a"), InformerSettings::default())]),
            None,
        );
        let err = without
            .get(&GroupVersionKind::gvk("", "v1", "Node"), None, "n1")
            .await
            .unwrap_err();
        assert!(matches!(err, Error::ClusterScopedNotCached { .. }));
    }

    #[tokio::test]
    async fn reads_before_start_fail_with_not_started_but_register_the_informer() {
        let cache = InformerCache::new(Context::offline(false), None, InformerSettings::default());
        let err = cache.get(&pods(), Some("a"), "x").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "the cache is not started, can not read objects"
        );
        let informers = cache.informers();
        assert_eq!(informers.len(), 1, "the read queued an informer for start");
        assert!(!informers[0].synced);
    }

    #[tokio::test]
    async fn fail_on_missing_informer_reports_the_kind_until_ensured() {
        let cache = InformerCache::new(Context::offline(true), None, InformerSettings::default());
        cache.start(&TaskTracker::new(), &CancellationToken::new());
        let err = cache.get(&pods(), Some("a"), "x").await.unwrap_err();
        assert_eq!(err.to_string(), "/v1, Kind=Pod is not cached");
        seed(&cache, None, vec![pod("a", "x")]).await;
        assert!(cache.get(&pods(), Some("a"), "x").await.is_ok());
        assert!(cache.informer_of(&pods()).is_some());
    }
}
