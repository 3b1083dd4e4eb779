//! Decoding the protobuf bodies kubectl's `create <kind>` generators and client-go's typed
//! clients send (`kubectl create namespace|configmap|secret|serviceaccount|role|…`, `kubectl
//! create token`, `kubectl auth can-i|whoami`) into JSON. The messages are `k8s-pb`'s (generated
//! by prost from `k8s.io/api` and `apimachinery`'s `generated.proto`); this file only chooses
//! the message for a kind and writes the JSON fields the rest of the server reads: `ObjectMeta`'s
//! identity, labels, annotations and finalizers, and the payload fields of those kinds.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_pb::api::authentication::v1 as authn;
use k8s_pb::api::authorization::v1 as authz;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::{Map, Value, json};

use super::registry::ResourceType;
use super::status::{ApiError, ApiResult};

/// The magic prefix of Kubernetes protobuf bodies (`k8s.io/apimachinery/pkg/runtime/serializer/
/// protobuf/protobuf.go`, `protoEncodingPrefix`).
const MAGIC: &[u8] = b"k8s\0";

/// A 400 for a body that is not the `kind` it claims to be, in kube-apiserver's words: a body it
/// cannot decode is a `BadRequest` Status, "the object provided is unrecognized (must be of
/// type KIND): ERROR" (`transformDecodeError` in
/// `k8s.io/apiserver/pkg/endpoints/handlers/rest.go`).
fn bad(kind: &str, what: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!(
        "the object provided is unrecognized (must be of type {kind}): {what}"
    ))
}

/// The `kind` message `bytes` hold.
fn message<M: Message + Default>(kind: &str, bytes: &[u8]) -> ApiResult<M> {
    M::decode(bytes).map_err(|e| bad(kind, e))
}

/// The payload of a protobuf envelope (`runtime.Unknown`'s `raw`) said to hold a `kind`.
fn payload(kind: &str, body: &[u8]) -> ApiResult<Vec<u8>> {
    let envelope = body.strip_prefix(MAGIC).ok_or_else(|| {
        bad(
            kind,
            "provided data does not appear to be a protobuf message, expected prefix \"k8s\\0\"",
        )
    })?;
    Ok(message::<Unknown>(kind, envelope)?.raw.unwrap_or_default())
}

/// Inserts `value` under `key` when there is one.
fn put(obj: &mut Map<String, Value>, key: &str, value: Option<impl Into<Value>>) {
    if let Some(value) = value {
        obj.insert(key.into(), value.into());
    }
}

/// Inserts a list under `key` unless it is empty.
fn put_list(obj: &mut Map<String, Value>, key: &str, values: Vec<Value>) {
    if !values.is_empty() {
        obj.insert(key.into(), Value::Array(values));
    }
}

fn strings(values: Vec<String>) -> Vec<Value> {
    values.into_iter().map(Value::String).collect()
}

/// A `map<string, string>` as a JSON object, or nothing when empty.
fn string_map(map: BTreeMap<String, String>) -> Option<Value> {
    (!map.is_empty()).then(|| Value::Object(map.into_iter().map(|(k, v)| (k, json!(v))).collect()))
}

/// A `map<string, bytes>` as a JSON object of base64 values, or nothing when empty.
fn bytes_map(map: BTreeMap<String, Vec<u8>>) -> Option<Value> {
    (!map.is_empty()).then(|| {
        Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, json!(STANDARD.encode(v))))
                .collect(),
        )
    })
}

fn object_meta(meta: ObjectMeta) -> Value {
    let mut out = Map::new();
    put(&mut out, "name", meta.name);
    put(&mut out, "generateName", meta.generate_name);
    put(&mut out, "namespace", meta.namespace);
    put(&mut out, "labels", string_map(meta.labels));
    put(&mut out, "annotations", string_map(meta.annotations));
    put_list(&mut out, "finalizers", strings(meta.finalizers));
    Value::Object(out)
}

/// A `PolicyRule` (`rbac/v1`): verbs always, the other lists when not empty.
fn policy_rule(rule: rbac::PolicyRule) -> Value {
    let mut out = Map::new();
    out.insert("verbs".into(), Value::Array(strings(rule.verbs)));
    put_list(&mut out, "apiGroups", strings(rule.api_groups));
    put_list(&mut out, "resources", strings(rule.resources));
    put_list(&mut out, "resourceNames", strings(rule.resource_names));
    put_list(
        &mut out,
        "nonResourceURLs",
        strings(rule.non_resource_ur_ls),
    );
    Value::Object(out)
}

