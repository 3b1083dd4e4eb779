//! `build`: composes the cache tree from [`Options`] exactly as controller-runtime's
//! `cache.New` does (`pkg/cache/cache.go`); the only place that maps options into layers.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::Client;

use super::api::Cache;
use super::by_kind::ByKindCache;
use super::informer_cache::{Context, InformerCache};
use super::multi_namespace::MultiNamespaceCache;
use super::options::{
    Config, NamespaceKey, Namespaces, Options, OptionsError, Scope, builtin_scope,
};
use super::resolver::{Discovery, Resolver};
use super::settings::InformerSettings;

/// Why the options can not be turned into a cache tree.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Defaulting the options failed.
    #[error("invalid cache options")]
    Options(#[source] OptionsError),
}

/// Builds the cache tree for `options`, resolving kinds by discovery through `client`. Nothing
/// is started and no request is made; call [`Cache::start`]. `by_object` kinds that are not
/// built in are taken as namespaced; [`resolve_scopes`] corrects them from discovery first.
///
/// # Errors
/// [`BuildError::Options`] when the options can not be defaulted (namespaces set for a
/// cluster-scoped kind).
pub fn build(options: &Options, client: Client) -> Result<Arc<dyn Cache>, BuildError> {
    let context = Context {
        resolver: Arc::new(Discovery::new(client.clone())),
        client,
        reader_fail_on_missing_informer: options.reader_fail_on_missing_informer,
        sync_timeout: None,
    };
    build_with(options, &context)
}

/// Sets the scope of every `by_object` kind that is not built in (custom resources) from
/// `resolver`, so a cluster-scoped custom resource gets one cluster-wide informer instead of
/// per-namespace ones. Kinds the resolver does not know keep their scope.
pub async fn resolve_scopes(options: &mut Options, resolver: &dyn Resolver) {
    for by in &mut options.by_object {
        if builtin_scope(&by.gvk).is_some() {
            continue;
        }
        if let Ok(kind) = resolver.resolve(&by.gvk).await {
            by.scope = if kind.namespaced {
                Scope::Namespaced
            } else {
                Scope::Cluster
            };
        }
    }
}

fn namespace_map(map: &BTreeMap<NamespaceKey, Config>) -> BTreeMap<String, InformerSettings> {
    map.iter()
        .map(|(ns, config)| {
            (
                ns.as_str().to_string(),
                InformerSettings::from_config(config, false),
            )
        })
        .collect()
}

