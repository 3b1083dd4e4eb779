//! Server-side apply: create when absent, merge the applied fields into the live object,
//! remove fields this manager applied before but no longer applies (unless another manager
//! owns them), and record the manager's field set in `managedFields`.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::strategic;
use super::write::modify;
use crate::apiserver::meta::{self, Target};
use crate::apiserver::request::Ctx;
use crate::apiserver::respond::json_bytes;
use crate::apiserver::status::{ApiError, ApiResult, Cause};

/// The `fieldsV1` set of an applied object: every map key as `f:<key>`, leaves as `{}`.
fn fields_of(v: &Value, top: bool) -> Value {
    let Some(map) = v.as_object() else {
        return json!({});
    };
    let mut out = Map::new();
    for (k, child) in map {
        if top && (k == "apiVersion" || k == "kind") {
            continue;
        }
        if k == "metadata" && top {
            let mut meta = child.clone();
            if let Some(m) = meta.as_object_mut() {
                for skip in [
                    "name",
                    "namespace",
                    "uid",
                    "resourceVersion",
                    "creationTimestamp",
                    "managedFields",
                    "generation",
                ] {
                    m.remove(skip);
                }
            }
            // Only the identity applied (`metadata: {name}`): no metadata field is owned, as
            // kube-apiserver records it.
            if meta.as_object().is_some_and(|m| !m.is_empty()) {
                out.insert("f:metadata".into(), fields_of(&meta, false));
            }
            continue;
        }
        let sub = if child.is_object() {
            fields_of(child, false)
        } else {
            json!({})
        };
        out.insert(format!("f:{k}"), sub);
    }
    Value::Object(out)
}

/// Record `manager`'s apply in `obj`'s managedFields (replacing its previous entry).
pub(super) fn set_managed_fields(obj: &mut Value, applied: &Value, manager: &str, target: Target) {
    let api_version = obj["apiVersion"].clone();
    let subresource = (target == Target::Status).then_some("status");
    let mut entry = json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": meta::now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_of(applied, true),
    });
    if let Some(s) = subresource {
        entry["subresource"] = json!(s);
    }
    let mut list: Vec<Value> = obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mine = |e: &Value| {
        e["manager"] == manager
            && e["operation"] == "Apply"
            && e["subresource"].as_str() == subresource
    };
    // An unchanged field set keeps its time, so a repeated identical apply is a no-op.
    if let Some(previous) = list.iter().find(|e| mine(e))
        && previous["fieldsV1"] == entry["fieldsV1"]
        && previous["apiVersion"] == entry["apiVersion"]
    {
        entry["time"] = previous["time"].clone();
    }
    list.retain(|e| !mine(e));
    list.push(entry);
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("managedFields".into(), Value::Array(list));
    }
}

fn subresource_of(target: Target) -> Option<&'static str> {
    (target == Target::Status).then_some("status")
}

/// Remove from `obj` the fields `manager` applied last time but not in `applied`, unless
/// another manager's `fieldsV1` still owns them.
fn remove_dropped_fields(
    obj: &mut Value,
    live: &Value,
    applied: &Value,
    manager: &str,
    target: Target,
) {
    let sub = subresource_of(target);
    let entries = live["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let is_mine = |e: &Value| {
        e["manager"] == manager && e["operation"] == "Apply" && e["subresource"].as_str() == sub
    };
    let Some(previous) = entries
        .iter()
        .find(|e| is_mine(e))
        .map(|e| e["fieldsV1"].clone())
    else {
        return;
    };
    let others: Vec<Value> = entries
        .iter()
        .filter(|e| !is_mine(e))
        .map(|e| e["fieldsV1"].clone())
        .collect();
    let now = fields_of(applied, true);
    prune(obj, &previous, &now, &others);
}

