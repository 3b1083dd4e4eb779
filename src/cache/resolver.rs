//! Kind resolution: a GVK to its API resource (plural, scope), by kube discovery or by a
//! built-in table of core kinds (for offline `informant explain` and unit tests).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use futures::future::BoxFuture;
use kube::{
    Client,
    core::{ApiResource, GroupVersion, GroupVersionKind},
    discovery::Scope as DiscoveryScope,
};

use super::error::{Error, Result};
use super::options::{Scope, builtin_scope};

/// A kind's API resource and whether its objects live in namespaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindInfo {
    /// The API resource (group, version, kind, plural) used for requests.
    pub resource: ApiResource,
    /// Whether objects of this kind are namespaced.
    pub namespaced: bool,
}

/// Maps a kind to its API resource (controller-runtime's `RESTMapper`).
#[doc(alias = "RESTMapper")]
pub trait Resolver: Send + Sync {
    /// Resolves `gvk`.
    ///
    /// # Errors
    /// [`Error::UnknownKind`] when the API server does not serve the kind.
    fn resolve<'a>(&'a self, gvk: &'a GroupVersionKind) -> BoxFuture<'a, Result<KindInfo>>;

    /// Forgets what is known of `gvk`: its `CustomResourceDefinition` was deleted, and may
    /// come back with another plural or scope. The next resolve asks again.
    fn forget(&self, gvk: &GroupVersionKind) {
        let _ = gvk;
    }
}

/// Resolves kinds by kube discovery, remembering each answer.
pub struct Discovery {
    client: Client,
    known: Mutex<HashMap<GroupVersionKind, KindInfo>>,
}

impl Discovery {
    /// A resolver asking the API server behind `client`; no request is made until a resolve.
    #[must_use]
    pub fn new(client: Client) -> Self {
        Self {
            client,
            known: Mutex::new(HashMap::new()),
        }
    }
}

impl Discovery {
    /// Why `gvk` could not be resolved: [`Error::UnknownKind`] with the kinds its group version
    /// serves (discovery answered, without that kind) or none (the group version is not
    /// served: 404), else [`Error::Discovery`].
    async fn unknown(&self, gvk: &GroupVersionKind, error: kube::Error) -> Error {
        let gv = GroupVersion::gv(&gvk.group, &gvk.version);
        match error {
            kube::Error::Discovery(_) => {
                let known = match kube::discovery::pinned_group(&self.client, &gv).await {
                    Ok(group) => {
                        let mut kinds: Vec<String> = group
                            .versioned_resources(&gvk.version)
                            .into_iter()
                            .map(|(resource, _)| resource.kind)
                            .collect();
                        kinds.sort();
                        kinds.dedup();
                        kinds
                    }
                    Err(_) => Vec::new(),
                };
                Error::UnknownKind {
                    gvk: gvk.clone(),
                    known,
                }
            }
            kube::Error::Api(status) if status.code == 404 => Error::UnknownKind {
                gvk: gvk.clone(),
                known: Vec::new(),
            },
            other => Error::Discovery {
                gvk: gvk.clone(),
                source: Box::new(other),
            },
        }
    }
}

impl Resolver for Discovery {
    fn forget(&self, gvk: &GroupVersionKind) {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(gvk);
    }

    fn resolve<'a>(&'a self, gvk: &'a GroupVersionKind) -> BoxFuture<'a, Result<KindInfo>> {
        Box::pin(async move {
            if let Some(info) = self
                .known
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(gvk)
            {
                return Ok(info.clone());
            }
            let (resource, caps) = match kube::discovery::pinned_kind(&self.client, gvk).await {
                Ok(found) => found,
                Err(error) => return Err(self.unknown(gvk, error).await),
            };
            let info = KindInfo {
                resource,
                namespaced: caps.scope == DiscoveryScope::Namespaced,
            };
            self.known
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(gvk.clone(), info.clone());
            Ok(info)
        })
    }
}

/// Resolves kinds without an API server: scopes of built-in kinds from
/// [`builtin_scope`], every other kind namespaced, plurals
/// guessed as kube's `ApiResource::from_gvk` does.
#[derive(Clone, Copy, Debug, Default)]
pub struct BuiltinKinds;

impl BuiltinKinds {
    /// Resolves `gvk` from the table.
    #[must_use]
    pub fn resolve_now(gvk: &GroupVersionKind) -> KindInfo {
        let namespaced = builtin_scope(gvk) != Some(Scope::Cluster);
        KindInfo {
            resource: ApiResource::from_gvk(gvk),
            namespaced,
        }
    }
}

impl BuiltinKinds {
    /// Resolves `gvk` from the table as [`Self::resolve_now`] does, but refuses a kind that
    /// its built-in group version does not serve (`v1/Pods`, `v1/Widget`) with the error
    /// discovery gives, [`Error::UnknownKind`] naming the kinds it serves (and the closest).
    /// Kinds of other groups (custom resources) are taken as named.
    ///
    /// ```
    /// use informant::cache::BuiltinKinds;
    /// use kube::core::GroupVersionKind;
    /// let typo = BuiltinKinds::check(&GroupVersionKind::gvk("", "v1", "Pods")).unwrap_err();
    /// assert!(typo.to_string().contains("did you mean \"Pod\"?"));
    /// assert!(BuiltinKinds::check(&GroupVersionKind::gvk("example.com", "v1", "Widget")).is_ok());
    /// ```
    ///
    /// # Errors
    /// [`Error::UnknownKind`] for a kind of a built-in group version that it does not serve.
    pub fn check(gvk: &GroupVersionKind) -> Result<KindInfo> {
        let builtin_group = crate::kinds::is_builtin_group(&gvk.group);
        if builtin_group && crate::kinds::builtin(&gvk.group, &gvk.version, &gvk.kind).is_none() {
            let mut known: Vec<String> = crate::kinds::in_group(&gvk.group)
                .filter(|k| k.version == gvk.version)
                .map(|k| k.kind.to_owned())
                .collect();
            known.sort();
            known.dedup();
            return Err(Error::UnknownKind {
                gvk: gvk.clone(),
                known,
            });
        }
        Ok(Self::resolve_now(gvk))
    }
}

impl Resolver for BuiltinKinds {
    fn resolve<'a>(&'a self, gvk: &'a GroupVersionKind) -> BoxFuture<'a, Result<KindInfo>> {
        Box::pin(async move { Ok(Self::resolve_now(gvk)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offline_check_refuses_unknown_kinds_of_builtin_groups_as_discovery_does() {
        let widget = BuiltinKinds::check(&GroupVersionKind::gvk("", "v1", "Widget")).unwrap_err();
        assert!(
            matches!(&widget, Error::UnknownKind { known, .. } if known.contains(&"Pod".to_owned()))
        );
        let gone =
            BuiltinKinds::check(&GroupVersionKind::gvk("apps", "v2", "Deployment")).unwrap_err();
        assert!(matches!(&gone, Error::UnknownKind { known, .. } if known.is_empty()));
        let node = BuiltinKinds::check(&GroupVersionKind::gvk("", "v1", "Node")).unwrap();
        assert!(!node.namespaced);
    }

    #[test]
    fn builtin_table_knows_cluster_scoped_core_kinds() {
        assert!(!BuiltinKinds::resolve_now(&GroupVersionKind::gvk("", "v1", "Node")).namespaced);
        let pod = BuiltinKinds::resolve_now(&GroupVersionKind::gvk("", "v1", "Pod"));
        assert!(pod.namespaced);
        assert_eq!(pod.resource.plural, "pods");
    }
}
