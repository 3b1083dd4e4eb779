//! One kind's changes from the informer pool as a typed stream: each `Applied`/`Deleted`
//! decoded, and a fresh list through the cache tree whenever objects may have left without a
//! delete (the pool says `Resynced`, or this subscriber lagged behind).

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use kube::core::{DynamicObject, GroupVersionKind};
use kube::runtime::watcher;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

use std::hash::Hash;

use futures::StreamExt as _;
use kube::Resource;
use kube::runtime::reflector::{self, ObjectRef};

use super::context::Context;
use super::series::Series;
use crate::cache::typed::{self, AnyObject, Decoder};
use crate::cache::{Cache, InformerEvent, ListOptions, SharedCache};

/// What happened to the kind, decoded.
#[derive(Debug)]
pub enum Change<T> {
    /// An object was added or updated.
    Applied(T),
    /// An object was deleted.
    Deleted(T),
    /// Every object the cache tree holds now; anything not in it is gone.
    Listed(Vec<T>),
    /// As `Listed`, after an informer of the kind listed it again from the API server while it
    /// ran ([`InformerEvent::Relisted`]): a controller reconciles every object again.
    Relisted(Vec<T>),
}

impl<T> Change<T> {
    /// The objects the change touched (every object, for a list).
    pub fn into_objects(self) -> Vec<T> {
        match self {
            Change::Applied(obj) | Change::Deleted(obj) => vec![obj],
            Change::Listed(objs) | Change::Relisted(objs) => objs,
        }
    }

    /// The change as watcher events for a reflector store: a list is a whole relist (`Init`,
    /// `InitApply` each, `InitDone`), so objects absent from it leave the store.
    pub fn into_watcher_events(self) -> Vec<watcher::Event<T>> {
        match self {
            Change::Applied(obj) => vec![watcher::Event::Apply(obj)],
            Change::Deleted(obj) => vec![watcher::Event::Delete(obj)],
            Change::Listed(objs) | Change::Relisted(objs) => {
                let mut events = Vec::with_capacity(objs.len() + 2);
                events.push(watcher::Event::Init);
                events.extend(objs.into_iter().map(watcher::Event::InitApply));
                events.push(watcher::Event::InitDone);
                events
            }
        }
    }
}

/// Turns a cached object into `T`; `None` skips it (the decoder says why).
pub type Decode<T> = fn(&GroupVersionKind, Arc<DynamicObject>) -> Option<T>;

/// How long a failed list waits before it is tried again, at first and at most.
const LIST_RETRY: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(30));

/// How a subscriber follows its kind.
#[derive(Clone, Copy, Debug)]
pub enum Follow {
    /// The kind a controller keeps a store of: list first, and let each list supersede the
    /// events queued before it.
    Store,
    /// A kind whose changes only trigger reconciles: no list until the pool asks for one, and
    /// every queued event still triggers (a list can not show what was deleted).
    Trigger,
}

struct State<T> {
    events: broadcast::Receiver<InformerEvent>,
    cache: Arc<SharedCache>,
    gvk: GroupVersionKind,
    decode: Decode<T>,
    /// Lists as this decoder's type, taken out of each answer by the function, instead of
    /// decoding every object.
    list_as: Option<(Arc<dyn Decoder>, Unpack<T>)>,
    follow: Follow,
    list_pending: bool,
    /// The pending list follows an informer's relist ([`Change::Relisted`]).
    relisted: bool,
    retry: Duration,
}

/// The changes of `gvk` from `events` (subscribed before the kind's informers were ensured,
/// so nothing is missed).
///
/// On `Resynced` or a lag the kind is listed through `cache`. Following a store, the events
/// queued before the list are dropped: the list holds everything they did (an informer
/// publishes a change after storing it), so replaying them after it would only roll objects
/// back for a moment. A failed list is retried, 100 ms doubling to 30 s, while no event is
/// taken.
pub fn changes<T: Send + 'static>(
    events: broadcast::Receiver<InformerEvent>,
    cache: Arc<SharedCache>,
    gvk: GroupVersionKind,
    decode: Decode<T>,
    follow: Follow,
) -> impl Stream<Item = Change<T>> + Send {
    changes_from(events, cache, gvk, decode, None, follow)
}

/// Takes a `T` out of what a [`Decoder`] of `T` answered.
type Unpack<T> = fn(&GroupVersionKind, AnyObject) -> Option<T>;

fn unpack<T: Clone + Send + Sync + 'static>(gvk: &GroupVersionKind, obj: AnyObject) -> Option<T> {
    match typed::downcast::<T>(gvk, obj) {
        Ok(obj) => Some(Arc::unwrap_or_clone(obj)),
        Err(error) => {
            tracing::warn!(error = %crate::telemetry::error_chain(&error), "controller skips a listed object");
            None
        }
    }
}