/// A `metav1.LabelSelector`: matchLabels and matchExpressions.
fn label_selector(selector: LabelSelector) -> Value {
    let mut out = Map::new();
    put(&mut out, "matchLabels", string_map(selector.match_labels));
    let expressions = selector
        .match_expressions
        .into_iter()
        .map(|e| {
            let mut expression = Map::new();
            put(&mut expression, "key", e.key);
            put(&mut expression, "operator", e.operator);
            put_list(&mut expression, "values", strings(e.values));
            Value::Object(expression)
        })
        .collect();
    put_list(&mut out, "matchExpressions", expressions);
    Value::Object(out)
}

fn subject(s: rbac::Subject) -> Value {
    let mut out = Map::new();
    put(&mut out, "kind", s.kind);
    put(&mut out, "apiGroup", s.api_group);
    put(&mut out, "name", s.name);
    put(&mut out, "namespace", s.namespace);
    Value::Object(out)
}

fn role_ref(r: rbac::RoleRef) -> Value {
    let mut out = Map::new();
    put(&mut out, "apiGroup", r.api_group);
    put(&mut out, "kind", r.kind);
    put(&mut out, "name", r.name);
    Value::Object(out)
}

/// The fields of the supported kinds after `metadata`, into `obj`, with the metadata.
fn kind_fields(obj: &mut Map<String, Value>, rt: &ResourceType, raw: &[u8]) -> ApiResult<()> {
    let kind = rt.kind.as_str();
    let rules = |rules: Vec<rbac::PolicyRule>| rules.into_iter().map(policy_rule).collect();
    let meta = match rt.plural.as_str() {
        "namespaces" => message::<core::Namespace>(kind, raw)?.metadata,
        "serviceaccounts" => message::<core::ServiceAccount>(kind, raw)?.metadata,
        "configmaps" => {
            let cm = message::<core::ConfigMap>(kind, raw)?;
            put(obj, "data", string_map(cm.data));
            put(obj, "binaryData", bytes_map(cm.binary_data));
            put(obj, "immutable", cm.immutable);
            cm.metadata
        }
        "secrets" => {
            let secret = message::<core::Secret>(kind, raw)?;
            let mut data = secret.data;
            // stringData is write-only: merged into data as kube-apiserver does.
            data.extend(
                secret
                    .string_data
                    .into_iter()
                    .map(|(k, v)| (k, v.into_bytes())),
            );
            put(obj, "data", bytes_map(data));
            put(obj, "type", secret.r#type);
            put(obj, "immutable", secret.immutable);
            secret.metadata
        }
        "roles" => {
            let role = message::<rbac::Role>(kind, raw)?;
            put_list(obj, "rules", rules(role.rules));
            role.metadata
        }
        "clusterroles" => {
            let role = message::<rbac::ClusterRole>(kind, raw)?;
            put_list(obj, "rules", rules(role.rules));
            if let Some(aggregation) = role.aggregation_rule {
                let selectors: Vec<Value> = aggregation
                    .cluster_role_selectors
                    .into_iter()
                    .map(label_selector)
                    .collect();
                obj.insert(
                    "aggregationRule".into(),
                    json!({"clusterRoleSelectors": selectors}),
                );
            }
            role.metadata
        }
        // A ClusterRoleBinding's fields are a RoleBinding's (the same numbers and types).
        "rolebindings" | "clusterrolebindings" => {
            let binding = message::<rbac::RoleBinding>(kind, raw)?;
            put_list(
                obj,
                "subjects",
                binding.subjects.into_iter().map(subject).collect(),
            );
            put(obj, "roleRef", binding.role_ref.map(role_ref));
            binding.metadata
        }
        _ => None,
    };
    put(obj, "metadata", meta.map(object_meta));
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
    let supported = match rt.group.as_str() {
        "" => matches!(
            rt.plural.as_str(),
            "namespaces" | "configmaps" | "secrets" | "serviceaccounts"
        ),
        "rbac.authorization.k8s.io" => matches!(
            rt.plural.as_str(),
            "roles" | "clusterroles" | "rolebindings" | "clusterrolebindings"
        ),
        _ => false,
    };
    if !supported {
        return Err(ApiError::unsupported_media_type(content_type));
    }
    let raw = payload(&rt.kind, body)?;
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(rt.api_version("v1")));
    obj.insert("kind".into(), json!(rt.kind));
    kind_fields(&mut obj, rt, &raw)?;
    Ok(Value::Object(obj))
}

