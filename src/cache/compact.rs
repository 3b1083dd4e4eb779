//! `CompactObject`: how an informer stores an object when reads hand out deep copies — the
//! routing keys parsed, the rest kept as one byte buffer that each read decodes.
//!
//! A parsed `DynamicObject` costs several times its JSON size (every JSON object a map
//! allocation, every string its own allocation, `ObjectMeta` hundreds of bytes of empty
//! options). A deep-copying read has to build a fresh object anyway, so building it by decoding
//! bytes instead of cloning a tree costs little and keeps the cache near the object's JSON size.
//! The bytes are the object's JSON as a [`tape`] (strings length-prefixed, numbers parsed),
//! which decodes faster than JSON text. With `unsafeDisableDeepCopy` the informer keeps parsed
//! objects instead (reads share them).

mod tape;
mod words;

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;

use kube::{
    api::TypeMeta,
    core::{ApiResource, DynamicObject},
    runtime::reflector::Lookup,
};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor,
    value::{BorrowedStrDeserializer, StringDeserializer},
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
    /// Where `metadata`'s text ends in `strings`.
    metadata_strings_len: u32,
    /// The tape of `metadata`, then the tape of the rest of the object (`DynamicObject::data`):
    /// two documents decoded directly, which is about twice as fast as decoding a
    /// `DynamicObject` (serde buffers a `#[serde(flatten)]` struct before decoding it).
    body: Box<[u8]>,
    /// The text of the strings of both tapes.
    strings: Box<str>,
    /// The bytes the informer's transform saved on this object: what it would hold as served
    /// less what it holds (0 without a transform). Kept so that the informer's total of saved
    /// bytes falls exactly when the object is replaced or deleted.
    saved: u32,
}

impl CompactObject {
    /// Encodes `obj` (its `apiVersion` and `kind` are not kept: one informer holds one kind).
    ///
    /// # Errors
    /// The object can not be serialized as JSON.
    pub fn encode(obj: &DynamicObject) -> Result<Self, serde_json::Error> {
        let too_large =
            |_| <serde_json::Error as serde::ser::Error>::custom("metadata larger than 4 GiB");
        let (mut body, mut strings) = (Vec::new(), String::new());
        tape::encode(&serde_json::to_vec(&obj.metadata)?, &mut body, &mut strings)?;
        let metadata_len = u32::try_from(body.len()).map_err(too_large)?;
        let metadata_strings_len = u32::try_from(strings.len()).map_err(too_large)?;
        tape::encode(&serde_json::to_vec(&obj.data)?, &mut body, &mut strings)?;
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
            metadata_strings_len,
            body: body.into_boxed_slice(),
            strings: strings.into_boxed_str(),
            saved: 0,
        })
    }

    /// This object, noting that a transform saved `saved` bytes on it (what the object as
    /// served would hold, [`Self::held_bytes`] of its encoding before the transform, less what
    /// it holds).
    #[must_use]
    pub(crate) fn with_saved(mut self, saved: usize) -> Self {
        self.saved = u32::try_from(saved).unwrap_or(u32::MAX);
        self
    }

    /// The bytes a transform saved on this object (0 without a transform).
    #[must_use]
    pub(crate) fn saved_bytes(&self) -> usize {
        self.saved as usize
    }

    /// Decodes a fresh object, with `types` as its `apiVersion` and `kind`.
    ///
    /// # Errors
    /// The stored bytes are not a valid object (they were written by [`CompactObject::encode`],
    /// so this means a bug, reported rather than panicking).
    pub fn decode(&self, types: &TypeMeta) -> Result<DynamicObject, serde_json::Error> {
        let (metadata, data) = self.tapes()?;
        Ok(DynamicObject {
            types: Some(types.clone()),
            metadata: read(metadata)?,
            data: read(data)?,
        })
    }

    /// Decodes a fresh `K` in one pass, with `types` as its `apiVersion` and `kind`: the
    /// stored metadata and fields are handed to `K`'s `Deserialize` as one JSON object, without
    /// building a `DynamicObject` first.
    ///
    /// # Errors
    /// The object does not fit `K` (or, a bug, the stored bytes are not valid JSON).
    pub fn decode_as<K: DeserializeOwned>(&self, types: &TypeMeta) -> Result<K, serde_json::Error> {
        let (metadata, data) = self.tapes()?;
        K::deserialize(Parts {
            types: Some(types),
            metadata,
            data,
        })
    }

    /// The tapes of `metadata` and of the other fields.
    fn tapes(&self) -> Result<(TapeBytes<'_>, TapeBytes<'_>), serde_json::Error> {
        let corrupt =
            || <serde_json::Error as serde::de::Error>::custom("cached object is corrupt");
        let (metadata, data) = self
            .body
            .split_at_checked(self.metadata_len as usize)
            .ok_or_else(corrupt)?;
        let (metadata_strings, data_strings) = self
            .strings
            .split_at_checked(self.metadata_strings_len as usize)
            .ok_or_else(corrupt)?;
        Ok(((metadata, metadata_strings), (data, data_strings)))
    }

    /// The object's fields other than `metadata`, `apiVersion` and `kind`, parsed (what a
    /// field selector on another path than name and namespace is evaluated on).
    ///
    /// # Errors
    /// The stored bytes are not valid JSON (a bug).
    pub fn data(&self) -> Result<serde_json::Value, serde_json::Error> {
        read(self.tapes()?.1)
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

    /// `metadata.resourceVersion`, read from the stored metadata without decoding the rest
    /// of the object (what a controller's runner store keeps to tell an object seen again in a
    /// list from a changed one).
    ///
    /// # Errors
    /// The stored bytes are not valid JSON (a bug).
    pub fn resource_version(&self) -> Result<Option<String>, serde_json::Error> {
        #[derive(serde::Deserialize)]
        struct Version {
            #[serde(rename = "resourceVersion")]
            resource_version: Option<String>,
        }
        Ok(read::<Version>(self.tapes()?.0)?.resource_version)
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

    /// Bytes this object holds in a store: its allocation behind the store's `Arc` (with the
    /// `Arc`'s two counters), what its fields own (name, namespace, labels, tapes), and its
    /// store key (an `ObjectRef` owning a copy of the name and namespace). The allocator's own
    /// bookkeeping and the hash map's spare capacity are not counted.
    #[must_use]
    pub fn held_bytes(&self) -> usize {
        let namespace = self.namespace.as_deref().map_or(0, str::len);
        let labels = self.labels.len() * std::mem::size_of::<(Box<str>, Box<str>)>()
            + self
                .labels
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>();
        let object = 2 * std::mem::size_of::<usize>()
            + std::mem::size_of::<Self>()
            + self.name.len()
            + namespace
            + labels
            + self.body.len()
            + self.strings.len();
        let key = std::mem::size_of::<kube::runtime::reflector::ObjectRef<Self>>()
            + self.name.len()
            + namespace;
        object + key
    }
}

/// `bytes` for people, in binary units with one decimal and no space (one column of
/// `kubectl get`, one word of a log line): `512B`, `1.5KiB`, `12.4MiB`.
#[must_use]
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    #[allow(
        clippy::cast_precision_loss,
        reason = "a figure for people, shown with one decimal"
    )]
    let mut value = bytes as f64 / 1024.0;
    let mut unit = UNITS[0];
    for next in &UNITS[1..] {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    format!("{value:.1}{unit}")
}

