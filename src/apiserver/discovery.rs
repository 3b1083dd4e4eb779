//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/{group}`, and the `APIResourceList`
//! of each group version, as kube-rs `Discovery` and kubectl read them.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::registry::ResourceType;
use super::respond::json_value;
use super::state::App;
use super::status::ApiError;

/// The Kubernetes minor version the server reports: the newest that k8s-openapi 0.29 describes
/// (its `v1_37` feature), so that the current kubectl is within its supported skew of one
/// minor version. A documented choice, not a build feature: k8s-openapi compiles exactly one
/// version, and the crate keeps `v1_33` as the operator's compatibility floor (the types it
/// reads and writes exist in every version from 1.33 on); what the server serves does not
/// depend on which k8s-openapi types are compiled.
pub const KUBERNETES_MINOR: &str = "37";

pub(crate) const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The verbs a resource answers: only `create` for a review, which stores nothing.
pub(crate) fn verbs(rt: &ResourceType) -> &'static [&'static str] {
    if rt.review { &["create"] } else { VERBS }
}

/// Whether `rt` is core `serviceaccounts`, whose `token` subresource issues tokens.
pub(crate) fn is_service_accounts(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.plural == "serviceaccounts"
}

/// `/version`.
#[must_use]
pub fn version() -> Response {
    json_value(
        StatusCode::OK,
        &json!({
            "major": "1",
            "minor": KUBERNETES_MINOR,
            "gitVersion": format!("v1.{KUBERNETES_MINOR}.0"),
            "gitCommit": "informant",
            "gitTreeState": "clean",
            "buildDate": "2026-08-26T00:00:00Z",
            "goVersion": "go1.25.0",
            "compiler": "gc",
            "platform": format!("{}/{}", std::env::consts::OS, if cfg!(target_arch = "x86_64") { "amd64" } else { std::env::consts::ARCH }),
        }),
    )
}

/// `/api`.
#[must_use]
pub fn core_versions(app: &App) -> Response {
    json_value(
        StatusCode::OK,
        &json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": app.addr.to_string()}],
        }),
    )
}

fn group_doc(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
#[must_use]
pub fn groups(app: &App) -> Response {
    let groups: Vec<Value> = app
        .registry
        .groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| {
            let mut doc = group_doc(&g, &vs);
            if let Some(m) = doc.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            doc
        })
        .collect();
    json_value(
        StatusCode::OK,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
    )
}

/// `/apis/{group}`.
#[must_use]
pub fn group(app: &App, group: &str) -> Response {
    match app
        .registry
        .groups()
        .into_iter()
        .find(|(g, _)| g == group && !g.is_empty())
    {
        Some((g, vs)) => json_value(StatusCode::OK, &group_doc(&g, &vs)),
        None => ApiError::no_route(&format!("/apis/{group}")).into_response(),
    }
}

fn resource_entries(rt: &ResourceType) -> Vec<Value> {
    let mut main = json!({
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": verbs(rt),
    });
    if !rt.short_names.is_empty() {
        main["shortNames"] = json!(rt.short_names);
    }
    if !rt.categories.is_empty() {
        main["categories"] = json!(rt.categories);
    }
    let mut out = vec![main];
    if rt.group.is_empty() && rt.plural == "namespaces" {
        out.push(json!({
            "name": "namespaces/finalize",
            "singularName": "",
            "namespaced": false,
            "kind": "Namespace",
            "verbs": ["update"],
        }));
    }
    if is_service_accounts(rt) {
        out.push(json!({
            "name": "serviceaccounts/token",
            "singularName": "",
            "namespaced": true,
            "group": "authentication.k8s.io",
            "version": "v1",
            "kind": "TokenRequest",
            "verbs": ["create"],
        }));
    }
    if rt.status_subresource {
        out.push(json!({
            "name": format!("{}/status", rt.plural),
            "singularName": "",
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    out
}

/// `/api/v1` and `/apis/{group}/{version}`.
#[must_use]
pub fn resources(app: &App, group: &str, version: &str) -> Response {
    let types: Vec<_> = app
        .registry
        .all()
        .into_iter()
        .filter(|rt| rt.group == group && rt.versions.iter().any(|v| v == version))
        .collect();
    if types.is_empty() {
        return ApiError::no_route(&format!("{group}/{version}")).into_response();
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let resources: Vec<Value> = types.iter().flat_map(|rt| resource_entries(rt)).collect();
    json_value(
        StatusCode::OK,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    )
}
