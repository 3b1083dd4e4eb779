//! An informer's reflector store in the form its read mode needs: compact objects decoded on
//! each read (deep copy, the default), or parsed objects handed out shared
//! (`unsafeDisableDeepCopy`).

use std::sync::Arc;

use kube::{
    api::TypeMeta,
    core::{ApiResource, DynamicObject, GroupVersionKind},
    runtime::{
        reflector::{ObjectRef, Store, store::Writer},
        watcher,
    },
};

use super::compact::CompactObject;
use super::error::{Error, Result};
use super::matching;
use crate::selector::LabelSelector;

/// The reading half of the store.
enum Reader {
    /// Deep-copying reads: compact objects, decoded on each read.
    Compact(Store<CompactObject>),
    /// `unsafeDisableDeepCopy`: parsed objects, handed out shared.
    Shared(Store<DynamicObject>),
}

/// The writing half of an informer's reflector store, taken once by whoever drives it
/// ([`super::Informer::start`], or a test calling [`super::Informer::run_events`]).
pub struct StoreWriter(WriterKind);

enum WriterKind {
    Compact(Writer<CompactObject>),
    Shared(Writer<DynamicObject>),
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
        match &mut self.0 {
            WriterKind::Shared(writer) => writer.apply_watcher_event(event),
            WriterKind::Compact(writer) => {
                if let Some(event) = compact_event(event) {
                    writer.apply_watcher_event(&event);
                }
            }
        }
    }
}

/// The objects of one informer, read as deep copies or shared.
pub(crate) struct ObjectStore {
    gvk: GroupVersionKind,
    reader: Reader,
    /// Shared-store keys carry their own `ApiResource` (kube-rs's `DynamicObject` key).
    resource: ApiResource,
    /// Compact-store keys share this one.
    key_resource: Arc<ApiResource>,
    /// `apiVersion` and `kind` of decoded objects.
    types: TypeMeta,
}

impl ObjectStore {
    /// An empty store of `resource` objects and its writer: shared parsed objects when
    /// `shared`, compact ones otherwise.
    pub(crate) fn new(
        gvk: GroupVersionKind,
        resource: &ApiResource,
        shared: bool,
    ) -> (Self, StoreWriter) {
        let key_resource = Arc::new(resource.clone());
        let (reader, writer) = if shared {
            let writer = Writer::new(resource.clone());
            (
                Reader::Shared(writer.as_reader()),
                WriterKind::Shared(writer),
            )
        } else {
            let writer = Writer::new(Arc::clone(&key_resource));
            (
                Reader::Compact(writer.as_reader()),
                WriterKind::Compact(writer),
            )
        };
        let types = TypeMeta {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        };
        let store = Self {
            gvk,
            reader,
            resource: resource.clone(),
            key_resource,
            types,
        };
        (store, StoreWriter(writer))
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
                object: match obj.namespace() {
                    Some(ns) => format!("{ns}/{}", obj.name()),
                    None => obj.name().to_string(),
                },
                source,
            })
    }

    /// The object `namespace/name` (`namespace` is `None` for cluster-scoped kinds): decoded,
    /// or shared.
    pub(crate) fn get(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>> {
        match &self.reader {
            Reader::Shared(store) => {
                let mut key = ObjectRef::<DynamicObject>::new_with(name, self.resource.clone());
                key.namespace = namespace.map(str::to_string);
                Ok(store.get(&key))
            }
            Reader::Compact(store) => {
                let mut key =
                    ObjectRef::<CompactObject>::new_with(name, Arc::clone(&self.key_resource));
                key.namespace = namespace.map(str::to_string);
                store.get(&key).map(|obj| self.decode(&obj)).transpose()
            }
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
            Reader::Shared(store) => {
                let mut found = store.state_filter(|obj| {
                    namespace.is_none_or(|ns| obj.metadata.namespace.as_deref() == Some(ns))
                        && matching::list_matches(obj, labels, fields)
                });
                found.sort_by(|a, b| {
                    (&a.metadata.namespace, &a.metadata.name)
                        .cmp(&(&b.metadata.namespace, &b.metadata.name))
                });
                found.truncate(limit);
                Ok(found)
            }
            Reader::Compact(store) => {
                // Namespace, name and labels are checked without decoding; other fields on
                // the decoded copy that is handed out anyway.
                let mut candidates = store.state_filter(|obj| {
                    namespace.is_none_or(|ns| obj.namespace() == Some(ns))
                        && labels.is_none_or(|sel| sel.matches_with(|key| obj.label(key)))
                        && fields.iter().all(|(f, v)| match *f {
                            "metadata.name" => obj.name() == *v,
                            "metadata.namespace" => obj.namespace().unwrap_or_default() == *v,
                            _ => true,
                        })
                });
                candidates
                    .sort_by(|a, b| (a.namespace(), a.name()).cmp(&(b.namespace(), b.name())));
                let mut found = Vec::new();
                for obj in candidates {
                    if found.len() >= limit {
                        break;
                    }
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
}

/// The event for the compact store; an object that can not be encoded is left out, with a
/// warning (serializing a parsed object as JSON does not fail in practice).
fn compact_event(event: &watcher::Event<DynamicObject>) -> Option<watcher::Event<CompactObject>> {
    let encode = |obj: &DynamicObject| match CompactObject::encode(obj) {
        Ok(compact) => Some(compact),
        Err(error) => {
            tracing::warn!(
                object.ref = %format!("{}/{}", obj.metadata.namespace.as_deref().unwrap_or(""), obj.metadata.name.as_deref().unwrap_or("")),
                error = %error,
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