/// Converts a parsed object into `K` as [`CompactObject::decode_as`] decodes a stored one, with
/// `types` as its `apiVersion` and `kind` (`obj.types` when `None`).
///
/// # Errors
/// The object does not fit `K`.
pub(crate) fn convert_as<K: DeserializeOwned>(
    obj: &DynamicObject,
    types: Option<&TypeMeta>,
) -> Result<K, serde_json::Error> {
    let (mut metadata, mut metadata_strings) = (Vec::new(), String::new());
    tape::encode(
        &serde_json::to_vec(&obj.metadata)?,
        &mut metadata,
        &mut metadata_strings,
    )?;
    let (mut data, mut data_strings) = (Vec::new(), String::new());
    tape::encode(
        &serde_json::to_vec(&obj.data)?,
        &mut data,
        &mut data_strings,
    )?;
    K::deserialize(Parts {
        types: types.or(obj.types.as_ref()),
        metadata: (&metadata, &metadata_strings),
        data: (&data, &data_strings),
    })
}

/// A tape's structure and strings.
type TapeBytes<'a> = (&'a [u8], &'a str);

/// One whole tape read as a `T`.
fn read<T: DeserializeOwned>((structure, strings): TapeBytes<'_>) -> Result<T, serde_json::Error> {
    let mut tape = tape::Tape::new(structure, strings);
    let value = T::deserialize(&mut tape)?;
    tape.end()?;
    Ok(value)
}

/// A stored object seen as the one JSON object it was:
/// `{"apiVersion": .., "kind": .., "metadata": <metadata>, <the fields of data>}`. Each part
/// is read from its tape straight into the target type's fields. Like the JSON of a
/// `DynamicObject`, `metadata` and (when `types` is set) `apiVersion` and `kind` win over keys
/// of the same name in `data`.
struct Parts<'de> {
    types: Option<&'de TypeMeta>,
    metadata: TapeBytes<'de>,
    data: TapeBytes<'de>,
}

impl<'de> Deserializer<'de> for Parts<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        let mut data = tape::Tape::new(self.data.0, self.data.1);
        let value = (&mut data).deserialize_any(DataVisitor {
            types: self.types,
            metadata: self.metadata,
            visitor,
        })?;
        data.end()?;
        Ok(value)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

