//! What every operator writes, through its [`Context`]: a child server-side applied with its
//! controller owner reference, the children no longer wanted deleted, and the status applied;
//! all as the controller's field manager (its name).
//!
//! The core of each write is one function shared with the hook controllers of
//! `crate::hooks` (their children and status): [`set_controller_owner`], [`apply_as`],
//! [`controlled_by`], [`delete_child`] and [`apply_status_as`], so a Rust controller and a hook
//! controller apply, own and prune children the same way.
//!
//! The finalizer guard is `Context::finalizer` (module `finalizer`).

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, Preconditions,
};
use kube::core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::context::Context;
use crate::cache::{Cache as _, ListOptions, typed};

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
    /// The child is controlled by another owner (its controller owner reference points
    /// elsewhere): an object has one controller, and taking it over silently would fight the
    /// other controller (controller-runtime's `AlreadyOwnedError`,
    /// `pkg/controller/controllerutil/controllerutil.go`). Nothing was written.
    #[error("{kind} {name:?} is already controlled by {owner_kind} {owner_name:?}")]
    AlreadyOwned {
        /// The child's kind.
        kind: String,
        /// Its name.
        name: String,
        /// The kind of the owner controlling it.
        owner_kind: String,
        /// That owner's name.
        owner_name: String,
    },
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

/// Sets `owner` as the controller owner reference of the child whose `metadata` this is: any
/// other controller reference, and any reference to the same owner, is replaced (an object
/// has one controller); other owners stay.
pub(crate) fn set_controller_owner(
    metadata: &mut serde_json::Map<String, Value>,
    owner: &OwnerReference,
) {
    let mut owners: Vec<Value> = metadata
        .get("ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter(|r| r["uid"] != owner.uid.as_str() && r["controller"] != true)
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    owners.push(serde_json::to_value(owner).unwrap_or(Value::Null));
    metadata.insert("ownerReferences".to_owned(), Value::Array(owners));
}

/// Server-side applies `body` (a whole object: `apiVersion`, `kind`, `metadata.name`) to the
/// object `name` of `api` as `field_manager`, forced: the controller owns the fields it sends.
///
/// # Errors
/// The API server's refusal.
pub(crate) async fn apply_as(
    api: &Api<DynamicObject>,
    name: &str,
    body: &Value,
    field_manager: &str,
) -> Result<DynamicObject, kube::Error> {
    let params = PatchParams::apply(field_manager).force();
    api.patch(name, &params, &Patch::Apply(body)).await
}

/// Server-side applies `status` to the status subresource of the object `name` (of
/// `api_version` and `kind`) as `field_manager`, forced.
///
/// # Errors
/// The API server's refusal.
pub(crate) async fn apply_status_as(
    api: &Api<DynamicObject>,
    (api_version, kind, name): (&str, &str, &str),
    status: &Value,
    field_manager: &str,
) -> Result<DynamicObject, kube::Error> {
    let body = serde_json::json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name},
        "status": status,
    });
    let params = PatchParams::apply(field_manager).force();
    api.patch_status(name, &params, &Patch::Apply(&body)).await
}

/// Whether the object of `meta` has a controller owner reference to the object `uid`.
pub(crate) fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    !uid.is_empty()
        && meta
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.controller == Some(true) && r.uid == uid)
}

/// The controller owner reference of `meta` to another object than `uid`, if any.
fn other_controller<'a>(meta: Option<&'a ObjectMeta>, uid: &str) -> Option<&'a OwnerReference> {
    meta?
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true) && r.uid != uid)
}

/// Deletes the child `name` of `api` (in the background, so its own children go after it),
/// only if it is still the object `uid` (a child re-created under the same name is not
/// touched). `Ok(true)`: deleted; `Ok(false)`: already gone or replaced, nothing to do.
///
/// # Errors
/// The API server's refusal (other than not found or a changed uid).
pub(crate) async fn delete_child(
    api: &Api<DynamicObject>,
    name: &str,
    uid: Option<&str>,
) -> Result<bool, kube::Error> {
    let mut params = DeleteParams::background();
    params.preconditions = uid.map(|uid| Preconditions {
        uid: Some(uid.to_owned()),
        resource_version: None,
    });
    match api.delete(name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(false),
        Err(source) => Err(source),
    }
}

