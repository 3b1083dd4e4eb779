//! Letting go of a hook controller's finalizer. A `Controller` with `finalize: true` holds
//! every object of its `for` kind with `hooks.informant.dev/<namespace>.<name>`; once it stops
//! holding them (deleted, dropped from the file, edited to `finalize: false` or to another
//! `for` kind), no one would remove that finalizer any more and each such object, once
//! deleted, would hang in Terminating (metacontroller's known trap). The [`Supervisor`]
//! removes it with [`release`] after stopping the old controller, and holds each `Controller`
//! resource with [`CONTROLLER_FINALIZER`] until that is done, so that a `Controller` deleted
//! while no manager leads is still seen going.
//!
//! [`Supervisor`]: super::Supervisor

use std::time::Instant;

use futures::future::BoxFuture;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use tokio_util::sync::CancellationToken;

use super::reconcile::{finalizers_patch, finalizers_without, has_finalizer, patch_finalizers};
use super::resource::Controller;
use crate::cache::{self, Cache as _, Discovery, ListOptions, Resolver as _};
use crate::controller::Context;

/// The finalizer the manager holds each `Controller` resource with while the controller holds
/// its objects with its own finalizer (`spec.finalize: true`): removed once every object is
/// released, so the `Controller` goes only after its objects are free.
pub const CONTROLLER_FINALIZER: &str = "informant.dev/release-hook-finalizers";

/// How many times the removal of a finalizer from one object is tried while the object keeps
/// changing under it (409 Conflict), each time re-read; then it is left with a warning.
/// client-go `util/retry/util.go` `DefaultRetry` (Steps: 5).
const TRIES: usize = 5;

/// A finalizer a stopped controller held on the objects of a kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Held {
    /// The controller (`namespace/name`), for the logs.
    pub(super) controller: String,
    /// Its `for` kind.
    pub(super) for_kind: GroupVersionKind,
    /// Its finalizer.
    pub(super) finalizer: String,
}

/// What a [`release`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Released {
    /// Objects the finalizer was removed from.
    pub(super) released: usize,
    /// Objects (or a listing) it could not be removed from; a later pass tries again.
    pub(super) failed: usize,
}

/// What [`remove_finalizer`] did to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Removal {
    /// The finalizer was removed.
    Removed,
    /// The object does not carry it (any more), or is gone.
    NotHeld,
    /// The object changed under every one of the [`TRIES`].
    Conflicts,
}

/// Removes `held.finalizer` from every object of `held.for_kind` in the cache's scope (the
/// objects the controller saw) that carries it, and nothing else of theirs. `None` when
/// `shutdown` came first: a manager that stops must not strip finalizers, its `Controller`
/// still exists.
pub(super) async fn release(
    ctx: &Context,
    held: &Held,
    shutdown: &CancellationToken,
) -> Option<Released> {
    if shutdown.is_cancelled() {
        return None;
    }
    let started = Instant::now();
    let released = tokio::select! {
        () = shutdown.cancelled() => return None,
        released = release_all(ctx, held) => released,
    };
    if released.failed == 0 {
        tracing::info!(controller = %held.controller, finalizer = %held.finalizer,
            released = released.released, elapsed = ?started.elapsed(),
            "released the finalizer of a stopped hook controller");
    } else {
        tracing::warn!(controller = %held.controller, finalizer = %held.finalizer,
            released = released.released, failed = released.failed,
            "could not release the finalizer of a stopped hook controller from every object; trying again later");
    }
    Some(released)
}

async fn release_all(ctx: &Context, held: &Held) -> Released {
    let failed = Released {
        released: 0,
        failed: 1,
    };
    let info = match Discovery::new(ctx.client().clone())
        .resolve(&held.for_kind)
        .await
    {
        Ok(info) => info,
        // The kind is not served any more: none of its objects is left to hold.
        Err(cache::Error::UnknownKind { .. }) => return Released::default(),
        Err(e) => {
            tracing::warn!(controller = %held.controller, error = %crate::telemetry::error_chain(&e), "cannot resolve the kind to release");
            return failed;
        }
    };
    let objects = match ensure_and_list(ctx, &held.for_kind).await {
        Ok(objects) => objects,
        Err(e) => {
            tracing::warn!(controller = %held.controller, error = %crate::telemetry::error_chain(&e), "cannot list the objects to release");
            return failed;
        }
    };
    let mut result = Released::default();
    for object in objects.iter().filter(|o| has_finalizer(o, &held.finalizer)) {
        let api = match object.metadata.namespace.as_deref() {
            Some(ns) if info.namespaced => {
                Api::namespaced_with(ctx.client().clone(), ns, &info.resource)
            }
            _ => Api::all_with(ctx.client().clone(), &info.resource),
        };
        match remove_finalizer(
            &api,
            object,
            &held.finalizer,
            Reread::Cache(ctx, &held.for_kind),
        )
        .await
        {
            Ok(Removal::Removed) => result.released += 1,
            Ok(Removal::NotHeld) => {}
            Ok(Removal::Conflicts) => {
                tracing::warn!(controller = %held.controller,
                    object.ref = %describe(object), tries = TRIES,
                    "the object kept changing; its finalizer is not released yet");
                result.failed += 1;
            }
            Err(e) => {
                tracing::warn!(controller = %held.controller, object.ref = %describe(object),
                    error = %crate::telemetry::error_chain(&e), "cannot release the object's finalizer");
                result.failed += 1;
            }
        }
    }
    result
}

