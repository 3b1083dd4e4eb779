//! GET of one object and LIST of a collection: selectors, limit/continue over a consistent
//! snapshot, resourceVersion and resourceVersionMatch.

use std::ops::Bound;
use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use crate::apiserver::crd_conversion;
use crate::apiserver::filter::Filter;
use crate::apiserver::lists::ListAnswer;
use crate::apiserver::request::Ctx;
use crate::apiserver::respond::{json_bytes, json_value};
use crate::apiserver::status::{ApiError, ApiResult};
use crate::apiserver::store::{ObjKey, Objects, Stored};
use crate::apiserver::table;

/// GET one object (at the version asked for).
pub(super) async fn get(ctx: &Ctx) -> ApiResult<Response> {
    let key = ctx.key();
    let obj = ctx
        .app
        .store
        .get(&ctx.rt.storage_key(), &key)
        .ok_or_else(|| ApiError::not_found(&ctx.rt.group, &ctx.rt.plural, &key.name))?;
    let obj = crd_conversion::at_version(&ctx.app, &ctx.rt, ctx.version(), vec![obj], false)
        .await?
        .pop()
        .ok_or_else(|| ApiError::internal("conversion returned no object"))?;
    if ctx.wants_table() {
        let t = table::build(
            &ctx.rt,
            &[obj.as_ref()],
            &obj.rv.to_string(),
            None,
            ctx.query.include_object.as_deref(),
        );
        return Ok(json_value(StatusCode::OK, &t));
    }
    Ok(json_bytes(StatusCode::OK, ctx.render_bytes(&obj)))
}

/// The position a continue token encodes: the snapshot's resourceVersion and the last key sent.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct ContinueToken {
    v: String,
    rv: u64,
    ns: String,
    name: String,
}

fn encode_token(rv: u64, key: &ObjKey) -> String {
    let token = ContinueToken {
        v: "meta.k8s.io/v1".to_string(),
        rv,
        ns: key.namespace.clone(),
        name: key.name.clone(),
    };
    STANDARD.encode(serde_json::to_vec(&token).unwrap_or_default())
}

fn decode_token(raw: &str) -> ApiResult<ContinueToken> {
    let bytes = STANDARD
        .decode(raw)
        .map_err(|e| ApiError::bad_request(format!("continue key is not valid: {e}")))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("continue key is not valid: {e}")))
}

/// Which snapshot a list reads, at which resourceVersion, and after which key.
fn source(ctx: &Ctx) -> ApiResult<(u64, Objects, Option<ObjKey>)> {
    let store = &ctx.app.store;
    let resource = ctx.rt.storage_key();
    if let Some(raw) = &ctx.query.continue_token {
        if ctx
            .query
            .resource_version
            .as_deref()
            .is_some_and(|v| v != "0")
        {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let token = decode_token(raw)?;
        let objs = store.snapshot_at(&resource, token.rv).map_err(|_| {
            ApiError::expired(
                "The provided continue parameter is too old to display a consistent list result. \
                 You can start a new list without the continue parameter.",
            )
        })?;
        return Ok((token.rv, objs, Some(ObjKey::new(&token.ns, &token.name))));
    }
    let rv = ctx.query.rv()?;
    let matching = ctx.query.resource_version_match.as_deref();
    match (rv, matching) {
        (None, Some(_)) => Err(ApiError::bad_request(
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        )),
        (None | Some(0), None | Some("NotOlderThan")) => {
            let (rv, objs) = store.snapshot(&resource);
            Ok((rv, objs, None))
        }
        (Some(r), Some("Exact")) => {
            let current = store.current_rv();
            if r > current {
                return Err(ApiError::too_large_resource_version(r, current));
            }
            Ok((r, store.snapshot_at(&resource, r)?, None))
        }
        (Some(r), None | Some("NotOlderThan")) => {
            let (current, objs) = store.snapshot(&resource);
            if r > current {
                return Err(ApiError::too_large_resource_version(r, current));
            }
            Ok((current, objs, None))
        }
        (_, Some(other)) => Err(ApiError::bad_request(format!(
            "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
        ))),
    }
}

/// The selected objects of one page, and the continue token when more follow.
pub(crate) fn page<'a>(
    objs: &'a Objects,
    filter: &Filter,
    after: Option<ObjKey>,
    limit: Option<usize>,
    rv: u64,
) -> (Vec<&'a Arc<Stored>>, Option<String>) {
    let lower = match (after, filter.namespace()) {
        (Some(k), _) => Bound::Excluded(k),
        (None, Some(ns)) => Bound::Included(ObjKey::new(ns, "")),
        (None, None) => Bound::Unbounded,
    };
    let mut items: Vec<&Arc<Stored>> = Vec::new();
    let mut last: Option<&ObjKey> = None;
    for (key, obj) in objs.range((lower, Bound::Unbounded)) {
        if let Some(ns) = filter.namespace()
            && key.namespace != ns
        {
            break;
        }
        if !filter.matches(&key.namespace, &obj.value) {
            continue;
        }
        if limit.is_some_and(|l| items.len() >= l) {
            return (items, last.map(|k| encode_token(rv, k)));
        }
        items.push(obj);
        last = Some(key);
    }
    (items, None)
}