/// The API of `K` in `namespace` (all namespaces for `None`), typed as dynamic objects so one
/// path serves namespaced and cluster-scoped kinds.
pub(super) fn api_of<K: Resource<DynamicType = ()>, T>(
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
    /// The `C` `namespace/name` the cache holds, when the cache watches `C` (no informer is
    /// started for a read here); `None` otherwise, or when it holds none.
    async fn watched<C: Resource<DynamicType = ()>>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<DynamicObject>> {
        let (api_version, kind) = (C::api_version(&()), C::kind(&()));
        let watching = self
            .cache()
            .informers()
            .iter()
            .any(|i| i.api_version == api_version && i.kind == kind && i.state.is_none());
        if !watching {
            return None;
        }
        let gvk = typed::gvk_of::<C>();
        self.cache().get(&gvk, namespace, name).await.ok()
    }

    /// Server-side applies `child` as the controller (its field manager, forced: the
    /// controller owns the fields it writes), with `owner`'s controller owner reference
    /// (`controller: true`, `blockOwnerDeletion: true`), so that `Controller::owns::<C>()`
    /// reconciles `owner` when the child changes or goes, and deleting `owner` deletes it
    /// (foreground deletion waits for it). Send only the fields the controller means to own;
    /// an unchanged child writes nothing new. Returns the child as the API server stored it.
    ///
    /// A child controlled by another owner is refused, as controller-runtime's
    /// `SetControllerReference` does: the one given, or the one the cache holds when the
    /// cache watches `C` (as `.owns::<C>()` makes it do); a child the cache does not watch is
    /// not read first, and the API server then refuses a second controller reference.
    ///
    /// # Errors
    /// [`WriteError::NoOwnerReference`] for an owner without uid;
    /// [`WriteError::AlreadyOwned`] for a child another owner controls; [`WriteError::Api`]
    /// when the API server refuses (RBAC: `patch` on the child's kind).
    pub async fn apply_owned<O, C>(&self, owner: &O, child: &C) -> Result<C, WriteError>
    where
        O: Resource<DynamicType = ()>,
        C: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    {
        let name = child.meta().name.clone().unwrap_or_default();
        let Some(mut reference) = owner.controller_owner_ref(&()) else {
            return Err(WriteError::NoOwnerReference {
                kind: O::kind(&()).into_owned(),
                name: owner.meta().name.clone().unwrap_or_default(),
            });
        };
        reference.block_owner_deletion = Some(true);
        let namespace = child.meta().namespace.clone();
        let held = self.watched::<C>(namespace.as_deref(), &name).await;
        for meta in [Some(child.meta()), held.as_ref().map(|h| &h.metadata)] {
            if let Some(other) = other_controller(meta, &reference.uid) {
                return Err(WriteError::AlreadyOwned {
                    kind: C::kind(&()).into_owned(),
                    name,
                    owner_kind: other.kind.clone(),
                    owner_name: other.name.clone(),
                });
            }
        }
        let mut body = serde_json::to_value(child).map_err(codec::<C>(&name))?;
        if let Some(map) = body.as_object_mut() {
            map.insert("apiVersion".into(), C::api_version(&()).into_owned().into());
            map.insert("kind".into(), C::kind(&()).into_owned().into());
            let metadata = map
                .entry("metadata")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if let Some(meta) = metadata.as_object_mut() {
                // Server-side apply refuses a body that names these.
                meta.remove("managedFields");
                meta.remove("resourceVersion");
                set_controller_owner(meta, &reference);
            }
        }
        let api = api_of::<C, T>(self, namespace.as_deref());
        let stored = apply_as(&api, &name, &body, self.field_manager())
            .await
            .map_err(refused::<C>(&name))?;
        let stored = serde_json::to_value(stored).map_err(codec::<C>(&name))?;
        serde_json::from_value(stored).map_err(codec::<C>(&name))
    }

    /// Deletes the `C`s in `owner`'s namespace that `owner` controls (their controller owner
    /// reference is `owner`'s uid) and whose names are not in `keep`, read through the cache:
    /// the children a reconcile no longer wants. Returns the names deleted; one already gone
    /// or being deleted counts as deleted. Only the child read is deleted (a uid
    /// precondition): one re-created under its name since stays.
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
            let meta = child.meta();
            let name = meta.name.clone().unwrap_or_default();
            if !controlled_by(meta, &uid) || keep.contains(&name.as_str()) {
                continue;
            }
            // One on its way out already is left to finish.
            if meta.deletion_timestamp.is_none() {
                let api = api_of::<C, T>(self, meta.namespace.as_deref());
                delete_child(&api, &name, meta.uid.as_deref())
                    .await
                    .map_err(refused::<C>(&name))?;
            }
            deleted.push(name);
        }
        Ok(deleted)
    }

    /// Server-side applies `status` to `object`'s status subresource as the controller;
    /// returns the object as stored.
    ///
    /// `status` is the status itself, not wrapped: `ctx.apply_status(&site, &site_status)`
    /// with the kind's status type (`T::Status` of a `#[derive(CustomResource)]`), or
    /// `json!({"ready": true})` for `{"status": {"ready": true}}`; the helper wraps it in
    /// `{"apiVersion", "kind", "metadata": {"name"}, "status": …}`. Send every status field
    /// the controller owns: one it owned and no longer sends is removed.
    ///
    /// `observedGeneration`: when `status` is an object without one (absent or `null`), the
    /// helper sets it to `object`'s `metadata.generation`, the spec this status answers; a
    /// status type without the field should not declare it in its schema to keep it (the
    /// API server prunes unknown fields).
    ///
    /// # Errors
    /// [`WriteError::Codec`] when `status` does not encode; [`WriteError::Api`] when the API
    /// server refuses (RBAC: `patch` on the kind's `status` subresource; a kind without one).
    pub async fn apply_status<K, S>(&self, object: &K, status: S) -> Result<K, WriteError>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
        S: Serialize,
    {
        let name = object.meta().name.clone().unwrap_or_default();
        let mut status = serde_json::to_value(status).map_err(codec::<K>(&name))?;
        if let (Some(map), Some(generation)) = (status.as_object_mut(), object.meta().generation) {
            let observed = map.entry("observedGeneration").or_insert(Value::Null);
            if observed.is_null() {
                *observed = generation.into();
            }
        }
        let api = api_of::<K, T>(self, object.meta().namespace.as_deref());
        let kind = (K::api_version(&()), K::kind(&()));
        let stored = apply_status_as(
            &api,
            (&kind.0, &kind.1, &name),
            &status,
            self.field_manager(),
        )
        .await
        .map_err(refused::<K>(&name))?;
        let stored = serde_json::to_value(stored).map_err(codec::<K>(&name))?;
        serde_json::from_value(stored).map_err(codec::<K>(&name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn owner(uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "db".into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    #[test]
    fn the_controller_owner_replaces_any_other_controller_and_keeps_plain_owners() {
        let mut metadata = json!({"name": "db", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "old", "uid": "u-old", "controller": true},
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u-pod"},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "db", "uid": "u-db"},
        ]});
        let map = metadata.as_object_mut().unwrap();
        set_controller_owner(map, &owner("u-db"));
        let uids: Vec<&str> = metadata["ownerReferences"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["uid"].as_str().unwrap())
            .collect();
        assert_eq!(uids, ["u-pod", "u-db"]);
        assert_eq!(metadata["ownerReferences"][1]["controller"], true);
        assert_eq!(metadata["ownerReferences"][1]["blockOwnerDeletion"], true);

        // No owner references yet: the controller's is the one.
        let mut bare = json!({"name": "db"});
        set_controller_owner(bare.as_object_mut().unwrap(), &owner("u-db"));
        assert_eq!(bare["ownerReferences"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn controlled_by_needs_the_controller_flag_and_a_uid() {
        let meta = ObjectMeta {
            owner_references: Some(vec![
                owner("u-db"),
                OwnerReference {
                    controller: None,
                    ..owner("u-plain")
                },
            ]),
            ..ObjectMeta::default()
        };
        assert!(controlled_by(&meta, "u-db"));
        assert!(
            !controlled_by(&meta, "u-plain"),
            "an owner, not the controller"
        );
        assert!(
            !controlled_by(&meta, ""),
            "an object with no uid controls nothing"
        );
    }
}
