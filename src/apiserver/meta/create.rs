//! A new object's metadata, as kube-apiserver's create path and the resource strategies'
//! `PrepareForCreate` set it: namespace from the path, name or `generateName`, uid, creation
//! timestamp, generation, and the status a resource starts with.

use serde_json::{Value, json};

use super::decode::{check_type, check_typed_parts, typed_meta};
use super::deletion::KUBERNETES_FINALIZER;
use super::identity::{is_dns_subdomain, new_uid, now, random_suffix};
use super::{canonicalize, meta_mut, tracks_generation, validate_owner_references};
use crate::apiserver::registry::ResourceType;
use crate::apiserver::status::{ApiError, ApiResult};
use crate::apiserver::store::ObjKey;

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
    validate_owner_references(rt, &name, meta)?;
    meta.remove("resourceVersion");
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    meta.remove("selfLink");
    Ok((ObjKey::new(&ns, &name), obj))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::apiserver::meta::fixtures::deployments;

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
    fn a_second_controller_owner_reference_is_refused_as_kube_apiserver_refuses_it() {
        let rt = deployments();
        let owner = |name: &str, controller: bool| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name,
                   "uid": format!("uid-{name}"), "controller": controller})
        };
        let err = prepare_create(
            &rt,
            "v1",
            Some("ns"),
            json!({"metadata": {"name": "w", "ownerReferences": [owner("a", true), owner("b", true)]}}),
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message.contains(
                r#"Invalid value: [{"apiVersion":"v1","kind":"ConfigMap","name":"a","uid":"uid-a","controller":true},"#
            ),
            "the references printed in the Go struct's field order: {}",
            err.message
        );
        assert!(
            err.message.contains(
                "Only one reference can have Controller set to true. Found \"true\" in references \
                 for ConfigMap/a and ConfigMap/b"
            ),
            "{}",
            err.message
        );
        let one = prepare_create(
            &rt,
            "v1",
            Some("ns"),
            json!({"metadata": {"name": "w", "ownerReferences": [owner("a", true), owner("b", false)]}}),
        );
        assert!(one.is_ok(), "one controller and another owner: {one:?}");
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
}
