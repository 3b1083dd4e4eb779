//! One resource request as its verb handler sees it ([`Ctx`]): the state, the resource type, the
//! path, the query, the headers and the user, with what the headers ask for (Table,
//! `PartialObjectMetadata`, YAML bodies). A leaf: the dispatcher builds it, the handlers and the
//! reviews read it, and it imports neither.

use std::sync::Arc;

use axum::http::{HeaderMap, header};
use bytes::Bytes;
use serde_json::Value;

use super::auth::User;
use super::query::Query;
use super::registry::ResourceType;
use super::route::ResourcePath;
use super::state::App;
use super::status::{ApiError, ApiResult};
use super::store::{ObjKey, Stored};

/// Everything a verb handler needs about its request.
#[derive(Debug)]
pub(crate) struct Ctx {
    /// The state every request shares.
    pub app: Arc<App>,
    /// The addressed resource, as the registry serves it.
    pub rt: Arc<ResourceType>,
    /// The parsed request path (group, version, namespace, name, subresource).
    pub path: ResourcePath,
    /// The parsed query parameters.
    pub query: Query,
    /// The request headers (a protobuf body already decoded and relabelled JSON).
    pub headers: HeaderMap,
    /// Who asks (the administrator when authorization is off and no token names someone).
    pub user: User,
    /// The warnings answered in `Warning` headers (admission webhooks').
    pub warnings: std::sync::Mutex<Vec<String>>,
}

impl Ctx {
    /// The addressed object's key (namespace "" for cluster-scoped resources).
    pub fn key(&self) -> ObjKey {
        ObjKey::new(
            self.path.namespace.as_deref().unwrap_or_default(),
            self.path.name.as_deref().unwrap_or_default(),
        )
    }

    /// The requested API version.
    pub fn version(&self) -> &str {
        &self.path.version
    }

    /// Whether the client asked for a `meta.k8s.io` Table (kubectl get).
    pub fn wants_table(&self) -> bool {
        self.headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("as=Table"))
    }

    /// Whether the client asked for `meta.k8s.io/v1` `PartialObjectMetadata` (kube-rs metadata
    /// APIs, metadata-only informers).
    pub fn wants_metadata(&self) -> bool {
        self.headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("as=PartialObjectMetadata"))
    }

    /// A stored object rendered as the client asked: as this resource presents it, or its
    /// `PartialObjectMetadata`.
    pub fn render_bytes(&self, stored: &Stored) -> Bytes {
        if self.wants_metadata() {
            Bytes::from(serde_json::to_vec(&partial_metadata(&stored.value)).unwrap_or_default())
        } else {
            self.rt.view_bytes(stored)
        }
    }

    /// Adds warnings to answer in `Warning` headers.
    pub fn warn(&self, more: Vec<String>) {
        if !more.is_empty() {
            self.warnings
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend(more);
        }
    }

    /// The request's content type, without parameters.
    pub fn content_type(&self) -> &str {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map_or("application/json", str::trim)
    }
}

/// The `PartialObjectMetadata` of an object.
pub(crate) fn partial_metadata(obj: &Value) -> Value {
    serde_json::json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(Value::Null),
    })
}

/// Parse a request body as a JSON object (YAML when the content type says so).
pub(crate) fn parse_body(ctx: &Ctx, body: &[u8]) -> ApiResult<Value> {
    let value: Value = if ctx.content_type().contains("yaml") {
        crate::yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("couldn't decode yaml body: {e}")))?
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("couldn't decode json body: {e}")))?
    };
    if value.is_object() {
        Ok(value)
    } else {
        Err(ApiError::bad_request(
            "the request body is not a JSON object",
        ))
    }
}
