//! [`Stub`]: what a controller's runner store holds for each object (its name, namespace and
//! `resourceVersion`, nothing else), and the read of the full object from the cache tree that
//! every reconcile starts with.
//!
//! kube-runtime's runner takes the object to reconcile from a `reflector::Store<K>` and hands
//! it to the reconcile. Feeding it the objects themselves kept a second, parsed copy of every
//! object of the controller's kind beside the cache's compact one (about 5× the object's JSON
//! size, where the cache holds about 1.2×). Three routes were open:
//!
//! - a `Store` backed by the cache's own store: kube-runtime's `Store` is a concrete map, not
//!   a trait, so it can not be;
//! - a change upstream putting the runner's store behind a trait: the right fix in the long
//!   run, but the runner would still need an object per entry until it lands;
//! - **stubs** (taken): the runner runs over `Stub<K>`, a `Resource` of `K`'s kind whose
//!   metadata holds only what scheduling uses, the name and namespace (the store key, the
//!   per-object dedupe, owner and mapper triggers), with the `resourceVersion` beside it. Each
//!   reconcile reads the full object through the cache tree first ([`read`]): decoded once
//!   from the compact store, or with `unsafeDisableDeepCopy` the cache's own `Arc` (the typed
//!   copy the cache keeps beside the object from its first typed read until it changes:
//!   nothing decoded per reconcile), so the reconcile still gets a whole typed `Arc<K>` and a
//!   hook the whole object. kube-runtime's scheduler and runner are used unchanged.
//!
//! The read is the one cost a reconcile pays for holding no object, so its own path allocates
//! nothing but the object: the queue is told by the stub's name and namespace
//! ([`read_stub`]), and the object's reference (for failure counts and warnings) is built only
//! when something failed.
//!
//! The stub also keeps the object's `resourceVersion`, so a list the manager takes itself (a
//! reload, a change of namespaces or shard share) tells the objects the store holds as they
//! are from the ones it brings in or changed, and reconciles only those (see
//! [`super::source::reflected`]). Nothing else scheduling might want (uid, deletion timestamp,
//! finalizers) is kept: the reconcile reads them, current, from the object it gets. An object
//! the cache tree does not answer when its turn comes is retried with its backoff (the tree may
//! lag the informer that fed the runner's store); one deleted meanwhile has left the runner's
//! store, and kube-runtime drops its retry (`ObjectNotFound`).
//!
//! The store lists its stubs through [`StubDecoder`]: from the compact store's keys, without
//! decoding an object.

use std::any::TypeId;
use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;

use kube::api::{ObjectMeta, TypeMeta};
use kube::core::{DynamicObject, GroupVersionKind, Resource};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde::Deserialize;

use futures::Stream;
use tokio::sync::broadcast;

use super::context::Context;
use super::series::Series;
use super::source::{self, Change, Follow};
use crate::cache::typed::{AnyObject, Decoder};
use crate::cache::{self, CompactObject, InformerEvent, SharedCache};

/// One object of kind `K` in a controller's runner store: its name, namespace and
/// `resourceVersion` only. Its `DynamicType` is `K`'s behind an `Arc`, so each store key of a
/// dynamic kind (a hook controller's) shares one `ApiResource` instead of holding a copy.
///
/// kube-runtime's runner takes what it reconciles from a `reflector::Store`, a concrete map
/// that can not be backed by the cache's store; so the runner schedules stubs and each
/// reconcile reads its object from the cache tree, which holds the only copy.
#[derive(Deserialize)]
#[serde(bound = "")]
pub struct Stub<K> {
    metadata: ObjectMeta,
    /// The object's `resourceVersion`, kept beside the metadata rather than in it: kube-rs
    /// copies a metadata `resourceVersion` into every `ObjectRef` the runner builds (two per
    /// reconcile), which costs a reconcile an allocation for nothing it uses.
    #[serde(skip)]
    version: Option<Box<str>>,
    #[serde(skip)]
    kind: PhantomData<fn() -> K>,
}

