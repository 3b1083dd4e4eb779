//! `meta.k8s.io/v1` Table rendering for `kubectl get` (`Accept: application/json;as=Table`):
//! Name, per-resource columns (CRD printer columns), Age.

use serde_json::{Value, json};

use super::registry::ResourceType;
use super::store::Stored;

/// kube-apiserver's `duration.HumanDuration` for ages (`k8s.io/apimachinery/pkg/util/duration`),
/// simplified to its leading units.
#[must_use]
pub fn human_age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..120 => format!("{s}s"),
        120..600 => format!("{}m{}s", s / 60, s % 60),
        600..10_800 => format!("{}m", s / 60),
        10_800..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn age_of(timestamp: &str) -> String {
    let Ok(ts) = timestamp.parse::<jiff::Timestamp>() else {
        return "<unknown>".to_string();
    };
    human_age(jiff::Timestamp::now().as_second() - ts.as_second())
}

/// Evaluate the `JSONPath` subset printer columns use: fields (`.spec.replicas`), indices
/// (`.items[0]`) and equality filters (`.conditions[?(@.type=="Ready")].status`, first match).
#[must_use]
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut cur = obj;
    let mut rest = path;
    while !rest.is_empty() {
        rest = rest.trim_start_matches('.');
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let inner = &after[..end];
            rest = &after[end + 1..];
            cur = if let Some(filter) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')'))
            {
                let (field, want) = filter.split_once("==")?;
                let want = want.trim().trim_matches(|c| c == '"' || c == '\'');
                cur.as_array()?
                    .iter()
                    .find(|item| item.get(field.trim()).and_then(Value::as_str) == Some(want))?
            } else {
                cur.get(inner.parse::<usize>().ok()?)?
            };
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let (name, tail) = rest.split_at(end);
        if !name.is_empty() {
            cur = cur.get(name)?;
        }
        rest = tail;
    }
    Some(cur)
}

fn cell(v: Option<&Value>, type_: &str) -> Value {
    match (v, type_) {
        (None | Some(Value::Null), _) => Value::Null,
        (Some(Value::String(s)), "date") => json!(age_of(s)),
        (Some(v), _) => v.clone(),
    }
}

struct Column {
    name: String,
    type_: String,
    format: String,
    description: String,
    priority: i64,
    path: Option<String>,
}

fn columns(rt: &ResourceType) -> Vec<Column> {
    let col =
        |name: &str, type_: &str, format: &str, description: &str, path: Option<&str>| Column {
            name: name.into(),
            type_: type_.into(),
            format: format.into(),
            description: description.into(),
            priority: 0,
            path: path.map(String::from),
        };
    let mut cols = vec![col(
        "Name",
        "string",
        "name",
        "Name must be unique within a namespace.",
        Some(".metadata.name"),
    )];
    if rt.custom && !rt.printer_columns.is_empty() {
        for pc in &rt.printer_columns {
            cols.push(Column {
                name: pc.name.clone(),
                type_: pc.type_.clone(),
                format: String::new(),
                description: pc.description.clone(),
                priority: pc.priority,
                path: Some(pc.json_path.clone()),
            });
        }
        return cols;
    }
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "namespaces" | "pods") => {
            cols.push(col(
                "Status",
                "string",
                "",
                "The phase.",
                Some(".status.phase"),
            ));
        }
        ("", "events") => {
            cols.push(col("Type", "string", "", "Event type.", Some(".type")));
            cols.push(col(
                "Reason",
                "string",
                "",
                "Event reason.",
                Some(".reason"),
            ));
            cols.push(col(
                "Message",
                "string",
                "",
                "Event message.",
                Some(".message"),
            ));
        }
        _ => {}
    }
    cols.push(col(
        "Age",
        "date",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
        Some(".metadata.creationTimestamp"),
    ));
    cols
}

fn row_object(obj: &Value, include: Option<&str>) -> Value {
    match include {
        Some("None") => Value::Null,
        Some("Object") => obj.clone(),
        _ => {
            let mut meta = obj["metadata"].clone();
            if let Some(m) = meta.as_object_mut() {
                m.remove("managedFields");
            }
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta})
        }
    }
}

/// A Table of `items`.
#[must_use]
pub fn build(
    rt: &ResourceType,
    items: &[&Stored],
    rv: &str,
    continue_token: Option<&str>,
    include: Option<&str>,
) -> Value {
    let cols = columns(rt);
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect();
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let cells: Vec<Value> = cols
                .iter()
                .map(|c| {
                    cell(
                        c.path.as_deref().and_then(|p| json_path(&o.value, p)),
                        &c.type_,
                    )
                })
                .collect();
            json!({"cells": cells, "object": row_object(&o.value, include)})
        })
        .collect();
    let mut meta = json!({"resourceVersion": rv});
    if let Some(t) = continue_token {
        meta["continue"] = json!(t);
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": defs, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_age_matches_kubectl_style() {
        assert_eq!(human_age(5), "5s");
        assert_eq!(human_age(130), "2m10s");
        assert_eq!(human_age(3600), "60m");
        assert_eq!(human_age(7 * 3600), "7h");
        assert_eq!(human_age(3 * 86_400), "3d");
    }

    #[test]
    fn json_path_follows_fields_and_indices() {
        let v = json!({"status": {"conditions": [{"type": "Ready"}]}});
        assert_eq!(
            json_path(&v, ".status.conditions[0].type"),
            Some(&json!("Ready"))
        );
        assert_eq!(json_path(&v, ".spec.x"), None);
        assert_eq!(
            json_path(&v, ".status.conditions[?(@.type==\"Ready\")].type"),
            Some(&json!("Ready"))
        );
        assert_eq!(
            json_path(&v, ".status.conditions[?(@.type==\"Valid\")].type"),
            None
        );
    }
}
