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

/// The repeated string field `number` of a message.
fn repeated(bytes: &[u8], number: u64) -> ApiResult<Vec<Value>> {
    let mut out = Vec::new();
    for (n, f) in fields(bytes)? {
        if let (true, Field::Bytes(b)) = (n == number, f) {
            out.push(json!(string(b)?));
        }
    }
    Ok(out)
}

/// A `PolicyRule` (`rbac/v1`): verbs, apiGroups, resources, resourceNames, nonResourceURLs.
fn policy_rule(bytes: &[u8]) -> ApiResult<Value> {
    let mut rule = Map::new();
    for (number, name) in [
        (1, "verbs"),
        (2, "apiGroups"),
        (3, "resources"),
        (4, "resourceNames"),
        (5, "nonResourceURLs"),
    ] {
        let values = repeated(bytes, number)?;
        if !values.is_empty() || number == 1 {
            rule.insert(name.into(), Value::Array(values));
        }
    }
    Ok(Value::Object(rule))
}

/// A `metav1.LabelSelector`: matchLabels and matchExpressions.
fn label_selector(bytes: &[u8]) -> ApiResult<Value> {
    let mut labels = Map::new();
    let mut expressions = Vec::new();
    for (n, f) in fields(bytes)? {
        let Field::Bytes(b) = f else { continue };
        match n {
            1 => {
                let (k, v) = map_entry(b, false)?;
                labels.insert(k, v);
            }
            2 => {
                let mut expression = strings_of(b, &[(1, "key"), (2, "operator")])?;
                let values = repeated(b, 3)?;
                if !values.is_empty() {
                    expression.insert("values".into(), Value::Array(values));
                }
                expressions.push(Value::Object(expression));
            }
            _ => {}
        }
    }
    let mut selector = Map::new();
    if !labels.is_empty() {
        selector.insert("matchLabels".into(), Value::Object(labels));
    }
    if !expressions.is_empty() {
        selector.insert("matchExpressions".into(), Value::Array(expressions));
    }
    Ok(Value::Object(selector))
}

/// The fields of a `Role`, `ClusterRole`, `RoleBinding` or `ClusterRoleBinding` after its
/// metadata, into `obj`.
fn rbac_field(obj: &mut Map<String, Value>, plural: &str, n: u64, b: &[u8]) -> ApiResult<()> {
    match (plural, n) {
        ("roles" | "clusterroles", 2) => {
            let rules = obj.entry("rules").or_insert_with(|| json!([]));
            if let Some(rules) = rules.as_array_mut() {
                rules.push(policy_rule(b)?);
            }
        }
        ("clusterroles", 3) => {
            let mut selectors = Vec::new();
            for (n, f) in fields(b)? {
                if let (1, Field::Bytes(s)) = (n, f) {
                    selectors.push(label_selector(s)?);
                }
            }
            obj.insert(
                "aggregationRule".into(),
                json!({"clusterRoleSelectors": selectors}),
            );
        }
        ("rolebindings" | "clusterrolebindings", 2) => {
            let subject = strings_of(
                b,
                &[(1, "kind"), (2, "apiGroup"), (3, "name"), (4, "namespace")],
            )?;
            let subjects = obj.entry("subjects").or_insert_with(|| json!([]));
            if let Some(subjects) = subjects.as_array_mut() {
                subjects.push(Value::Object(subject));
            }
        }
        ("rolebindings" | "clusterrolebindings", 3) => {
            let role_ref = strings_of(b, &[(1, "apiGroup"), (2, "kind"), (3, "name")])?;
            obj.insert("roleRef".into(), Value::Object(role_ref));
        }
        _ => {}
    }
    Ok(())
}

