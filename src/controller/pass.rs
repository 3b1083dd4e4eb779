//! The list pass: after each list of a controller's kind (its first, and every relist after a
//! reload, a lag or a relist of its informer), objects of the runner's store are asked for once,
//! at the runner's pace, through kube-runtime's `Controller::reconcile_on`: every object after
//! the first list and after an informer relisted the kind from the API server (as client-go's
//! informer hands controller-runtime an update of every object then); after a list the manager
//! took itself (a reload, a namespace or shard share change, a lag), only the objects that list
//! brought in or changed ([`Listed`]).
//!
//! Handing kube-runtime's scheduler a whole list at once would queue every object in an
//! instant, and the scheduler's maps keep the capacity of the largest queue they ever held (a
//! few hundred bytes per object of the kind, for as long as the controller runs). A pass asks
//! for the next object only while fewer than [`LIST_PASS_QUEUE`](super::LIST_PASS_QUEUE) wait
//! ([`Series::try_admit`]); a full queue is let drain to half ([`Series::drained`]) before the
//! pass refills it, so the scheduler stays small and the pass wakes once per run of objects,
//! not once per object. A list of the whole store restarts the pass on the store it made; a
//! list of some objects adds them to what is left of the pass.
//!
//! The pass is a hand-written stream: it runs for every object a controller reconciles, and
//! a stream built from an `async` block would move its whole state for each object.

use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt as _};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

/// What a list asks the pass for: `None` every object of the store it made, or the objects
/// it brought in or changed.
pub(super) type Listed<K> = Option<Vec<Arc<K>>>;

use super::series::Series;

/// The objects of `store` each list `lists` announces asks for ([`Listed`]), each asked for
/// once the queue `series` counts has room ([`super::LIST_PASS_QUEUE`]). Ends when `lists` is
/// dropped (the controller's changes ended).
pub(super) fn list_pass<K>(
    store: Store<K>,
    dyntype: K::DynamicType,
    series: Series,
    lists: impl Stream<Item = Listed<K>> + Send + 'static,
) -> impl Stream<Item = ObjectRef<K>> + Send
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    Pass {
        store,
        dyntype,
        series,
        lists: Box::pin(lists),
        left: Vec::new().into_iter(),
        next: None,
        room: None,
    }
}

