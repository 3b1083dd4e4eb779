//! `/openapi/v2`: the swagger document, in JSON or as gnostic's `openapi_v2.Document` protobuf
//! (what kubectl asks for when it validates a `kind: List` or computes a client-side apply
//! patch), negotiated on `Accept` as kube-openapi's handler does (406 for anything else).
//!
//! The document is built from the same schemas as the v3 documents: every custom resource's
//! schema in each served version, converted to v2 the way apiextensions-apiserver publishes
//! CRDs (`pkg/controller/openapi/v2/conversion.go`, `ToStructuralOpenAPIV2`), and for every
//! served kind the object paths with the `x-kubernetes-group-version-kind` and
//! `fieldValidation` parameter kubectl's query-parameter verifier looks for. Built-in kinds
//! have no published schema (as in v3), so kubectl skips their client-side validation.
//!
//! Field numbers are those of `github.com/google/gnostic-models/openapiv2/OpenAPIv2.proto`.

use std::hash::{DefaultHasher, Hash, Hasher};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::discovery::KUBERNETES_MINOR;
use super::openapi::{group_path, published_schema, schema_name};
use super::registry::ResourceType;
use super::state::App;

/// The media type kube-openapi answers protobuf with
/// (`k8s.io/kube-openapi/pkg/handler/handler.go`, `subTypeProtobuf`).
const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
/// The older spelling kubectl still sends (`subTypeProtobufDeprecated`), answered as `PROTOBUF`.
const PROTOBUF_DEPRECATED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
const JSON: &str = "application/json";

/// What a client accepts, in kube-openapi's order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Protobuf,
}

/// The first `Accept` clause (by quality, then order) that names a format the handler serves.
fn negotiate(headers: &HeaderMap) -> Option<Format> {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .filter(|a| !a.trim().is_empty())
        .unwrap_or("*/*");
    let mut clauses: Vec<(f32, &str)> = accept
        .split(',')
        .map(|clause| {
            let mut parts = clause.split(';');
            let media = parts.next().unwrap_or_default().trim();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.parse::<f32>().ok())
                .unwrap_or(1.0);
            (q, media)
        })
        .filter(|(q, _)| *q > 0.0)
        .collect();
    clauses.sort_by(|a, b| b.0.total_cmp(&a.0));
    clauses.into_iter().find_map(|(_, media)| match media {
        "*/*" | "application/*" | JSON => Some(Format::Json),
        PROTOBUF | PROTOBUF_DEPRECATED => Some(Format::Protobuf),
        _ => None,
    })
}

/// `/openapi/v2` in the format the client accepts, or 406.
#[must_use]
pub fn serve(app: &App, headers: &HeaderMap) -> Response {
    let Some(format) = negotiate(headers) else {
        let mut resp = StatusCode::NOT_ACCEPTABLE.into_response();
        resp.headers_mut()
            .insert(header::VARY, HeaderValue::from_static("Accept"));
        return resp;
    };
    let doc = document(app);
    let (content_type, body) = match format {
        Format::Json => (JSON, serde_json::to_vec(&doc).unwrap_or_default()),
        Format::Protobuf => (PROTOBUF, encode_document(&doc)),
    };
    let mut hasher = DefaultHasher::new();
    body.hash(&mut hasher);
    let etag = format!("\"{:016X}\"", hasher.finish());
    let mut resp = (StatusCode::OK, Body::from(body)).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    resp
}

/// The patch media types a resource accepts, as kube-apiserver lists them in `consumes`
/// (strategic merge patch only for built-in kinds).
fn patch_consumes(rt: &ResourceType) -> Vec<&'static str> {
    let mut consumes = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
    ];
    if !rt.custom {
        consumes.push("application/strategic-merge-patch+json");
    }
    consumes.push("application/apply-patch+yaml");
    consumes
}

fn operation(rt: &ResourceType, version: &str, action: &str, consumes: &[&str]) -> Value {
    let mut params = vec![
        json!({"name": "dryRun", "in": "query", "type": "string", "uniqueItems": true}),
        json!({"name": "fieldManager", "in": "query", "type": "string", "uniqueItems": true}),
    ];
    if matches!(action, "post" | "put" | "patch") {
        params.push(json!({
            "name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true,
            "description": "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields."
        }));
    }
    json!({
        "operationId": format!("{action}{}", rt.kind),
        "consumes": consumes,
        "produces": ["application/json", "application/yaml"],
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": rt.group, "version": version, "kind": rt.kind},
    })
}