async fn ensure_and_list(
    ctx: &Context,
    gvk: &GroupVersionKind,
) -> cache::Result<Vec<std::sync::Arc<DynamicObject>>> {
    ctx.cache().ensure_informer(gvk).await?;
    ctx.cache().list(gvk, &ListOptions::default()).await
}

fn describe(object: &DynamicObject) -> String {
    let name = object.metadata.name.as_deref().unwrap_or_default();
    match object.metadata.namespace.as_deref() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

/// Removes `finalizer` from `object`, and only it, with a merge patch carrying the version
/// read ([`finalizers_patch`]): on a conflict the object is read again and the removal
/// retried, at most [`TRIES`] times; a 404 means there is nothing left to release.
pub(super) async fn remove_finalizer(
    api: &Api<DynamicObject>,
    object: &DynamicObject,
    finalizer: &str,
    reread: Reread<'_>,
) -> Result<Removal, kube::Error> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let name = name.as_str();
    remove_with(api, object, finalizer, move |current| {
        Box::pin(async move { reread.fresh(api, &current, name).await })
    })
    .await
}

/// What [`remove_with`] reads an object again with.
type Fresh<'a> = BoxFuture<'a, Result<Option<DynamicObject>, kube::Error>>;

/// [`remove_finalizer`], reading the object again with `reread` after each conflict.
async fn remove_with<'a>(
    api: &Api<DynamicObject>,
    object: &DynamicObject,
    finalizer: &str,
    reread: impl Fn(DynamicObject) -> Fresh<'a>,
) -> Result<Removal, kube::Error> {
    let mut current = object.clone();
    for _ in 0..TRIES {
        if !has_finalizer(&current, finalizer) {
            return Ok(Removal::NotHeld);
        }
        let body = finalizers_patch(&current, &finalizers_without(&current, finalizer));
        match patch_finalizers(api, &current, &body).await {
            Ok(()) => return Ok(Removal::Removed),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Removal::NotHeld),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                match reread(current.clone()).await? {
                    Some(fresh) => current = fresh,
                    None => return Ok(Removal::NotHeld),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Removal::Conflicts)
}

/// Where [`remove_finalizer`] reads an object again after a conflict.
#[derive(Clone, Copy)]
pub(super) enum Reread<'a> {
    /// From the API server (a `Controller` resource: the manager may `get` those).
    Server,
    /// From the cache the controller read it from: its `for` kind, whose RBAC is the user's
    /// (`rbac.extraRules`) and need not include `get`. A cache still behind gives the same
    /// version again, the patch conflicts again, and after [`TRIES`] the object is left to
    /// the next pass.
    Cache(&'a Context, &'a GroupVersionKind),
}

impl Reread<'_> {
    async fn fresh(
        self,
        api: &Api<DynamicObject>,
        current: &DynamicObject,
        name: &str,
    ) -> Result<Option<DynamicObject>, kube::Error> {
        match self {
            Self::Server => api.get_opt(name).await,
            Self::Cache(ctx, gvk) => {
                let namespace = current.metadata.namespace.as_deref();
                match ctx.cache().get(gvk, namespace, name).await {
                    Ok(object) => Ok(Some((*object).clone())),
                    Err(cache::Error::NotFound { .. }) => Ok(None),
                    // The cache cannot answer now (stopping, rescoped): keep the version in
                    // hand; the next try conflicts and the object is left to the next pass.
                    Err(_) => Ok(Some(current.clone())),
                }
            }
        }
    }
}

/// The `Controller` resources of `namespace`, as dynamic objects.
fn controllers(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::erase::<Controller>(&()),
    )
}

/// The `Controller` `resource`'s metadata as a dynamic object, for the finalizer patches.
fn controller_object(resource: &Controller) -> DynamicObject {
    let mut object = DynamicObject::new(
        resource.metadata.name.as_deref().unwrap_or_default(),
        &ApiResource::erase::<Controller>(&()),
    );
    object.metadata = resource.metadata.clone();
    object
}