/// LIST a collection (every object at the version asked for, converted together).
pub(super) async fn list(ctx: &Ctx) -> ApiResult<Response> {
    let filter = Filter::new(ctx.rt.clone(), ctx.path.namespace.clone(), &ctx.query)?;
    let (rv, objs, after) = source(ctx)?;
    let limit = ctx.query.limit.filter(|l| *l > 0);
    let (items, token) = page(&objs, &filter, after, limit, rv);
    let items: Vec<Arc<Stored>> = items.into_iter().cloned().collect();
    let items = crd_conversion::at_version(&ctx.app, &ctx.rt, ctx.version(), items, true).await?;
    if ctx.wants_table() {
        let rows: Vec<&Stored> = items.iter().map(AsRef::as_ref).collect();
        let t = table::build(
            &ctx.rt,
            &rows,
            &rv.to_string(),
            token.as_deref(),
            ctx.query.include_object.as_deref(),
        );
        return Ok(json_value(StatusCode::OK, &t));
    }
    let mut meta = serde_json::json!({"resourceVersion": rv.to_string()});
    if let Some(t) = &token {
        meta["continue"] = serde_json::Value::String(t.clone());
    }
    if let Some(selector) = filter.shard_info() {
        meta["shardInfo"] = serde_json::json!({ "selector": selector });
    }
    let (kind, api_version) = if ctx.wants_metadata() {
        (
            "PartialObjectMetadataList".to_string(),
            "meta.k8s.io/v1".to_string(),
        )
    } else {
        (
            format!("{}List", ctx.rt.kind),
            ctx.rt.api_version(ctx.version()),
        )
    };
    let head = serde_json::json!({"kind": kind, "apiVersion": api_version, "metadata": meta});
    let head = serde_json::to_vec(&head).unwrap_or_default();
    // kube-apiserver's lists of built-in kinds carry no apiVersion and kind on their items (its
    // JSON serializer writes what the internal objects hold; custom resources are unstructured
    // and keep theirs): clients take the kind from the list's.
    let bare = !ctx.rt.custom && !ctx.wants_metadata();
    let views: Vec<bytes::Bytes> = items
        .iter()
        .map(|o| {
            let view = ctx.render_bytes(o);
            if bare {
                bytes::Bytes::from(without_type_meta(&view))
            } else {
                view
            }
        })
        .collect();
    let size: usize = views.iter().map(|o| o.len() + 1).sum();
    let mut body = Vec::with_capacity(head.len() + size + 16);
    // `head` is an object: reopen it to append "items".
    body.extend_from_slice(&head[..head.len().saturating_sub(1)]);
    body.extend_from_slice(b",\"items\":[");
    for (i, obj) in views.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(obj);
    }
    body.extend_from_slice(b"]}");
    ctx.app.lists.record(ListAnswer {
        group: ctx.rt.group.clone(),
        resource: ctx.rt.plural.clone(),
        namespace: ctx.path.namespace.clone(),
        shard_selector: filter.shard_info().map(ToOwned::to_owned),
        label_selector: ctx.query.label_selector.clone(),
        field_selector: ctx.query.field_selector.clone(),
        continued: ctx.query.continue_token.clone(),
        next: token.clone(),
        resource_version: rv,
        items: items.len(),
        bytes: body.len(),
    });
    Ok(json_bytes(StatusCode::OK, body))
}