fn resource_attributes(a: authz::ResourceAttributes) -> Value {
    let mut out = Map::new();
    put(&mut out, "namespace", a.namespace);
    put(&mut out, "verb", a.verb);
    put(&mut out, "group", a.group);
    put(&mut out, "version", a.version);
    put(&mut out, "resource", a.resource);
    put(&mut out, "subresource", a.subresource);
    put(&mut out, "name", a.name);
    Value::Object(out)
}

fn non_resource_attributes(a: authz::NonResourceAttributes) -> Value {
    let mut out = Map::new();
    put(&mut out, "path", a.path);
    put(&mut out, "verb", a.verb);
    Value::Object(out)
}

/// An access review's attributes, into `spec`.
fn attributes(
    spec: &mut Map<String, Value>,
    resource: Option<authz::ResourceAttributes>,
    non_resource: Option<authz::NonResourceAttributes>,
) {
    put(
        spec,
        "resourceAttributes",
        resource.map(resource_attributes),
    );
    put(
        spec,
        "nonResourceAttributes",
        non_resource.map(non_resource_attributes),
    );
}

/// The `metadata` and `spec` of the kinds [`decode_auth`] takes, or `None` for another kind.
fn auth_fields(kind: &str, raw: &[u8]) -> ApiResult<Option<(Option<ObjectMeta>, Option<Value>)>> {
    Ok(Some(match kind {
        "TokenRequest" => {
            let request = message::<authn::TokenRequest>(kind, raw)?;
            let spec = request.spec.map(|s| {
                let mut spec = Map::new();
                put_list(&mut spec, "audiences", strings(s.audiences));
                put(&mut spec, "expirationSeconds", s.expiration_seconds);
                Value::Object(spec)
            });
            (request.metadata, spec)
        }
        "SelfSubjectAccessReview" => {
            let review = message::<authz::SelfSubjectAccessReview>(kind, raw)?;
            let spec = review.spec.map(|s| {
                let mut spec = Map::new();
                attributes(&mut spec, s.resource_attributes, s.non_resource_attributes);
                Value::Object(spec)
            });
            (review.metadata, spec)
        }
        "SubjectAccessReview" => {
            let review = message::<authz::SubjectAccessReview>(kind, raw)?;
            let spec = review.spec.map(|s| {
                let mut spec = Map::new();
                attributes(&mut spec, s.resource_attributes, s.non_resource_attributes);
                put(&mut spec, "user", s.user);
                put_list(&mut spec, "groups", strings(s.groups));
                put(&mut spec, "uid", s.uid);
                Value::Object(spec)
            });
            (review.metadata, spec)
        }
        "SelfSubjectRulesReview" => {
            let review = message::<authz::SelfSubjectRulesReview>(kind, raw)?;
            let spec = review.spec.map(|s| {
                let mut spec = Map::new();
                put(&mut spec, "namespace", s.namespace);
                Value::Object(spec)
            });
            (review.metadata, spec)
        }
        "SelfSubjectReview" => (
            message::<authn::SelfSubjectReview>(kind, raw)?.metadata,
            None,
        ),
        _ => return Ok(None),
    }))
}

/// Decode the protobuf body of a create that stores nothing: `kind` is `TokenRequest` or one
/// of the reviews (`SelfSubjectAccessReview`, `SubjectAccessReview`, `SelfSubjectRulesReview`,
/// `SelfSubjectReview`), as client-go's typed clients send them.
///
/// # Errors
///
/// 400 for a malformed body, 415 for another kind.
pub fn decode_auth(body: &[u8], group: &str, kind: &str, content_type: &str) -> ApiResult<Value> {
    let raw = payload(kind, body)?;
    let (meta, spec) =
        auth_fields(kind, &raw)?.ok_or_else(|| ApiError::unsupported_media_type(content_type))?;
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(format!("{group}/v1")));
    obj.insert("kind".into(), json!(kind));
    put(&mut obj, "metadata", meta.map(object_meta));
    put(&mut obj, "spec", spec);
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests;
