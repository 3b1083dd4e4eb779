//! `MultiNamespaceCache`: an `InformerCache` per namespace, a cluster cache for cluster-scoped
//! kinds, and the `""` entry as fallback for every other namespace (controller-runtime's
//! `multiNamespaceCache`).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use kube::core::{DynamicObject, GroupVersionKind};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::api::{Cache, Description, ListOptions};
use super::error::{Error, Result};
use super::informer::InformerInfo;
use super::informer_cache::{Context, InformerCache};
use super::matching::excluding_namespaces;
use super::selector::FieldRequirement;
use super::settings::InformerSettings;

/// The key of the fallback entry: every namespace not listed (`metav1.NamespaceAll`).
pub const ALL_NAMESPACES: &str = "";

/// Routes reads by namespace to per-namespace `InformerCache`s.
#[doc(alias = "multiNamespaceCache")]
pub struct MultiNamespaceCache {
    context: Context,
    namespaces: BTreeMap<String, InformerCache>,
    cluster: Option<InformerCache>,
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
    /// The `""` entry watches all namespaces except the listed ones: its field selector gets
    /// `metadata.namespace!=<ns>` for each (controller-runtime `defaultOpts`), so no object is
    /// cached twice.
    #[must_use]
    pub fn new(
        context: Context,
        namespaces: &BTreeMap<String, InformerSettings>,
        cluster: Option<InformerSettings>,
    ) -> Self {
        let listed: Vec<&str> = namespaces
            .keys()
            .map(String::as_str)
            .filter(|ns| *ns != ALL_NAMESPACES)
            .collect();
        let caches = namespaces
            .iter()
            .map(|(ns, settings)| {
                let mut settings = settings.clone();
                let namespace = if ns == ALL_NAMESPACES {
                    // Options::defaulted already adds these; add only what is missing.
                    let present = |ns: &&str| {
                        settings.field_selector.as_ref().is_some_and(|f| {
                            f.requirements()
                                .contains(&FieldRequirement::not_equals("metadata.namespace", *ns))
                        })
                    };
                    let missing: Vec<&str> =
                        listed.iter().copied().filter(|ns| !present(ns)).collect();
                    if !missing.is_empty() {
                        let exclusion = excluding_namespaces(missing);
                        settings.field_selector = Some(match settings.field_selector.take() {
                            Some(own) => own.and(&exclusion),
                            None => exclusion,
                        });
                    }
                    None
                } else {
                    Some(ns.clone())
                };
                (
                    ns.clone(),
                    InformerCache::new(context.clone(), namespace, settings),
                )
            })
            .collect();
        let cluster = cluster.map(|settings| InformerCache::new(context.clone(), None, settings));
        Self {
            context,
            namespaces: caches,
            cluster,
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

    /// The cache for `namespace`, or the `""` fallback.
    fn for_namespace(&self, namespace: &str) -> Option<(&str, &InformerCache)> {
        self.namespaces
            .get_key_value(namespace)
            .or_else(|| self.namespaces.get_key_value(ALL_NAMESPACES))
            .map(|(k, v)| (k.as_str(), v))
    }

    fn all_caches(&self) -> impl Iterator<Item = &InformerCache> {
        self.namespaces.values().chain(self.cluster.iter())
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
            if !self.namespaced(gvk).await? {
                return self.cluster(gvk)?.get(gvk, None, name).await;
            }
            let namespace = namespace.unwrap_or(ALL_NAMESPACES);
            match self.for_namespace(namespace) {
                Some((_, cache)) => cache.get(gvk, Some(namespace), name).await,
                None => Err(Error::UnknownNamespaceGet {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                }),
            }
        })
    }

