//! PATCH: JSON patch, JSON merge patch, strategic merge patch and server-side apply (with a
//! managedFields entry per apply manager), on objects and their status.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::strategic;
use super::write::{modify, tracked};
use crate::apiserver::meta::Target;
use crate::apiserver::request::Ctx;
use crate::apiserver::respond::json_bytes;
use crate::apiserver::status::{ApiError, ApiResult};

fn parse_json(body: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("couldn't decode patch: {e}")))
}

/// PATCH an object (or its status).
pub(super) async fn patch(ctx: &Ctx, body: &[u8]) -> ApiResult<Response> {
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
            modify(
                ctx,
                target,
                tracked(ctx, target, |cur| {
                    let mut v = cur.ok_or_else(missing)?.clone();
                    // Not `json_patch::patch`: on a failed operation it undoes the ones before, and
                    // its undo panics (`unreachable!`) when a `move` failed half-way, after removing
                    // its source (json-patch 5.0). The copy is dropped on failure: nothing to undo.
                    apply_json_patch(&mut v, &ops).map_err(|e| invalid(e.to_string()))?;
                    Ok(v)
                }),
            )
            .await?
        }
        "application/merge-patch+json" => {
            let p = parse_json(body)?;
            modify(
                ctx,
                target,
                tracked(ctx, target, |cur| {
                    let mut v = cur.ok_or_else(missing)?.clone();
                    json_patch::merge(&mut v, &p);
                    Ok(v)
                }),
            )
            .await?
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
            modify(
                ctx,
                target,
                tracked(ctx, target, |cur| {
                    let mut v = cur.ok_or_else(missing)?.clone();
                    strategic::merge(&mut v, &p, true);
                    Ok(v)
                }),
            )
            .await?
        }
        "application/apply-patch+yaml" | "application/apply-patch+json" => {
            return super::apply::apply(ctx, body, target).await;
        }
        _ => return Err(ApiError::unsupported_patch(!ctx.rt.custom)),
    };
    Ok(json_bytes(
        StatusCode::OK,
        ctx.render_bytes(&written.stored),
    ))
}

/// Applies `ops` in order, as kube-apiserver's JSON patch library (evanphx/json-patch) does:
/// as `json_patch::patch_unsafe`, except that a `test` of a member missing from an existing
/// object holds against `null` (evanphx treats a missing member as null). kube-runtime's
/// `finalizer` relies on it: its first patch tests `/metadata/finalizers` against `null`
/// before adding the list.
fn apply_json_patch(
    doc: &mut Value,
    ops: &[json_patch::PatchOperation],
) -> Result<(), json_patch::PatchError> {
    for (i, op) in ops.iter().enumerate() {
        if let json_patch::PatchOperation::Test(test) = op
            && test.value.is_null()
            && doc.pointer(test.path.as_str()).is_none()
            && test
                .path
                .parent()
                .is_some_and(|parent| doc.pointer(parent.as_str()).is_some_and(Value::is_object))
        {
            continue;
        }
        json_patch::patch_unsafe(doc, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = i;
            e
        })?;
    }
    Ok(())
}