/// The swagger 2.0 document (JSON form; the protobuf form is encoded from it).
#[must_use]
pub fn document(app: &App) -> Value {
    let mut paths = Map::new();
    let mut defs = Map::new();
    for rt in app.registry.all() {
        for version in &rt.versions {
            if rt.custom {
                defs.insert(
                    schema_name(&rt, version),
                    to_v2(&published_schema(&rt, version)),
                );
            }
            let base = format!("/{}", group_path(&rt.group, version));
            let (collection, item) = if rt.namespaced {
                (
                    format!("{base}/namespaces/{{namespace}}/{}", rt.plural),
                    format!("{base}/namespaces/{{namespace}}/{}/{{name}}", rt.plural),
                )
            } else {
                (
                    format!("{base}/{}", rt.plural),
                    format!("{base}/{}/{{name}}", rt.plural),
                )
            };
            let body = ["application/json", "application/yaml"];
            paths.insert(
                collection,
                json!({"post": operation(&rt, version, "post", &body)}),
            );
            paths.insert(
                item,
                json!({
                    "get": operation(&rt, version, "get", &[]),
                    "put": operation(&rt, version, "put", &body),
                    "delete": operation(&rt, version, "delete", &body),
                    "patch": operation(&rt, version, "patch", &patch_consumes(&rt)),
                }),
            );
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{KUBERNETES_MINOR}.0")},
        "paths": paths,
        "definitions": defs,
    })
}

/// A v3 structural schema as apiextensions-apiserver publishes it in v2: no junctors
/// (`allOf`, `oneOf`, `anyOf`, `not`); nullable fields untyped and not required;
/// `x-kubernetes-preserve-unknown-fields` objects without properties, items or object type;
/// arrays without items untyped (kubectl cannot cope with them otherwise).
#[must_use]
pub fn to_v2(schema: &Value) -> Value {
    let Some(obj) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = obj.clone();
    for junctor in ["allOf", "oneOf", "anyOf", "not"] {
        out.remove(junctor);
    }
    let nullable = |s: &Value| s["nullable"].as_bool() == Some(true);
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        let nullable_fields: Vec<&String> = props
            .iter()
            .filter(|(_, s)| nullable(s))
            .map(|(k, _)| k)
            .collect();
        if let Some(required) = out.get_mut("required").and_then(Value::as_array_mut) {
            required.retain(|r| !nullable_fields.iter().any(|f| r.as_str() == Some(f)));
        }
        let converted: Map<String, Value> =
            props.iter().map(|(k, s)| (k.clone(), to_v2(s))).collect();
        out.insert("properties".into(), Value::Object(converted));
    }
    if obj.get("additionalProperties").is_some_and(nullable) {
        out.remove("required");
    }
    if out
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        out.remove("required");
    }
    if let Some(ap) = obj.get("additionalProperties").filter(|a| a.is_object()) {
        out.insert("additionalProperties".into(), to_v2(ap));
    }
    match obj.get("items") {
        Some(Value::Array(items)) => {
            out.insert(
                "items".into(),
                Value::Array(items.iter().map(to_v2).collect()),
            );
        }
        Some(items @ Value::Object(_)) => {
            out.insert("items".into(), to_v2(items));
        }
        _ => {}
    }
    if nullable(schema) {
        out.remove("type");
        out.remove("items");
        out.remove("properties");
    }
    out.remove("nullable");
    let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if preserve {
        out.remove("items");
        out.remove("properties");
    }
    let typ = out.get("type").and_then(Value::as_str).map(str::to_string);
    if (typ.as_deref() == Some("array") && !out.contains_key("items"))
        || (preserve && typ.as_deref() == Some("object"))
    {
        out.remove("type");
    }
    Value::Object(out)
}

