//! A finalizer guard on the [`Context`]: [`Context::finalizer`], kube-runtime's
//! `kube::runtime::finalizer` semantics (its `Event` and `Error` types) through the context's
//! client, guarded by the `resourceVersion` read instead of a JSON patch `test` of the list.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use kube::api::{Patch, PatchParams};
use kube::core::Resource;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Error, Event};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::context::Context;

impl<D> Context<D> {
    /// Runs `reconcile` under the finalizer `name` on `object`, as kube-runtime's
    /// `finalizer`: an object without the finalizer gets it first, and the reconcile goes on
    /// in the same pass with [`Event::Apply`] of the object as the API server stored it (in
    /// kube-runtime the reconcile waits for the change that adds it, which a
    /// [`Predicate::GenerationChanged`](super::Predicate::GenerationChanged) filters out: the
    /// finalizer does not bump the generation); one that has it gets
    /// [`Event::Apply`]; one being deleted gets [`Event::Cleanup`], and the finalizer is
    /// removed only once the cleanup succeeded, so the API server deletes the object then (a
    /// failed cleanup keeps it, and is retried by the error policy). An object being deleted
    /// without the finalizer is left alone.
    ///
    /// Each change of the finalizers is a merge patch of the whole list carrying the
    /// `resourceVersion` the reconcile read, so a list someone changed since (or a cache
    /// behind the API server) is a conflict, retried as any failed reconcile, never a lost
    /// finalizer of someone else's. kube-runtime's own `finalizer(&api, name, obj, ..)` works
    /// here too, with `Api::namespaced(ctx.client().clone(), ns)`; this one builds its `Api`
    /// from the object, for namespaced and cluster-scoped kinds alike.
    ///
    /// RBAC: `patch` on the object's kind.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use informant::controller::{Action, Context};
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube::runtime::finalizer::{Error, Event};
    ///
    /// async fn reconcile(
    ///     configmap: Arc<ConfigMap>,
    ///     ctx: Arc<Context>,
    /// ) -> Result<Action, Error<kube::Error>> {
    ///     ctx.finalizer("demo.example.com/cleanup", configmap, |event| async {
    ///         match event {
    ///             // Create or update what the object needs.
    ///             Event::Apply(_configmap) => Ok(Action::await_change()),
    ///             // Delete what no owner reference would; then the object goes.
    ///             Event::Cleanup(_configmap) => Ok(Action::await_change()),
    ///         }
    ///     })
    ///     .await
    /// }
    /// ```
    ///
    /// # Errors
    /// [`Error::ApplyFailed`] and [`Error::CleanupFailed`] with the reconcile's error;
    /// [`Error::AddFinalizer`] and [`Error::RemoveFinalizer`] when the API server refuses the
    /// patch (a conflict included); [`Error::UnnamedObject`] for an object with no name.
    pub async fn finalizer<K, Fut, E>(
        &self,
        name: &str,
        object: Arc<K>,
        reconcile: impl FnOnce(Event<K>) -> Fut,
    ) -> Result<Action, Error<E>>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
        Fut: Future<Output = Result<Action, E>>,
        E: std::error::Error + 'static,
    {
        let meta = object.meta();
        let finalizers: Vec<String> = meta.finalizers.clone().unwrap_or_default();
        let has = finalizers.iter().any(|f| f == name);
        let deleting = meta.deletion_timestamp.is_some();
        let Some(object_name) = meta.name.clone() else {
            return Err(Error::UnnamedObject);
        };
        let version = meta.resource_version.clone();
        let api = super::write::api_of::<K, D>(self, meta.namespace.as_deref());
        let set = |finalizers: Vec<String>| {
            let body = serde_json::json!({
                "metadata": {"resourceVersion": version, "finalizers": finalizers},
            });
            let (api, object_name) = (&api, &object_name);
            async move {
                api.patch(object_name, &PatchParams::default(), &Patch::Merge(&body))
                    .await
            }
        };
        match (has, deleting) {
            (true, false) => reconcile(Event::Apply(object))
                .await
                .map_err(Error::ApplyFailed),
            (true, true) => {
                let action = reconcile(Event::Cleanup(object))
                    .await
                    .map_err(Error::CleanupFailed)?;
                let kept = finalizers.into_iter().filter(|f| f != name).collect();
                set(kept).await.map_err(Error::RemoveFinalizer)?;
                Ok(action)
            }
            (false, false) => {
                let mut added = finalizers;
                added.push(name.to_owned());
                let stored = set(added.clone()).await.map_err(Error::AddFinalizer)?;
                // What the API server stored (its new resourceVersion); read as K, or else the
                // object read with the finalizer it now has.
                let object = stored.try_parse::<K>().map_or_else(
                    |_| {
                        let mut object = (*object).clone();
                        object.meta_mut().finalizers = Some(added);
                        Arc::new(object)
                    },
                    Arc::new,
                );
                reconcile(Event::Apply(object))
                    .await
                    .map_err(Error::ApplyFailed)
            }
            (false, true) => Ok(Action::await_change()),
        }
    }
}
