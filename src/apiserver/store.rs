//! The in-memory object store: one global resourceVersion counter, per-resource ordered maps
//! that snapshot in O(1), a bounded change history for watches, and a broadcast of changes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::registry::ResourceKey;
use super::status::{ApiError, ApiResult};

/// The identity of an object within its resource ("" namespace for cluster-scoped objects).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjKey {
    /// Namespace, "" when cluster-scoped.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjKey {
    /// A key from its parts.
    #[must_use]
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

/// One stored object: its JSON value and its serialized bytes (so lists never re-serialize).
#[derive(Debug)]
pub struct Stored {
    /// The object.
    pub value: Value,
    /// `value` serialized as JSON.
    pub json: Bytes,
    /// Its resourceVersion.
    pub rv: u64,
}

impl Stored {
    /// An object that is not stored (a dry run's answer), at resourceVersion `rv`.
    #[must_use]
    pub fn unsaved(value: Value, rv: u64) -> Self {
        Self::new(value, rv)
    }

    fn new(mut value: Value, rv: u64) -> Self {
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let json = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
        Self { value, json, rv }
    }
}

/// The objects of one resource, ordered by namespace then name.
pub type Objects = imbl::OrdMap<ObjKey, Arc<Stored>>;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Removed.
    Deleted,
}

/// One change, as kept in the history and broadcast to watches.
#[derive(Debug)]
pub struct Change {
    /// The resourceVersion of the change.
    pub rv: u64,
    /// The resource changed.
    pub resource: ResourceKey,
    /// The object's key.
    pub key: ObjKey,
    /// What happened.
    pub kind: ChangeType,
    /// The object after the change (for deletions: the last state, stamped with `rv`).
    pub object: Arc<Stored>,
    /// The object before the change (`None` for additions).
    pub previous: Option<Arc<Stored>>,
}

/// What a mutation decides to do with the object.
#[derive(Debug)]
pub enum Action {
    /// Store this value (create or update).
    Put(Value),
    /// Remove the object.
    Delete,
    /// Change nothing; answer with the current object.
    Keep,
}

/// The store's tunables.
#[derive(Debug, Clone)]
pub struct Limits {
    /// How many changes the history keeps for watch resumption and consistent continuation.
    pub history: usize,
    /// Capacity of the change broadcast; a watch lagging further is ended with 410 Expired.
    pub broadcast: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            history: 10_000,
            broadcast: 16_384,
        }
    }
}

struct Inner {
    rv: u64,
    tables: HashMap<ResourceKey, Objects>,
    history: VecDeque<Arc<Change>>,
    /// Changes with an rv at or below this may be missing from the history, for every resource
    /// (raised by [`Store::expire_history`]).
    compacted: u64,
    /// Per resource: its changes with an rv at or below this may be missing. Tracked per
    /// resource so that churn on one resource does not expire quiet resources' watches, as
    /// kube-apiserver keeps one watch cache per resource.
    compacted_by: HashMap<ResourceKey, u64>,
    snapshots: VecDeque<(ResourceKey, u64, Objects)>,
}

impl Inner {
    /// The resourceVersion at or below which `resource`'s changes may be missing.
    fn floor(&self, resource: &ResourceKey) -> u64 {
        self.compacted
            .max(self.compacted_by.get(resource).copied().unwrap_or(0))
    }
}

/// Where a watch starts.
#[derive(Debug)]
pub struct WatchStart {
    /// Changes after the requested resourceVersion (resume), oldest first.
    pub backlog: Vec<Arc<Change>>,
    /// The current objects (for synthetic ADDED events), when starting from "now".
    pub initial: Option<Objects>,
    /// The resourceVersion at which the watch is positioned.
    pub rv: u64,
    /// Live changes after `rv`.
    pub receiver: broadcast::Receiver<Arc<Change>>,
}