/// Decode a protobuf request body for `rt` into its JSON form; kinds other than `Namespace`,
/// `ConfigMap`, `Secret`, `ServiceAccount` and the RBAC kinds (what kubectl's `create`
/// generators send) are refused.
///
/// # Errors
///
/// 415 for other kinds, 400 for a malformed body.
pub fn decode(body: &[u8], rt: &ResourceType, content_type: &str) -> ApiResult<Value> {
    let rbac = rt.group == "rbac.authorization.k8s.io";
    let supported = rbac
        || rt.group.is_empty()
            && matches!(
                rt.plural.as_str(),
                "namespaces" | "configmaps" | "secrets" | "serviceaccounts"
            );
    if !supported {
        return Err(ApiError::unsupported_media_type(content_type));
    }
    let raw = payload(body)?;
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(rt.api_version("v1")));
    obj.insert("kind".into(), json!(rt.kind));
    let mut data = Map::new();
    let mut binary = Map::new();
    let mut string_data = Map::new();
    for (n, f) in fields(raw)? {
        match (rt.plural.as_str(), n, f) {
            (_, 1, Field::Bytes(b)) => drop(obj.insert("metadata".into(), object_meta(b)?)),
            (plural, n, Field::Bytes(b)) if rbac => rbac_field(&mut obj, plural, n, b)?,
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

/// The payload of a protobuf envelope.
fn payload(body: &[u8]) -> ApiResult<&[u8]> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("missing k8s magic prefix"))?;
    let mut raw: &[u8] = &[];
    for (n, f) in fields(envelope)? {
        if let (2, Field::Bytes(b)) = (n, f) {
            raw = b;
        }
    }
    Ok(raw)
}

/// The string fields of a message by number, with their JSON names.
fn strings_of(bytes: &[u8], names: &[(u64, &str)]) -> ApiResult<Map<String, Value>> {
    let mut out = Map::new();
    for (n, f) in fields(bytes)? {
        if let (Some((_, name)), Field::Bytes(b)) = (names.iter().find(|(k, _)| *k == n), f) {
            out.insert((*name).to_string(), json!(string(b)?));
        }
    }
    Ok(out)
}

/// An access review's spec (`authorization/v1` `SelfSubjectAccessReviewSpec` and
/// `SubjectAccessReviewSpec`: attributes, then user, groups and uid).
fn access_review_spec(bytes: &[u8]) -> ApiResult<Value> {
    let mut spec = Map::new();
    let mut groups = Vec::new();
    for (n, f) in fields(bytes)? {
        let Field::Bytes(b) = f else { continue };
        match n {
            1 => {
                let attributes = strings_of(
                    b,
                    &[
                        (1, "namespace"),
                        (2, "verb"),
                        (3, "group"),
                        (4, "version"),
                        (5, "resource"),
                        (6, "subresource"),
                        (7, "name"),
                    ],
                )?;
                spec.insert("resourceAttributes".into(), Value::Object(attributes));
            }
            2 => {
                let attributes = strings_of(b, &[(1, "path"), (2, "verb")])?;
                spec.insert("nonResourceAttributes".into(), Value::Object(attributes));
            }
            3 => drop(spec.insert("user".into(), json!(string(b)?))),
            4 => groups.push(json!(string(b)?)),
            6 => drop(spec.insert("uid".into(), json!(string(b)?))),
            _ => {}
        }
    }
    if !groups.is_empty() {
        spec.insert("groups".into(), Value::Array(groups));
    }
    Ok(Value::Object(spec))
}

/// A `TokenRequestSpec` (`authentication/v1`): audiences and expiration.
fn token_request_spec(bytes: &[u8]) -> ApiResult<Value> {
    let mut spec = Map::new();
    let mut audiences = Vec::new();
    for (n, f) in fields(bytes)? {
        match (n, f) {
            (1, Field::Bytes(b)) => audiences.push(json!(string(b)?)),
            (4, Field::Varint(v)) => {
                drop(spec.insert(
                    "expirationSeconds".into(),
                    json!(i64::try_from(v).unwrap_or(i64::MAX)),
                ));
            }
            _ => {}
        }
    }
    if !audiences.is_empty() {
        spec.insert("audiences".into(), Value::Array(audiences));
    }
    Ok(Value::Object(spec))
}

