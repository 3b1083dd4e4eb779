//! An updated object's metadata, as kube-apiserver's update path and the strategies'
//! `PrepareForUpdate` and `ValidateUpdate` treat it: the resourceVersion precondition, what stays
//! fixed, which part each target (main resource, `/status`, `/finalize`) may change, the
//! generation bump, and immutable `ConfigMaps` and `Secrets`.

use serde_json::{Value, json};

use super::decode::{check_type, check_typed_parts, typed_meta};
use super::deletion::{keep_spec_finalizers, remove_spec_finalizers};
use super::{
    canonicalize, is_namespaces, meta_mut, payload_maps, set_path, tracks_generation,
    validate_owner_references,
};
use crate::apiserver::registry::ResourceType;
use crate::apiserver::status::{ApiError, ApiResult, FieldError};
use crate::apiserver::store::ObjKey;

/// The part of an object whose change bumps `metadata.generation`: all but metadata and status.
fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
        m.remove("apiVersion");
        m.remove("kind");
    }
    v
}

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The main resource: everything but status (when status is a subresource).
    Main,
    /// The status subresource: status only.
    Status,
    /// A namespace's `/finalize` subresource: `spec.finalizers` only.
    Finalize,
}
/// Optimistic concurrency of an update: a `resourceVersion` must be the stored one (else 409);
/// without one the update is unconditional where the strategy allows it (the built-in kinds
/// served here), and refused for custom resources, whose strategy does not
/// (apiextensions-apiserver `pkg/registry/customresource/strategy.go`,
/// `AllowUnconditionalUpdate`; apiserver `pkg/registry/generic/registry/store.go`, `Update`: the
/// version parsed as 0, shown as Go's `%#v` of a uint64). A merge patch setting
/// `metadata.resourceVersion` to null is such an update.
fn check_resource_version(
    rt: &ResourceType,
    key: &ObjKey,
    rv: Option<&str>,
    old: &Value,
) -> ApiResult<()> {
    match rv {
        Some(rv) if !rv.is_empty() => {
            if Some(rv) == old["metadata"]["resourceVersion"].as_str() {
                Ok(())
            } else {
                Err(ApiError::conflict(&rt.group, &rt.plural, &key.name))
            }
        }
        _ if rt.custom => Err(ApiError::invalid_fields(
            &rt.plural,
            &rt.group,
            &key.name,
            &[FieldError::invalid(
                "metadata.resourceVersion",
                "0x0",
                "must be specified for an update",
            )],
        )),
        _ => Ok(()),
    }
}

/// Prepare an updated object: resourceVersion precondition, immutable metadata, status split,
/// generation bump.
///
/// # Errors
///
/// 409 Conflict on a stale resourceVersion; 400 for a wrong kind or name.
pub fn prepare_update(
    rt: &ResourceType,
    version: &str,
    key: &ObjKey,
    old: &Value,
    mut new: Value,
    target: Target,
) -> ApiResult<Value> {
    check_type(rt, version, &mut new)?;
    check_typed_parts(rt, version, &new)?;
    let typed = typed_meta(&new)?;
    if let Some(name) = typed.name.as_deref()
        && !name.is_empty()
        && name != key.name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            key.name
        )));
    }
    check_resource_version(rt, key, typed.resource_version.as_deref(), old)?;
    let mut result = match target {
        Target::Finalize => {
            let mut merged = old.clone();
            match new.get("spec").and_then(|s| s.get("finalizers")) {
                Some(f) => set_path(&mut merged, &["spec", "finalizers"], f.clone()),
                None => remove_spec_finalizers(&mut merged),
            }
            merged
        }
        Target::Status => {
            let mut merged = old.clone();
            if let Some(m) = merged.as_object_mut() {
                match new.get("status") {
                    Some(s) => m.insert("status".into(), s.clone()),
                    None => m.remove("status"),
                };
            }
            // A status apply records its manager: the one metadata change a status write makes.
            if let Some(mf) = new["metadata"].get("managedFields")
                && let Some(meta) = merged.get_mut("metadata").and_then(Value::as_object_mut)
            {
                meta.insert("managedFields".into(), mf.clone());
            }
            merged
        }
        Target::Main => {
            if rt.status_subresource
                && let Some(m) = new.as_object_mut()
            {
                match old.get("status") {
                    Some(s) => m.insert("status".into(), s.clone()),
                    None => m.remove("status"),
                };
            }
            // Only `/finalize` changes a namespace's finalizers (the namespace strategy's
            // PrepareForUpdate keeps the old ones).
            if is_namespaces(rt) {
                keep_spec_finalizers(old, &mut new);
            }
            new
        }
    };
    let old_meta = old.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let generation = old_meta["generation"].as_i64().unwrap_or(1);
    let bump = target == Target::Main && spec_part(old) != spec_part(&result);
    let meta = meta_mut(&mut result)?;
    meta.insert("name".into(), Value::String(key.name.clone()));
    if rt.namespaced {
        meta.insert("namespace".into(), Value::String(key.namespace.clone()));
    }
    for fixed in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        match old_meta.get(fixed) {
            Some(v) => meta.insert(fixed.into(), v.clone()),
            None => meta.remove(fixed),
        };
    }
    if !meta.contains_key("managedFields")
        && let Some(mf) = old_meta.get("managedFields")
    {
        meta.insert("managedFields".into(), mf.clone());
    }
    if tracks_generation(rt) {
        meta.insert(
            "generation".into(),
            json!(if bump {
                generation.saturating_add(1)
            } else {
                generation
            }),
        );
    } else {
        meta.remove("generation");
    }
    canonicalize(rt, meta, &key.name);
    validate_owner_references(rt, &key.name, meta)?;
    validate_immutable(rt, key, old, &result)?;
    Ok(result)
}

