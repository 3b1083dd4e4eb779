//! Aggregated discovery (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`), which kubectl asks
//! for first on `/api` and `/apis`: every group, version and resource in one document.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use super::discovery::{is_service_accounts, verbs};
use super::registry::ResourceType;
use super::respond::json_value;
use super::state::App;

/// The media type of aggregated discovery, as clients ask for it and the server labels it.
const MEDIA_TYPE: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the request's `Accept` asks for aggregated discovery (v2).
#[must_use]
pub fn wanted(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| {
            a.split(',').any(|t| {
                t.contains("as=APIGroupDiscoveryList")
                    && t.contains("g=apidiscovery.k8s.io")
                    && t.contains("v=v2")
                    && !t.contains("v=v2beta1")
            })
        })
}

fn resource(rt: &ResourceType, version: &str) -> Value {
    let kind = json!({"group": rt.group, "version": version, "kind": rt.kind});
    let mut r = json!({
        "resource": rt.plural,
        "responseKind": kind,
        "scope": if rt.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": rt.singular,
        "verbs": verbs(rt),
    });
    if !rt.short_names.is_empty() {
        r["shortNames"] = json!(rt.short_names);
    }
    if !rt.categories.is_empty() {
        r["categories"] = json!(rt.categories);
    }
    let mut subresources = Vec::new();
    if rt.group.is_empty() && rt.plural == "namespaces" {
        subresources.push(json!({
            "subresource": "finalize",
            "responseKind": kind,
            "verbs": ["update"],
        }));
    }
    if is_service_accounts(rt) {
        subresources.push(json!({
            "subresource": "token",
            "responseKind": {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"},
            "verbs": ["create"],
        }));
    }
    if rt.status_subresource {
        subresources.push(json!({
            "subresource": "status",
            "responseKind": kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    if !subresources.is_empty() {
        r["subresources"] = json!(subresources);
    }
    r
}

/// The `APIGroupDiscoveryList` of the core group (`/api`, `core: true`) or of every named group.
#[must_use]
pub fn document(app: &App, core: bool) -> Response {
    let types = app.registry.all();
    let items: Vec<Value> = app
        .registry
        .groups()
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = types
                        .iter()
                        .filter(|rt| rt.group == group && rt.versions.contains(v))
                        .map(|rt| resource(rt, v))
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": group}, "versions": versions})
        })
        .collect();
    let mut resp = json_value(
        StatusCode::OK,
        &json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}),
    );
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_v2_media_type_selects_aggregated_discovery() {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_static(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
        ));
        assert!(wanted(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert!(!wanted(&h));
    }
}
