//! Creating objects outside HTTP (seed files, the library handle), creating missing namespaces.

use serde_json::{Value, json};

use super::handlers::write::{insert, prepare};
use super::meta::prepare_create;
use super::registry::ResourceKey;
use super::state::App;
use super::status::{ApiError, ApiResult};
use super::store::ObjKey;

/// Create `obj` (any served kind); a namespaced object without namespace goes to `default`.
pub(crate) fn create(app: &App, obj: Value) -> ApiResult<Value> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
    let kind = obj["kind"].as_str().unwrap_or_default().to_string();
    let rt = app.registry.by_kind(&api_version, &kind).ok_or_else(|| {
        ApiError::bad_request(format!(
            "no resource serves apiVersion {api_version:?} kind {kind:?}"
        ))
    })?;
    let version = api_version.rsplit('/').next().unwrap_or("v1").to_string();
    let ns = obj["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    if rt.namespaced {
        ensure_namespace(app, &ns)?;
    }
    let (key, prepared) = prepare_create(&rt, &version, Some(&ns), obj)?;
    let prepared = prepare(app, &rt, prepared)?;
    let stored = insert(app, &rt, &key, prepared)?;
    Ok(rt.view(&stored.value))
}

fn ensure_namespace(app: &App, ns: &str) -> ApiResult<()> {
    let key = ResourceKey::new("", "namespaces");
    if app.store.contains(&key, &ObjKey::new("", ns)) {
        return Ok(());
    }
    let rt = app
        .registry
        .get(&key)
        .ok_or_else(|| ApiError::internal("namespaces are not served"))?;
    let (k, obj) = prepare_create(&rt, "v1", None, json!({"metadata": {"name": ns}}))?;
    match insert(app, &rt, &k, obj) {
        Ok(_) => Ok(()),
        Err(e) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Parse a multi-document YAML file into objects (`List` kinds are flattened).
///
/// # Errors
///
/// The YAML error, when a document does not parse.
pub fn parse_yaml(text: &str) -> Result<Vec<Value>, crate::yaml::Error> {
    let mut out = Vec::new();
    for v in crate::yaml::documents(text)? {
        match v {
            Value::Object(ref m)
                if m.get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.ends_with("List")) =>
            {
                if let Some(items) = m.get("items").and_then(Value::as_array) {
                    out.extend(items.iter().cloned());
                }
            }
            other => out.push(other),
        }
    }
    Ok(out)
}
