//! Decoding the protobuf bodies kubectl's `create <kind>` generators send (`kubectl create
//! namespace|configmap|secret|serviceaccount`) into JSON: the `k8s\0` envelope, `ObjectMeta`'s
//! identity, labels and annotations, and the payload fields of those kinds. Field numbers are
//! from `k8s.io/api/core/v1/generated.proto` and `apimachinery/pkg/apis/meta/v1/generated.proto`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use super::registry::ResourceType;
use super::status::{ApiError, ApiResult};

/// The magic prefix of Kubernetes protobuf bodies (`runtime/serializer/protobuf`).
const MAGIC: &[u8] = b"k8s\0";

/// One protobuf field: its number and (for length-delimited fields) bytes.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

fn bad(what: &str) -> ApiError {
    ApiError::bad_request(format!("malformed protobuf body: {what}"))
}

fn varint(buf: &[u8], pos: &mut usize) -> ApiResult<u64> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or_else(|| bad("truncated varint"))?;
        *pos += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err(bad("varint too long"))
}

fn fields(buf: &[u8]) -> ApiResult<Vec<(u64, Field<'_>)>> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (number, wire) = (key >> 3, key & 7);
        let field = match wire {
            0 => Field::Varint(varint(buf, &mut pos)?),
            1 | 5 => {
                pos += if wire == 1 { 8 } else { 4 };
                Field::Fixed
            }
            2 => {
                let len =
                    usize::try_from(varint(buf, &mut pos)?).map_err(|_| bad("length overflow"))?;
                let end = pos
                    .checked_add(len)
                    .filter(|e| *e <= buf.len())
                    .ok_or_else(|| bad("truncated field"))?;
                let bytes = &buf[pos..end];
                pos = end;
                Field::Bytes(bytes)
            }
            _ => return Err(bad("unsupported wire type")),
        };
        if pos > buf.len() {
            return Err(bad("truncated fixed field"));
        }
        out.push((number, field));
    }
    Ok(out)
}

fn string(bytes: &[u8]) -> ApiResult<String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| bad("string is not UTF-8"))
}

/// A `map<string, string|bytes>` entry.
fn map_entry(bytes: &[u8], base64_values: bool) -> ApiResult<(String, Value)> {
    let mut key = String::new();
    let mut value = Value::String(String::new());
    for (n, f) in fields(bytes)? {
        match (n, f) {
            (1, Field::Bytes(b)) => key = string(b)?,
            (2, Field::Bytes(b)) if base64_values => value = json!(STANDARD.encode(b)),
            (2, Field::Bytes(b)) => value = json!(string(b)?),
            _ => {}
        }
    }
    Ok((key, value))
}

