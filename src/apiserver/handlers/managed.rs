//! The field managers of writes other than apply: kube-apiserver records each create, update
//! and patch in `metadata.managedFields` as an `Update` operation of its manager (the
//! `fieldManager` parameter, else the User-Agent up to its first `/`), owning the fields the
//! write added or changed, which the other managers lose, and dropping the fields it removed
//! from every manager (structured-merge-diff's `Updater.Update`, through apimachinery's
//! `pkg/util/managedfields/internal`; the manager's name from apiserver's
//! `pkg/endpoints/handlers/create.go`, `managerOrUserAgent`).
//!
//! Fields are paths of map keys; a list is one field (as the apply of this server treats it),
//! where kube-apiserver tells the items of associative and set lists apart.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::apiserver::meta::{self, Target};
use crate::apiserver::request::Ctx;

type Path = Vec<String>;

/// apimachinery's `validation.FieldManagerMaxLength`: a manager's name is cut to this many bytes.
const MANAGER_MAX_LENGTH: usize = 128;

/// What a write did to the fields of an object.
#[derive(Default)]
struct Changes {
    added: BTreeSet<Path>,
    modified: BTreeSet<Path>,
    removed: BTreeSet<Path>,
}

/// The manager of a write: `fieldManager`, else the User-Agent's printable characters up to
/// its first `/`, at most 128 bytes.
pub(super) fn manager(ctx: &Ctx) -> String {
    if let Some(m) = ctx.query.field_manager.as_deref().filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    let agent = ctx
        .headers
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let mut out = String::new();
    for c in agent.split('/').next().unwrap_or_default().chars() {
        if c.is_control() {
            continue;
        }
        if out.len() + c.len_utf8() > MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// Whether `path` is one of the fields no manager owns (apimachinery's `stripMetaManager`),
/// or one the target does not write: status on the main resource of a kind with a status
/// subresource, everything but status on the status subresource.
fn ignored(path: &[String], target: Target, status_subresource: bool) -> bool {
    let Some(top) = path.first() else {
        return true;
    };
    match target {
        Target::Finalize => return true,
        Target::Status => return top != "status",
        Target::Main if status_subresource && top == "status" => return true,
        Target::Main => {}
    }
    match (top.as_str(), path.get(1)) {
        ("apiVersion" | "kind" | "metadata", None) => true,
        ("metadata", Some(field)) => matches!(
            field.as_str(),
            "name"
                | "namespace"
                | "creationTimestamp"
                | "selfLink"
                | "uid"
                | "clusterName"
                | "generation"
                | "managedFields"
                | "resourceVersion"
        ),
        _ => false,
    }
}

/// Every node of `value` below `path` (`path` included) into `out`.
fn all_nodes(value: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
    if !path.is_empty() {
        out.insert(path.clone());
    }
    if let Some(map) = value.as_object() {
        for (k, v) in map {
            path.push(k.clone());
            all_nodes(v, path, out);
            path.pop();
        }
    }
}

/// The fields `new` added, changed and removed against `old` (structured-merge-diff's
/// `Compare`).
fn compare(old: Option<&Value>, new: Option<&Value>, path: &mut Path, out: &mut Changes) {
    match (old, new) {
        (None, Some(n)) => all_nodes(n, path, &mut out.added),
        (Some(o), None) => all_nodes(o, path, &mut out.removed),
        (Some(Value::Object(o)), Some(Value::Object(n))) => {
            let keys: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
            for k in keys {
                path.push(k.clone());
                compare(o.get(k), n.get(k), path, out);
                path.pop();
            }
        }
        (Some(o), Some(n)) if o != n => {
            if !path.is_empty() {
                out.modified.insert(path.clone());
            }
            if let Some(map) = n.as_object() {
                for (k, v) in map {
                    path.push(k.clone());
                    all_nodes(v, path, &mut out.added);
                    path.pop();
                }
            }
        }
        _ => {}
    }
}

/// The paths of a `fieldsV1` set: `f:<key>` members, `.` the node itself.
fn set_of(fields: &Value) -> BTreeSet<Path> {
    fn walk(v: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
        let Some(map) = v.as_object() else { return };
        if (map.is_empty() || map.contains_key(".")) && !path.is_empty() {
            out.insert(path.clone());
        }
        for (k, child) in map {
            if let Some(key) = k.strip_prefix("f:") {
                path.push(key.to_string());
                walk(child, path, out);
                path.pop();
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(fields, &mut Vec::new(), &mut out);
    out
}

/// Marks with `.` each member of `set` that also has members under it.
fn mark(node: &mut Map<String, Value>, path: &mut Path, set: &BTreeSet<Path>) {
    for (k, child) in node.iter_mut() {
        let Some(key) = k.strip_prefix("f:") else {
            continue;
        };
        let Some(map) = child.as_object_mut() else {
            continue;
        };
        path.push(key.to_string());
        if !map.is_empty() {
            if set.contains(path) {
                map.insert(".".into(), json!({}));
            }
            mark(map, path, set);
        }
        path.pop();
    }
}

/// The `fieldsV1` of a set: a member with members under it gets `.`.
fn fields_of_set(set: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for key in path {
            let entry = node.entry(format!("f:{key}")).or_insert_with(|| json!({}));
            let Some(next) = entry.as_object_mut() else {
                break;
            };
            node = next;
        }
    }
    mark(&mut root, &mut Vec::new(), set);
    Value::Object(root)
}

/// Records a create, update or patch of `ctx`'s object in `new`'s `managedFields`: `old` is the
/// stored object (`None` for a create).
pub(super) fn track(ctx: &Ctx, target: Target, old: Option<&Value>, new: &mut Value) {
    let status_subresource = ctx.rt.status_subresource;
    let mut changes = Changes::default();
    compare(old, Some(new), &mut Vec::new(), &mut changes);
    let keep = |set: BTreeSet<Path>| -> BTreeSet<Path> {
        set.into_iter()
            .filter(|p| !ignored(p, target, status_subresource))
            .collect()
    };
    let (added, modified, removed) = (
        keep(changes.added),
        keep(changes.modified),
        keep(changes.removed),
    );
    // The entries the write starts from: its own, else the stored object's.
    let sent = new["metadata"]["managedFields"]
        .as_array()
        .filter(|a| !a.is_empty())
        .cloned();
    let mut entries = sent.unwrap_or_else(|| {
        old.and_then(|o| o["metadata"]["managedFields"].as_array().cloned())
            .unwrap_or_default()
    });
    let manager = manager(ctx);
    let api_version = new["apiVersion"].clone();
    let subresource = (target == Target::Status).then_some("status");
    let mine = |e: &Value| {
        e["manager"] == manager.as_str()
            && e["operation"] == "Update"
            && e["apiVersion"] == api_version
            && e["subresource"].as_str() == subresource
    };
    // The other managers lose what this write changed or removed.
    let taken: BTreeSet<Path> = added
        .union(&modified)
        .chain(removed.iter())
        .cloned()
        .collect();
    for entry in entries.iter_mut().filter(|e| !mine(e)) {
        let before = set_of(&entry["fieldsV1"]);
        let after: BTreeSet<Path> = before.difference(&taken).cloned().collect();
        if after != before {
            entry["fieldsV1"] = fields_of_set(&after);
        }
    }
    let previous = entries
        .iter()
        .find(|e| mine(e))
        .map(|e| set_of(&e["fieldsV1"]))
        .unwrap_or_default();
    let owned: BTreeSet<Path> = previous
        .difference(&removed)
        .cloned()
        .chain(modified.iter().cloned())
        .chain(added.iter().cloned())
        .collect();
    if owned != previous {
        entries.retain(|e| !mine(e));
        let mut entry = json!({
            "manager": manager,
            "operation": "Update",
            "apiVersion": api_version,
            "time": meta::now(),
            "fieldsType": "FieldsV1",
            "fieldsV1": fields_of_set(&owned),
        });
        if let Some(s) = subresource {
            entry["subresource"] = json!(s);
        }
        entries.push(entry);
    }
    entries.retain(|e| !set_of(&e["fieldsV1"]).is_empty());
    sort(&mut entries);
    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        if entries.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

/// kube-apiserver's order of `managedFields`: by operation (`Apply` first), time, manager,
/// apiVersion, subresource (apimachinery's `sortEncodedManagedFields`).
pub(super) fn sort(entries: &mut [Value]) {
    let key = |e: &Value| {
        (
            e["operation"].as_str().unwrap_or_default().to_string(),
            e["time"].as_str().unwrap_or_default().to_string(),
            e["manager"].as_str().unwrap_or_default().to_string(),
            e["apiVersion"].as_str().unwrap_or_default().to_string(),
            e["subresource"].as_str().unwrap_or_default().to_string(),
        )
    };
    entries.sort_by_key(key);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(old: Option<&Value>, new: &Value) -> Changes {
        let mut out = Changes::default();
        compare(old, Some(new), &mut Vec::new(), &mut out);
        out
    }

    fn p(keys: &[&str]) -> Path {
        keys.iter().map(|k| (*k).to_string()).collect()
    }

    #[test]
    fn a_created_map_is_owned_with_its_node_and_a_changed_key_alone() {
        let created = changes(None, &json!({"data": {"a": "1"}}));
        let set: BTreeSet<Path> = created.added;
        assert_eq!(
            fields_of_set(&set),
            json!({"f:data": {".": {}, "f:a": {}}}),
            "the map added with its key: the map itself is owned too"
        );
        let changed = changes(
            Some(&json!({"data": {"a": "1", "b": "2"}})),
            &json!({"data": {"a": "9", "b": "2", "c": "3"}}),
        );
        assert_eq!(changed.modified, BTreeSet::from([p(&["data", "a"])]));
        assert_eq!(changed.added, BTreeSet::from([p(&["data", "c"])]));
        assert!(changed.removed.is_empty());
    }

    #[test]
    fn a_fields_set_reads_back_as_written() {
        let set = BTreeSet::from([
            p(&["data"]),
            p(&["data", "a"]),
            p(&["metadata", "labels", "app"]),
        ]);
        let fields = fields_of_set(&set);
        assert_eq!(
            fields,
            json!({"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
        );
        assert_eq!(set_of(&fields), set);
    }

    #[test]
    fn identity_and_the_other_targets_fields_are_nobodys() {
        for path in [
            p(&["apiVersion"]),
            p(&["metadata"]),
            p(&["metadata", "name"]),
            p(&["metadata", "resourceVersion"]),
            p(&["metadata", "managedFields"]),
        ] {
            assert!(ignored(&path, Target::Main, false), "{path:?}");
        }
        assert!(!ignored(&p(&["metadata", "labels"]), Target::Main, false));
        assert!(ignored(&p(&["status", "phase"]), Target::Main, true));
        assert!(!ignored(&p(&["status", "phase"]), Target::Main, false));
        assert!(ignored(&p(&["spec", "x"]), Target::Status, true));
        assert!(!ignored(&p(&["status", "phase"]), Target::Status, true));
    }

    #[test]
    fn entries_sort_as_kube_apiserver_sorts_them() {
        let mut entries = vec![
            json!({"manager": "b", "operation": "Update", "time": "2026-01-01T00:00:01Z"}),
            json!({"manager": "a", "operation": "Update", "time": "2026-01-01T00:00:01Z"}),
            json!({"manager": "z", "operation": "Apply", "time": "2026-01-01T00:00:09Z"}),
            json!({"manager": "c", "operation": "Update", "time": "2026-01-01T00:00:00Z"}),
        ];
        sort(&mut entries);
        let managers: Vec<&str> = entries
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["z", "c", "a", "b"]);
    }
}
