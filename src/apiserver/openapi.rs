//! `OpenAPI` documents: the v3 index and per-group-version documents carrying the CRDs' schemas
//! (enough for `kubectl explain` and server-side field validation discovery); v2 is in
//! `openapi_v2`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::discovery::KUBERNETES_MINOR;
use super::registry::ResourceType;
use super::respond::json_value;
use super::state::App;
use super::status::ApiError;

pub(super) fn group_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// Reverse-DNS schema name, as kube-apiserver names CRD schemas (`dev.informant.v1alpha1.CacheConfig`).
pub(super) fn schema_name(rt: &ResourceType, version: &str) -> String {
    let reversed: Vec<&str> = rt.group.split('.').rev().collect();
    format!("{}.{version}.{}", reversed.join("."), rt.kind)
}

/// A CRD schema completed the way kube-apiserver publishes it (apiVersion, kind, metadata).
pub(super) fn published_schema(rt: &ResourceType, version: &str) -> Value {
    let mut schema = rt
        .schema
        .clone()
        .unwrap_or_else(|| json!({"type": "object"}));
    if let Some(m) = schema.as_object_mut() {
        let props = m.entry("properties").or_insert_with(|| json!({}));
        if let Some(p) = props.as_object_mut() {
            p.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
            p.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
            p.insert(
                "metadata".into(),
                json!({"type": "object", "description": "Standard object's metadata."}),
            );
        }
        m.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": rt.group, "version": version, "kind": rt.kind}]),
        );
    }
    schema
}

/// `/openapi/v3`: one entry per served group version.
#[must_use]
pub fn v3_index(app: &App) -> Response {
    let mut paths = Map::new();
    for (group, versions) in app.registry.groups() {
        for v in versions {
            let p = group_path(&group, &v);
            paths.insert(
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=0")}),
            );
        }
    }
    json_value(StatusCode::OK, &json!({"paths": paths}))
}

fn operation(rt: &ResourceType, verb: &str, schema_ref: &str) -> Value {
    json!({
        "operationId": format!("{verb}{}", rt.kind),
        "parameters": [
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}}
        ],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": schema_ref}}}}},
        "x-kubernetes-action": verb,
        "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.preferred_version(), "kind": rt.kind}
    })
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`.
#[must_use]
pub fn v3_group(app: &App, group: &str, version: &str) -> Response {
    let types: Vec<_> = app
        .registry
        .all()
        .into_iter()
        .filter(|rt| rt.group == group && rt.versions.iter().any(|v| v == version))
        .collect();
    if types.is_empty() {
        return ApiError::no_route(&format!("/openapi/v3/{}", group_path(group, version)))
            .into_response();
    }
    let mut schemas = Map::new();
    let mut paths = Map::new();
    for rt in &types {
        let name = schema_name(rt, version);
        let schema_ref = format!("#/components/schemas/{name}");
        if rt.schema.is_some() || rt.custom {
            schemas.insert(name.clone(), published_schema(rt, version));
        } else {
            let mut s = json!({"type": "object", "x-kubernetes-group-version-kind": [{"group": rt.group, "version": version, "kind": rt.kind}]});
            s["description"] = json!(format!(
                "{} (schema not published by the embedded API server)",
                rt.kind
            ));
            schemas.insert(name.clone(), s);
        }
        let base = format!("/{}", group_path(group, version));
        let item = if rt.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", rt.plural)
        } else {
            format!("{base}/{}/{{name}}", rt.plural)
        };
        paths.insert(
            item,
            json!({
                "get": operation(rt, "get", &schema_ref),
                "put": operation(rt, "put", &schema_ref),
                "patch": operation(rt, "patch", &schema_ref),
                "delete": operation(rt, "delete", &schema_ref),
            }),
        );
        let collection = if rt.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", rt.plural)
        } else {
            format!("{base}/{}", rt.plural)
        };
        paths.insert(
            collection,
            json!({"post": operation(rt, "post", &schema_ref)}),
        );
    }
    json_value(
        StatusCode::OK,
        &json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": format!("v1.{KUBERNETES_MINOR}.0")},
            "paths": paths,
            "components": {"schemas": schemas},
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::Registry;

    #[test]
    fn schema_names_reverse_the_group() {
        let reg = Registry::new();
        let rt = reg.lookup("apps", "v1", "deployments").unwrap();
        assert_eq!(schema_name(&rt, "v1"), "apps.v1.Deployment");
        let leases = reg.lookup("coordination.k8s.io", "v1", "leases").unwrap();
        assert_eq!(schema_name(&leases, "v1"), "io.k8s.coordination.v1.Lease");
    }
}