/// The in-memory store.
pub struct Store {
    inner: Mutex<Inner>,
    limits: Limits,
    events: broadcast::Sender<Arc<Change>>,
    watch_epoch: Mutex<CancellationToken>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

const SNAPSHOT_CACHE: usize = 16;

impl Store {
    /// An empty store.
    #[must_use]
    pub fn new(limits: Limits) -> Self {
        let (events, _) = broadcast::channel(limits.broadcast.max(1));
        Self {
            inner: Mutex::new(Inner {
                rv: 1,
                tables: HashMap::new(),
                history: VecDeque::new(),
                compacted: 0,
                compacted_by: HashMap::new(),
                snapshots: VecDeque::new(),
            }),
            limits,
            events,
            watch_epoch: Mutex::new(CancellationToken::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The latest resourceVersion.
    #[must_use]
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// One object.
    #[must_use]
    pub fn get(&self, resource: &ResourceKey, key: &ObjKey) -> Option<Arc<Stored>> {
        self.lock().tables.get(resource)?.get(key).cloned()
    }

    /// Whether an object exists.
    #[must_use]
    pub fn contains(&self, resource: &ResourceKey, key: &ObjKey) -> bool {
        self.get(resource, key).is_some()
    }

    /// The current objects of a resource and the resourceVersion they are consistent at.
    #[must_use]
    pub fn snapshot(&self, resource: &ResourceKey) -> (u64, Objects) {
        let inner = self.lock();
        (
            inner.rv,
            inner.tables.get(resource).cloned().unwrap_or_default(),
        )
    }

    /// The objects of a resource as they were at `rv` (for `resourceVersionMatch=Exact` and
    /// continue tokens).
    ///
    /// # Errors
    ///
    /// 410 Expired when the history no longer reaches back that far.
    pub fn snapshot_at(&self, resource: &ResourceKey, rv: u64) -> ApiResult<Objects> {
        let mut inner = self.lock();
        if rv >= inner.rv {
            return Ok(inner.tables.get(resource).cloned().unwrap_or_default());
        }
        if let Some((_, _, objs)) = inner
            .snapshots
            .iter()
            .find(|(r, v, _)| r == resource && *v == rv)
        {
            return Ok(objs.clone());
        }
        let floor = inner.floor(resource);
        if rv < floor {
            return Err(ApiError::expired(format!(
                "too old resource version: {rv} ({})",
                floor + 1
            )));
        }
        let mut objs = inner.tables.get(resource).cloned().unwrap_or_default();
        for change in inner.history.iter().rev() {
            if change.rv <= rv {
                break;
            }
            if change.resource != *resource {
                continue;
            }
            match &change.previous {
                Some(prev) => {
                    objs.insert(change.key.clone(), prev.clone());
                }
                None => {
                    objs.remove(&change.key);
                }
            }
        }
        if inner.snapshots.len() >= SNAPSHOT_CACHE {
            inner.snapshots.pop_front();
        }
        inner
            .snapshots
            .push_back((resource.clone(), rv, objs.clone()));
        Ok(objs)
    }

    /// Atomically read, decide and write one object. `decide` sees the current object and a
    /// lookup into the rest of the store (to check the namespace exists and is not
    /// terminating, say).
    ///
    /// # Errors
    ///
    /// Whatever `decide` returns.
    pub fn mutate<F>(
        &self,
        resource: &ResourceKey,
        key: &ObjKey,
        decide: F,
    ) -> ApiResult<(Option<Arc<Stored>>, Option<ChangeType>)>
    where
        F: FnOnce(
            Option<&Arc<Stored>>,
            &dyn Fn(&ResourceKey, &ObjKey) -> Option<Arc<Stored>>,
        ) -> ApiResult<Action>,
    {
        let mut inner = self.lock();
        let current = inner.tables.get(resource).and_then(|t| t.get(key)).cloned();
        let action = {
            let tables = &inner.tables;
            let lookup =
                |r: &ResourceKey, k: &ObjKey| tables.get(r).and_then(|t| t.get(k)).cloned();
            decide(current.as_ref(), &lookup)?
        };
        match action {
            Action::Keep => Ok((current, None)),
            Action::Put(value) => {
                let rv = inner.rv + 1;
                inner.rv = rv;
                let stored = Arc::new(Stored::new(value, rv));
                inner
                    .tables
                    .entry(resource.clone())
                    .or_default()
                    .insert(key.clone(), stored.clone());
                let kind = if current.is_some() {
                    ChangeType::Modified
                } else {
                    ChangeType::Added
                };
                self.record(&mut inner, resource, key, kind, stored.clone(), current);
                Ok((Some(stored), Some(kind)))
            }
            Action::Delete => {
                let Some(prev) = current else {
                    return Ok((None, None));
                };
                let rv = inner.rv + 1;
                inner.rv = rv;
                if let Some(t) = inner.tables.get_mut(resource) {
                    t.remove(key);
                }
                let last = Arc::new(Stored::new(prev.value.clone(), rv));
                self.record(
                    &mut inner,
                    resource,
                    key,
                    ChangeType::Deleted,
                    last.clone(),
                    Some(prev),
                );
                Ok((Some(last), Some(ChangeType::Deleted)))
            }
        }
    }

    fn record(
        &self,
        inner: &mut Inner,
        resource: &ResourceKey,
        key: &ObjKey,
        kind: ChangeType,
        object: Arc<Stored>,
        previous: Option<Arc<Stored>>,
    ) {
        let change = Arc::new(Change {
            rv: object.rv,
            resource: resource.clone(),
            key: key.clone(),
            kind,
            object,
            previous,
        });
        inner.history.push_back(change.clone());
        while inner.history.len() > self.limits.history {
            if let Some(old) = inner.history.pop_front() {
                let floor = inner.compacted_by.entry(old.resource.clone()).or_insert(0);
                *floor = (*floor).max(old.rv);
            }
        }
        // No receivers is fine: nobody watches.
        let _ = self.events.send(change);
    }

    /// The keys of every object in `namespace`, of every resource.
    #[must_use]
    pub fn keys_in_namespace(&self, namespace: &str) -> Vec<(ResourceKey, ObjKey)> {
        let inner = self.lock();
        inner
            .tables
            .iter()
            .flat_map(|(resource, objs)| {
                objs.range(ObjKey::new(namespace, "")..)
                    .take_while(|(k, _)| k.namespace == namespace)
                    .map(|(k, _)| (resource.clone(), k.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Delete every object of every resource in `namespace` (namespace deletion).
    pub fn delete_namespace_contents(&self, namespace: &str) {
        let mut inner = self.lock();
        let resources: Vec<ResourceKey> = inner.tables.keys().cloned().collect();
        for resource in resources {
            self.delete_matching(&mut inner, &resource, |k| k.namespace == namespace);
        }
    }

    /// Delete every object of a resource (CRD deletion).
    pub fn delete_resource(&self, resource: &ResourceKey) {
        let mut inner = self.lock();
        self.delete_matching(&mut inner, resource, |_| true);
        inner.tables.remove(resource);
    }

    fn delete_matching(
        &self,
        inner: &mut Inner,
        resource: &ResourceKey,
        pred: impl Fn(&ObjKey) -> bool,
    ) {
        let keys: Vec<ObjKey> = inner
            .tables
            .get(resource)
            .map(|t| t.keys().filter(|k| pred(k)).cloned().collect())
            .unwrap_or_default();
        for key in keys {
            let Some(old) = inner.tables.get_mut(resource).and_then(|t| t.remove(&key)) else {
                continue;
            };
            inner.rv += 1;
            let last = Arc::new(Stored::new(old.value.clone(), inner.rv));
            self.record(inner, resource, &key, ChangeType::Deleted, last, Some(old));
        }
    }

    /// Position a watch: from `from` (resume: the changes after it), or from now when `None`
    /// (the caller sends the current objects as ADDED). 410 Expired when `from` is older than
    /// the history.
    ///
    /// # Errors
    ///
    /// 410 Expired when `from` is older than the history window.
    pub fn watch(&self, resource: &ResourceKey, from: Option<u64>) -> ApiResult<WatchStart> {
        let inner = self.lock();
        let receiver = self.events.subscribe();
        match from {
            None => Ok(WatchStart {
                backlog: Vec::new(),
                initial: Some(inner.tables.get(resource).cloned().unwrap_or_default()),
                rv: inner.rv,
                receiver,
            }),
            Some(rv) => {
                let floor = inner.floor(resource);
                if rv < floor {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {rv} ({})",
                        floor + 1
                    )));
                }
                let backlog = inner
                    .history
                    .iter()
                    .filter(|c| c.rv > rv && c.resource == *resource)
                    .cloned()
                    .collect();
                Ok(WatchStart {
                    backlog,
                    initial: None,
                    rv: rv.max(inner.rv),
                    receiver,
                })
            }
        }
    }

    /// A token cancelled when watches are dropped by fault injection.
    #[must_use]
    pub fn watch_epoch(&self) -> CancellationToken {
        self.watch_epoch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// End every open watch now (their clients see the stream close and re-watch).
    pub fn drop_watches(&self) {
        let mut epoch = self
            .watch_epoch
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        epoch.cancel();
        *epoch = CancellationToken::new();
    }

    /// Forget the history: every resume from an older resourceVersion gets 410 Expired.
    pub fn expire_history(&self) {
        let mut inner = self.lock();
        inner.history.clear();
        inner.snapshots.clear();
        inner.compacted = inner.rv;
        inner.compacted_by.clear();
    }

    /// Number of stored objects, over all resources.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().tables.values().map(imbl::OrdMap::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(name: &str, v: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}, "data": {"v": v}})
    }

    fn put(store: &Store, name: &str, v: &str) -> u64 {
        let r = ResourceKey::new("", "configmaps");
        let (obj, _) = store
            .mutate(&r, &ObjKey::new("ns", name), |_, _| {
                Ok(Action::Put(cm(name, v)))
            })
            .unwrap();
        obj.unwrap().rv
    }

    #[test]
    fn every_write_gets_a_larger_resource_version_stamped_into_metadata() {
        let store = Store::new(Limits::default());
        let a = put(&store, "a", "1");
        let b = put(&store, "a", "2");
        assert!(b > a);
        let got = store
            .get(&ResourceKey::new("", "configmaps"), &ObjKey::new("ns", "a"))
            .unwrap();
        assert_eq!(got.value["metadata"]["resourceVersion"], b.to_string());
    }

    #[test]
    fn snapshot_at_an_old_version_undoes_later_changes() {
        let store = Store::new(Limits::default());
        let r = ResourceKey::new("", "configmaps");
        let rv1 = put(&store, "a", "1");
        put(&store, "a", "2");
        put(&store, "b", "1");
        store
            .mutate(&r, &ObjKey::new("ns", "a"), |_, _| Ok(Action::Delete))
            .unwrap();
        let old = store.snapshot_at(&r, rv1).unwrap();
        assert_eq!(old.len(), 1);
        assert_eq!(
            old.get(&ObjKey::new("ns", "a")).unwrap().value["data"]["v"],
            "1"
        );
    }

    #[test]
    fn resuming_before_the_history_window_is_expired() {
        let store = Store::new(Limits {
            history: 2,
            broadcast: 8,
        });
        let r = ResourceKey::new("", "configmaps");
        let first = put(&store, "a", "1");
        put(&store, "a", "2");
        put(&store, "a", "3");
        put(&store, "a", "4");
        let err = store.watch(&r, Some(first)).unwrap_err();
        assert_eq!(err.code, 410);
        let ok = store.watch(&r, Some(store.current_rv() - 1)).unwrap();
        assert_eq!(ok.backlog.len(), 1);
    }

    #[test]
    fn churn_on_one_resource_does_not_expire_watches_of_another() {
        let store = Store::new(Limits {
            history: 2,
            broadcast: 8,
        });
        let secrets = ResourceKey::new("", "secrets");
        let quiet = store.current_rv();
        for v in ["1", "2", "3", "4"] {
            put(&store, "a", v);
        }
        assert!(store.watch(&secrets, Some(quiet)).is_ok());
        assert!(store.snapshot_at(&secrets, quiet).is_ok());
        let cms = ResourceKey::new("", "configmaps");
        assert_eq!(store.watch(&cms, Some(quiet)).unwrap_err().code, 410);
    }

    #[test]
    fn expire_history_forces_410_on_any_resume_but_now() {
        let store = Store::new(Limits::default());
        let r = ResourceKey::new("", "configmaps");
        let rv = put(&store, "a", "1");
        put(&store, "a", "2");
        store.expire_history();
        assert_eq!(store.watch(&r, Some(rv)).unwrap_err().code, 410);
        assert!(store.watch(&r, Some(store.current_rv())).is_ok());
    }
}