/// Adds [`CONTROLLER_FINALIZER`] to the `Controller` `resource`, read first from the API
/// server when `resource` carries no `resourceVersion` (one built rather than watched), so the
/// patch always names the version it extends and no one else's finalizer is lost. A conflict
/// or a 404 is left to the next pass, which sees the newer version.
pub(super) async fn hold_controller(client: &kube::Client, resource: &Controller) {
    let mut object = controller_object(resource);
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let api = controllers(client, &namespace);
    if object.metadata.resource_version.is_none() {
        let name = object.metadata.name.clone().unwrap_or_default();
        match api.get_opt(&name).await {
            Ok(Some(stored)) => object = stored,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(controller = %describe(&object), error = %crate::telemetry::error_chain(&e),
                    "cannot read the controller to add the release finalizer");
                return;
            }
        }
    }
    if has_finalizer(&object, CONTROLLER_FINALIZER) {
        return;
    }
    let mut finalizers = object.metadata.finalizers.clone().unwrap_or_default();
    finalizers.push(CONTROLLER_FINALIZER.to_owned());
    let body = finalizers_patch(&object, &finalizers);
    match patch_finalizers(&api, &object, &body).await {
        Ok(()) => {}
        Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {
            tracing::debug!(controller = %describe(&object), code = status.code,
                "the controller changed or went before its release finalizer was added; the next pass adds it");
        }
        Err(e) => {
            tracing::warn!(controller = %describe(&object), error = %crate::telemetry::error_chain(&e),
                "cannot add the release finalizer to the controller");
        }
    }
}

/// Removes [`CONTROLLER_FINALIZER`] from the `Controller` `namespace/name` (read first: the
/// watch may be behind), so a deleted `Controller` goes.
pub(super) async fn let_go_of_controller(client: &kube::Client, namespace: &str, name: &str) {
    let api = controllers(client, namespace);
    let removed = match api.get_opt(name).await {
        Ok(Some(object)) => {
            remove_finalizer(&api, &object, CONTROLLER_FINALIZER, Reread::Server).await
        }
        Ok(None) => Ok(Removal::NotHeld),
        Err(e) => Err(e),
    };
    match removed {
        Ok(Removal::Removed | Removal::NotHeld) => {}
        Ok(Removal::Conflicts) => {
            tracing::warn!(controller = %format!("{namespace}/{name}"), tries = TRIES,
                "the controller kept changing; its release finalizer is removed on a later pass");
        }
        Err(e) => {
            tracing::warn!(controller = %format!("{namespace}/{name}"), error = %crate::telemetry::error_chain(&e),
                "cannot remove the release finalizer from the controller");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use kube::api::{Api, ApiResource, DynamicObject};
    use kube::client::Body;
    use serde_json::{Value, json};

    use super::{Removal, remove_with};

    fn configmap(version: &str, finalizers: &[&str]) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": version,
                         "finalizers": finalizers}
        }))
        .unwrap()
    }

    /// A release whose object changed since it was read (409) patches the version `reread`
    /// gives (the cache's, for a `for` kind: no GET the user's RBAC may not grant), removing
    /// the finalizer and keeping the others.
    #[tokio::test]
    async fn a_conflict_patches_the_reread_version_and_makes_no_other_request() {
        let seen: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let log = seen.clone();
        let service = tower::service_fn(move |request: http::Request<Body>| {
            let log = log.clone();
            async move {
                let method = request.method().to_string();
                let body: Value =
                    serde_json::from_slice(&request.into_body().collect_bytes().await?)?;
                let version = body["metadata"]["resourceVersion"].clone();
                log.lock().unwrap().push((method, body));
                let (code, answer) = if version == "1" {
                    (
                        409,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                 "reason": "Conflict", "code": 409, "message": "changed"}),
                    )
                } else {
                    (200, serde_json::to_value(configmap("3", &["keep"]))?)
                };
                let response = http::Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Body::from(serde_json::to_vec(&answer)?))?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
            }
        });
        let client = kube::Client::new(service, "default");
        let api: Api<DynamicObject> = Api::namespaced_with(
            client,
            "shop",
            &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        );
        let finalizers = ["hooks.informant.dev/shop.x", "keep"];
        let rereads = Mutex::new(0);
        let removal = remove_with(&api, &configmap("1", &finalizers), finalizers[0], |_| {
            *rereads.lock().unwrap() += 1;
            Box::pin(async move { Ok(Some(configmap("2", &finalizers))) })
        })
        .await
        .unwrap();

        assert_eq!(removal, Removal::Removed);
        assert_eq!(*rereads.lock().unwrap(), 1);
        let seen = seen.lock().unwrap();
        let versions: Vec<(&str, &Value)> = seen
            .iter()
            .map(|(method, body)| (method.as_str(), &body["metadata"]["resourceVersion"]))
            .collect();
        assert_eq!(versions, [("PATCH", &json!("1")), ("PATCH", &json!("2"))]);
        assert_eq!(seen[1].1["metadata"]["finalizers"], json!(["keep"]));
    }
}
