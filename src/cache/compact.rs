//! `CompactObject`: how an informer stores an object when reads hand out deep copies — the
//! routing keys parsed, the rest kept as one JSON byte buffer that each read decodes.
//!
//! A parsed `DynamicObject` costs several times its JSON size (every JSON object a map
//! allocation, every string its own allocation, `ObjectMeta` hundreds of bytes of empty
//! options). A deep-copying read has to build a fresh object anyway, so building it by decoding
//! bytes instead of cloning a tree costs little and keeps the cache near the object's JSON size.
//! With `unsafeDisableDeepCopy` the informer keeps parsed objects instead (reads share them).

use std::borrow::Cow;
use std::sync::Arc;

use kube::{
    api::TypeMeta,
    core::{ApiResource, DynamicObject},
    runtime::reflector::Lookup,
};

/// One cached object: name, namespace and labels (what the store key, namespace filters and
/// label selectors need without decoding) plus the object's JSON without `apiVersion`/`kind`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactObject {
    name: Box<str>,
    namespace: Option<Box<str>>,
    /// Sorted by key.
    labels: Box<[(Box<str>, Box<str>)]>,
    /// Where `metadata` ends in `body`.
    metadata_len: u32,
    /// The JSON of `metadata`, then the JSON of the rest of the object (`DynamicObject::data`):
    /// two documents decoded directly, which is about twice as fast as decoding a
    /// `DynamicObject` (serde buffers a `#[serde(flatten)]` struct before decoding it).
    body: Box<[u8]>,
}

impl CompactObject {
    /// Encodes `obj` (its `apiVersion` and `kind` are not kept: one informer holds one kind).
    ///
    /// # Errors
    /// The object can not be serialized as JSON.
    pub fn encode(obj: &DynamicObject) -> Result<Self, serde_json::Error> {
        let mut body = serde_json::to_vec(&obj.metadata)?;
        let metadata_len = u32::try_from(body.len()).map_err(|_| {
            <serde_json::Error as serde::ser::Error>::custom("metadata larger than 4 GiB")
        })?;
        serde_json::to_writer(&mut body, &obj.data)?;
        let labels = obj
            .metadata
            .labels
            .iter()
            .flatten()
            .map(|(k, v)| (Box::from(k.as_str()), Box::from(v.as_str())))
            .collect();
        Ok(Self {
            name: obj.metadata.name.as_deref().unwrap_or_default().into(),
            namespace: obj.metadata.namespace.as_deref().map(Box::from),
            labels,
            metadata_len,
            body: body.into_boxed_slice(),
        })
    }

    /// Decodes a fresh object, with `types` as its `apiVersion` and `kind`.
    ///
    /// # Errors
    /// The stored bytes are not a valid object (they were written by [`CompactObject::encode`],
    /// so this means a bug, reported rather than panicking).
    pub fn decode(&self, types: &TypeMeta) -> Result<DynamicObject, serde_json::Error> {
        let (metadata, data) = self.body.split_at(self.metadata_len as usize);
        Ok(DynamicObject {
            types: Some(types.clone()),
            metadata: serde_json::from_slice(metadata)?,
            data: serde_json::from_slice(data)?,
        })
    }

    /// `metadata.name`.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `metadata.namespace`.
    #[must_use]
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The value of label `key`.
    #[must_use]
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .and_then(|i| self.labels.get(i))
            .map(|(_, v)| &**v)
    }

    /// Bytes of the encoded body (for figures and tests).
    #[must_use]
    pub fn body_len(&self) -> usize {
        self.body.len()
    }
}

/// Store keys carry the informer's `ApiResource` behind one shared `Arc` (a `DynamicObject`
/// key carries its own copy of every string of it), and no `resourceVersion` or `uid`: the
/// store does not use them and the object's body keeps them.
impl Lookup for CompactObject {
    type DynamicType = Arc<ApiResource>;

    fn kind(dyntype: &Self::DynamicType) -> Cow<'_, str> {
        Cow::Borrowed(&dyntype.kind)
    }

    fn group(dyntype: &Self::DynamicType) -> Cow<'_, str> {
        Cow::Borrowed(&dyntype.group)
    }

    fn version(dyntype: &Self::DynamicType) -> Cow<'_, str> {
        Cow::Borrowed(&dyntype.version)
    }

    fn api_version(dyntype: &Self::DynamicType) -> Cow<'_, str> {
        Cow::Borrowed(&dyntype.api_version)
    }

    fn plural(dyntype: &Self::DynamicType) -> Cow<'_, str> {
        Cow::Borrowed(&dyntype.plural)
    }

    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn namespace(&self) -> Option<Cow<'_, str>> {
        self.namespace.as_deref().map(Cow::Borrowed)
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }

    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn object() -> DynamicObject {
        let mut obj = DynamicObject::new("one", &ApiResource::erase::<ConfigMap>(&())).within("a");
        obj.metadata.labels = Some(
            [("b", "2"), ("a", "1")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        obj.metadata.resource_version = Some("7".into());
        obj.metadata.uid = Some("u-1".into());
        obj.data = serde_json::json!({"data": {"k": "v"}, "binaryData": null});
        obj
    }

    #[test]
    fn an_encoded_object_decodes_to_the_same_object_with_the_given_types() {
        let obj = object();
        let compact = CompactObject::encode(&obj).unwrap();
        assert_eq!((compact.name(), compact.namespace()), ("one", Some("a")));
        assert_eq!(compact.label("a"), Some("1"));
        assert_eq!(compact.label("b"), Some("2"));
        assert_eq!(compact.label("c"), None);
        let types = obj.types.clone().unwrap();
        assert_eq!(compact.decode(&types).unwrap(), obj);
        let body = std::str::from_utf8(&compact.body).unwrap();
        assert!(!body.contains("ConfigMap"), "kind is not stored: {body}");
    }

    #[test]
    fn store_keys_hold_name_and_namespace_only() {
        let compact = CompactObject::encode(&object()).unwrap();
        let key = compact.to_object_ref(Arc::new(ApiResource::erase::<ConfigMap>(&())));
        assert_eq!(key.name, "one");
        assert_eq!(key.namespace.as_deref(), Some("a"));
        assert!(key.extra.resource_version.is_none() && key.extra.uid.is_none());
        assert_eq!(key.to_string(), "ConfigMap.v1./one.a");
    }
}