/// Reads the `data` document: an object (or `null`, no fields) whose entries follow the
/// `apiVersion`, `kind` and `metadata` entries handed to the target's visitor.
struct DataVisitor<'de, V> {
    types: Option<&'de TypeMeta>,
    metadata: TapeBytes<'de>,
    visitor: V,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for DataVisitor<'de, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the fields of an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.visitor.visit_map(Entries {
            types: self.types,
            metadata: self.metadata,
            next: Next::ApiVersion,
            value: Pending::None,
            data,
        })
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.visitor.visit_map(Entries {
            types: self.types,
            metadata: self.metadata,
            next: Next::ApiVersion,
            value: Pending::None,
            data: NoEntries(PhantomData),
        })
    }
}

/// The entry [`Entries`] hands out next.
#[derive(Clone, Copy)]
enum Next {
    ApiVersion,
    Kind,
    Metadata,
    Data,
}

/// The value of the key [`Entries`] handed out last.
enum Pending<'de> {
    None,
    Str(&'de str),
    Metadata,
    Data,
}

/// The entries of the whole object: `apiVersion`, `kind`, `metadata`, then `data`'s.
struct Entries<'de, A> {
    types: Option<&'de TypeMeta>,
    metadata: TapeBytes<'de>,
    next: Next,
    value: Pending<'de>,
    data: A,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Entries<'de, A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Self::Error> {
        loop {
            let (key, value) = match (self.next, self.types) {
                (Next::ApiVersion, types) => {
                    self.next = Next::Kind;
                    match types {
                        Some(t) => ("apiVersion", Pending::Str(&t.api_version)),
                        None => continue,
                    }
                }
                (Next::Kind, types) => {
                    self.next = Next::Metadata;
                    match types {
                        Some(t) => ("kind", Pending::Str(&t.kind)),
                        None => continue,
                    }
                }
                (Next::Metadata, _) => {
                    self.next = Next::Data;
                    ("metadata", Pending::Metadata)
                }
                (Next::Data, types) => {
                    let Some(key) = self.data.next_key_seed(KeyName)? else {
                        return Ok(None);
                    };
                    let replaced = match &*key {
                        "metadata" => true,
                        "apiVersion" | "kind" => types.is_some(),
                        _ => false,
                    };
                    if replaced {
                        self.data.next_value::<IgnoredAny>()?;
                        continue;
                    }
                    self.value = Pending::Data;
                    return match key {
                        Cow::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::new(key)),
                        Cow::Owned(key) => seed.deserialize(StringDeserializer::new(key)),
                    }
                    .map(Some);
                }
            };
            self.value = value;
            return seed
                .deserialize(BorrowedStrDeserializer::new(key))
                .map(Some);
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, Self::Error> {
        match std::mem::replace(&mut self.value, Pending::None) {
            Pending::Str(value) => seed.deserialize(BorrowedStrDeserializer::new(value)),
            Pending::Metadata => {
                let mut metadata = tape::Tape::new(self.metadata.0, self.metadata.1);
                seed.deserialize(&mut metadata)
                    .and_then(|value| metadata.end().map(|()| value))
                    .map_err(de::Error::custom)
            }
            Pending::Data => self.data.next_value_seed(seed),
            Pending::None => Err(de::Error::custom("value requested before its key")),
        }
    }
}

/// Reads a key of `data`, borrowed from the JSON when it has no escapes.
struct KeyName;

impl<'de> DeserializeSeed<'de> for KeyName {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyName {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a field name")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// The entries of a `null` `data`: none.
struct NoEntries<E>(PhantomData<E>);

impl<'de, E: de::Error> MapAccess<'de> for NoEntries<E> {
    type Error = E;

    fn next_key_seed<S: DeserializeSeed<'de>>(&mut self, _: S) -> Result<Option<S::Value>, E> {
        Ok(None)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, _: S) -> Result<S::Value, E> {
        Err(de::Error::custom("no fields"))
    }
}

/// The kind of an informer store's keys: the informer's `ApiResource` behind one `Arc` that
/// every key shares (a `DynamicObject` key carries its own copy of every string of it).
///
/// One store holds one kind, so a key's hash leaves the kind out: hashing the `ApiResource`'s
/// five strings on every read and write of the store would tell no two keys apart. Two kinds
/// are equal when they are the same `Arc`, or hold equal resources.
#[derive(Clone, Debug)]
pub struct StoreKind(pub Arc<ApiResource>);

impl PartialEq for StoreKind {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Eq for StoreKind {}

impl std::hash::Hash for StoreKind {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

/// The type half of a `Lookup` whose `DynamicType` is the informer's [`StoreKind`]: every name
/// borrowed from it (the compact and the shared store use it alike).
macro_rules! shared_resource_type {
    () => {
        fn kind(dyntype: &Self::DynamicType) -> Cow<'_, str> {
            Cow::Borrowed(&dyntype.0.kind)
        }

        fn group(dyntype: &Self::DynamicType) -> Cow<'_, str> {
            Cow::Borrowed(&dyntype.0.group)
        }

