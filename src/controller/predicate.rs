//! [`Predicate`]: which changes of a controller's own kind reconcile it (controller-runtime's
//! `predicate.GenerationChangedPredicate`, `LabelChangedPredicate`,
//! `AnnotationChangedPredicate`), and the filter the runner applies them with.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt as _;
use futures::future::BoxFuture;
use kube::api::ObjectMeta;
use kube::core::{GroupVersionKind, Resource};
use serde::de::DeserializeOwned;

use super::stub::Stub;
use crate::cache::{Cache, SharedCache, typed};

/// Which changes of the controller's own kind reconcile an object, as controller-runtime's
/// predicates on `For`: a new object always passes, and so does one that can not be read any
/// more; an update passes when what the predicate watches changed since the object's last
/// change or reconcile.
///
/// Predicates filter only the changes of the `for` kind: requeues, retries, the periodic
/// resync, list passes and the changes of owned and watched kinds reconcile regardless (in
/// controller-runtime a predicate on `For` also drops the informer's resync; here the resync
/// is the controller's own and always runs). A change of an object marked for deletion always
/// passes, whatever the predicates (a finalizer's cleanup must not wait: kube-apiserver bumps
/// the generation when it marks an object with finalizers, but not every server does, and the
/// finalizer's own removal is metadata only). Several predicates on one controller must all
/// pass, as controller-runtime's `WithPredicates(a, b)`; [`Predicate::Any`] is its `Or`.
///
/// ```
/// use informant::controller::{Controller, Predicate};
/// use k8s_openapi::api::apps::v1::Deployment;
///
/// // Reconcile on spec changes (a new generation) or label changes, not on status writes.
/// let controller = Controller::<Deployment>::new("web").predicate(Predicate::Any(vec![
///     Predicate::GenerationChanged,
///     Predicate::LabelsChanged,
/// ]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Predicate {
    /// `metadata.generation` changed: a spec change, never a status or metadata-only write
    /// (controller-runtime's `GenerationChangedPredicate`). Kinds whose API server strategy
    /// does not track generation (`ConfigMap`, `Secret`) never change it: use another.
    GenerationChanged,
    /// `metadata.labels` changed (`LabelChangedPredicate`).
    LabelsChanged,
    /// `metadata.annotations` changed (`AnnotationChangedPredicate`).
    AnnotationsChanged,
    /// One of these passes (`predicate.Or`).
    Any(Vec<Predicate>),
}

/// What the predicates compare of an object between two changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    generation: Option<i64>,
    /// Marked for deletion: every change of an object being deleted passes, whatever the
    /// predicates, so its cleanup (a finalizer's) never waits for a resync.
    deleting: bool,
    labels: u64,
    annotations: u64,
}

impl Seen {
    fn of(meta: &ObjectMeta) -> Self {
        // One fixed hasher: the same maps hash the same for the life of the process.
        let hasher = foldhash::fast::FixedState::with_seed(0);
        Self {
            generation: meta.generation,
            deleting: meta.deletion_timestamp.is_some(),
            labels: hasher.hash_one(&meta.labels),
            annotations: hasher.hash_one(&meta.annotations),
        }
    }
}

impl Predicate {
    /// Whether a change from `before` to `after` passes.
    fn passes(&self, before: &Seen, after: &Seen) -> bool {
        match self {
            Self::GenerationChanged => before.generation != after.generation,
            Self::LabelsChanged => before.labels != after.labels,
            Self::AnnotationsChanged => before.annotations != after.annotations,
            Self::Any(any) => any.iter().any(|p| p.passes(before, after)),
        }
    }
}

/// The key of an object in the filter's memory.
type Key = (Option<String>, String);

/// Decides, per change of `K`, whether `predicates` let it reconcile: reads the object
/// through `cache` and compares it with what the filter saw of it last.
pub(super) struct Filter<K> {
    predicates: Arc<[Predicate]>,
    cache: Arc<SharedCache>,
    gvk: Arc<GroupVersionKind>,
    seen: Arc<Mutex<HashMap<Key, Seen>>>,
    kind: std::marker::PhantomData<fn() -> K>,
}

impl<K> Filter<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    pub(super) fn new(predicates: Vec<Predicate>, cache: Arc<SharedCache>) -> Self {
        Self {
            predicates: predicates.into(),
            cache,
            gvk: Arc::new(typed::gvk_of::<K>()),
            seen: Arc::default(),
            kind: std::marker::PhantomData,
        }
    }

    /// A reconcile read `meta`: what later changes of the object are compared with. The
    /// objects a list brought are reconciled without passing through the filter, so their
    /// first change after is an update, not a create.
    pub(super) fn saw(&self, meta: &ObjectMeta) {
        let key: Key = (
            meta.namespace.clone(),
            meta.name.clone().unwrap_or_default(),
        );
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, Seen::of(meta));
    }

    /// Whether the change that brought `stub` reconciles it.
    pub(super) fn admits(&self, stub: &Stub<K>) -> BoxFuture<'static, bool> {
        let key: Key = (stub.namespace().map(str::to_owned), stub.name().to_owned());
        let (cache, gvk) = (Arc::clone(&self.cache), Arc::clone(&self.gvk));
        let (predicates, seen) = (Arc::clone(&self.predicates), Arc::clone(&self.seen));
        async move {
            let read = cache
                .get_as(&gvk, key.0.as_deref(), &key.1, &typed::As::<K>::new())
                .await
                .and_then(|object| typed::downcast::<K>(&gvk, object));
            let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
            let Ok(object) = read else {
                // Gone, or not readable now: the reconcile finds out and says so.
                seen.remove(&key);
                return true;
            };
            let now = Seen::of(object.meta());
            match seen.insert(key, now) {
                None => true,
                Some(_) if now.deleting => true,
                Some(before) => predicates.iter().all(|p| p.passes(&before, &now)),
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn meta(generation: i64, label: &str, annotation: &str) -> ObjectMeta {
        ObjectMeta {
            generation: Some(generation),
            labels: Some(BTreeMap::from([("app".to_owned(), label.to_owned())])),
            annotations: Some(BTreeMap::from([("note".to_owned(), annotation.to_owned())])),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn each_predicate_passes_only_the_change_it_watches() {
        let before = Seen::of(&meta(1, "a", "x"));
        let status_only = Seen::of(&meta(1, "a", "x"));
        let spec = Seen::of(&meta(2, "a", "x"));
        let label = Seen::of(&meta(1, "b", "x"));
        let annotation = Seen::of(&meta(1, "a", "y"));
        let table = [
            (Predicate::GenerationChanged, [false, true, false, false]),
            (Predicate::LabelsChanged, [false, false, true, false]),
            (Predicate::AnnotationsChanged, [false, false, false, true]),
            (
                Predicate::Any(vec![Predicate::GenerationChanged, Predicate::LabelsChanged]),
                [false, true, true, false],
            ),
        ];
        for (predicate, expected) in table {
            let got = [status_only, spec, label, annotation]
                .map(|after| predicate.passes(&before, &after));
            assert_eq!(got, expected, "{predicate:?}");
        }
    }
}