/// A protobuf message being written (proto3: scalar fields at their default are omitted;
/// sub-messages are always written, since their presence matters to gnostic's readers).
#[derive(Default)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            // Truncation is the encoding: the low seven bits, with the continuation bit.
            self.0
                .push(u8::try_from(v & 0x7f).unwrap_or_default() | 0x80);
            v >>= 7;
        }
        self.0.push(u8::try_from(v).unwrap_or_default());
    }

    fn key(&mut self, field: u64, wire: u64) {
        self.varint((field << 3) | wire);
    }

    fn bytes(&mut self, field: u64, bytes: &[u8]) {
        self.key(field, 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    fn string(&mut self, field: u64, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    fn message(&mut self, field: u64, m: &Pb) {
        self.bytes(field, &m.0);
    }

    fn bool(&mut self, field: u64, b: bool) {
        if b {
            self.key(field, 0);
            self.varint(1);
        }
    }

    /// A `bool` inside a `oneof`: written even when false.
    fn oneof_bool(&mut self, field: u64, b: bool) {
        self.key(field, 0);
        self.varint(u64::from(b));
    }

    fn int64(&mut self, field: u64, v: i64) {
        if v != 0 {
            self.key(field, 0);
            // Negative int64s are ten-byte two's-complement varints in protobuf.
            self.varint(v.cast_unsigned());
        }
    }

    fn double(&mut self, field: u64, v: f64) {
        if v != 0.0 {
            self.key(field, 1);
            self.0.extend_from_slice(&v.to_le_bytes());
        }
    }

    fn strings(&mut self, field: u64, values: Option<&Value>) {
        for s in values.and_then(Value::as_array).into_iter().flatten() {
            if let Some(s) = s.as_str() {
                self.bytes(field, s.as_bytes());
            }
        }
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// gnostic's `Any`: the value as YAML text (JSON is YAML).
fn any(value: &Value) -> Pb {
    let mut m = Pb::default();
    m.string(2, &value.to_string());
    m
}

/// `NamedAny` vendor extensions: every `x-` key of `obj`.
fn extensions(out: &mut Pb, field: u64, obj: &Map<String, Value>) {
    for (k, v) in obj.iter().filter(|(k, _)| k.starts_with("x-")) {
        let mut named = Pb::default();
        named.string(1, k);
        named.message(2, &any(v));
        out.message(field, &named);
    }
}

fn encode_schema(schema: &Value) -> Pb {
    let mut m = Pb::default();
    let Some(obj) = schema.as_object() else {
        return m;
    };
    m.string(1, str_of(schema, "$ref"));
    m.string(2, str_of(schema, "format"));
    m.string(3, str_of(schema, "title"));
    m.string(4, str_of(schema, "description"));
    if let Some(d) = obj.get("default") {
        m.message(5, &any(d));
    }
    let num = |k: &str| obj.get(k).and_then(Value::as_f64).unwrap_or_default();
    let int = |k: &str| obj.get(k).and_then(Value::as_i64).unwrap_or_default();
    let flag = |k: &str| obj.get(k).and_then(Value::as_bool).unwrap_or_default();
    m.double(6, num("multipleOf"));
    m.double(7, num("maximum"));
    m.bool(8, flag("exclusiveMaximum"));
    m.double(9, num("minimum"));
    m.bool(10, flag("exclusiveMinimum"));
    m.int64(11, int("maxLength"));
    m.int64(12, int("minLength"));
    m.string(13, str_of(schema, "pattern"));
    m.int64(14, int("maxItems"));
    m.int64(15, int("minItems"));
    m.bool(16, flag("uniqueItems"));
    m.int64(17, int("maxProperties"));
    m.int64(18, int("minProperties"));
    m.strings(19, obj.get("required"));
    for e in obj
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(20, &any(e));
    }
    match obj.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut ap = Pb::default();
            ap.oneof_bool(2, *b);
            m.message(21, &ap);
        }
        Some(s @ Value::Object(_)) => {
            let mut ap = Pb::default();
            ap.message(1, &encode_schema(s));
            m.message(21, &ap);
        }
        _ => {}
    }
    match obj.get("type") {
        Some(Value::String(t)) => {
            let mut ty = Pb::default();
            ty.string(1, t);
            m.message(22, &ty);
        }
        Some(types @ Value::Array(_)) => {
            let mut ty = Pb::default();
            ty.strings(1, Some(types));
            m.message(22, &ty);
        }
        _ => {}
    }
    let items: Vec<&Value> = match obj.get("items") {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(item @ Value::Object(_)) => vec![item],
        _ => Vec::new(),
    };
    if obj.contains_key("items") {
        let mut it = Pb::default();
        for item in items {
            it.message(1, &encode_schema(item));
        }
        m.message(23, &it);
    }
    for s in obj
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(24, &encode_schema(s));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        let mut p = Pb::default();
        for (name, s) in props {
            let mut named = Pb::default();
            named.string(1, name);
            named.message(2, &encode_schema(s));
            p.message(1, &named);
        }
        m.message(25, &p);
    }
    m.bool(27, flag("readOnly"));
    if let Some(e) = obj.get("example") {
        m.message(30, &any(e));
    }
    extensions(&mut m, 31, obj);
    m
}

fn encode_parameter(param: &Value) -> Pb {
    // ParametersItem { parameter: Parameter { non_body_parameter: NonBodyParameter {
    //   query_parameter_sub_schema: QueryParameterSubSchema } } }
    let mut query = Pb::default();
    query.bool(1, param["required"].as_bool().unwrap_or_default());
    query.string(2, str_of(param, "in"));
    query.string(3, str_of(param, "description"));
    query.string(4, str_of(param, "name"));
    query.string(6, str_of(param, "type"));
    query.bool(20, param["uniqueItems"].as_bool().unwrap_or_default());
    let mut non_body = Pb::default();
    non_body.message(3, &query);
    let mut parameter = Pb::default();
    parameter.message(2, &non_body);
    let mut item = Pb::default();
    item.message(1, &parameter);
    item
}