fn prune(obj: &mut Value, previous: &Value, now: &Value, others: &[Value]) {
    let (Some(prev), Some(map)) = (previous.as_object(), obj.as_object_mut()) else {
        return;
    };
    for (fkey, prev_sub) in prev {
        let Some(key) = fkey.strip_prefix("f:") else {
            continue;
        };
        let now_sub = now.get(fkey);
        let other_subs: Vec<Value> = others.iter().filter_map(|o| o.get(fkey).cloned()).collect();
        let prev_is_leaf = prev_sub.as_object().is_none_or(Map::is_empty);
        let empty = json!({});
        let next_now = match now_sub {
            // Dropped and owned by nobody else: remove the whole field.
            None if other_subs.is_empty() => {
                map.remove(key);
                continue;
            }
            // A leaf still applied, or kept by another manager.
            Some(_) | None if prev_is_leaf => continue,
            Some(n) => n,
            None => &empty,
        };
        if let Some(child) = map.get_mut(key) {
            prune(child, prev_sub, next_now, &other_subs);
        }
    }
}

/// The leaf paths of a `fieldsV1` set (`["data", "a"]`).
fn leaves(set: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let Some(map) = set.as_object() else { return };
    if map.is_empty() && !prefix.is_empty() {
        out.push(prefix.clone());
        return;
    }
    for (fkey, sub) in map {
        if let Some(key) = fkey.strip_prefix("f:") {
            prefix.push(key.to_string());
            leaves(sub, prefix, out);
            prefix.pop();
        }
    }
}

fn owns(set: &Value, path: &[String]) -> bool {
    let mut cur = set;
    for key in path {
        match cur.get(format!("f:{key}")) {
            Some(next) => cur = next,
            None => return false,
        }
    }
    true
}

fn at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, key| cur.get(key))
}

/// How kube-apiserver names a manager in a conflict: `"name"`, with `with subresource "status"`,
/// and `using <apiVersion>` for an `Update` (apimachinery's
/// `pkg/util/managedfields/internal/conflict.go`, `printManager`).
fn print_manager(entry: &Value) -> String {
    let name = format!("{:?}", entry["manager"].as_str().unwrap_or_default());
    let sub = entry["subresource"]
        .as_str()
        .map(|s| format!(" with subresource {s:?}"))
        .unwrap_or_default();
    let using = if entry["operation"] == "Update" {
        format!(
            " using {}",
            entry["apiVersion"].as_str().unwrap_or_default()
        )
    } else {
        String::new()
    };
    format!("{name}{sub}{using}")
}

