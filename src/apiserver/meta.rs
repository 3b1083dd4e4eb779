//! Object metadata rules on create and update: identity, uid, timestamps, generation,
//! resourceVersion preconditions, and what the status subresource may change.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value, json};

use super::registry::ResourceType;
use super::status::{ApiError, ApiResult, FieldError, go_value};
use super::store::ObjKey;

/// The current time as kube-apiserver writes it (RFC 3339, whole seconds, UTC).
#[must_use]
pub fn now() -> String {
    let ts = jiff::Timestamp::now();
    jiff::Timestamp::from_second(ts.as_second())
        .unwrap_or(ts)
        .to_string()
}

/// A random RFC 4122 version-4 uid, as kube-apiserver gives every object
/// (`k8s.io/apimachinery/pkg/util/uuid`, `NewUUID`).
#[must_use]
pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn random_suffix() -> String {
    // The alphabet of apimachinery's `util/rand.String` (no vowels, no confusable digits).
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| {
            let i = usize::from(rand::random::<u8>()) % ALPHABET.len();
            char::from(ALPHABET[i])
        })
        .collect()
}

/// Whether `name` is a DNS-1123 subdomain (the rule for most object names).
#[must_use]
pub fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.')
        && name
            .bytes()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric())
}

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

/// The typed metadata of a stored or submitted object.
///
/// # Errors
///
/// 400 when the metadata is malformed.
pub fn typed_meta(obj: &Value) -> ApiResult<ObjectMeta> {
    match obj.get("metadata") {
        None | Some(Value::Null) => Ok(ObjectMeta::default()),
        Some(m) => serde_json::from_value(m.clone())
            .map_err(|e| ApiError::bad_request(format!("invalid metadata: {e}"))),
    }
}

/// Check `apiVersion`/`kind` of a body against the resource and fill them in when absent.
fn check_type(rt: &ResourceType, version: &str, obj: &mut Value) -> ApiResult<()> {
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
    Ok(())
}

/// The typed `spec` and `status` of a built-in kind with a status subresource (every one has a
/// `<Kind>Spec` and a `<Kind>Status` struct), and a namespace's `spec.finalizers`: a value of
/// another JSON type is the 400 kube-apiserver's decoder answers (`Namespace in version "v1"
/// cannot be handled as a Namespace: json: cannot unmarshal string into Go struct field
/// Namespace.spec of type v1.NamespaceSpec`). Custom resources have no Go types (and this
/// server no schema validation): theirs pass.
fn check_typed_parts(rt: &ResourceType, version: &str, obj: &Value) -> ApiResult<()> {
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

/// Gives `new` the `spec.finalizers` of `old` (none when `old` has none).
fn keep_spec_finalizers(old: &Value, new: &mut Value) {
    match old.get("spec").and_then(|s| s.get("finalizers")) {
        Some(f) if !f.is_null() => set_path(new, &["spec", "finalizers"], f.clone()),
        _ => remove_spec_finalizers(new),
    }
}

/// Removes `obj.spec.finalizers`, when there is one.
fn remove_spec_finalizers(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("finalizers");
    }
}

/// The finalizer that keeps a namespace until its content is deleted (`FinalizerKubernetes`).
pub const KUBERNETES_FINALIZER: &str = "kubernetes";

/// Whether `rt` is the core group's namespaces.
#[must_use]
pub fn is_namespaces(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.plural == "namespaces"
}

/// Reset `status` on create for resources with a status subresource, like their strategies.
fn initial_status(rt: &ResourceType, obj: &mut Value) {
    if !rt.status_subresource {
        return;
    }
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    match (rt.group.as_str(), rt.plural.as_str()) {
        // Nodes may set status on create (kubelet registers that way).
        ("", "nodes") => {}
        ("", "pods") => {
            map.insert("status".into(), json!({"phase": "Pending"}));
        }
        ("", "namespaces") => {
            map.insert("status".into(), json!({"phase": "Active"}));
            // The namespace strategy's PrepareForCreate adds the `kubernetes` finalizer, which
            // the namespace controller removes once the namespace's content is gone.
            let spec = map.entry("spec").or_insert_with(|| json!({}));
            if !spec.is_object() {
                *spec = json!({});
            }
            let finalizers = spec
                .as_object_mut()
                .map(|s| s.entry("finalizers").or_insert_with(|| json!([])));
            if let Some(list) = finalizers {
                if !list.is_array() {
                    *list = json!([]);
                }
                if let Some(items) = list.as_array_mut()
                    && !items.iter().any(|f| f == KUBERNETES_FINALIZER)
                {
                    items.push(json!(KUBERNETES_FINALIZER));
                }
            }
        }
        _ => {
            map.remove("status");
        }
    }
}