fn encode_operation(op: &Value) -> Pb {
    let mut m = Pb::default();
    m.string(3, str_of(op, "description"));
    m.string(5, str_of(op, "operationId"));
    m.strings(6, op.get("produces"));
    m.strings(7, op.get("consumes"));
    for p in op["parameters"].as_array().into_iter().flatten() {
        m.message(8, &encode_parameter(p));
    }
    if let Some(responses) = op["responses"].as_object() {
        let mut rs = Pb::default();
        for (code, r) in responses {
            let mut response = Pb::default();
            response.string(1, str_of(r, "description"));
            let mut value = Pb::default();
            value.message(1, &response);
            let mut named = Pb::default();
            named.string(1, code);
            named.message(2, &value);
            rs.message(1, &named);
        }
        m.message(9, &rs);
    }
    if let Some(obj) = op.as_object() {
        extensions(&mut m, 13, obj);
    }
    m
}

/// The protobuf `openapi_v2.Document` of a swagger document built by [`document`].
#[must_use]
pub fn encode_document(doc: &Value) -> Vec<u8> {
    let mut m = Pb::default();
    m.string(1, str_of(doc, "swagger"));
    let mut info = Pb::default();
    info.string(1, str_of(&doc["info"], "title"));
    info.string(2, str_of(&doc["info"], "version"));
    m.message(2, &info);
    let mut paths = Pb::default();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        let mut ops = Pb::default();
        for (field, verb) in [
            (2, "get"),
            (3, "put"),
            (4, "post"),
            (5, "delete"),
            (8, "patch"),
        ] {
            if let Some(op) = item.get(verb) {
                ops.message(field, &encode_operation(op));
            }
        }
        let mut named = Pb::default();
        named.string(1, path);
        named.message(2, &ops);
        paths.message(2, &named);
    }
    m.message(8, &paths);
    let mut defs = Pb::default();
    for (name, schema) in doc["definitions"].as_object().into_iter().flatten() {
        let mut named = Pb::default();
        named.string(1, name);
        named.message(2, &encode_schema(schema));
        defs.message(1, &named);
    }
    m.message(9, &defs);
    m.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_drops_junctors_and_untypes_nullable_and_preserved_fields() {
        let v3 = json!({
            "type": "object",
            "required": ["a", "b"],
            "properties": {
                "a": {"type": "string", "nullable": true},
                "b": {"type": "array", "items": {"type": "string"}},
                "c": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                      "properties": {"d": {"type": "string"}}},
                "e": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            }
        });
        let v2 = to_v2(&v3);
        assert_eq!(v2["required"], json!(["b"]));
        assert_eq!(v2["properties"]["a"], json!({}));
        assert_eq!(
            v2["properties"]["b"],
            json!({"type": "array", "items": {"type": "string"}})
        );
        assert_eq!(
            v2["properties"]["c"],
            json!({"x-kubernetes-preserve-unknown-fields": true})
        );
        assert_eq!(
            v2["properties"]["e"],
            json!({"x-kubernetes-int-or-string": true})
        );
    }

    #[test]
    fn accept_negotiation_follows_kube_openapi() {
        let with = |accept: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
            negotiate(&h)
        };
        assert_eq!(with(PROTOBUF_DEPRECATED), Some(Format::Protobuf));
        assert_eq!(with(PROTOBUF), Some(Format::Protobuf));
        assert_eq!(with("application/json, */*"), Some(Format::Json));
        assert_eq!(
            with(
                "application/json;q=0.5, application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
            ),
            Some(Format::Protobuf)
        );
        assert_eq!(with("text/html"), None);
        assert_eq!(negotiate(&HeaderMap::new()), Some(Format::Json));
    }

    #[test]
    fn varints_and_empty_messages_encode_as_protobuf_does() {
        let mut m = Pb::default();
        m.varint(300);
        assert_eq!(m.0, [0xac, 0x02]);
        let mut outer = Pb::default();
        outer.message(25, &Pb::default());
        // Field 25, wire type 2 (key 202 = 0xca 0x01), length 0: present but empty.
        assert_eq!(outer.0, [0xca, 0x01, 0x00]);
        let mut neg = Pb::default();
        neg.int64(1, -1);
        assert_eq!(neg.0.len(), 11);
    }
}