fn object_meta(bytes: &[u8]) -> ApiResult<Value> {
    let mut meta = Map::new();
    let mut labels = Map::new();
    let mut annotations = Map::new();
    let mut finalizers = Vec::new();
    for (n, f) in fields(bytes)? {
        let Field::Bytes(b) = f else { continue };
        match n {
            1 => drop(meta.insert("name".into(), json!(string(b)?))),
            2 => drop(meta.insert("generateName".into(), json!(string(b)?))),
            3 => drop(meta.insert("namespace".into(), json!(string(b)?))),
            11 => {
                let (k, v) = map_entry(b, false)?;
                labels.insert(k, v);
            }
            12 => {
                let (k, v) = map_entry(b, false)?;
                annotations.insert(k, v);
            }
            14 => finalizers.push(json!(string(b)?)),
            _ => {}
        }
    }
    if !labels.is_empty() {
        meta.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
    if !finalizers.is_empty() {
        meta.insert("finalizers".into(), Value::Array(finalizers));
    }
    Ok(Value::Object(meta))
}

/// Decode a protobuf request body for `rt` into its JSON form; kinds other than `Namespace`,
/// `ConfigMap`, `Secret` and `ServiceAccount` are refused.
///
/// # Errors
///
/// 415 for other kinds, 400 for a malformed body.
pub fn decode(body: &[u8], rt: &ResourceType, content_type: &str) -> ApiResult<Value> {
    let supported = rt.group.is_empty()
        && matches!(
            rt.plural.as_str(),
            "namespaces" | "configmaps" | "secrets" | "serviceaccounts"
        );
    if !supported {
        return Err(ApiError::unsupported_media_type(content_type));
    }
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("missing k8s magic prefix"))?;
    let mut raw: &[u8] = &[];
    for (n, f) in fields(envelope)? {
        if let (2, Field::Bytes(b)) = (n, f) {
            raw = b;
        }
    }
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!("v1"));
    obj.insert("kind".into(), json!(rt.kind));
    let mut data = Map::new();
    let mut binary = Map::new();
    let mut string_data = Map::new();
    for (n, f) in fields(raw)? {
        match (rt.plural.as_str(), n, f) {
            (_, 1, Field::Bytes(b)) => drop(obj.insert("metadata".into(), object_meta(b)?)),
            ("configmaps", 2, Field::Bytes(b)) => {
                let (k, v) = map_entry(b, false)?;
                data.insert(k, v);
            }
            ("configmaps", 3, Field::Bytes(b)) => {
                let (k, v) = map_entry(b, true)?;
                binary.insert(k, v);
            }
            ("secrets", 2, Field::Bytes(b)) => {
                let (k, v) = map_entry(b, true)?;
                data.insert(k, v);
            }
            ("secrets", 3, Field::Bytes(b)) => drop(obj.insert("type".into(), json!(string(b)?))),
            ("secrets", 4, Field::Bytes(b)) => {
                let (k, v) = map_entry(b, false)?;
                string_data.insert(k, v);
            }
            ("configmaps", 4, Field::Varint(v)) | ("secrets", 5, Field::Varint(v)) => {
                drop(obj.insert("immutable".into(), json!(v != 0)));
            }
            _ => {}
        }
    }
    if !data.is_empty() {
        obj.insert("data".into(), Value::Object(data));
    }
    if !binary.is_empty() {
        obj.insert("binaryData".into(), Value::Object(binary));
    }
    if !string_data.is_empty() {
        // stringData is write-only: merged into data as the real server does.
        let data = obj.entry("data").or_insert_with(|| json!({}));
        for (k, v) in string_data {
            data[k] = json!(STANDARD.encode(v.as_str().unwrap_or_default()));
        }
    }
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::Registry;

    fn ld(n: u8, bytes: &[u8]) -> Vec<u8> {
        let mut v = vec![(n << 3) | 2, u8::try_from(bytes.len()).unwrap()];
        v.extend_from_slice(bytes);
        v
    }

    #[test]
    fn a_configmap_from_kubectl_create_decodes() {
        let meta = [
            ld(1, b"cm1"),
            ld(11, &[ld(1, b"app"), ld(2, b"web")].concat()),
        ]
        .concat();
        let cm = [ld(1, &meta), ld(2, &[ld(1, b"k"), ld(2, b"v")].concat())].concat();
        let envelope = [
            MAGIC.to_vec(),
            ld(1, &[ld(1, b"v1"), ld(2, b"ConfigMap")].concat()),
            ld(2, &cm),
        ]
        .concat();
        let rt = Registry::new().lookup("", "v1", "configmaps").unwrap();
        let v = decode(&envelope, &rt, "application/vnd.kubernetes.protobuf").unwrap();
        assert_eq!(v["metadata"]["name"], "cm1");
        assert_eq!(v["metadata"]["labels"]["app"], "web");
        assert_eq!(v["data"]["k"], "v");
    }

    #[test]
    fn truncated_bodies_are_bad_requests_and_other_kinds_unsupported() {
        let rt = Registry::new().lookup("", "v1", "namespaces").unwrap();
        assert_eq!(decode(b"k8s\0\x12\x7f", &rt, "x").unwrap_err().code, 400);
        assert_eq!(decode(b"nope", &rt, "x").unwrap_err().code, 400);
        let pods = Registry::new().lookup("", "v1", "pods").unwrap();
        assert_eq!(decode(b"k8s\0", &pods, "x").unwrap_err().code, 415);
    }
}