/// The 409 of an apply that conflicts (apimachinery's `NewConflictError`): one cause per
/// conflict, the message listing them as kube-apiserver does.
fn conflict_error(found: &[(Value, Vec<String>)]) -> ApiError {
    let path = |p: &[String]| format!(".{}", p.join("."));
    let message = if let [(entry, p)] = found {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            print_manager(entry),
            path(p)
        )
    } else {
        let mut by_manager: std::collections::BTreeMap<String, Vec<String>> =
            std::collections::BTreeMap::new();
        for (entry, p) in found {
            let key = serde_json::to_string(&json!({
                "manager": entry["manager"], "operation": entry["operation"],
                "apiVersion": entry["apiVersion"], "subresource": entry["subresource"],
            }))
            .unwrap_or_default();
            by_manager.entry(key).or_default().push(path(p));
        }
        let mut lines = Vec::new();
        for (key, paths) in &by_manager {
            let entry: Value = serde_json::from_str(key).unwrap_or_default();
            lines.push(format!("conflicts with {}:", print_manager(&entry)));
            lines.extend(paths.iter().map(|p| format!("- {p}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            found.len(),
            lines.join("\n")
        )
    };
    let mut err = ApiError::apply_conflict(message);
    err.causes = found
        .iter()
        .map(|(entry, p)| Cause {
            reason: "FieldManagerConflict".into(),
            message: format!("conflict with {}", print_manager(entry)),
            field: path(p),
        })
        .collect();
    err
}

/// Fields `applied` sets to a value other than the live one while another manager (an apply
/// or an update) owns them: `(that manager's entry, path)` pairs.
fn conflicts(
    live: &Value,
    applied: &Value,
    manager: &str,
    target: Target,
) -> Vec<(Value, Vec<String>)> {
    let sub = subresource_of(target);
    let mut paths = Vec::new();
    leaves(&fields_of(applied, true), &mut Vec::new(), &mut paths);
    let mut out = Vec::new();
    for entry in live["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let other = entry["manager"].as_str().unwrap_or_default();
        let this_apply = other == manager && entry["operation"] == "Apply";
        if this_apply || entry["subresource"].as_str() != sub {
            continue;
        }
        for path in &paths {
            // An empty map applied owns the key, not the contents: no value to conflict on.
            if at(applied, path).is_some_and(Value::is_object) {
                continue;
            }
            if owns(&entry["fieldsV1"], path) && at(live, path) != at(applied, path) {
                out.push((entry.clone(), path.clone()));
            }
        }
    }
    out
}

/// Removes `path` from the `fieldsV1` set `set`, and the maps that leaves empty.
fn disown_path(set: &mut Value, path: &[String]) {
    let (Some((key, rest)), Some(map)) = (path.split_first(), set.as_object_mut()) else {
        return;
    };
    let fkey = format!("f:{key}");
    if rest.is_empty() {
        map.remove(&fkey);
        return;
    }
    if let Some(child) = map.get_mut(&fkey) {
        disown_path(child, rest);
        if child.as_object().is_some_and(Map::is_empty) {
            map.remove(&fkey);
        }
    }
}

/// A forced apply takes the conflicting fields over, as kube-apiserver does: each is removed
/// from the field set of the manager that owned it (an entry left with no field is dropped),
/// so the forcing manager is their only owner and its next apply does not conflict.
fn take_over(obj: &mut Value, forced: &[(Value, Vec<String>)], target: Target) {
    let sub = subresource_of(target);
    // Not `obj["metadata"]["managedFields"]`: an applied `metadata` that is no object (400
    // later, in validation) must not panic here first.
    let Some(entries) = obj
        .get_mut("metadata")
        .and_then(|m| m.get_mut("managedFields"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for entry in entries.iter_mut() {
        if entry["subresource"].as_str() != sub {
            continue;
        }
        for (owner, path) in forced {
            let same = |f: &str| entry[f] == owner[f];
            if same("manager")
                && same("operation")
                && same("apiVersion")
                && let Some(set) = entry.get_mut("fieldsV1")
            {
                disown_path(set, path);
            }
        }
    }
    entries.retain(|e| !e["fieldsV1"].as_object().is_some_and(Map::is_empty));
}

/// Server-side apply of a whole object: create when absent, otherwise merge the applied fields
/// into the live object; record the manager in managedFields.
pub(super) async fn apply(ctx: &Ctx, body: &[u8], target: Target) -> ApiResult<Response> {
    let manager = ctx.query.field_manager.clone().ok_or_else(|| {
        ApiError::invalid(
            "PatchOptions",
            "meta.k8s.io",
            "",
            "fieldManager: Required value: is required for apply patch",
        )
    })?;
    let mut applied: Value = crate::yaml::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("couldn't decode apply patch: {e}")))?;
    if !applied.is_object() {
        return Err(ApiError::bad_request("an apply patch must be an object"));
    }
    if let Some(m) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    let typed = !ctx.rt.custom;
    let force = ctx.query.force;
    let written = modify(ctx, target, |cur| {
        let mut out = match cur {
            // As kube-apiserver: a subresource never creates its object.
            None if target == Target::Status => {
                return Err(ApiError::not_found(
                    &ctx.rt.group,
                    &ctx.rt.plural,
                    &ctx.key().name,
                ));
            }
            None => applied.clone(),
            Some(live) => {
                let found = conflicts(live, &applied, &manager, target);
                if !found.is_empty() && !force {
                    return Err(conflict_error(&found));
                }
                let mut v = live.clone();
                strategic::merge(&mut v, &applied, typed);
                remove_dropped_fields(&mut v, live, &applied, &manager, target);
                take_over(&mut v, &found, target);
                v
            }
        };
        set_managed_fields(&mut out, &applied, &manager, target);
        Ok(out)
    })
    .await?;
    let code = if written.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json_bytes(code, ctx.render_bytes(&written.stored)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_v1_lists_applied_keys_but_not_identity() {
        let f = fields_of(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "y"}}, "data": {"k": "v"}}),
            true,
        );
        assert_eq!(
            f,
            json!({"f:metadata": {"f:labels": {"f:x": {}}}, "f:data": {"f:k": {}}})
        );
    }

    #[test]
    fn a_second_apply_by_the_same_manager_replaces_its_entry() {
        let mut obj = json!({"apiVersion": "v1", "metadata": {}});
        set_managed_fields(&mut obj, &json!({"data": {}}), "m", Target::Main);
        set_managed_fields(&mut obj, &json!({"data": {}}), "m", Target::Main);
        set_managed_fields(&mut obj, &json!({"data": {}}), "other", Target::Main);
        assert_eq!(
            obj["metadata"]["managedFields"].as_array().unwrap().len(),
            2
        );
    }

    #[test]
    fn applying_a_different_value_to_a_field_another_manager_applied_conflicts() {
        let mut live = json!({"apiVersion": "v1", "metadata": {}, "data": {"a": "1", "b": "2"}});
        set_managed_fields(
            &mut live,
            &json!({"data": {"a": "1"}}),
            "other",
            Target::Main,
        );
        let same = conflicts(&live, &json!({"data": {"a": "1"}}), "me", Target::Main);
        assert!(
            same.is_empty(),
            "the same value is shared ownership, not a conflict"
        );
        let differs = conflicts(
            &live,
            &json!({"data": {"a": "9", "b": "2"}}),
            "me",
            Target::Main,
        );
        let owners: Vec<(&str, &[String])> = differs
            .iter()
            .map(|(e, p)| (e["manager"].as_str().unwrap_or_default(), p.as_slice()))
            .collect();
        assert_eq!(
            owners,
            [("other", ["data".to_string(), "a".to_string()].as_slice())]
        );
        let err = conflict_error(&differs);
        assert_eq!(
            err.message,
            "Apply failed with 1 conflict: conflict with \"other\": .data.a"
        );
        assert_eq!(err.causes[0].field, ".data.a");
        assert_eq!(err.causes[0].reason, "FieldManagerConflict");
    }

    #[test]
    fn a_field_an_update_wrote_conflicts_with_an_apply_naming_its_version() {
        let live = json!({"apiVersion": "v1", "metadata": {"managedFields": [{
            "manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:a": {}}}}]},
            "data": {"a": "1"}});
        let found = conflicts(&live, &json!({"data": {"a": "2"}}), "me", Target::Main);
        assert_eq!(
            conflict_error(&found).message,
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.a"
        );
    }

    #[test]
    fn a_forced_apply_takes_the_conflicting_fields_from_their_owner() {
        let mut live = json!({"apiVersion": "v1", "metadata": {}, "data": {"a": "1", "b": "2"}});
        set_managed_fields(
            &mut live,
            &json!({"data": {"a": "1", "b": "2"}}),
            "first",
            Target::Main,
        );
        set_managed_fields(
            &mut live,
            &json!({"data": {"b": "2"}}),
            "third",
            Target::Main,
        );
        let entry = |m: &str| json!({"manager": m, "operation": "Apply", "apiVersion": "v1"});
        let forced = [
            (entry("first"), vec!["data".to_string(), "a".to_string()]),
            (entry("third"), vec!["data".to_string(), "b".to_string()]),
        ];
        take_over(&mut live, &forced, Target::Main);
        let entries = live["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(
            entries.len(),
            1,
            "third owned nothing else: its entry is gone"
        );
        assert_eq!(entries[0]["manager"], "first");
        assert_eq!(entries[0]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
    }

    #[test]
    fn fields_dropped_from_an_apply_are_removed_unless_another_manager_owns_them() {
        let mut live =
            json!({"apiVersion": "v1", "metadata": {}, "data": {"a": "1", "b": "2", "c": "3"}});
        set_managed_fields(
            &mut live,
            &json!({"data": {"a": "1", "b": "2"}}),
            "me",
            Target::Main,
        );
        set_managed_fields(
            &mut live,
            &json!({"data": {"b": "2", "c": "3"}}),
            "other",
            Target::Main,
        );
        let applied = json!({"data": {}});
        let mut out = live.clone();
        remove_dropped_fields(&mut out, &live, &applied, "me", Target::Main);
        assert_eq!(
            out["data"],
            json!({"b": "2", "c": "3"}),
            "a was mine alone; b is shared"
        );
    }
}