impl<K> Stub<K> {
    /// The stub of the object `namespace/name`.
    #[must_use]
    pub fn new(name: &str, namespace: Option<&str>) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: namespace.map(str::to_owned),
                ..ObjectMeta::default()
            },
            version: None,
            kind: PhantomData,
        }
    }

    /// The stub of the object `meta` describes: its name, namespace and `resourceVersion`.
    #[must_use]
    pub fn of(meta: &ObjectMeta) -> Self {
        Self::new(
            meta.name.as_deref().unwrap_or_default(),
            meta.namespace.as_deref(),
        )
        .at_version(meta.resource_version.as_deref())
    }

    /// This stub with `resourceVersion` `version`.
    #[must_use]
    pub fn at_version(mut self, version: Option<&str>) -> Self {
        self.version = version.map(Box::from);
        self
    }

    /// The object's `resourceVersion` when the stub was made.
    #[must_use]
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// The object's name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The object's namespace (`None` for a cluster-scoped kind).
    #[must_use]
    pub fn namespace(&self) -> Option<&str> {
        self.metadata.namespace.as_deref()
    }
}

impl<K: Resource> Stub<K> {
    /// The object's reference as metrics and failure counts key it (an erased `ObjectRef<K>`,
    /// `dyntype` being `K`'s).
    #[must_use]
    pub fn key(&self, dyntype: &K::DynamicType) -> ObjectRef<DynamicObject>
    where
        K::DynamicType: Clone,
    {
        let mut key = ObjectRef::<K>::new_with(self.name(), dyntype.clone());
        key.namespace = self.namespace().map(str::to_owned);
        key.erase()
    }
}

impl<K> source::Versioned for Stub<K> {
    fn version(&self) -> Option<&str> {
        Stub::version(self)
    }
}

impl<K> Clone for Stub<K> {
    fn clone(&self) -> Self {
        Self {
            metadata: self.metadata.clone(),
            version: self.version.clone(),
            kind: PhantomData,
        }
    }
}

impl<K> std::fmt::Debug for Stub<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stub")
            .field("namespace", &self.namespace())
            .field("name", &self.name())
            .finish()
    }
}

impl<K: Resource> Resource for Stub<K> {
    type DynamicType = Arc<K::DynamicType>;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The [`Stub`] of a cached object (a [`super::Decode`] of the pool's changes).
#[allow(
    clippy::needless_pass_by_value,
    clippy::unnecessary_wraps,
    reason = "the shape of every source::Decode"
)]
pub(super) fn stub_of<K>(_gvk: &GroupVersionKind, obj: Arc<DynamicObject>) -> Option<Stub<K>> {
    Some(Stub::of(&obj.metadata))
}

/// The changes of the kind `gvk` (a controller's own, whose `events` were subscribed before its
/// informers were ensured) as stubs, following the controller's store: listed through
/// [`StubDecoder`], decoded from each change's metadata.
pub fn stubs<K: Resource + 'static>(
    events: broadcast::Receiver<InformerEvent>,
    cache: Arc<SharedCache>,
    gvk: GroupVersionKind,
) -> impl Stream<Item = Change<Stub<K>>> + Send {
    source::changes_with(
        events,
        cache,
        gvk,
        stub_of::<K>,
        Arc::new(StubDecoder::<K>::new()),
        Follow::Store,
    )
}

/// Lists [`Stub`]s through the cache tree ([`cache::Cache::list_as`]): from the compact
/// store's keys without decoding the object, or from a shared parsed object's metadata, never
/// kept as the shared object's typed copy (that is the reconcile's `K`).
pub struct StubDecoder<K>(PhantomData<fn() -> K>);

impl<K> StubDecoder<K> {
    /// The decoder into `Stub<K>`.
    #[must_use]
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<K> Default for StubDecoder<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: 'static> Decoder for StubDecoder<K> {
    fn output(&self) -> TypeId {
        TypeId::of::<Stub<K>>()
    }

    fn decode(
        &self,
        stored: &CompactObject,
        _types: &TypeMeta,
    ) -> Result<AnyObject, serde_json::Error> {
        let version = stored.resource_version()?;
        Ok(Arc::new(
            Stub::<K>::new(stored.name(), stored.namespace()).at_version(version.as_deref()),
        ))
    }

    fn convert(
        &self,
        obj: &DynamicObject,
        _types: Option<&TypeMeta>,
    ) -> Result<AnyObject, serde_json::Error> {
        Ok(Arc::new(Stub::<K>::of(&obj.metadata)))
    }

    fn keep(&self) -> bool {
        false
    }
}

