//! What kube-apiserver's decoder refuses before any metadata rule runs: a body that is no
//! object, an `apiVersion` or `kind` of another resource, malformed metadata, and a `spec` or
//! `status` of the wrong JSON type for a built-in kind.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::{is_namespaces, payload_maps};
use crate::apiserver::registry::ResourceType;
use crate::apiserver::status::{ApiError, ApiResult, go_value};

/// The typed metadata of a stored or submitted object.
///
/// # Errors
///
/// 400 when the metadata is malformed.
pub(super) fn typed_meta(obj: &Value) -> ApiResult<ObjectMeta> {
    match obj.get("metadata") {
        None | Some(Value::Null) => Ok(ObjectMeta::default()),
        Some(m) => serde_json::from_value(m.clone())
            .map_err(|e| ApiError::bad_request(format!("invalid metadata: {e}"))),
    }
}

/// Check `apiVersion`/`kind` of a body against the resource and fill them in when absent.
pub fn check_type(rt: &ResourceType, version: &str, obj: &mut Value) -> ApiResult<()> {
    let expected_av = rt.api_version(version);
    let map = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the request body is not a JSON object"))?;
    match map.get("apiVersion").and_then(Value::as_str) {
        Some(av) if av != expected_av && !rt.versions.iter().any(|v| rt.api_version(v) == av) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({expected_av})"
            )));
        }
        _ => {}
    }
    match map.get("kind").and_then(Value::as_str) {
        Some(k) if k != rt.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                rt.kind
            )));
        }
        _ => {}
    }
    map.insert("apiVersion".into(), Value::String(expected_av));
    map.insert("kind".into(), Value::String(rt.kind.clone()));
    if !rt.custom && rt.group.is_empty() && rt.plural == "secrets" {
        decode_secret(map);
    }
    if !rt.custom {
        drop_empty_maps(rt, map);
    }
    Ok(())
}

/// A built-in kind's empty maps are gone after kube-apiserver's decoding: Go's `encoding/json`
/// leaves an empty `map` with `omitempty` out (`data: {}` of a `ConfigMap` comes back without
/// `data`). The maps of this server's kinds that clients send empty: the object's `labels` and
/// `annotations`, a `ConfigMap`'s `data` and `binaryData`, a Secret's `data`.
fn drop_empty_maps(rt: &ResourceType, object: &mut serde_json::Map<String, Value>) {
    let empty =
        |v: Option<&Value>| v.is_some_and(|v| v.as_object().is_some_and(serde_json::Map::is_empty));
    if let Some(Value::Object(meta)) = object.get_mut("metadata") {
        for field in ["labels", "annotations"] {
            if empty(meta.get(field)) {
                meta.remove(field);
            }
        }
    }
    for field in payload_maps(rt) {
        if empty(object.get(*field)) {
            object.remove(*field);
        }
    }
}

/// What kube-apiserver's decoding does to every Secret written: `stringData` is write-only,
/// merged into `data` (its keys win; `Convert_v1_Secret_To_core_Secret` of
/// `pkg/apis/core/v1/conversion.go`), and an empty `type` is `Opaque` (`SetDefaults_Secret` of
/// `pkg/apis/core/v1/defaults.go`). A `stringData` that is no map of strings is left for
/// validation to refuse.
fn decode_secret(secret: &mut serde_json::Map<String, Value>) {
    use base64::Engine as _;
    let strings = match secret.get("stringData") {
        Some(Value::Object(strings)) if strings.values().all(Value::is_string) => strings.clone(),
        Some(Value::Null) => serde_json::Map::new(),
        _ => return default_secret_type(secret),
    };
    secret.remove("stringData");
    let had_data = secret.contains_key("data");
    let mut data = match secret.remove("data") {
        Some(Value::Object(data)) => data,
        _ => serde_json::Map::new(),
    };
    for (key, value) in strings {
        let text = value.as_str().unwrap_or_default();
        data.insert(
            key,
            Value::String(base64::engine::general_purpose::STANDARD.encode(text)),
        );
    }
    if had_data || !data.is_empty() {
        secret.insert("data".into(), Value::Object(data));
    }
    default_secret_type(secret);
}

/// A Secret's empty `type` is `Opaque`.
fn default_secret_type(secret: &mut serde_json::Map<String, Value>) {
    if secret
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        secret.insert("type".into(), Value::String("Opaque".into()));
    }
}

