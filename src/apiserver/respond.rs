//! JSON responses: a status code, a body and `Content-Type: application/json`, as every handler,
//! discovery document and review answers. A leaf: it knows no handler and no server.

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;

/// A JSON response from pre-serialized bytes.
pub(crate) fn json_bytes(code: StatusCode, body: impl Into<Bytes>) -> Response {
    let mut resp = (code, Body::from(body.into())).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    resp
}

/// A JSON response from a value.
pub(crate) fn json_value(code: StatusCode, body: &Value) -> Response {
    json_bytes(code, serde_json::to_vec(body).unwrap_or_default())
}
