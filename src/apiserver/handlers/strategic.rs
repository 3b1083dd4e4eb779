//! Strategic merge patch for the shapes operators use: maps merge, `null` deletes, scalars and
//! most lists are replaced, lists with a known merge key (containers, env, conditions, ...)
//! merge item by item, `finalizers` merges as a set, and the `$patch`, `$retainKeys`,
//! `$deleteFromPrimitiveList` and `$setElementOrder` directives.

use serde_json::{Map, Value};

/// The merge key of a list field, from the Kubernetes API types' `patchMergeKey` tags
/// (`k8s.io/api/core/v1/types.go`, `meta/v1/types.go`).
fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        "ports" => {
            if items.iter().any(|i| i.get("containerPort").is_some()) {
                "containerPort"
            } else {
                "port"
            }
        }
        _ => return None,
    })
}

/// Lists of scalars that merge as sets (`patchStrategy:"merge"` on a `[]string`).
fn is_primitive_set(field: &str) -> bool {
    field == "finalizers"
}

/// Apply a strategic merge `patch` to `target`. `typed` is false for custom resources, where
/// every list is replaced (as kube-apiserver treats JSON-merge-like fields without schema).
pub fn merge(target: &mut Value, patch: &Value, typed: bool) {
    let Some(patch_map) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    match patch_map.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut replaced = patch_map.clone();
            replaced.remove("$patch");
            *target = Value::Object(strip_directives(replaced));
            return;
        }
        Some("delete") => {
            *target = Value::Object(Map::new());
            return;
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(target_map) = target.as_object_mut() else {
        return;
    };
    let mut retain: Option<Vec<String>> = None;
    for (key, value) in patch_map {
        if key == "$retainKeys" {
            retain = value.as_array().map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            });
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(remove)) =
                (target_map.get_mut(field), value.as_array())
            {
                list.retain(|item| !remove.contains(item));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        match value {
            Value::Null => {
                target_map.remove(key);
            }
            Value::Object(_) => {
                let entry = target_map.entry(key.clone()).or_insert(Value::Null);
                merge(entry, value, typed);
            }
            Value::Array(items) => {
                let merged = match (typed, target_map.get(key)) {
                    (true, Some(Value::Array(current))) => merge_list(key, current, items),
                    _ => Value::Array(items.iter().map(clean).collect()),
                };
                target_map.insert(key.clone(), merged);
            }
            scalar => {
                target_map.insert(key.clone(), scalar.clone());
            }
        }
    }
    if let Some(keep) = retain {
        target_map.retain(|k, _| keep.contains(k));
    }
}

fn clean(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(strip_directives(m.clone())),
        other => other.clone(),
    }
}

fn strip_directives(mut m: Map<String, Value>) -> Map<String, Value> {
    m.retain(|k, _| !k.starts_with('$'));
    m
}

fn merge_list(field: &str, current: &[Value], patch: &[Value]) -> Value {
    if is_primitive_set(field) {
        let mut out = current.to_vec();
        for item in patch {
            if !out.contains(item) {
                out.push(item.clone());
            }
        }
        return Value::Array(out);
    }
    let Some(key) = merge_key(field, patch) else {
        return Value::Array(patch.iter().map(clean).collect());
    };
    if patch
        .iter()
        .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Value::Array(
            patch
                .iter()
                .filter(|p| p.get("$patch").is_none())
                .map(clean)
                .collect(),
        );
    }
    let mut out = current.to_vec();
    for item in patch {
        let id = item.get(key);
        let pos = id.and_then(|id| out.iter().position(|c| c.get(key) == Some(id)));
        let deleting = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, deleting) {
            (Some(i), true) => {
                out.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => merge(&mut out[i], item, true),
            (None, false) => out.push(clean(item)),
        }
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_merge_scalars_replace_and_null_deletes() {
        let mut t = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "count": 1});
        merge(
            &mut t,
            &json!({"metadata": {"labels": {"a": null, "c": "3"}}, "count": 2}),
            true,
        );
        assert_eq!(
            t,
            json!({"metadata": {"labels": {"b": "2", "c": "3"}}, "count": 2})
        );
    }

    #[test]
    fn containers_merge_by_name() {
        let mut t = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        merge(
            &mut t,
            &json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}]}}),
            true,
        );
        assert_eq!(
            t["spec"]["containers"],
            json!([{"name": "a", "image": "x"}, {"name": "b", "image": "z"}, {"name": "c", "image": "w"}])
        );
    }

    #[test]
    fn delete_directive_removes_a_list_item() {
        let mut t = json!({"status": {"conditions": [{"type": "Ready"}, {"type": "Synced"}]}});
        merge(
            &mut t,
            &json!({"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}}),
            true,
        );
        assert_eq!(t["status"]["conditions"], json!([{"type": "Synced"}]));
    }

    #[test]
    fn finalizers_merge_as_a_set_and_delete_from_primitive_list_removes() {
        let mut t = json!({"metadata": {"finalizers": ["a"]}});
        merge(
            &mut t,
            &json!({"metadata": {"finalizers": ["b", "a"]}}),
            true,
        );
        assert_eq!(t["metadata"]["finalizers"], json!(["a", "b"]));
        merge(
            &mut t,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
            true,
        );
        assert_eq!(t["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn lists_without_merge_key_and_custom_resource_lists_are_replaced() {
        let mut t = json!({"spec": {"args": ["a"], "containers": [{"name": "a"}]}});
        merge(
            &mut t,
            &json!({"spec": {"args": ["b"], "containers": [{"name": "b"}]}}),
            false,
        );
        assert_eq!(
            t,
            json!({"spec": {"args": ["b"], "containers": [{"name": "b"}]}})
        );
    }
}