/// The detail of every field error about an immutable `ConfigMap` or `Secret`
/// (`pkg/apis/core/validation/validation.go`, `ValidateConfigMapUpdate`, `ValidateSecretUpdate`).
const IMMUTABLE_SET: &str = "field is immutable when `immutable` is set";

/// A map field as stored: absent, null and empty are the same (protobuf storage does not tell
/// them apart).
fn map_field(obj: &Value, field: &str) -> Option<Value> {
    obj.get(field)
        .filter(|v| !v.is_null() && v.as_object().is_none_or(|m| !m.is_empty()))
        .cloned()
}

/// kube-apiserver's update validation of immutable `ConfigMaps` and `Secrets`: once `immutable`
/// is true, it cannot be unset and the payload (`data`, and `binaryData` for `ConfigMaps`) cannot
/// change. Every violation is reported, as `NewInvalid` does.
///
/// # Errors
///
/// 422 Invalid with a `FieldValueForbidden` cause per field.
fn validate_immutable(rt: &ResourceType, key: &ObjKey, old: &Value, new: &Value) -> ApiResult<()> {
    let payload = payload_maps(rt);
    if payload.is_empty() || old["immutable"].as_bool() != Some(true) {
        return Ok(());
    }
    let mut errors = Vec::new();
    if new["immutable"].as_bool() != Some(true) {
        errors.push(FieldError::forbidden("immutable", IMMUTABLE_SET));
    }
    for field in payload {
        if map_field(old, field) != map_field(new, field) {
            errors.push(FieldError::forbidden(field, IMMUTABLE_SET));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_fields(
            &rt.kind, &rt.group, &key.name, &errors,
        ))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::apiserver::meta::fixtures::{deployments, namespaces};
    use crate::apiserver::meta::prepare_create;

    #[test]
    fn spec_changes_bump_generation_but_status_and_labels_do_not() {
        let rt = deployments();
        let (key, old) = prepare_create(
            &rt,
            "v1",
            Some("a"),
            json!({"metadata": {"name": "w"}, "spec": {"replicas": 1}}),
        )
        .unwrap();
        let mut labels = old.clone();
        labels["metadata"]["labels"] = json!({"x": "y"});
        let same = prepare_update(&rt, "v1", &key, &old, labels, Target::Main).unwrap();
        assert_eq!(same["metadata"]["generation"], 1);
        let mut status = old.clone();
        status["status"] = json!({"replicas": 3});
        let st = prepare_update(&rt, "v1", &key, &old, status, Target::Status).unwrap();
        assert_eq!(st["metadata"]["generation"], 1);
        assert_eq!(st["status"]["replicas"], 3);
        let mut spec = old.clone();
        spec["spec"]["replicas"] = json!(2);
        let bumped = prepare_update(&rt, "v1", &key, &old, spec, Target::Main).unwrap();
        assert_eq!(bumped["metadata"]["generation"], 2);
    }

    #[test]
    fn a_stale_resource_version_is_a_conflict() {
        let rt = deployments();
        let (key, mut old) =
            prepare_create(&rt, "v1", Some("a"), json!({"metadata": {"name": "w"}})).unwrap();
        old["metadata"]["resourceVersion"] = json!("5");
        let mut new = old.clone();
        new["metadata"]["resourceVersion"] = json!("4");
        let err = prepare_update(&rt, "v1", &key, &old, new, Target::Main).unwrap_err();
        assert_eq!(err.code, 409);
        assert_eq!(err.reason, "Conflict");
    }

    #[test]
    fn the_main_resource_cannot_change_status() {
        let rt = deployments();
        let (key, mut old) =
            prepare_create(&rt, "v1", Some("a"), json!({"metadata": {"name": "w"}})).unwrap();
        old["status"] = json!({"replicas": 1});
        let mut new = old.clone();
        new["status"] = json!({"replicas": 9});
        let out = prepare_update(&rt, "v1", &key, &old, new, Target::Main).unwrap();
        assert_eq!(out["status"]["replicas"], 1);
    }

    #[test]
    fn finalize_replaces_only_the_spec_finalizers() {
        let rt = namespaces();
        let (key, old) =
            prepare_create(&rt, "v1", None, json!({"metadata": {"name": "ns"}})).unwrap();
        let body = json!({"metadata": {"name": "ns"}, "spec": {"finalizers": ["a"]}});
        let out = prepare_update(&rt, "v1", &key, &old, body, Target::Finalize).unwrap();
        assert_eq!(out["spec"]["finalizers"], json!(["a"]));
        let body = json!({"metadata": {"name": "ns"}});
        let out = prepare_update(&rt, "v1", &key, &old, body, Target::Finalize).unwrap();
        assert_eq!(out["spec"], json!({}));
        let body = json!({"metadata": {"name": "ns"}, "spec": {"finalizers": []}});
        let out = prepare_update(&rt, "v1", &key, &old, body, Target::Main).unwrap();
        assert_eq!(
            out["spec"]["finalizers"],
            json!(["kubernetes"]),
            "kept on a plain PUT"
        );
    }
}