/// [`changes`], listing with `list_as` (whose output must be `T`) through
/// [`crate::cache::Cache::list_as`] rather than decoding every listed object with `decode`:
/// how a controller lists its stubs without decoding an object.
pub(super) fn changes_with<T: Clone + Send + Sync + 'static>(
    events: broadcast::Receiver<InformerEvent>,
    cache: Arc<SharedCache>,
    gvk: GroupVersionKind,
    decode: Decode<T>,
    list_as: Arc<dyn Decoder>,
    follow: Follow,
) -> impl Stream<Item = Change<T>> + Send {
    changes_from(
        events,
        cache,
        gvk,
        decode,
        Some((list_as, unpack::<T>)),
        follow,
    )
}

fn changes_from<T: Send + 'static>(
    events: broadcast::Receiver<InformerEvent>,
    cache: Arc<SharedCache>,
    gvk: GroupVersionKind,
    decode: Decode<T>,
    list_as: Option<(Arc<dyn Decoder>, Unpack<T>)>,
    follow: Follow,
) -> impl Stream<Item = Change<T>> + Send {
    let state = State {
        events,
        cache,
        gvk,
        decode,
        list_as,
        follow,
        list_pending: matches!(follow, Follow::Store),
        relisted: false,
        retry: LIST_RETRY.0,
    };
    futures::stream::unfold(state, |mut state| async move {
        let change = state.next().await?;
        Some((change, state))
    })
}

impl<T> State<T> {
    /// Every object the cache tree holds now, as `T`.
    async fn list(&self) -> crate::cache::Result<Vec<T>> {
        let options = ListOptions::default();
        if let Some((decoder, unpack)) = &self.list_as {
            let objects = self
                .cache
                .list_as(&self.gvk, &options, decoder.as_ref())
                .await?;
            return Ok(objects
                .into_iter()
                .filter_map(|obj| unpack(&self.gvk, obj))
                .collect());
        }
        let objects = self.cache.list(&self.gvk, &options).await?;
        let decode = self.decode;
        Ok(objects
            .into_iter()
            .filter_map(|obj| decode(&self.gvk, obj))
            .collect())
    }

