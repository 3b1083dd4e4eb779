//! An informer's reflector store in the form its read mode needs: compact objects decoded on
//! each read (deep copy, the default), or parsed objects handed out shared
//! (`unsafeDisableDeepCopy`), each with the typed copy typed reads share.

use std::any::Any;
use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::LocalKey;

use kube::{
    api::{ObjectMeta, TypeMeta},
    core::{ApiResource, DynamicObject, GroupVersionKind},
    runtime::{
        reflector::{Lookup, ObjectRef, Store, store::Writer},
        watcher,
    },
};

use super::compact::{CompactObject, StoreKind, shared_resource_type};
use super::error::{Error, Result};
use super::matching;
use super::typed::{AnyObject, Decoder};
use crate::selector::LabelSelector;

thread_local! {
    /// The key of this thread's last read of a compact store, rewritten in place by the next.
    static COMPACT_KEY: RefCell<Option<ObjectRef<CompactObject>>> = const { RefCell::new(None) };
    /// The same for shared stores.
    static SHARED_KEY: RefCell<Option<ObjectRef<SharedObject>>> = const { RefCell::new(None) };
}

/// `store`'s object `namespace/name`, its key of kind `resource` taken from `slot`. kube-runtime's
/// `Store::get` takes an `ObjectRef`, which owns its name and namespace; building one per read
/// cost two allocations each read (every reconcile starts with one), so each thread rewrites
/// the key of its last read instead. A thread keeps the `ApiResource` of the last kind it read.
fn lookup<K>(
    slot: &'static LocalKey<RefCell<Option<ObjectRef<K>>>>,
    store: &Store<K>,
    resource: &StoreKind,
    namespace: Option<&str>,
    name: &str,
) -> Option<Arc<K>>
where
    K: Lookup<DynamicType = StoreKind> + Clone + 'static,
{
    slot.with_borrow_mut(|slot| {
        if slot
            .as_ref()
            .is_some_and(|key| !Arc::ptr_eq(&key.dyntype.0, &resource.0))
        {
            *slot = None;
        }
        let key = slot.get_or_insert_with(|| ObjectRef::new_with("", resource.clone()));
        key.name.clear();
        key.name.push_str(name);
        match namespace {
            Some(namespace) => {
                let text = key.namespace.get_or_insert_with(String::new);
                text.clear();
                text.push_str(namespace);
            }
            None => key.namespace = None,
        }
        store.get(key)
    })
}

/// The reading half of the store.
enum Reader {
    /// Deep-copying reads: compact objects, decoded on each read.
    Compact(Store<CompactObject>),
    /// `unsafeDisableDeepCopy`: parsed objects, handed out shared.
    Shared(Store<SharedObject>),
}

/// A parsed object of a store whose reads share objects, and the typed copy typed reads share,
/// made by the first typed read. A changed object is a new `SharedObject` with an empty slot,
/// so a typed copy never outlives the version it was made from; memory for typed copies is
/// only spent on objects read typed. The wrapper and its empty slot cost 48 bytes per object,
/// less than the copy of the `ApiResource` each key carried before keys shared one.
#[derive(Clone)]
struct SharedObject {
    object: Arc<DynamicObject>,
    typed: OnceLock<AnyObject>,
}

impl SharedObject {
    fn new(object: DynamicObject) -> Self {
        Self {
            object: Arc::new(object),
            typed: OnceLock::new(),
        }
    }

    /// The store key of `obj` only (a deleted object needs no more).
    fn key_of(obj: &DynamicObject) -> Self {
        Self::new(DynamicObject {
            types: None,
            metadata: ObjectMeta {
                name: obj.metadata.name.clone(),
                namespace: obj.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            data: serde_json::Value::Null,
        })
    }
}

/// Keys as [`CompactObject`]'s: the informer's [`StoreKind`], name and namespace only.
impl Lookup for SharedObject {
    type DynamicType = StoreKind;

    shared_resource_type!();

    fn name(&self) -> Option<Cow<'_, str>> {
        self.object.metadata.name.as_deref().map(Cow::Borrowed)
    }