struct Pass<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash,
{
    store: Store<K>,
    dyntype: K::DynamicType,
    series: Series,
    /// One item per list in the store.
    lists: Pin<Box<dyn Stream<Item = Listed<K>> + Send>>,
    /// What is left of the current pass.
    left: std::vec::IntoIter<Arc<K>>,
    /// The object that found the queue full, asked for again once it drained.
    next: Option<ObjectRef<K>>,
    /// Waits for the queue to drain ([`Series::drained`]) while it is full.
    room: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

// Nothing of a pass is pinned in place: its futures are boxed.
impl<K: Resource + 'static> Unpin for Pass<K> where K::DynamicType: Eq + Hash {}

impl<K> Stream for Pass<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    type Item = ObjectRef<K>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            // A new list first: the pass starts over on the store it made, or adds what the
            // list changed to what is left.
            match this.lists.poll_next_unpin(cx) {
                Poll::Ready(Some(None)) => {
                    this.left = this.store.state().into_iter();
                    this.next = None;
                    this.room = None;
                    continue;
                }
                Poll::Ready(Some(Some(changed))) => {
                    let mut left: Vec<Arc<K>> = this.left.by_ref().collect();
                    left.extend(changed);
                    this.left = left.into_iter();
                    continue;
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => {}
            }
            if let Some(room) = &mut this.room {
                if room.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.room = None;
            }
            let object = if let Some(object) = this.next.take() {
                object
            } else if let Some(obj) = this.left.next() {
                ObjectRef::from_obj_with(obj.as_ref(), this.dyntype.clone())
            } else {
                // The pass is over until the next list (which need not find the buffer of
                // this one).
                this.left = Vec::new().into_iter();
                return Poll::Pending;
            };
            if this.series.try_admit(&object) {
                return Poll::Ready(Some(object));
            }
            let series = this.series.clone();
            this.room = Some(Box::pin(async move { series.drained().await }));
            this.next = Some(object);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt as _;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::runtime::{reflector, watcher};

    use super::*;
    use crate::controller::LIST_PASS_QUEUE;

    fn configmap(i: usize) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("cm-{i:05}")),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn list(
        writer: &mut reflector::store::Writer<ConfigMap>,
        objects: impl Iterator<Item = usize>,
    ) {
        writer.apply_watcher_event(&watcher::Event::Init);
        for i in objects {
            writer.apply_watcher_event(&watcher::Event::InitApply(configmap(i)));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
    }

    /// The next object the pass asks for, `None` when it asks for nothing within `within`.
    async fn next(
        pass: &mut (impl futures::Stream<Item = ObjectRef<ConfigMap>> + Unpin),
        within: Duration,
    ) -> Option<String> {
        match tokio::time::timeout(within, pass.next()).await {
            Ok(Some(object)) => Some(object.name),
            Ok(None) => Some("<end>".to_owned()),
            Err(_) => None,
        }
    }

    fn taken(series: &Series, name: &str) {
        series.taken(&ObjectRef::<ConfigMap>::new(name).within("default"));
    }

    /// A list of more objects than the queue holds reaches the scheduler as the runner takes
    /// them (a full queue refilled once it drained to half), every object once; a new list
    /// restarts the pass on the new store.
    #[tokio::test]
    async fn a_pass_asks_for_each_listed_object_once_as_the_queue_has_room() {
        let (soon, guard) = (Duration::from_millis(50), Duration::from_secs(5));
        let n = LIST_PASS_QUEUE + 10;
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let series = Series::default();
        let (listed, lists) = futures::channel::mpsc::unbounded();
        let mut pass = Box::pin(list_pass(store.clone(), (), series.clone(), lists));
        assert_eq!(next(&mut pass, soon).await, None, "nothing before a list");

        list(&mut writer, 0..n);
        listed.unbounded_send(None).unwrap();
        let mut asked = Vec::new();
        for _ in 0..LIST_PASS_QUEUE {
            asked.push(next(&mut pass, guard).await.unwrap());
        }
        assert_eq!(series.depth(), LIST_PASS_QUEUE);
        assert_eq!(
            next(&mut pass, soon).await,
            None,
            "the queue is full until the runner takes objects"
        );
        let half = LIST_PASS_QUEUE / 2;
        for name in &asked[..half - 1] {
            taken(&series, name);
        }
        assert_eq!(
            next(&mut pass, soon).await,
            None,
            "a full queue is let drain to half before the pass refills it"
        );
        taken(&series, &asked[half - 1]);
        asked.push(next(&mut pass, guard).await.unwrap());
        for name in &asked[half..] {
            taken(&series, name);
        }
        while asked.len() < n {
            let name = next(&mut pass, guard).await.unwrap();
            taken(&series, &name);
            asked.push(name);
        }
        asked.sort();
        asked.dedup();
        assert_eq!(asked.len(), n, "every object once");
        assert_eq!(next(&mut pass, soon).await, None, "the pass is over");

        // A relist: the pass goes over the store it made.
        list(&mut writer, [99_999].into_iter());
        listed.unbounded_send(None).unwrap();
        assert_eq!(next(&mut pass, guard).await.as_deref(), Some("cm-99999"));
        taken(&series, "cm-99999");

        // A list of some objects: those, after what is left of the pass.
        list(&mut writer, [1, 2, 3].into_iter());
        listed.unbounded_send(None).unwrap();
        let first = next(&mut pass, guard).await.unwrap();
        taken(&series, &first);
        let changed = store.get(&ObjectRef::new("cm-00003").within("default"));
        listed
            .unbounded_send(Some(changed.into_iter().collect()))
            .unwrap();
        let mut asked = vec![first];
        for _ in 0..3 {
            let name = next(&mut pass, guard).await.unwrap();
            taken(&series, &name);
            asked.push(name);
        }
        asked.sort();
        assert_eq!(asked, ["cm-00001", "cm-00002", "cm-00003", "cm-00003"]);
        assert_eq!(next(&mut pass, soon).await, None, "the pass is over");
        drop(listed);
        assert_eq!(
            next(&mut pass, guard).await.as_deref(),
            Some("<end>"),
            "no more lists, no more passes"
        );
    }
}