        fn version(dyntype: &Self::DynamicType) -> Cow<'_, str> {
            Cow::Borrowed(&dyntype.0.version)
        }

        fn api_version(dyntype: &Self::DynamicType) -> Cow<'_, str> {
            Cow::Borrowed(&dyntype.0.api_version)
        }

        fn plural(dyntype: &Self::DynamicType) -> Cow<'_, str> {
            Cow::Borrowed(&dyntype.0.plural)
        }
    };
}
pub(super) use shared_resource_type;

/// Store keys carry the informer's [`StoreKind`], and no `resourceVersion` or `uid`: the store
/// does not use them and the object's body keeps them.
impl Lookup for CompactObject {
    type DynamicType = StoreKind;

    shared_resource_type!();

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

    #[test]
    fn human_bytes_use_binary_units() {
        assert_eq!(human_bytes(0), "0B");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(1536), "1.5KiB");
        assert_eq!(human_bytes(13_002_342), "12.4MiB");
        assert_eq!(human_bytes(3 * 1024 * 1024 * 1024), "3.0GiB");
    }
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
        assert!(!compact.strings.contains("ConfigMap"), "kind is not stored");
    }

    #[test]
    fn decoding_as_a_type_equals_converting_the_decoded_object() {
        let obj = object();
        let compact = CompactObject::encode(&obj).unwrap();
        let types = obj.types.clone().unwrap();
        let config_map: ConfigMap = compact.decode_as(&types).unwrap();
        let via_value: ConfigMap =
            serde_json::from_value(serde_json::to_value(&obj).unwrap()).unwrap();
        assert_eq!(config_map, via_value);
        assert_eq!(config_map.metadata.uid.as_deref(), Some("u-1"));
        let dynamic: DynamicObject = compact.decode_as(&types).unwrap();
        assert_eq!(dynamic, obj, "apiVersion and kind are handed to the type");
        assert_eq!(convert_as::<DynamicObject>(&obj, None).unwrap(), obj);
    }

    #[test]
    fn decoding_keeps_the_stored_metadata_and_types_over_fields_of_the_same_name() {
        let mut obj = object();
        obj.data = serde_json::json!({
            "metadata": {"name": "shadow"},
            "kind": "Secret",
            "data": {"k\"q": "v"},
        });
        let compact = CompactObject::encode(&obj).unwrap();
        let types = obj.types.clone().unwrap();
        let config_map: ConfigMap = compact.decode_as(&types).unwrap();
        assert_eq!(config_map.metadata.name.as_deref(), Some("one"));
        assert_eq!(
            config_map.data.unwrap()["k\"q"],
            "v",
            "escaped keys are read"
        );
        let dynamic: DynamicObject = compact.decode_as(&types).unwrap();
        assert_eq!(dynamic.types.unwrap().kind, "ConfigMap");
    }

    #[test]
    fn an_object_without_fields_or_types_decodes() {
        let mut obj = object();
        obj.data = serde_json::Value::Null;
        obj.types = None;
        let typed: ConfigMap = convert_as(&obj, None).unwrap();
        assert_eq!(typed.metadata.name.as_deref(), Some("one"));
        assert!(typed.data.is_none());
        obj.data = serde_json::json!("not an object");
        assert!(convert_as::<ConfigMap>(&obj, None).is_err());
    }

    #[test]
    fn store_keys_hold_name_and_namespace_only() {
        let compact = CompactObject::encode(&object()).unwrap();
        let key = compact.to_object_ref(StoreKind(Arc::new(ApiResource::erase::<ConfigMap>(&()))));
        assert_eq!(key.name, "one");
        assert_eq!(key.namespace.as_deref(), Some("a"));
        assert!(key.extra.resource_version.is_none() && key.extra.uid.is_none());
        assert_eq!(key.to_string(), "ConfigMap.v1./one.a");
    }

    #[test]
    fn the_resource_version_is_read_without_decoding_the_object() {
        let mut obj = object();
        // A `resourceVersion` under `data` is not the object's.
        obj.data["data"]["resourceVersion"] = "not-it".into();
        assert_eq!(
            CompactObject::encode(&obj)
                .unwrap()
                .resource_version()
                .unwrap(),
            Some("7".to_owned())
        );
        obj.metadata.resource_version = None;
        assert_eq!(
            CompactObject::encode(&obj)
                .unwrap()
                .resource_version()
                .unwrap(),
            None
        );
    }
}