    fn list<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        options: &'a ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Arc<DynamicObject>>>> {
        Box::pin(async move {
            if options
                .continue_token
                .as_deref()
                .is_some_and(|c| !c.is_empty())
            {
                return Err(Error::ContinueNotSupported);
            }
            if !self.namespaced(gvk).await? {
                return self.cluster(gvk)?.list(gvk, options).await;
            }
            if let Some(namespace) = options.namespace.as_deref().filter(|ns| !ns.is_empty()) {
                return match self.for_namespace(namespace) {
                    Some((_, cache)) => cache.list(gvk, options).await,
                    None => Err(Error::UnknownNamespaceList {
                        namespace: namespace.to_string(),
                    }),
                };
            }
            // Every namespace: merge, and stop once the limit is reached.
            let mut remaining = options.limit.filter(|l| *l > 0);
            let mut all = Vec::new();
            for cache in self.namespaces.values() {
                let per_cache = ListOptions {
                    limit: remaining,
                    ..options.clone()
                };
                let items = cache.list(gvk, &per_cache).await?;
                if let Some(left) = remaining.as_mut() {
                    *left = left.saturating_sub(items.len());
                }
                all.extend(items);
                if remaining == Some(0) {
                    break;
                }
            }
            Ok(all)
        })
    }

    fn ensure_informer<'a>(&'a self, gvk: &'a GroupVersionKind) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            if !self.namespaced(gvk).await? {
                return self.cluster(gvk)?.ensure_informer(gvk).await;
            }
            for cache in self.namespaces.values() {
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

    fn informers(&self) -> Vec<InformerInfo> {
        self.all_caches().flat_map(Cache::informers).collect()
    }

    fn describe(&self, role: &str) -> Description {
        let mut children: Vec<Description> = self
            .namespaces
            .iter()
            .map(|(ns, cache)| {
                if ns == ALL_NAMESPACES {
                    cache.describe("namespace \"\" (every namespace not listed)")
                } else {
                    cache.describe(&format!("namespace {ns}"))
                }
            })
            .collect();
        if let Some(cluster) = &self.cluster {
            children.push(cluster.describe("cluster-scoped kinds"));
        }
        Description::routing("MultiNamespaceCache", role, children)
    }

    fn route<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<String>>> {
        Box::pin(async move {
            if !self.namespaced(gvk).await? {
                let mut path = vec!["MultiNamespaceCache: cluster-scoped kind, served by the cluster cache (namespace ignored)".to_string()];
                path.extend(self.cluster(gvk)?.route(gvk, None, name).await?);
                return Ok(path);
            }
            let namespace = namespace.unwrap_or(ALL_NAMESPACES);
            let Some((key, cache)) = self.for_namespace(namespace) else {
                return Err(match name {
                    Some(name) => Error::UnknownNamespaceGet {
                        namespace: namespace.to_string(),
                        name: name.to_string(),
                    },
                    None => Error::UnknownNamespaceList {
                        namespace: namespace.to_string(),
                    },
                });
            };
            let how = if key == namespace {
                format!("MultiNamespaceCache: namespace {namespace:?} is listed")
            } else {
                format!(
                    "MultiNamespaceCache: namespace {namespace:?} is not listed, served by the \"\" entry"
                )
            };
            let mut path = vec![how];
            path.extend(cache.route(gvk, Some(namespace), name).await?);
            Ok(path)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::informer::Informer;
    use crate::cache::resolver::{BuiltinKinds, Resolver};
    use futures::stream;
    use kube::core::ApiResource;
    use kube::runtime::watcher;

    pub(crate) fn offline_context(fail_on_missing: bool) -> Context {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Context {
            client: kube::Client::try_from(config).unwrap(),
            resolver: Arc::new(BuiltinKinds),
            reader_fail_on_missing_informer: fail_on_missing,
            sync_timeout: None,
        }
    }

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
            ("a".to_string(), InformerSettings::default()),
            ("b".to_string(), InformerSettings::default()),
        ]);
        if fallback {
            namespaces.insert(String::new(), InformerSettings::default());
        }
        let cache = MultiNamespaceCache::new(
            offline_context(false),
            &namespaces,
            Some(InformerSettings::default()),
        );
        cache.start(&TaskTracker::new(), &CancellationToken::new());
        seed(
            &cache.namespaces["a"],
            Some("a"),
            vec![pod("a", "p1"), pod("a", "p2")],
        )
        .await;
        seed(&cache.namespaces["b"], Some("b"), vec![pod("b", "p1")]).await;
        if fallback {
            seed(&cache.namespaces[""], None, vec![pod("c", "p1")]).await;
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
        let field = cache.namespaces[""]
            .settings()
            .field_selector
            .as_ref()
            .unwrap()
            .to_string();
        assert_eq!(field, "metadata.namespace!=a,metadata.namespace!=b");
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
    async fn cluster_scoped_kinds_route_to_the_cluster_cache_whatever_the_namespace() {
        let cache = two_namespaces(false).await;
        let route = cache
            .route(
                &GroupVersionKind::gvk("", "v1", "Node"),
                Some("zzz"),
                Some("n1"),
            )
            .await
            .unwrap();
        assert!(route[0].contains("cluster cache"), "{route:?}");
        let without = MultiNamespaceCache::new(
            offline_context(false),
            &BTreeMap::from([("a".to_string(), InformerSettings::default())]),
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
        let cache = InformerCache::new(offline_context(false), None, InformerSettings::default());
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
        let cache = InformerCache::new(offline_context(true), None, InformerSettings::default());
        cache.start(&TaskTracker::new(), &CancellationToken::new());
        let err = cache.get(&pods(), Some("a"), "x").await.unwrap_err();
        assert_eq!(err.to_string(), "/v1, Kind=Pod is not cached");
        seed(&cache, None, vec![pod("a", "x")]).await;
        assert!(cache.get(&pods(), Some("a"), "x").await.is_ok());
        assert!(cache.informer_of(&pods()).is_some());
    }
}