/// Decode the protobuf body of a create that stores nothing: `kind` is `TokenRequest` or one
/// of the reviews (`SelfSubjectAccessReview`, `SubjectAccessReview`, `SelfSubjectRulesReview`,
/// `SelfSubjectReview`), as client-go's typed clients send them (field numbers from
/// `k8s.io/api/{authentication,authorization}/v1/generated.proto`).
///
/// # Errors
///
/// 400 for a malformed body, 415 for another kind.
pub fn decode_auth(body: &[u8], group: &str, kind: &str, content_type: &str) -> ApiResult<Value> {
    let raw = payload(body)?;
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(format!("{group}/v1")));
    obj.insert("kind".into(), json!(kind));
    for (n, f) in fields(raw)? {
        let Field::Bytes(b) = f else { continue };
        match (kind, n) {
            (_, 1) => drop(obj.insert("metadata".into(), object_meta(b)?)),
            ("TokenRequest", 2) => drop(obj.insert("spec".into(), token_request_spec(b)?)),
            ("SelfSubjectAccessReview" | "SubjectAccessReview", 2) => {
                drop(obj.insert("spec".into(), access_review_spec(b)?));
            }
            ("SelfSubjectRulesReview", 2) => {
                let spec = strings_of(b, &[(1, "namespace")])?;
                drop(obj.insert("spec".into(), Value::Object(spec)));
            }
            (
                "TokenRequest"
                | "SelfSubjectAccessReview"
                | "SubjectAccessReview"
                | "SelfSubjectRulesReview"
                | "SelfSubjectReview",
                _,
            ) => {}
            _ => return Err(ApiError::unsupported_media_type(content_type)),
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
    fn a_role_binding_from_kubectl_create_decodes() {
        let subject = [ld(1, b"ServiceAccount"), ld(3, b"inf"), ld(4, b"ops")].concat();
        let role_ref = [
            ld(1, b"rbac.authorization.k8s.io"),
            ld(2, b"Role"),
            ld(3, b"r"),
        ]
        .concat();
        let binding = [ld(1, &ld(1, b"rb")), ld(2, &subject), ld(3, &role_ref)].concat();
        let envelope = [MAGIC.to_vec(), ld(2, &binding)].concat();
        let rt = Registry::new()
            .lookup("rbac.authorization.k8s.io", "v1", "rolebindings")
            .unwrap();
        let v = decode(&envelope, &rt, "x").unwrap();
        assert_eq!(v["apiVersion"], "rbac.authorization.k8s.io/v1");
        assert_eq!(
            v["subjects"],
            json!([{"kind": "ServiceAccount", "name": "inf", "namespace": "ops"}])
        );
        assert_eq!(v["roleRef"]["kind"], "Role");
        let policy = [
            ld(1, b"list"),
            ld(1, b"watch"),
            ld(2, b""),
            ld(3, b"configmaps"),
        ]
        .concat();
        let object = [ld(1, &ld(1, b"r")), ld(2, &policy)].concat();
        let envelope = [MAGIC.to_vec(), ld(2, &object)].concat();
        let rt = Registry::new()
            .lookup("rbac.authorization.k8s.io", "v1", "roles")
            .unwrap();
        let v = decode(&envelope, &rt, "x").unwrap();
        assert_eq!(
            v["rules"],
            json!([{"verbs": ["list", "watch"], "apiGroups": [""], "resources": ["configmaps"]}])
        );
    }

    #[test]
    fn a_self_subject_access_review_and_a_token_request_decode() {
        let attributes = [ld(1, b"ops"), ld(2, b"list"), ld(5, b"configmaps")].concat();
        let review = ld(2, &ld(1, &attributes));
        let envelope = [MAGIC.to_vec(), ld(2, &review)].concat();
        let v = decode_auth(
            &envelope,
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            "x",
        )
        .unwrap();
        assert_eq!(v["apiVersion"], "authorization.k8s.io/v1");
        assert_eq!(
            v["spec"]["resourceAttributes"],
            json!({"namespace": "ops", "verb": "list", "resource": "configmaps"})
        );
        // expirationSeconds = 1200 (varint field 4), one audience.
        let spec = [ld(1, b"api"), vec![4 << 3, 0xb0, 0x09]].concat();
        let envelope = [MAGIC.to_vec(), ld(2, &ld(2, &spec))].concat();
        let v = decode_auth(&envelope, "authentication.k8s.io", "TokenRequest", "x").unwrap();
        assert_eq!(
            v["spec"],
            json!({"audiences": ["api"], "expirationSeconds": 1200})
        );
        assert_eq!(
            decode_auth(&envelope, "", "Pod", "x").unwrap_err().code,
            415
        );
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