    async fn next(&mut self) -> Option<Change<T>> {
        loop {
            if self.list_pending {
                if matches!(self.follow, Follow::Store) {
                    self.drain();
                }
                match self.list().await {
                    Ok(objects) => {
                        self.list_pending = false;
                        self.retry = LIST_RETRY.0;
                        if std::mem::take(&mut self.relisted) {
                            return Some(Change::Relisted(objects));
                        }
                        return Some(Change::Listed(objects));
                    }
                    Err(error) => {
                        let chain = crate::telemetry::error_chain(&error);
                        let retry_in_ms = self.retry.as_millis();
                        let message = "controller cannot list its kind through the cache";
                        if matches!(error, crate::cache::Error::WaitingForKind { .. }) {
                            // Its CRD went: the controller stops this stream before long.
                            tracing::debug!(error = %chain, retry_in_ms, "{message}");
                        } else {
                            tracing::warn!(error = %chain, retry_in_ms, "{message}");
                        }
                        tokio::time::sleep(self.retry).await;
                        self.retry = (self.retry * 2).min(LIST_RETRY.1);
                        continue;
                    }
                }
            }
            match self.events.recv().await {
                Ok(InformerEvent::Applied(obj)) => {
                    if let Some(obj) = (self.decode)(&self.gvk, obj) {
                        return Some(Change::Applied(obj));
                    }
                }
                Ok(InformerEvent::Deleted(obj)) => {
                    if let Some(obj) = (self.decode)(&self.gvk, obj) {
                        return Some(Change::Deleted(obj));
                    }
                }
                Ok(InformerEvent::Resynced) => self.list_pending = true,
                Ok(InformerEvent::Relisted) => {
                    self.list_pending = true;
                    self.relisted = true;
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, "controller lagged behind the informers, relisting");
                    self.list_pending = true;
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }

    /// Drops every queued event: the list about to be taken supersedes them.
    fn drain(&mut self) {
        loop {
            match self.events.try_recv() {
                Ok(_) | Err(TryRecvError::Lagged(_)) => {}
                Err(TryRecvError::Empty | TryRecvError::Closed) => return,
            }
        }
    }
}

/// The objects a controller reconciles, as kube-runtime's runner takes them: the `changes` of
/// its kind (following a store) reflected into `writer`, the runner's store. Returns two
/// trigger streams: each applied object that is news to the store (for
/// `Controller::for_stream`), counted as a workqueue add in `series`, and, after each list, a
/// pass ([`super::LIST_PASS_QUEUE`]) (for `Controller::reconcile_on`). Each deleted object's
/// failure count is forgotten in `ctx`. Rust controllers (`K` a `Stub` of their type) and hook
/// controllers (of a `DynamicObject` of `dyntype`) build their runner on it.
///
/// News to the store is an object it does not hold, or holds with another `resourceVersion`.
/// A list the manager takes itself — a reload or a change of namespaces or shard share started
/// new informers, one stopped, or this subscriber lagged — passes over the objects it brought
/// in or changed: an object the store held as it is was reconciled already, and is not
/// reconciled again because the manager's scope moved elsewhere. After an informer listed the
/// kind again from the API server ([`Change::Relisted`]) the pass goes over every object, as
/// controller-runtime reconciles every object after client-go's informer relisted. A list's
/// objects are not triggered one by one as they are stored: the store takes the whole list at
/// once (so its readiness and the objects that left are exact), and the pass then asks for
/// each object at the runner's pace.
pub fn reflected<K>(
    changes: impl Stream<Item = Change<K>> + Send + 'static,
    writer: reflector::store::Writer<K>,
    dyntype: K::DynamicType,
    ctx: Context,
    series: Series,
) -> (
    impl Stream<Item = Result<K, watcher::Error>> + Send,
    impl Stream<Item = ObjectRef<K>> + Send,
)
where
    K: Resource + Versioned + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    reflected_into(
        changes,
        Arc::new(std::sync::Mutex::new(writer)),
        dyntype,
        ctx,
        series,
    )
}

/// A runner store's writer that outlives one runner: a Rust controller whose kind went away
/// and came back starts a new runner on the store it handed out ([`super::Controller::store`]).
pub(super) type SharedWriter<K> = Arc<std::sync::Mutex<reflector::store::Writer<K>>>;

/// [`reflected`] into a writer the caller keeps. Each event is applied to the store with
/// kube-runtime's own [`reflector::store::Writer::apply_watcher_event`], as its `reflect` does
/// (the writer is not a shared one, so there is nothing to dispatch).
pub(super) fn reflected_into<K>(
    changes: impl Stream<Item = Change<K>> + Send + 'static,
    writer: SharedWriter<K>,
    dyntype: K::DynamicType,
    ctx: Context,
    series: Series,
) -> (
    impl Stream<Item = Result<K, watcher::Error>> + Send,
    impl Stream<Item = ObjectRef<K>> + Send,
)
where
    K: Resource + Versioned + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    let (listed, lists) = futures::channel::mpsc::unbounded();
    let reader = writer
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .as_reader();
    let pass = super::pass::list_pass(reader.clone(), dyntype.clone(), series.clone(), lists);
    let applied = changes.flat_map(move |change| {
        let key = |obj: &K| ObjectRef::from_obj_with(obj, dyntype.clone());
        let triggered = match change {
            Change::Applied(obj) => {
                let object = key(&obj);
                let news = is_change(&reader, &object, &obj);
                let event = watcher::Event::Apply(obj);
                apply(&writer, &event);
                match event {
                    watcher::Event::Apply(obj) if news => {
                        series.queue_added(&object);
                        Some(Ok(obj))
                    }
                    _ => None,
                }
            }
            Change::Deleted(obj) => {
                ctx.forget(&key(&obj).erase());
                apply(&writer, &watcher::Event::Delete(obj));
                None
            }
            Change::Listed(objs) => {
                let fresh: Vec<bool> = objs
                    .iter()
                    .map(|obj| is_change(&reader, &key(obj), obj))
                    .collect();
                // Everything is news (the first list): the pass goes over the whole store, and
                // no reference to every object is built for it.
                let news = (!fresh.iter().all(|f| *f)).then(|| {
                    objs.iter()
                        .zip(&fresh)
                        .filter(|(_, fresh)| **fresh)
                        .map(|(obj, _)| key(obj))
                        .collect::<Vec<_>>()
                });
                relist(&writer, objs);
                let news = news.map(|keys| keys.iter().filter_map(|k| reader.get(k)).collect());
                // The receiver lives as long as the pass stream; a controller that dropped it
                // wants no pass.
                let _ = listed.unbounded_send(news);
                None
            }
            Change::Relisted(objs) => {
                relist(&writer, objs);
                let _ = listed.unbounded_send(None);
                None
            }
        };
        futures::stream::iter(triggered)
    });
    (applied, pass)
}

