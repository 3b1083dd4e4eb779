//! `/debug/requests` (request counters as JSON) and `/debug/faults` (inject faults over HTTP).

use std::time::Duration;

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::faults::FailRule;
use super::respond::json_value;
use super::state::App;
use super::status::ApiError;

/// `GET /debug/requests`.
#[must_use]
pub fn requests(app: &App) -> Response {
    #[derive(serde::Serialize)]
    struct Body {
        requests: Vec<super::faults::RequestCount>,
    }
    // Serialized from the struct so every entry reads `"verb","group","resource","count"` in
    // that order, which shell scripts can grep.
    let body = Body {
        requests: app.counters.snapshot(),
    };
    super::respond::json_bytes(
        StatusCode::OK,
        serde_json::to_vec(&body).unwrap_or_default(),
    )
}

/// The body of `POST /debug/faults`; every field is optional and applied in order.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultRequest {
    /// Remove all injected faults first.
    #[serde(default)]
    pub clear: bool,
    /// End every open watch.
    #[serde(default)]
    pub drop_watches: bool,
    /// Forget the watch history (410 on resume).
    #[serde(default)]
    pub expire_history: bool,
    /// Fail the next requests matching a rule.
    pub fail_next: Option<FailRule>,
    /// Added latency per resource request, in milliseconds.
    pub latency_ms: Option<u64>,
    /// Answer the next `count` requests with 429 and `Retry-After`.
    pub throttle: Option<Throttle>,
}

/// 429 injection.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Throttle {
    /// How many requests.
    pub count: u32,
    /// The `Retry-After` seconds.
    pub retry_after_seconds: u32,
}

/// `POST /debug/faults`.
#[must_use]
pub fn faults(app: &App, method: &Method, body: &[u8]) -> Response {
    if method != Method::POST {
        return ApiError::method_not_allowed(method.as_str(), "/debug/faults").into_response();
    }
    let req: FaultRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            return ApiError::bad_request(format!("invalid fault request: {e}")).into_response();
        }
    };
    if req.clear {
        app.faults.clear();
    }
    if req.drop_watches {
        app.store.drop_watches();
    }
    if req.expire_history {
        app.store.expire_history();
    }
    if let Some(rule) = req.fail_next {
        app.faults.fail_next(rule);
    }
    if let Some(ms) = req.latency_ms {
        app.faults.set_latency(Duration::from_millis(ms));
    }
    if let Some(t) = req.throttle {
        app.faults.throttle_next(t.count, t.retry_after_seconds);
    }
    json_value(StatusCode::OK, &json!({"status": "Success"}))
}