    fn namespace(&self) -> Option<Cow<'_, str>> {
        self.object.metadata.namespace.as_deref().map(Cow::Borrowed)
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }

    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

/// The writing half of an informer's reflector store, taken once by whoever drives it
/// ([`super::Informer::start`], or a test calling [`super::Informer::run_events`]).
pub(crate) struct StoreWriter {
    kind: WriterKind,
    /// The informer's kind, for store keys.
    key_resource: StoreKind,
    /// The bytes the store holds and those its transform saved, shared with its
    /// [`ObjectStore`].
    counts: Arc<Counts>,
    /// The same, of the relist being buffered (between `Init` and `InitDone`).
    init: (i64, i64),
}

/// What a compact store's objects hold, and what the informer's transform saved on them.
#[derive(Debug, Default)]
struct Counts {
    bytes: AtomicI64,
    saved: AtomicI64,
}

enum WriterKind {
    Compact(Writer<CompactObject>),
    Shared(Writer<SharedObject>),
}

impl std::fmt::Debug for StoreWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreWriter").finish_non_exhaustive()
    }
}

impl StoreWriter {
    /// Applies one (already transformed) watcher event, encoding its object for a compact
    /// store.
    pub(crate) fn apply(&mut self, event: &watcher::Event<DynamicObject>) {
        self.apply_transformed(event, None);
    }

    /// Whether the store counts what a transform saves (a compact store: its objects' bytes
    /// are known exactly).
    pub(crate) fn counts_bytes(&self) -> bool {
        matches!(self.kind, WriterKind::Compact(_))
    }

    /// Applies one watcher event whose object a transform changed; `served` is
    /// [`CompactObject::held_bytes`] of the object as it was served, before the transform, so
    /// that the store counts what the transform saved on it.
    pub(crate) fn apply_transformed(
        &mut self,
        event: &watcher::Event<DynamicObject>,
        served: Option<usize>,
    ) {
        match &mut self.kind {
            WriterKind::Shared(writer) => writer.apply_watcher_event(&shared_event(event)),
            WriterKind::Compact(writer) => {
                let Some(event) = compact_event(event, served) else {
                    return;
                };
                let counts = &self.counts;
                let add = |(bytes, saved): (i64, i64)| {
                    counts.bytes.fetch_add(bytes, Ordering::Relaxed);
                    counts.saved.fetch_add(saved, Ordering::Relaxed);
                };
                match &event {
                    watcher::Event::Apply(obj) => {
                        let (new, old) = (held(obj), stored(writer, &self.key_resource, obj));
                        add((new.0 - old.0, new.1 - old.1));
                    }
                    watcher::Event::Delete(obj) => {
                        let old = stored(writer, &self.key_resource, obj);
                        add((-old.0, -old.1));
                    }
                    watcher::Event::Init => self.init = (0, 0),
                    watcher::Event::InitApply(obj) => {
                        let (bytes, saved) = held(obj);
                        self.init.0 += bytes;
                        self.init.1 += saved;
                    }
                    watcher::Event::InitDone => {
                        counts.bytes.store(self.init.0, Ordering::Relaxed);
                        counts.saved.store(self.init.1, Ordering::Relaxed);
                    }
                }
                writer.apply_watcher_event(&event);
            }
        }
    }
}

/// The bytes `obj` holds ([`CompactObject::held_bytes`]) and those a transform saved on it.
fn held(obj: &CompactObject) -> (i64, i64) {
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    (count(obj.held_bytes()), count(obj.saved_bytes()))
}

/// [`held`] of the object `writer`'s store keeps under `obj`'s key (0 when none).
fn stored(writer: &Writer<CompactObject>, key: &StoreKind, obj: &CompactObject) -> (i64, i64) {
    writer
        .as_reader()
        .get(&obj.to_object_ref(key.clone()))
        .map_or((0, 0), |old| held(&old))
}