/// Whether `obj` is news to the runner's store: absent from it, or another `resourceVersion`
/// than the copy it holds (every write of an object gives it a new one, a new object of the
/// same name too, so the same one is the same object, seen again in a list or in a new
/// informer's first list). An object without one is always news.
fn is_change<K>(store: &reflector::Store<K>, key: &ObjectRef<K>, obj: &K) -> bool
where
    K: Resource + Versioned + Clone,
    K::DynamicType: Clone + Eq + Hash,
{
    store
        .get(key)
        .is_none_or(|held| obj.version().is_none() || held.version() != obj.version())
}

/// What tells two copies of an object in a runner's store apart: its `resourceVersion`.
pub trait Versioned {
    /// The object's `resourceVersion`, if known.
    fn version(&self) -> Option<&str>;
}

fn apply<K>(writer: &SharedWriter<K>, event: &watcher::Event<K>)
where
    K: Resource + Clone,
    K::DynamicType: Clone + Eq + Hash,
{
    writer
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .apply_watcher_event(event);
}

/// Replaces the store's objects by `objs`, as kube-runtime's reflector applies a relist.
fn relist<K>(writer: &SharedWriter<K>, objs: Vec<K>)
where
    K: Resource + Clone,
    K::DynamicType: Clone + Eq + Hash,
{
    let mut writer = writer
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for event in Change::Listed(objs).into_watcher_events() {
        writer.apply_watcher_event(&event);
    }
}

#[cfg(test)]
mod tests {
    use futures::channel::mpsc;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::controller::Stub;

    fn configmap(name: &str, version: &str) -> Stub<ConfigMap> {
        Stub::new(name, Some("default")).at_version(Some(version))
    }

    /// What `stream` yields within `within` (each taken from the queue), sorted.
    async fn names(
        stream: &mut (impl Stream<Item = ObjectRef<Stub<ConfigMap>>> + Unpin),
        series: &Series,
        within: Duration,
    ) -> Vec<String> {
        let mut names = Vec::new();
        while let Ok(Some(object)) = tokio::time::timeout(within, stream.next()).await {
            series.taken(&object);
            names.push(object.name);
        }
        names.sort();
        names
    }

    /// The objects the applied stream triggers within `within`.
    async fn triggered(
        applied: &mut (impl Stream<Item = Result<Stub<ConfigMap>, watcher::Error>> + Unpin),
        within: Duration,
    ) -> Vec<String> {
        let mut names = Vec::new();
        while let Ok(Some(Ok(object))) = tokio::time::timeout(within, applied.next()).await {
            names.push(object.name().to_owned());
        }
        names
    }

    /// A list the manager takes itself (a reload, a namespace or share change, a lag) and an
    /// event that shows an object as the store holds it reconcile nothing again; a relist of
    /// an informer reconciles every object, as controller-runtime does after client-go's.
    #[tokio::test]
    async fn only_news_to_the_store_is_reconciled_except_after_an_informer_relisted() {
        let soon = Duration::from_millis(100);
        let (changes, rx) = mpsc::unbounded();
        let (store, writer) = reflector::store::<Stub<ConfigMap>>();
        let series = Series::default();
        let dyntype = Arc::new(());
        let (applied, pass) = reflected(rx, writer, dyntype, Context::offline(), series.clone());
        let (mut applied, mut pass) = (Box::pin(applied), Box::pin(pass));
        let send = |change| changes.unbounded_send(change).unwrap();

        // The first list: everything is news.
        send(Change::Listed(vec![
            configmap("a", "1"),
            configmap("b", "1"),
        ]));
        assert_eq!(triggered(&mut applied, soon).await, Vec::<String>::new());
        assert_eq!(names(&mut pass, &series, soon).await, ["a", "b"]);

        // An event: only a changed version.
        send(Change::Applied(configmap("a", "1")));
        send(Change::Applied(configmap("b", "2")));
        assert_eq!(triggered(&mut applied, soon).await, ["b"]);

        // A list the manager took: the new object only; one that left leaves the store.
        send(Change::Listed(vec![
            configmap("b", "2"),
            configmap("c", "1"),
            configmap("d", "1"),
        ]));
        assert_eq!(triggered(&mut applied, soon).await, Vec::<String>::new());
        assert_eq!(names(&mut pass, &series, soon).await, ["c", "d"]);
        assert!(
            store
                .get(&ObjectRef::new_with("a", Arc::new(())).within("default"))
                .is_none()
        );
        send(Change::Listed(vec![
            configmap("c", "2"),
            configmap("d", "1"),
        ]));
        triggered(&mut applied, soon).await;
        assert_eq!(names(&mut pass, &series, soon).await, ["c"]);

        // An informer relisted: every object.
        send(Change::Relisted(vec![
            configmap("c", "2"),
            configmap("d", "1"),
        ]));
        triggered(&mut applied, soon).await;
        assert_eq!(names(&mut pass, &series, soon).await, ["c", "d"]);
    }
}
