//! PATCH: JSON patch, JSON merge patch, strategic merge patch and server-side apply (with a
//! managedFields entry per apply manager), on objects and their status.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::write::modify;
use super::{Ctx, json_bytes, strategic};
use crate::apiserver::meta::{self, Target};
use crate::apiserver::status::{ApiError, ApiResult};

fn parse_json(body: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("couldn't decode patch: {e}")))
}

/// PATCH an object (or its status).
pub(super) fn patch(ctx: &Ctx, body: &[u8]) -> ApiResult<Response> {
    let target = if ctx.path.subresource.is_some() {
        Target::Status
    } else {
        Target::Main
    };
    let (rt, name) = (ctx.rt.clone(), ctx.key().name);
    let missing = || ApiError::not_found(&rt.group, &rt.plural, &name);
    let invalid = |msg: String| ApiError::invalid(&rt.kind, &rt.group, &name, msg);
    let content_type = ctx.content_type().to_string();
    let written = match content_type.as_str() {
        "application/json-patch+json" => {
            let ops: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("couldn't decode json patch: {e}")))?;
            modify(ctx, target, |cur| {
                let mut v = cur.ok_or_else(missing)?.clone();
                json_patch::patch(&mut v, &ops).map_err(|e| invalid(e.to_string()))?;
                Ok(v)
            })?
        }
        "application/merge-patch+json" => {
            let p = parse_json(body)?;
            modify(ctx, target, |cur| {
                let mut v = cur.ok_or_else(missing)?.clone();
                json_patch::merge(&mut v, &p);
                Ok(v)
            })?
        }
        "application/strategic-merge-patch+json" => {
            if ctx.rt.custom {
                return Err(ApiError::unsupported_patch(false));
            }
            let p = parse_json(body)?;
            if !p.is_object() {
                return Err(ApiError::bad_request(
                    "a strategic merge patch must be a JSON object",
                ));
            }
            modify(ctx, target, |cur| {
                let mut v = cur.ok_or_else(missing)?.clone();
                strategic::merge(&mut v, &p, true);
                Ok(v)
            })?
        }
        "application/apply-patch+yaml" | "application/apply-patch+json" => {
            return apply(ctx, body, target);
        }
        _ => return Err(ApiError::unsupported_patch(!ctx.rt.custom)),
    };
    Ok(json_bytes(StatusCode::OK, written.stored.json.clone()))
}

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
            out.insert("f:metadata".into(), fields_of(&meta, false));
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
    list.retain(|e| {
        !(e["manager"] == manager
            && e["operation"] == "Apply"
            && e["subresource"].as_str() == subresource)
    });
    list.push(entry);
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("managedFields".into(), Value::Array(list));
    }
}

/// Server-side apply of a whole object: create when absent, otherwise merge the applied fields
/// into the live object; record the manager in managedFields.
fn apply(ctx: &Ctx, body: &[u8], target: Target) -> ApiResult<Response> {
    let manager = ctx.query.field_manager.clone().ok_or_else(|| {
        ApiError::invalid(
            "PatchOptions",
            "meta.k8s.io",
            "",
            "fieldManager: Required value: is required for apply patch",
        )
    })?;
    let mut applied: Value = serde_yaml::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("couldn't decode apply patch: {e}")))?;
    if !applied.is_object() {
        return Err(ApiError::bad_request("an apply patch must be an object"));
    }
    if let Some(m) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    let typed = !ctx.rt.custom;
    let written = modify(ctx, target, |cur| {
        let mut out = match cur {
            None => applied.clone(),
            Some(live) => {
                let mut v = live.clone();
                strategic::merge(&mut v, &applied, typed);
                v
            }
        };
        set_managed_fields(&mut out, &applied, &manager, target);
        Ok(out)
    })?;
    let code = if written.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json_bytes(code, written.stored.json.clone()))
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
}