/// The objects of one informer, read as deep copies or shared.
pub(crate) struct ObjectStore {
    gvk: GroupVersionKind,
    reader: Reader,
    /// Store keys share this one.
    key_resource: StoreKind,
    /// `apiVersion` and `kind` of decoded objects.
    types: TypeMeta,
    /// What a compact store's objects hold and what a transform saved, kept by its writer.
    counts: Arc<Counts>,
}

impl ObjectStore {
    /// An empty store of `resource` objects and its writer: shared parsed objects when
    /// `shared`, compact ones otherwise.
    pub(crate) fn new(
        gvk: GroupVersionKind,
        resource: &ApiResource,
        shared: bool,
    ) -> (Self, StoreWriter) {
        let key_resource = StoreKind(Arc::new(resource.clone()));
        let (reader, writer) = if shared {
            let writer = Writer::new(key_resource.clone());
            (
                Reader::Shared(writer.as_reader()),
                WriterKind::Shared(writer),
            )
        } else {
            let writer = Writer::new(key_resource.clone());
            (
                Reader::Compact(writer.as_reader()),
                WriterKind::Compact(writer),
            )
        };
        let types = TypeMeta {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        };
        let counts = Arc::new(Counts::default());
        let writer = StoreWriter {
            kind: writer,
            key_resource: key_resource.clone(),
            counts: Arc::clone(&counts),
            init: (0, 0),
        };
        let store = Self {
            gvk,
            reader,
            key_resource,
            types,
            counts,
        };
        (store, writer)
    }

    /// The bytes the objects of a compact store hold ([`CompactObject::held_bytes`], summed as
    /// the writer applies events); `None` for a shared store, whose parsed objects' heap size
    /// is not known exactly.
    pub(crate) fn bytes(&self) -> Option<i64> {
        match self.reader {
            Reader::Compact(_) => Some(self.counts.bytes.load(Ordering::Relaxed)),
            Reader::Shared(_) => None,
        }
    }

    /// The bytes the informer's transform saved on the objects a compact store holds (what
    /// they would hold as served less what they hold); `None` for a shared store.
    pub(crate) fn saved_bytes(&self) -> Option<i64> {
        match self.reader {
            Reader::Compact(_) => Some(self.counts.saved.load(Ordering::Relaxed)),
            Reader::Shared(_) => None,
        }
    }

    /// Objects in the store.
    pub(crate) fn len(&self) -> usize {
        match &self.reader {
            Reader::Compact(store) => store.len(),
            Reader::Shared(store) => store.len(),
        }
    }

    /// Whether objects are stored compactly.
    #[cfg(test)]
    pub(crate) fn is_compact(&self) -> bool {
        matches!(self.reader, Reader::Compact(_))
    }

    /// A fresh object decoded from the compact store.
    fn decode(&self, obj: &CompactObject) -> Result<Arc<DynamicObject>> {
        obj.decode(&self.types)
            .map(Arc::new)
            .map_err(|source| Error::Decode {
                gvk: self.gvk.clone(),
                object: object_name(obj),
                source,
            })
    }

    fn convert_error(&self, source: serde_json::Error) -> Error {
        Error::Convert {
            gvk: self.gvk.clone(),
            source,
        }
    }

    /// The typed copy of a shared object: the one kept beside it, made by the first typed read.
    fn shared_as(&self, obj: &SharedObject, decoder: &dyn Decoder) -> Result<AnyObject> {
        let of_type = |typed: &&AnyObject| Any::type_id(&***typed) == decoder.output();
        if let Some(typed) = obj.typed.get().filter(of_type) {
            return Ok(Arc::clone(typed));
        }
        let typed = decoder
            .convert(&obj.object, Some(&self.types))
            .map_err(|e| self.convert_error(e))?;
        if !decoder.keep() {
            return Ok(typed);
        }
        // Readers racing on the first typed read all hand out the copy that was kept; a second
        // type read from the same kind is converted on each read.
        let _ = obj.typed.set(Arc::clone(&typed));
        Ok(obj.typed.get().filter(of_type).map_or(typed, Arc::clone))
    }

