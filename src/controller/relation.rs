//! The kinds a controller owns or watches besides its own: each one's pool subscription,
//! turned into the trigger stream kube-runtime's `Controller` maps to reconcile requests.

use std::fmt::Debug;
use std::sync::Arc;

use futures::{StreamExt, stream};
use kube::core::{
    DynamicObject, GroupVersionKind, PartialObjectMeta, PartialObjectMetaExt, Resource,
};
use kube::runtime::{self, reflector::ObjectRef};
use serde::de::DeserializeOwned;
use tokio::sync::broadcast;

use super::series::Series;
use super::source::{self, Follow};
use super::stub::{Stub, stub_ref};
use crate::cache::{InformerEvent, SharedCache, typed};

/// Adds one relation's trigger stream to a kube-runtime controller: at each start of the
/// controller's runner (it starts again when its kinds come back after a CRD was deleted).
type Attach<K> = Box<
    dyn Fn(
            runtime::Controller<Stub<K>>,
            broadcast::Receiver<InformerEvent>,
            Arc<SharedCache>,
            Series,
        ) -> runtime::Controller<Stub<K>>
        + Send
        + Sync,
>;

/// A kind whose changes trigger reconciles of `K`.
pub(super) struct Relation<K: Resource<DynamicType = ()> + Clone + Debug + 'static> {
    /// The related kind.
    pub(super) gvk: GroupVersionKind,
    attach: Attach<K>,
}

impl<K> Relation<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// `C` objects trigger their controller owner of kind `K` (controller-runtime's `Owns`,
    /// which enqueues only the owner reference with `controller: true`). Only their metadata
    /// is decoded.
    pub(super) fn owns<C>() -> Self
    where
        C: Resource<DynamicType = ()> + Send + Sync + 'static,
    {
        let gvk = typed::gvk_of::<C>();
        let attach: Attach<K> = Box::new(move |controller, events, cache, series| {
            let children = source::changes(
                events,
                cache,
                typed::gvk_of::<C>(),
                controller_owned::<C>,
                Follow::Trigger,
            )
            .flat_map(|change| stream::iter(change.into_objects()))
            .map(move |child: PartialObjectMeta<C>| {
                if let Some(owner) = owner_of_kind::<K>(&child) {
                    series.queue_added(&owner);
                }
                Ok(child)
            });
            controller.owns_stream(children)
        });
        Self { gvk, attach }
    }

    /// Each `O` triggers the `K`s `mapper` names (controller-runtime's `Watches` with an
    /// `EnqueueRequestsFromMapFunc`).
    pub(super) fn watches<O, F>(mapper: F) -> Self
    where
        O: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        F: Fn(&O) -> Vec<ObjectRef<K>> + Send + Sync + 'static,
    {
        let gvk = typed::gvk_of::<O>();
        let mapper = Arc::new(mapper);
        let attach: Attach<K> = Box::new(move |controller, events, cache, series| {
            let mapper = Arc::clone(&mapper);
            let others = source::changes(
                events,
                cache,
                typed::gvk_of::<O>(),
                super::decode::<O>,
                Follow::Trigger,
            )
            .flat_map(|change| stream::iter(change.into_objects()))
            .map(Ok);
            // Every `Stub<K>` key shares the kind's (empty) dynamic type.
            let dyntype = Arc::new(());
            controller.watches_stream(others, move |other: O| {
                let targets = mapper(&other);
                for target in &targets {
                    series.queue_added(target);
                }
                targets
                    .into_iter()
                    .map(|target| stub_ref(target, &dyntype))
                    .collect::<Vec<_>>()
            })
        });
        Self { gvk, attach }
    }

    /// Adds this relation's triggers, read from `events`, to `controller`.
    pub(super) fn attach(
        &self,
        controller: runtime::Controller<Stub<K>>,
        events: broadcast::Receiver<InformerEvent>,
        cache: Arc<SharedCache>,
        series: Series,
    ) -> runtime::Controller<Stub<K>> {
        (self.attach)(controller, events, cache, series)
    }
}

/// The metadata of a cached child, keeping only its controller owner reference.
#[allow(
    clippy::needless_pass_by_value,
    clippy::unnecessary_wraps,
    reason = "the shape of every source::Decode"
)]
fn controller_owned<C>(
    _gvk: &GroupVersionKind,
    obj: Arc<DynamicObject>,
) -> Option<PartialObjectMeta<C>>
where
    C: Resource<DynamicType = ()>,
{
    let mut meta = obj.metadata.clone();
    if let Some(owners) = meta.owner_references.as_mut() {
        owners.retain(|owner| owner.controller == Some(true));
    }
    Some(meta.into_request_partial::<C>())
}

/// The owner of kind `K` among `child`'s (controller) owner references.
fn owner_of_kind<K>(child: &impl Resource) -> Option<ObjectRef<K>>
where
    K: Resource<DynamicType = ()>,
{
    let meta = child.meta();
    meta.owner_references
        .iter()
        .flatten()
        .find_map(|owner| ObjectRef::from_owner_ref(meta.namespace.as_deref(), owner, ()))
}
