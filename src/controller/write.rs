//! What every operator writes, through its [`Context`]: a child server-side applied with its
//! controller owner reference, the children no longer wanted deleted, and the status applied;
//! all as the controller's field manager (its name).
//!
//! A finalizer guard is kube-runtime's own `kube::runtime::finalizer` (it adds the finalizer,
//! runs the cleanup on deletion, then removes it); it works unchanged in a reconcile here, with
//! `Api::namespaced(ctx.client().clone(), ns)` as its `Api`.

use std::fmt::Debug;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::context::Context;
use crate::cache::ListOptions;

/// Why a write of [`Context`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The owner has no name or uid (it was not read from the API server): no owner
    /// reference can point at it.
    #[error("{kind} {name:?} has no uid: an owner must be read from the API server")]
    NoOwnerReference {
        /// The owner's kind.
        kind: String,
        /// Its name, if any.
        name: String,
    },
    /// The object does not encode or the answer does not decode.
    #[error("cannot encode or decode {kind} {name:?}")]
    Codec {
        /// The object's kind.
        kind: String,
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The cache could not list the children to prune.
    #[error("cannot list the children to prune")]
    List(#[source] crate::cache::Error),
    /// The API server refused or could not be reached.
    #[error("the API server refused the write of {kind} {name:?}")]
    Api {
        /// The object's kind.
        kind: String,
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// The API of `K` in `namespace` (all namespaces for `None`), typed as dynamic objects so one
/// path serves namespaced and cluster-scoped kinds.
fn api_of<K: Resource<DynamicType = ()>, T>(
    ctx: &Context<T>,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let resource = ApiResource::erase::<K>(&());
    match namespace {
        Some(namespace) => Api::namespaced_with(ctx.client().clone(), namespace, &resource),
        None => Api::all_with(ctx.client().clone(), &resource),
    }
}

fn codec<K: Resource<DynamicType = ()>>(
    name: &str,
) -> impl FnOnce(serde_json::Error) -> WriteError {
    let (kind, name) = (K::kind(&()).into_owned(), name.to_owned());
    move |source| WriteError::Codec { kind, name, source }
}

fn refused<K: Resource<DynamicType = ()>>(name: &str) -> impl FnOnce(kube::Error) -> WriteError {
    let (kind, name) = (K::kind(&()).into_owned(), name.to_owned());
    move |source| WriteError::Api { kind, name, source }
}

impl<T> Context<T> {
    /// Server-side applies `child` as the controller (its field manager, forced: the
    /// controller owns the fields it writes), with `owner`'s controller owner reference
    /// (`controller: true`, `blockOwnerDeletion: true`), so that `Controller::owns::<C>()`
    /// reconciles `owner` when the child changes or goes, and deleting `owner` deletes it.
    /// Send only the fields the controller means to own; an unchanged child writes nothing
    /// new. Returns the child as the API server stored it.
    ///
    /// # Errors
    /// [`WriteError::NoOwnerReference`] for an owner without uid; [`WriteError::Api`] when
    /// the API server refuses (RBAC: `patch` on the child's kind).
    pub async fn apply_owned<O, C>(&self, owner: &O, child: &C) -> Result<C, WriteError>
    where
        O: Resource<DynamicType = ()>,
        C: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    {
        let name = child.meta().name.clone().unwrap_or_default();
        let Some(reference) = owner.controller_owner_ref(&()) else {
            return Err(WriteError::NoOwnerReference {
                kind: O::kind(&()).into_owned(),
                name: owner.meta().name.clone().unwrap_or_default(),
            });
        };
        let mut child = child.clone();
        let references = child
            .meta_mut()
            .owner_references
            .get_or_insert_with(Vec::new);
        references.retain(|r| r.controller != Some(true));
        references.push(reference);
        let mut body = serde_json::to_value(&child).map_err(codec::<C>(&name))?;
        if let Some(map) = body.as_object_mut() {
            map.insert("apiVersion".into(), C::api_version(&()).into_owned().into());
            map.insert("kind".into(), C::kind(&()).into_owned().into());
            if let Some(meta) = map.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                // Server-side apply refuses a body that names these.
                meta.remove("managedFields");
                meta.remove("resourceVersion");
            }
        }
        let namespace = child.meta().namespace.clone();
        let params = PatchParams::apply(self.field_manager()).force();
        let stored = api_of::<C, T>(self, namespace.as_deref())
            .patch(&name, &params, &Patch::Apply(body))
            .await
            .map_err(refused::<C>(&name))?;
        let stored = serde_json::to_value(stored).map_err(codec::<C>(&name))?;
        serde_json::from_value(stored).map_err(codec::<C>(&name))
    }

    /// Deletes the `C`s in `owner`'s namespace that `owner` controls (their controller owner
    /// reference is `owner`'s uid) and whose names are not in `keep`, read through the cache:
    /// the children a reconcile no longer wants. Returns the names deleted; one already gone
    /// counts as deleted.
    ///
    /// # Errors
    /// [`WriteError::List`] when the cache can not list `C`; [`WriteError::Api`] when a
    /// delete is refused (RBAC: `delete` on `C`). Deletes before the failing one stay done.
    pub async fn prune_owned<O, C>(
        &self,
        owner: &O,
        keep: &[&str],
    ) -> Result<Vec<String>, WriteError>
    where
        O: Resource<DynamicType = ()>,
        C: Resource<DynamicType = ()> + DeserializeOwned + Clone + Send + Sync + 'static,
    {
        let Some(uid) = owner.meta().uid.clone() else {
            return Err(WriteError::NoOwnerReference {
                kind: O::kind(&()).into_owned(),
                name: owner.meta().name.clone().unwrap_or_default(),
            });
        };
        let namespace = owner.meta().namespace.clone();
        let options = ListOptions {
            namespace: namespace.clone(),
            ..ListOptions::default()
        };
        let children: Vec<C> = self.list(&options).await.map_err(WriteError::List)?;
        let mut deleted = Vec::new();
        for child in children {
            let controlled = child
                .meta()
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.controller == Some(true) && r.uid == uid);
            let name = child.meta().name.clone().unwrap_or_default();
            if !controlled || keep.contains(&name.as_str()) {
                continue;
            }
            let api = api_of::<C, T>(self, child.meta().namespace.as_deref());
            match api.delete(&name, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                Err(source) => return Err(refused::<C>(&name)(source)),
            }
            deleted.push(name);
        }
        Ok(deleted)
    }

    /// Server-side applies `status` (the `status` object's fields the controller owns) to
    /// `object`'s status subresource as the controller; returns the object as stored.
    ///
    /// # Errors
    /// [`WriteError::Api`] when the API server refuses (RBAC: `patch` on the kind's `status`
    /// subresource; a kind without one).
    pub async fn apply_status<K>(
        &self,
        object: &K,
        status: serde_json::Value,
    ) -> Result<K, WriteError>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let name = object.meta().name.clone().unwrap_or_default();
        let body = serde_json::json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "metadata": {"name": name},
            "status": status,
        });
        let params = PatchParams::apply(self.field_manager()).force();
        let stored = api_of::<K, T>(self, object.meta().namespace.as_deref())
            .patch_status(&name, &params, &Patch::Apply(body))
            .await
            .map_err(refused::<K>(&name))?;
        let stored = serde_json::to_value(stored).map_err(codec::<K>(&name))?;
        serde_json::from_value(stored).map_err(codec::<K>(&name))
    }
}