    fn compact_get(
        &self,
        store: &Store<CompactObject>,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<CompactObject>> {
        lookup(&COMPACT_KEY, store, &self.key_resource, namespace, name)
    }

    fn shared_get(
        &self,
        store: &Store<SharedObject>,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<SharedObject>> {
        lookup(&SHARED_KEY, store, &self.key_resource, namespace, name)
    }

    /// The object `namespace/name` (`namespace` is `None` for cluster-scoped kinds): decoded,
    /// or shared.
    pub(crate) fn get(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>> {
        match &self.reader {
            Reader::Shared(store) => Ok(self
                .shared_get(store, namespace, name)
                .map(|obj| Arc::clone(&obj.object))),
            Reader::Compact(store) => self
                .compact_get(store, namespace, name)
                .map(|obj| self.decode(&obj))
                .transpose(),
        }
    }

    /// The object `namespace/name` as `decoder`'s type: decoded once from the compact store, or
    /// the typed copy kept beside the shared object.
    pub(crate) fn get_as(
        &self,
        namespace: Option<&str>,
        name: &str,
        decoder: &dyn Decoder,
    ) -> Result<Option<AnyObject>> {
        match &self.reader {
            Reader::Shared(store) => self
                .shared_get(store, namespace, name)
                .map(|obj| self.shared_as(&obj, decoder))
                .transpose(),
            Reader::Compact(store) => self
                .compact_get(store, namespace, name)
                .map(|obj| {
                    decoder
                        .decode(&obj, &self.types)
                        .map_err(|e| self.convert_error(e))
                })
                .transpose(),
        }
    }

    /// Objects in `namespace` (all when `None`) matching `labels` and the exact `fields`,
    /// sorted by namespace and name, at most `limit`.
    pub(crate) fn list(
        &self,
        namespace: Option<&str>,
        labels: Option<&LabelSelector>,
        fields: &[(&str, &str)],
        limit: usize,
    ) -> Result<Vec<Arc<DynamicObject>>> {
        match &self.reader {
            Reader::Shared(store) => Ok(shared_matches(store, namespace, labels, fields, limit)
                .into_iter()
                .map(|obj| Arc::clone(&obj.object))
                .collect()),
            Reader::Compact(store) => {
                let mut found = Vec::new();
                for obj in compact_candidates(store, namespace, labels, fields) {
                    if found.len() >= limit {
                        break;
                    }
                    // Other fields are checked on the decoded copy that is handed out anyway.
                    let decoded = self.decode(&obj)?;
                    if fields
                        .iter()
                        .all(|(f, v)| matching::field_value(&decoded, f) == *v)
                    {
                        found.push(decoded);
                    }
                }
                Ok(found)
            }
        }
    }

    /// What [`ObjectStore::list`] selects, as `decoder`'s type (see [`ObjectStore::get_as`]).
    pub(crate) fn list_as(
        &self,
        namespace: Option<&str>,
        labels: Option<&LabelSelector>,
        fields: &[(&str, &str)],
        limit: usize,
        decoder: &dyn Decoder,
    ) -> Result<Vec<AnyObject>> {
        match &self.reader {
            Reader::Shared(store) => shared_matches(store, namespace, labels, fields, limit)
                .iter()
                .map(|obj| self.shared_as(obj, decoder))
                .collect(),
            Reader::Compact(store) => {
                // Fields other than name and namespace are read from the object's parsed data
                // (as `matching::field_value` reads them), only when the selector has some.
                let other_fields: Vec<_> = fields
                    .iter()
                    .filter(|(f, _)| !matches!(*f, "metadata.name" | "metadata.namespace"))
                    .collect();
                let mut found = Vec::new();
                for obj in compact_candidates(store, namespace, labels, fields) {
                    if found.len() >= limit {
                        break;
                    }
                    if !other_fields.is_empty() {
                        let data = DynamicObject {
                            types: None,
                            metadata: ObjectMeta::default(),
                            data: obj.data().map_err(|source| Error::Decode {
                                gvk: self.gvk.clone(),
                                object: object_name(&obj),
                                source,
                            })?,
                        };
                        if !other_fields
                            .iter()
                            .all(|(f, v)| matching::field_value(&data, f) == *v)
                        {
                            continue;
                        }
                    }
                    found.push(
                        decoder
                            .decode(&obj, &self.types)
                            .map_err(|e| self.convert_error(e))?,
                    );
                }
                Ok(found)
            }
        }
    }
}

/// `namespace/name`, or `name` when cluster-scoped.
fn object_name(obj: &CompactObject) -> String {
    match obj.namespace() {
        Some(ns) => format!("{ns}/{}", obj.name()),
        None => obj.name().to_string(),
    }
}

/// Shared objects in `namespace` matching `labels` and `fields`, sorted by namespace and name,
/// at most `limit`.
fn shared_matches(
    store: &Store<SharedObject>,
    namespace: Option<&str>,
    labels: Option<&LabelSelector>,
    fields: &[(&str, &str)],
    limit: usize,
) -> Vec<Arc<SharedObject>> {
    let mut found = store.state_filter(|obj| {
        let obj = &obj.object;
        namespace.is_none_or(|ns| obj.metadata.namespace.as_deref() == Some(ns))
            && matching::list_matches(obj, labels, fields)
    });
    found.sort_by(|a, b| {
        (&a.object.metadata.namespace, &a.object.metadata.name)
            .cmp(&(&b.object.metadata.namespace, &b.object.metadata.name))
    });
    found.truncate(limit);
    found
}

/// Compact objects in `namespace` matching `labels` and the `metadata.name` and
/// `metadata.namespace` requirements of `fields` (checked without decoding), sorted by
/// namespace and name.
fn compact_candidates(
    store: &Store<CompactObject>,
    namespace: Option<&str>,
    labels: Option<&LabelSelector>,
    fields: &[(&str, &str)],
) -> Vec<Arc<CompactObject>> {
    let mut candidates = store.state_filter(|obj| {
        namespace.is_none_or(|ns| obj.namespace() == Some(ns))
            && labels.is_none_or(|sel| sel.matches_with(|key| obj.label(key)))
            && fields.iter().all(|(f, v)| match *f {
                "metadata.name" => obj.name() == *v,
                "metadata.namespace" => obj.namespace().unwrap_or_default() == *v,
                _ => true,
            })
    });
    candidates.sort_by(|a, b| (a.namespace(), a.name()).cmp(&(b.namespace(), b.name())));
    candidates
}

/// The event for the shared store: each object wrapped with an empty typed slot.
fn shared_event(event: &watcher::Event<DynamicObject>) -> watcher::Event<SharedObject> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(SharedObject::new(o.clone())),
        watcher::Event::Delete(o) => watcher::Event::Delete(SharedObject::key_of(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(SharedObject::new(o.clone())),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// The event for the compact store; an object that can not be encoded is left out, with a
/// warning (serializing a parsed object as JSON does not fail in practice).
fn compact_event(
    event: &watcher::Event<DynamicObject>,
    served: Option<usize>,
) -> Option<watcher::Event<CompactObject>> {
    let encode = |obj: &DynamicObject| match CompactObject::encode(obj) {
        Ok(compact) => Some(match served {
            Some(served) => {
                let saved = served.saturating_sub(compact.held_bytes());
                compact.with_saved(saved)
            }
            None => compact,
        }),
        Err(error) => {
            tracing::warn!(
                object.ref = %format!("{}/{}", obj.metadata.namespace.as_deref().unwrap_or(""), obj.metadata.name.as_deref().unwrap_or("")),
                error = %crate::telemetry::error_chain(&error),
                "object can not be cached"
            );
            None
        }
    };
    Some(match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(encode(o)?),
        watcher::Event::Delete(o) => watcher::Event::Delete(encode(o)?),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(encode(o)?),
        watcher::Event::InitDone => watcher::Event::InitDone,
    })
}

#[cfg(test)]
mod tests;