/// Whether the resource's strategy tracks `metadata.generation`: custom resources, CRDs, the
/// workload kinds and Pods (their strategies' `PrepareForCreate` set it to 1, e.g.
/// `pkg/registry/apps/deployment/strategy.go`; Pods since 1.33, KEP-5067). `ConfigMaps`, `Secrets`,
/// `Namespaces`, `Services` and the rest never carry it.
#[must_use]
pub fn tracks_generation(rt: &ResourceType) -> bool {
    rt.custom
        || matches!(
            (rt.group.as_str(), rt.plural.as_str()),
            ("", "pods")
                | ("apps" | "batch", _)
                | ("apiextensions.k8s.io", "customresourcedefinitions")
        )
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

/// Prepare a new object for storage: identity, uid, timestamps, generation.
///
/// # Errors
///
/// 400 for a wrong kind, apiVersion or namespace; 422 for a missing or invalid name.
pub fn prepare_create(
    rt: &ResourceType,
    version: &str,
    namespace: Option<&str>,
    mut obj: Value,
) -> ApiResult<(ObjKey, Value)> {
    check_type(rt, version, &mut obj)?;
    check_typed_parts(rt, version, &obj)?;
    let typed = typed_meta(&obj)?;
    let ns = if rt.namespaced {
        let path_ns = namespace.unwrap_or_default();
        match typed.namespace.as_deref() {
            Some(body_ns) if !body_ns.is_empty() && !path_ns.is_empty() && body_ns != path_ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            Some(body_ns) if path_ns.is_empty() => body_ns.to_string(),
            _ => path_ns.to_string(),
        }
    } else {
        String::new()
    };
    if rt.namespaced && ns.is_empty() {
        return Err(ApiError::bad_request(
            "the namespace of the object must be set",
        ));
    }
    let mut name = typed.name.clone().unwrap_or_default();
    if name.is_empty() {
        match typed.generate_name.as_deref() {
            Some(prefix) if !prefix.is_empty() => name = format!("{prefix}{}", random_suffix()),
            _ => {
                return Err(ApiError::invalid(
                    &rt.kind,
                    &rt.group,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
        }
    }
    if rt.group == "rbac.authorization.k8s.io" {
        // RBAC names are path segments, not DNS names (`system:discovery`):
        // `pkg/apis/rbac/validation`, `ValidateRBACName` = `path.IsValidPathSegmentName`.
        let problem = match name.as_str() {
            "." => Some("may not be '.'"),
            ".." => Some("may not be '..'"),
            n if n.contains('/') => Some("may not contain '/'"),
            n if n.contains('%') => Some("may not contain '%'"),
            _ => None,
        };
        if let Some(problem) = problem {
            return Err(ApiError::invalid(
                &rt.kind,
                &rt.group,
                &name,
                format!("metadata.name: Invalid value: {name:?}: {problem}"),
            ));
        }
    } else if !is_dns_subdomain(&name) {
        return Err(ApiError::invalid(
            &rt.kind,
            &rt.group,
            &name,
            format!(
                "metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
        ));
    }
    initial_status(rt, &mut obj);
    let meta = meta_mut(&mut obj)?;
    meta.insert("name".into(), Value::String(name.clone()));
    if rt.namespaced {
        meta.insert("namespace".into(), Value::String(ns.clone()));
    } else {
        meta.remove("namespace");
    }
    meta.insert("uid".into(), Value::String(new_uid()));
    meta.insert("creationTimestamp".into(), Value::String(now()));
    if tracks_generation(rt) {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    canonicalize(rt, meta, &name);
    meta.remove("resourceVersion");
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    meta.remove("selfLink");
    Ok((ObjKey::new(&ns, &name), obj))
}

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
    if let Some(rv) = typed.resource_version.as_deref()
        && !rv.is_empty()
        && Some(rv) != old["metadata"]["resourceVersion"].as_str()
    {
        return Err(ApiError::conflict(&rt.group, &rt.plural, &key.name));
    }
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
    validate_immutable(rt, key, old, &result)?;
    Ok(result)
}

/// The label every namespace carries with its own name, set on create and on every update so
/// it cannot be removed or changed (`kubernetes.io/metadata.name`; the namespace strategy's
/// `Canonicalize`, `pkg/registry/core/namespace/strategy.go`), so a namespace selector can
/// name namespaces.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

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
pub fn validate_immutable(
    rt: &ResourceType,
    key: &ObjKey,
    old: &Value,
    new: &Value,
) -> ApiResult<()> {
    let payload: &[&str] = match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "configmaps") => &["data", "binaryData"],
        ("", "secrets") => &["data"],
        _ => return Ok(()),
    };
    if old["immutable"].as_bool() != Some(true) {
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

/// Whether `obj` has finalizers: `metadata.finalizers`, and for namespaces `spec.finalizers`.
#[must_use]
pub fn has_finalizers(rt: &ResourceType, obj: &Value) -> bool {
    let pending = |v: &Value| v.as_array().is_some_and(|f| !f.is_empty());
    pending(&obj["metadata"]["finalizers"])
        || (is_namespaces(rt) && pending(&obj["spec"]["finalizers"]))
}

/// Whether an object is being deleted and has no finalizers left (so it must go now).
#[must_use]
pub fn ready_to_delete(rt: &ResourceType, obj: &Value) -> bool {
    !obj["metadata"]["deletionTimestamp"].is_null() && !has_finalizers(rt, obj)
}

/// `obj` marked for deletion while finalizers keep it: a `deletionTimestamp`, and what the
/// resource's storage adds (a zero grace period for most kinds; the `Terminating` phase for a
/// namespace, whose REST storage sets only the timestamp and the phase).
#[must_use]
pub fn mark_for_deletion(rt: &ResourceType, obj: &Value) -> Value {
    let mut marked = obj.clone();
    set_path(
        &mut marked,
        &["metadata", "deletionTimestamp"],
        json!(now()),
    );
    if is_namespaces(rt) {
        set_path(&mut marked, &["status", "phase"], json!("Terminating"));
    } else {
        set_path(
            &mut marked,
            &["metadata", "deletionGracePeriodSeconds"],
            json!(0),
        );
    }
    marked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::Registry;

    fn deployments() -> std::sync::Arc<ResourceType> {
        Registry::new().lookup("apps", "v1", "deployments").unwrap()
    }

    #[test]
    fn create_fills_uid_timestamp_generation_and_namespace_from_the_path() {
        let rt = deployments();
        let (key, obj) = prepare_create(
            &rt,
            "v1",
            Some("ns"),
            json!({"metadata": {"name": "web"}, "spec": {}}),
        )
        .unwrap();
        assert_eq!(key, ObjKey::new("ns", "web"));
        assert_eq!(obj["metadata"]["generation"], 1);
        assert_eq!(obj["metadata"]["uid"].as_str().unwrap().len(), 36);
        assert_eq!(obj["apiVersion"], "apps/v1");
        assert_eq!(obj["kind"], "Deployment");
    }

    #[test]
    fn create_rejects_a_mismatched_namespace_and_a_bad_name() {
        let rt = deployments();
        let err = prepare_create(
            &rt,
            "v1",
            Some("a"),
            json!({"metadata": {"name": "w", "namespace": "b"}}),
        )
        .unwrap_err();
        assert_eq!(err.code, 400);
        let err = prepare_create(&rt, "v1", Some("a"), json!({"metadata": {"name": "Web_1"}}))
            .unwrap_err();
        assert_eq!(err.code, 422);
    }

    #[test]
    fn generate_name_appends_five_characters() {
        let rt = deployments();
        let (key, _) = prepare_create(
            &rt,
            "v1",
            Some("a"),
            json!({"metadata": {"generateName": "web-"}}),
        )
        .unwrap();
        assert!(key.name.starts_with("web-"));
        assert_eq!(key.name.len(), 9);
    }

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

    fn namespaces() -> std::sync::Arc<ResourceType> {
        Registry::new().lookup("", "v1", "namespaces").unwrap()
    }

    #[test]
    fn uids_are_random_version_4_uuids() {
        let (a, b) = (new_uid(), new_uid());
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122);
    }

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

    #[test]
    fn custom_resources_keep_a_spec_of_any_type() {
        let mut rt = (*deployments()).clone();
        rt.custom = true;
        let (_, obj) = prepare_create(
            &rt,
            "v1",
            Some("a"),
            json!({"metadata": {"name": "w"}, "spec": "x"}),
        )
        .unwrap();
        assert_eq!(obj["spec"], "x");
    }

    #[test]
    fn marking_for_deletion_never_panics_on_a_stored_status_of_another_type() {
        let rt = namespaces();
        let marked = mark_for_deletion(&rt, &json!({"metadata": {"name": "ns"}, "status": "x"}));
        assert_eq!(marked["status"], json!({"phase": "Terminating"}));
        assert!(marked["metadata"]["deletionTimestamp"].is_string());
        let marked = mark_for_deletion(&deployments(), &json!({"metadata": 5}));
        assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 0);
    }

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