/// `object` (compact JSON of one object) without its top-level `apiVersion` and `kind`: the
/// members are copied byte for byte, found by one scan that tracks strings and nesting. Input
/// that is not a JSON object comes back unchanged.
fn without_type_meta(object: &[u8]) -> Vec<u8> {
    let Some(members) = top_level_members(object) else {
        return object.to_vec();
    };
    let mut out = Vec::with_capacity(object.len());
    out.push(b'{');
    for (key, member) in members {
        if matches!(key, b"apiVersion" | b"kind") {
            continue;
        }
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(member);
    }
    out.push(b'}');
    out
}

/// The members (`"key":value`) of the JSON object `text`, with each key's raw bytes (escapes
/// left as they are), or `None` when `text` is not an object.
fn top_level_members(text: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let start = text.iter().position(|b| !b.is_ascii_whitespace())?;
    let end = text.iter().rposition(|b| !b.is_ascii_whitespace())?;
    if text[start] != b'{' || text[end] != b'}' || end <= start {
        return None;
    }
    let body = &text[start + 1..end];
    let mut members = Vec::new();
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut member_start = 0;
    let mut key: Option<(usize, usize)> = None;
    let mut key_open = None;
    for (i, &b) in body.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
                if let (0, Some(open), None) = (depth, key_open, key) {
                    key = Some((open + 1, i));
                }
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                if depth == 0 && key.is_none() {
                    key_open = Some(i);
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b',' if depth == 0 => {
                let (k0, k1) = key.take()?;
                members.push((&body[k0..k1], trim(&body[member_start..i])));
                member_start = i + 1;
                key_open = None;
            }
            _ => {}
        }
    }
    if in_string || depth != 0 {
        return None;
    }
    if let Some((k0, k1)) = key {
        members.push((&body[k0..k1], trim(&body[member_start..])));
    } else if !trim(&body[member_start..]).is_empty() {
        return None;
    }
    Some(members)
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &bytes[start..end.max(start)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_items_lose_only_their_top_level_type_meta() {
        let object = br#"{"apiVersion":"v1","data":{"kind":"x","a\"pi":"{,}"},"kind":"ConfigMap","metadata":{"name":"a"}}"#;
        let bare = without_type_meta(object);
        let value: serde_json::Value = serde_json::from_slice(&bare).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"data": {"kind": "x", "a\"pi": "{,}"}, "metadata": {"name": "a"}})
        );
        assert_eq!(without_type_meta(br#"{"kind":"K"}"#), b"{}");
        assert_eq!(without_type_meta(b"{}"), b"{}");
        assert_eq!(
            without_type_meta(b" { \"kind\" : 1 , \"b\" : [1,2] } "),
            br#"{"b" : [1,2]}"#
        );
        for broken in [&b"[1]"[..], b"{\"a\":1", b"{\"a\":\"1}", b"\"x\""] {
            assert_eq!(
                without_type_meta(broken),
                broken,
                "{:?}",
                String::from_utf8_lossy(broken)
            );
        }
    }

    #[test]
    fn continue_tokens_round_trip_and_garbage_is_rejected() {
        let t = encode_token(42, &ObjKey::new("ns", "a"));
        let back = decode_token(&t).unwrap();
        assert_eq!(
            (back.rv, back.ns.as_str(), back.name.as_str()),
            (42, "ns", "a")
        );
        assert_eq!(decode_token("!!!").unwrap_err().code, 400);
    }
}
