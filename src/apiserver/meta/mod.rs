//! Object metadata rules on create and update, one file per concept: `identity` (name, uid,
//! timestamp), `decode` (what the decoder refuses), `create`, `update` (preconditions, status
//! split, generation, immutable objects) and `deletion` (finalizers). This file holds what
//! create and update share: the canonical metadata, which resources track `generation`, and
//! the one-controller rule of owner references.

mod create;
mod decode;
mod deletion;
mod identity;
mod update;

use serde_json::{Map, Value, json};

use super::registry::ResourceType;
use super::status::{ApiError, ApiResult, FieldError};

pub use create::prepare_create;
pub use decode::check_type;
pub use deletion::{KUBERNETES_FINALIZER, has_finalizers, mark_for_deletion, ready_to_delete};
pub use identity::now;
pub use update::{Target, prepare_update};

/// The `metadata` map of `obj`, created when absent or null.
fn meta_mut(obj: &mut Value) -> ApiResult<&mut Map<String, Value>> {
    let map = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the request body is not a JSON object"))?;
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if meta.is_null() {
        *meta = json!({});
    }
    meta.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

/// Sets `obj.<path>` to `value`, making each step an object (replacing what is not one), where
/// `obj[a][b] = value` would panic on a step that is a string, number or array.
fn set_path(obj: &mut Value, path: &[&str], value: Value) {
    let Some((last, steps)) = path.split_last() else {
        *obj = value;
        return;
    };
    let mut cur = obj;
    for step in steps {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        cur = map.entry(*step).or_insert(Value::Null);
    }
    if !cur.is_object() {
        *cur = json!({});
    }
    if let Some(map) = cur.as_object_mut() {
        map.insert((*last).to_string(), value);
    }
}

/// Whether `rt` is the core group's namespaces.
#[must_use]
pub fn is_namespaces(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.plural == "namespaces"
}

/// The payload maps of a `ConfigMap` (`data`, `binaryData`) or a Secret (`data`); none for
/// another kind. What `immutable` freezes, and what decoding drops when empty.
fn payload_maps(rt: &ResourceType) -> &'static [&'static str] {
    match (rt.custom, rt.group.as_str(), rt.plural.as_str()) {
        (false, "", "configmaps") => &["data", "binaryData"],
        (false, "", "secrets") => &["data"],
        _ => &[],
    }
}

/// Whether the resource's strategy tracks `metadata.generation`: custom resources, CRDs, the
/// workload kinds and Pods (their strategies' `PrepareForCreate` set it to 1, e.g.
/// `pkg/registry/apps/deployment/strategy.go`; Pods since 1.33, KEP-5067). `ConfigMaps`, `Secrets`,
/// `Namespaces`, `Services` and the rest never carry it.
#[must_use]
fn tracks_generation(rt: &ResourceType) -> bool {
    rt.custom
        || matches!(
            (rt.group.as_str(), rt.plural.as_str()),
            ("", "pods")
                | ("apps" | "batch", _)
                | ("apiextensions.k8s.io", "customresourcedefinitions")
        )
}

/// kube-apiserver's rule that at most one owner reference is the controller
/// (k8s.io/apimachinery pkg/api/validation/objectmeta.go `ValidateOwnerReferences`): 422 naming
/// the first controller and each further one, the list printed as JSON as apimachinery prints
/// a value it cannot print plainly.
fn validate_owner_references(
    rt: &ResourceType,
    name: &str,
    meta: &Map<String, Value>,
) -> ApiResult<()> {
    let Some(references) = meta.get("ownerReferences").and_then(Value::as_array) else {
        return Ok(());
    };
    let controller = |r: &Value| {
        format!(
            "{}/{}",
            r["kind"].as_str().unwrap_or_default(),
            r["name"].as_str().unwrap_or_default()
        )
    };
    let mut controllers = references
        .iter()
        .filter(|r| r["controller"].as_bool() == Some(true))
        .map(controller);
    let Some(first) = controllers.next() else {
        return Ok(());
    };
    let printed = go_printed_references(references);
    let errors: Vec<FieldError> = controllers
        .map(|other| {
            FieldError::invalid(
                "metadata.ownerReferences",
                &printed,
                &format!(
                    "Only one reference can have Controller set to true. Found \"true\" in \
                     references for {first} and {other}"
                ),
            )
        })
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid_fields(&rt.kind, &rt.group, name, &errors))
}

/// `references` as apimachinery prints a `[]OwnerReference` in a field error: JSON with each
/// reference's fields in the Go struct's order (`apiVersion`, `kind`, `name`, `uid`,
/// `controller`, `blockOwnerDeletion`), absent ones left out.
fn go_printed_references(references: &[Value]) -> String {
    let printed: Vec<String> = references
        .iter()
        .map(|r| {
            let fields: Vec<String> = [
                "apiVersion",
                "kind",
                "name",
                "uid",
                "controller",
                "blockOwnerDeletion",
            ]
            .iter()
            .filter_map(|f| {
                r.get(*f)
                    .filter(|v| !v.is_null())
                    .map(|v| format!("{}:{v}", Value::from(*f)))
            })
            .collect();
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    format!("[{}]", printed.join(","))
}

/// Drop a `generateName` that is present but empty (kube-apiserver never stores one: Go's
/// `omitempty` drops it).
fn drop_empty_generate_name(meta: &mut Map<String, Value>) {
    if meta
        .get("generateName")
        .is_some_and(|g| g.is_null() || g.as_str() == Some(""))
    {
        meta.remove("generateName");
    }
}

/// The label every namespace carries with its own name, set on create and on every update so
/// it cannot be removed or changed (`kubernetes.io/metadata.name`; the namespace strategy's
/// `Canonicalize`, `pkg/registry/core/namespace/strategy.go`), so a namespace selector can
/// name namespaces.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// What every stored object's metadata gets on create and update: no empty `generateName`, and
/// a namespace's name label.
fn canonicalize(rt: &ResourceType, meta: &mut Map<String, Value>, name: &str) {
    drop_empty_generate_name(meta);
    if is_namespaces(rt) {
        label_namespace_name(meta, name);
    }
}

fn label_namespace_name(meta: &mut Map<String, Value>, name: &str) {
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(NAMESPACE_NAME_LABEL.into(), Value::String(name.to_owned()));
    }
}

/// The resource types the tests of every metadata rule use.
#[cfg(test)]
mod fixtures {
    use std::sync::Arc;

    use crate::apiserver::registry::{Registry, ResourceType};

    pub(super) fn deployments() -> Arc<ResourceType> {
        Registry::new().lookup("apps", "v1", "deployments").unwrap()
    }

    pub(super) fn namespaces() -> Arc<ResourceType> {
        Registry::new().lookup("", "v1", "namespaces").unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_path_makes_every_step_an_object() {
        let mut v = json!({"a": "x"});
        set_path(&mut v, &["a", "b", "c"], json!(1));
        assert_eq!(v, json!({"a": {"b": {"c": 1}}}));
        let mut v = json!([1]);
        set_path(&mut v, &["a"], json!(2));
        assert_eq!(v, json!({"a": 2}));
    }
}
