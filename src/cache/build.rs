//! `build`: options to a running-ready cache tree in one call, with kinds resolved by
//! discovery; and [`resolve_scopes`], which asks discovery for the scope of custom kinds
//! before a [`Plan`] is made.

use std::sync::Arc;

use kube::Client;

use super::api::Cache;
use super::informer_cache::Context;
use super::options::{Options, OptionsError, Scope, builtin_scope};
use super::plan::Plan;
use super::resolver::{Discovery, Resolver};

/// Plans and instantiates the cache tree for `options`, resolving kinds by discovery through
/// `client`. Nothing is started and no request is made; call [`Cache::start`].
///
/// # Errors
/// [`OptionsError`] when the options can not be defaulted (namespaces set for a
/// cluster-scoped kind).
pub fn build(options: &Options, client: Client) -> Result<Arc<dyn Cache>, OptionsError> {
    let context = Context {
        reader_fail_on_missing_informer: options.reader_fail_on_missing_informer,
        ..Context::new(client.clone(), Arc::new(Discovery::new(client)))
    };
    Ok(Plan::new(options)?.instantiate(&context))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Layer;
    use crate::cache::{ByObject, Config, NamespaceKey};
    use kube::core::GroupVersionKind;

    /// Resolves every kind as cluster-scoped.
    struct ClusterScoped;

    impl Resolver for ClusterScoped {
        fn resolve<'a>(
            &'a self,
            gvk: &'a GroupVersionKind,
        ) -> futures::future::BoxFuture<'a, crate::cache::Result<crate::cache::KindInfo>> {
            Box::pin(async move {
                Ok(crate::cache::KindInfo {
                    resource: kube::core::ApiResource::from_gvk(gvk),
                    namespaced: false,
                })
            })
        }
    }

    #[tokio::test]
    async fn a_cluster_scoped_custom_resource_gets_one_cluster_wide_informer_once_resolved() {
        let mut options = Options::default()
            .with_default_namespace(NamespaceKey::named("a"), Config::default())
            .with_by_object(ByObject::new(GroupVersionKind::gvk(
                "example.com",
                "v1",
                "Widget",
            )))
            .with_by_object(ByObject::new(GroupVersionKind::gvk("", "v1", "Pod")));
        let widget = |plan: &Plan| match plan.root() {
            Layer::ByKind { kinds, .. } => kinds[1].1.clone(),
            other => panic!("not a ByKindCache: {other:?}"),
        };
        let unresolved = Plan::new(&options).unwrap();
        assert!(
            matches!(widget(&unresolved), Layer::MultiNamespace { .. }),
            "assumed namespaced"
        );
        resolve_scopes(&mut options, &ClusterScoped).await;
        assert_eq!(
            options.by_object[1].scope,
            Scope::Namespaced,
            "built-in kinds keep their scope"
        );
        let resolved = Plan::new(&options).unwrap();
        assert!(matches!(widget(&resolved), Layer::Informers(_)));
    }
}