/// The typed `spec` and `status` of a built-in kind with a status subresource (every one has a
/// `<Kind>Spec` and a `<Kind>Status` struct), and a namespace's `spec.finalizers`: a value of
/// another JSON type is the 400 kube-apiserver's decoder answers (`Namespace in version "v1"
/// cannot be handled as a Namespace: json: cannot unmarshal string into Go struct field
/// Namespace.spec of type v1.NamespaceSpec`). Custom resources have no Go types (and this
/// server no schema validation): theirs pass.
pub(super) fn check_typed_parts(rt: &ResourceType, version: &str, obj: &Value) -> ApiResult<()> {
    if rt.custom || !rt.status_subresource {
        return Ok(());
    }
    let kind = rt.kind.as_str();
    for (field, go_type) in [("spec", "Spec"), ("status", "Status")] {
        if let Some(v) = obj.get(field).filter(|v| !v.is_null() && !v.is_object()) {
            return Err(ApiError::cannot_decode(
                kind,
                version,
                kind,
                field,
                &format!("v1.{kind}{go_type}"),
                &go_value(v, false),
            ));
        }
    }
    if is_namespaces(rt) {
        let bad = |found: &Value, go_type: &str| {
            ApiError::cannot_decode(
                kind,
                version,
                "NamespaceSpec",
                "spec.finalizers",
                go_type,
                &go_value(found, false),
            )
        };
        match obj.get("spec").and_then(|s| s.get("finalizers")) {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                if let Some(item) = items.iter().find(|i| !i.is_string()) {
                    return Err(bad(item, "v1.FinalizerName"));
                }
            }
            Some(other) => return Err(bad(other, "[]v1.FinalizerName")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_secret_s_string_data_is_merged_into_data_and_its_type_defaulted() {
        let mut secret = json!({"stringData": {"user": "admin", "pass": "new"}, "data": {"pass": "b2xk", "k": "dg=="}});
        let map = secret.as_object_mut().unwrap();
        super::decode_secret(map);
        assert_eq!(
            secret,
            json!({"data": {"user": "YWRtaW4=", "pass": "bmV3", "k": "dg=="}, "type": "Opaque"})
        );
        let mut typed = json!({"type": "kubernetes.io/tls", "stringData": 3});
        super::decode_secret(typed.as_object_mut().unwrap());
        assert_eq!(
            typed,
            json!({"type": "kubernetes.io/tls", "stringData": 3}),
            "left for validation"
        );
        let mut bare = json!({"metadata": {}});
        super::decode_secret(bare.as_object_mut().unwrap());
        assert_eq!(bare, json!({"metadata": {}, "type": "Opaque"}));
    }

    use crate::apiserver::meta::fixtures::namespaces;
    use crate::apiserver::meta::{Target, prepare_create, prepare_update};

    /// Each of these wrote `x["spec"]["finalizers"]` or `x["status"]["phase"]` on a client's
    /// value, which panics when the step is no object (issue #33, item 4).
    #[test]
    fn a_namespace_spec_or_status_of_the_wrong_type_is_400_not_a_panic() {
        let rt = namespaces();
        let (key, old) =
            prepare_create(&rt, "v1", None, json!({"metadata": {"name": "ns"}})).unwrap();
        for (body, message) in [
            (
                json!({"metadata": {"name": "ns"}, "spec": "x"}),
                "Namespace in version \"v1\" cannot be handled as a Namespace: json: cannot \
                 unmarshal string into Go struct field Namespace.spec of type v1.NamespaceSpec",
            ),
            (
                json!({"metadata": {"name": "ns"}, "spec": [1]}),
                "Namespace in version \"v1\" cannot be handled as a Namespace: json: cannot \
                 unmarshal array into Go struct field Namespace.spec of type v1.NamespaceSpec",
            ),
            (
                json!({"metadata": {"name": "ns"}, "status": 3}),
                "Namespace in version \"v1\" cannot be handled as a Namespace: json: cannot \
                 unmarshal number into Go struct field Namespace.status of type \
                 v1.NamespaceStatus",
            ),
            (
                json!({"metadata": {"name": "ns"}, "spec": {"finalizers": "kubernetes"}}),
                "Namespace in version \"v1\" cannot be handled as a Namespace: json: cannot \
                 unmarshal string into Go struct field NamespaceSpec.spec.finalizers of type \
                 []v1.FinalizerName",
            ),
            (
                json!({"metadata": {"name": "ns"}, "spec": {"finalizers": [1]}}),
                "Namespace in version \"v1\" cannot be handled as a Namespace: json: cannot \
                 unmarshal number into Go struct field NamespaceSpec.spec.finalizers of type \
                 v1.FinalizerName",
            ),
        ] {
            for target in [Target::Main, Target::Status, Target::Finalize] {
                let err = prepare_update(&rt, "v1", &key, &old, body.clone(), target).unwrap_err();
                assert_eq!((err.code, err.message.as_str()), (400, message), "{body}");
            }
            let err = prepare_create(&rt, "v1", None, body.clone()).unwrap_err();
            assert_eq!((err.code, err.message.as_str()), (400, message), "{body}");
        }
    }
}