/// [`build`] with a given context (client, resolver, read behaviour); the context's
/// `reader_fail_on_missing_informer` wins over the options'.
///
/// - no `default_namespaces`, no `by_object`: one [`InformerCache`] over all namespaces with
///   the `default_*` settings;
/// - `default_namespaces`: a [`MultiNamespaceCache`] with an `InformerCache` per namespace,
///   the `""` entry as fallback, and a cluster cache with the `default_*` settings;
/// - `by_object`: a [`ByKindCache`] routing each listed kind to a `MultiNamespaceCache`
///   without cluster cache (when it has namespaces) or an `InformerCache` over all
///   namespaces, and every other kind to the default cache above.
///
/// # Errors
/// As [`build`].
pub fn build_with(options: &Options, context: &Context) -> Result<Arc<dyn Cache>, BuildError> {
    let options = options.defaulted().map_err(BuildError::Options)?;
    let defaults = InformerSettings::from_config(&options.default_config(), false);
    let default: Arc<dyn Cache> = if options.default_namespaces.is_empty() {
        Arc::new(InformerCache::new(context.clone(), None, defaults))
    } else {
        Arc::new(MultiNamespaceCache::new(
            context.clone(),
            &namespace_map(&options.default_namespaces),
            Some(defaults),
        ))
    };
    if options.by_object.is_empty() {
        return Ok(default);
    }
    let caches = options
        .by_object
        .iter()
        .map(|by| {
            let cache: Arc<dyn Cache> = match &by.namespaces {
                Namespaces::Only(map) if !map.is_empty() => {
                    let mut namespaces = namespace_map(map);
                    for settings in namespaces.values_mut() {
                        settings.metadata_only = by.metadata_only;
                    }
                    Arc::new(MultiNamespaceCache::new(context.clone(), &namespaces, None))
                }
                _ => Arc::new(InformerCache::new(
                    context.clone(),
                    None,
                    InformerSettings::from_config(&by.config, by.metadata_only),
                )),
            };
            (by.gvk.clone(), cache)
        })
        .collect();
    Ok(Arc::new(ByKindCache::new(caches, default)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::options::ByObject;
    use crate::cache::resolver::BuiltinKinds;
    use crate::cache::selector::LabelSelector;
    use kube::core::GroupVersionKind;

    fn context() -> Context {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Context {
            client: kube::Client::try_from(config).unwrap(),
            resolver: Arc::new(BuiltinKinds),
            reader_fail_on_missing_informer: false,
            sync_timeout: None,
        }
    }

    #[tokio::test]
    async fn empty_options_build_one_informer_cache() {
        let tree = build_with(&Options::default(), &context())
            .unwrap()
            .describe("root");
        assert_eq!(tree.cache, "InformerCache");
        assert_eq!(tree.namespace, None);
    }

    #[tokio::test]
    async fn default_namespaces_build_a_multi_namespace_cache_with_a_cluster_cache() {
        let mut options = Options {
            default_label_selector: Some(LabelSelector::parse("app=shop").unwrap()),
            ..Options::default()
        };
        options
            .default_namespaces
            .insert(NamespaceKey::named("a"), Config::default());
        options
            .default_namespaces
            .insert(NamespaceKey::AllOthers, Config::default());
        let tree = build_with(&options, &context()).unwrap().describe("root");
        assert_eq!(tree.cache, "MultiNamespaceCache");
        let roles: Vec<&str> = tree.children.iter().map(|c| c.role.as_str()).collect();
        assert_eq!(
            roles,
            [
                "namespace \"\" (every namespace not listed)",
                "namespace a",
                "cluster-scoped kinds"
            ]
        );
        assert_eq!(
            tree.children[0].field_selector.as_deref(),
            Some("metadata.namespace!=a")
        );
        assert_eq!(tree.children[2].label_selector.as_deref(), Some("app=shop"));
    }

    #[tokio::test]
    async fn by_object_wraps_the_default_cache_and_routes_unlisted_kinds_to_it() {
        let mut options = Options::default();
        options
            .default_namespaces
            .insert(NamespaceKey::named("a"), Config::default());
        let mut pods = ByObject::new(GroupVersionKind::gvk("", "v1", "Pod"));
        pods.namespaces = Namespaces::All;
        pods.metadata_only = true;
        options.by_object.push(pods);
        options.by_object.push(ByObject::new(GroupVersionKind::gvk(
            "apps",
            "v1",
            "Deployment",
        )));
        let cache = build_with(&options, &context()).unwrap();
        let tree = cache.describe("root");
        assert_eq!(tree.cache, "ByKindCache");
        let kinds: Vec<(&str, &str)> = tree
            .children
            .iter()
            .map(|c| (c.role.as_str(), c.cache))
            .collect();
        assert_eq!(
            kinds,
            [
                ("byObject v1/Pod", "InformerCache"),
                ("byObject apps/v1/Deployment", "MultiNamespaceCache"),
                ("default: every kind not in byObject", "MultiNamespaceCache"),
            ]
        );
        assert!(tree.children[0].metadata_only);
        // The inherited namespaces of a byObject entry get no cluster cache.
        assert_eq!(tree.children[1].children.len(), 1);
        let route = cache
            .route(
                &GroupVersionKind::gvk("", "v1", "Secret"),
                Some("zzz"),
                Some("s"),
            )
            .await
            .unwrap_err();
        assert_eq!(
            route.to_string(),
            "unable to get: zzz/s because of unknown namespace for the cache"
        );
    }

    /// Resolves every kind as cluster-scoped.
    struct ClusterScoped;

    impl Resolver for ClusterScoped {
        fn resolve<'a>(
            &'a self,
            gvk: &'a GroupVersionKind,
        ) -> futures::future::BoxFuture<'a, crate::cache::Result<crate::cache::resolver::KindInfo>>
        {
            Box::pin(async move {
                Ok(crate::cache::resolver::KindInfo {
                    resource: kube::core::ApiResource::from_gvk(gvk),
                    namespaced: false,
                })
            })
        }
    }

    #[tokio::test]
    async fn a_cluster_scoped_custom_resource_gets_one_cluster_wide_informer_once_resolved() {
        let mut options = Options::default();
        options
            .default_namespaces
            .insert(NamespaceKey::named("a"), Config::default());
        options.by_object.push(ByObject::new(GroupVersionKind::gvk(
            "example.com",
            "v1",
            "Widget",
        )));
        options
            .by_object
            .push(ByObject::new(GroupVersionKind::gvk("", "v1", "Pod")));
        let unresolved = build_with(&options, &context()).unwrap().describe("root");
        assert_eq!(
            unresolved.children[1].cache, "MultiNamespaceCache",
            "assumed namespaced"
        );
        resolve_scopes(&mut options, &ClusterScoped).await;
        assert_eq!(
            options.by_object[1].scope,
            Scope::Namespaced,
            "built-in kinds keep their scope"
        );
        let resolved = build_with(&options, &context()).unwrap().describe("root");
        let roles: Vec<(&str, &str)> = resolved
            .children
            .iter()
            .map(|c| (c.role.as_str(), c.cache))
            .collect();
        assert_eq!(
            roles[1],
            ("byObject example.com/v1/Widget", "InformerCache")
        );
    }
}