/// What a reconcile does with the cache's answer `read` for the object `key` its stub names:
/// reconcile the object, or, without calling the reconcile, the [`Action`] to return.
///
/// Either way the object has left the queue ([`Series::taken`]). An object the cache tree does
/// not hold although the runner's store held its stub (the tree not yet published after a
/// reload or a shard share change, or the object deleted since its trigger) is retried with the
/// object's error backoff: a deleted one has left the runner's store by then, and kube-runtime
/// skips a retry whose object is gone from its store (`ObjectNotFound`), so it is never
/// reconciled. An object out of the cache's scope (its namespace or kind no longer cached) is
/// not reconciled. A read that may succeed later (an informer restarting after a reload) is
/// retried with the object's error backoff. An object that does not decode into the reconcile's type is skipped
/// with a warning, as it was before it had a stub.
// Reason: hook controllers read their objects through it.
#[cfg_attr(not(feature = "hooks"), allow(dead_code))]
pub(crate) fn read<T>(
    answer: cache::Result<Arc<T>>,
    key: &ObjectRef<DynamicObject>,
    ctx: &Context,
    series: &Series,
) -> Result<Arc<T>, Action> {
    // The runner took the object from the queue, whatever happens next.
    series.taken(key);
    answer.map_err(|error| unreadable(&error, key, ctx, series))
}

/// [`read`] of the object `stub` names, whose reference (`dyntype` its kind's) is built only
/// when the cache does not answer it: the reconcile's own path allocates nothing of its own.
pub(super) fn read_stub<K: Resource, T, D>(
    answer: cache::Result<Arc<T>>,
    stub: &Stub<K>,
    dyntype: &K::DynamicType,
    ctx: &Context<D>,
    series: &Series,
) -> Result<Arc<T>, Action>
where
    K::DynamicType: Clone,
{
    series.taken_at(stub.namespace(), stub.name());
    answer.map_err(|error| unreadable(&error, &stub.key(dyntype), ctx, series))
}

/// The [`Action`] for an object the cache did not answer (see [`read`]).
fn unreadable<D>(
    error: &cache::Error,
    key: &ObjectRef<DynamicObject>,
    ctx: &Context<D>,
    series: &Series,
) -> Action {
    let error_text = crate::telemetry::error_chain(error);
    if error.is_retryable() {
        ctx.failed(key.clone());
        let wait = super::error_backoff(ctx.failures_of(key));
        tracing::warn!(object.ref = %key, error = %error_text, retry_in_ms = wait.as_millis(),
            "controller cannot read the object to reconcile from the cache");
        series.queue_retried();
        return Action::requeue(wait);
    }
    if matches!(error, cache::Error::NotFound { .. }) {
        // The runner's store held the object's stub when its turn came, so the cache tree may
        // not serve the informer holding it yet: a reload or a change of shard share publishes
        // a new informer's objects to the controllers before the tree that routes reads to it
        // (seen as members that never reconciled some objects of a part they took over). Retry
        // with the object's backoff; if it was deleted, its stub leaves the store and
        // kube-runtime drops the retry (`ObjectNotFound`), so nothing runs for a gone object.
        ctx.failed(key.clone());
        let wait = super::error_backoff(ctx.failures_of(key));
        tracing::debug!(object.ref = %key, reason = %error_text, retry_in_ms = wait.as_millis(),
            "object not in the cache tree yet, retrying");
        series.queue_retried();
        return Action::requeue(wait);
    }
    if matches!(
        error,
        cache::Error::Convert { .. } | cache::Error::Decode { .. }
    ) {
        tracing::warn!(object.ref = %key, error = %error_text,
            "controller skips an object that does not decode");
    } else {
        tracing::debug!(object.ref = %key, reason = %error_text,
            "object left the cache before its reconcile");
    }
    Action::await_change()
}

/// `key` (a reference to a `K`) as a reference to its stub.
pub(super) fn stub_ref<K: Resource>(
    key: ObjectRef<K>,
    dyntype: &Arc<K::DynamicType>,
) -> ObjectRef<Stub<K>> {
    let mut stub = ObjectRef::new_with(&key.name, Arc::clone(dyntype));
    stub.namespace = key.namespace;
    stub
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::ApiResource;
    use kube::runtime::reflector;

    use super::*;
    use crate::controller::ControllerMetrics;

    fn big_configmap() -> DynamicObject {
        let mut obj = DynamicObject::new("web", &ApiResource::erase::<ConfigMap>(&()))
            .within("shop")
            .data(serde_json::json!({"data": {"key": "v".repeat(10_000)}}));
        obj.metadata.uid = Some("u-1".into());
        obj.metadata.resource_version = Some("42".into());
        obj.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
        obj.metadata.finalizers = Some(vec!["keep".into()]);
        obj
    }

    /// The stub holds the name, namespace and `resourceVersion` and nothing else of the
    /// object: the runner's store must not grow with the objects it schedules.
    #[test]
    fn a_stub_keeps_the_name_namespace_and_version_of_an_object_and_nothing_else() {
        let obj = big_configmap();
        let from_event = stub_of::<ConfigMap>(
            &crate::cache::typed::gvk_of::<ConfigMap>(),
            Arc::new(obj.clone()),
        )
        .unwrap();
        let compact = CompactObject::encode(&obj).unwrap();
        let types = TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let decoder = StubDecoder::<ConfigMap>::new();
        let listed = decoder.decode(&compact, &types).unwrap();
        let converted = decoder.convert(&obj, None).unwrap();
        for stub in [
            Arc::new(from_event),
            listed.downcast::<Stub<ConfigMap>>().unwrap(),
            converted.downcast::<Stub<ConfigMap>>().unwrap(),
        ] {
            assert_eq!(
                serde_json::to_value(stub.meta()).unwrap(),
                serde_json::json!({"name": "web", "namespace": "shop"})
            );
            assert_eq!(stub.version(), Some("42"));
        }
        assert!(
            !decoder.keep(),
            "a shared store keeps the reconcile's type, not stubs"
        );
        assert_eq!(
            std::mem::size_of::<Stub<ConfigMap>>(),
            std::mem::size_of::<ObjectMeta>() + std::mem::size_of::<Box<str>>(),
            "a stub is its metadata and version, not an object"
        );
    }

    #[test]
    fn a_stub_is_a_resource_of_its_kind_with_the_same_store_and_queue_keys() {
        let obj = big_configmap();
        let dyntype = Arc::new(ApiResource::erase::<ConfigMap>(&()));
        let stub = Stub::<DynamicObject>::of(&obj.metadata);
        let mut writer = reflector::store::Writer::<Stub<DynamicObject>>::new(Arc::clone(&dyntype));
        let store = writer.as_reader();
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(stub.clone()));
        let key = ObjectRef::from_obj_with(&stub, Arc::clone(&dyntype));
        assert!(store.get(&key).is_some());
        assert_eq!(
            key.clone().erase(),
            ObjectRef::from_obj_with(&obj, ApiResource::erase::<ConfigMap>(&())).erase(),
            "metrics and failure counts key a stub as its object"
        );
        assert_eq!(key.to_string(), "ConfigMap.v1./web.shop");
        let typed = stub_ref(
            ObjectRef::<ConfigMap>::new("web").within("shop"),
            &Arc::new(()),
        );
        assert_eq!(typed.erase(), key.erase());
    }

    fn context() -> Context {
        Context::offline()
    }

    /// A reconcile whose object the tree does not hold yet, or one the cache can not answer
    /// yet, is retried with the object's backoff; one out of the cache's scope does not run.
    #[tokio::test]
    async fn a_missing_object_is_retried_one_out_of_scope_dropped_an_unready_cache_retried() {
        let ctx = context();
        let metrics = ControllerMetrics::new();
        let series = Series::new(Some(&metrics), "stubs", 1);
        let key = ObjectRef::<ConfigMap>::new("web").within("shop").erase();
        let found = read(Ok(Arc::new(7)), &key, &ctx, &series);
        assert_eq!(found.map(|n| *n), Ok(7));

        series.queue_added(&key);
        assert_eq!(metrics.controller("stubs", 1).depth(), 1);

        let gone = read::<u8>(
            Err(cache::Error::NotFound {
                gvk: crate::cache::typed::gvk_of::<ConfigMap>(),
                namespace: Some("shop".into()),
                name: "web".into(),
            }),
            &key,
            &ctx,
            &series,
        );
        assert_eq!(
            gone,
            Err(Action::requeue(super::super::error_backoff(1))),
            "the tree may lag the runner's store: retried, not dropped"
        );
        assert_eq!(
            metrics.controller("stubs", 1).depth(),
            0,
            "it left the queue without a reconcile"
        );
        ctx.forget(&key);

        let out_of_scope = read::<u8>(
            Err(cache::Error::UnknownNamespaceGet {
                namespace: "shop".into(),
                name: "web".into(),
                selector: None,
            }),
            &key,
            &ctx,
            &series,
        );
        assert_eq!(out_of_scope, Err(Action::await_change()));

        for failures in 1..=2 {
            let later = read::<u8>(Err(cache::Error::NotStarted), &key, &ctx, &series);
            assert_eq!(
                later,
                Err(Action::requeue(super::super::error_backoff(failures)))
            );
        }
        assert_eq!(ctx.failures_of(&key), 2);
    }
}
