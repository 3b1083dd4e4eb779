//! `metav1.Status` error bodies, built the way kube-apiserver builds them (reason, code, details).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// An API error answered to the client as a `Status` object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status code, mirrored in `Status.code`.
    pub code: u16,
    /// The machine-readable reason (`NotFound`, `AlreadyExists`, `Conflict`, ...).
    pub reason: &'static str,
    /// The human-readable message.
    pub message: String,
    /// `details.name`, `details.group`, `details.kind` when the error concerns one object.
    pub details: Option<Box<Details>>,
    /// Seconds the client should wait before retrying (`Retry-After`, `details.retryAfterSeconds`).
    pub retry_after: Option<u32>,
    /// `details.causes`: the field errors of an Invalid error, or the machine-readable cause of
    /// another (`ResourceVersionTooLarge`).
    pub causes: Vec<Cause>,
}

/// One entry of `Status.details.causes` (apimachinery's `metav1.StatusCause`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `reason`: `FieldValueForbidden`, `FieldValueInvalid`, `ResourceVersionTooLarge`, ...
    pub reason: String,
    /// `message`: for a field error, its body (`Forbidden: field is immutable ...`).
    pub message: String,
    /// `field`: the field path, "" when the cause is not about a field.
    pub field: String,
}

/// One field error of a 422 Invalid answer (apimachinery's `field.Error`), rendered as
/// `<field>: <Type>: <detail>` in the message and as a [`Cause`] in the details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path (`data`, `metadata.name`).
    pub field: String,
    /// The error type: `Forbidden`, `Invalid value`, `Required value`, ...
    pub type_: FieldErrorType,
    /// The detail after the type.
    pub detail: String,
}

/// apimachinery's `field.ErrorType`s the server reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorType {
    /// `field.Forbidden`: `FieldValueForbidden`, printed `Forbidden`.
    Forbidden,
    /// `field.Invalid`: `FieldValueInvalid`, printed `Invalid value: <value>`.
    Invalid,
    /// `field.NotSupported`: `FieldValueNotSupported`, printed `Unsupported value: <value>`.
    NotSupported,
}

impl FieldErrorType {
    /// The `CauseType` (`metav1.CauseType`) and the printed name
    /// (`k8s.io/apimachinery/pkg/util/validation/field/errors.go`, `ErrorType.String`).
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Self::Forbidden => ("FieldValueForbidden", "Forbidden"),
            Self::Invalid => ("FieldValueInvalid", "Invalid value"),
            Self::NotSupported => ("FieldValueNotSupported", "Unsupported value"),
        }
    }
}

impl FieldError {
    /// A `field.Forbidden` error.
    #[must_use]
    pub fn forbidden(field: &str, detail: &str) -> Self {
        Self {
            field: field.to_string(),
            type_: FieldErrorType::Forbidden,
            detail: detail.to_string(),
        }
    }

    /// A `field.Invalid` error: `value` as apimachinery prints it (a number bare, a string
    /// quoted), then the detail.
    #[must_use]
    pub fn invalid(field: &str, value: &str, detail: &str) -> Self {
        Self {
            field: field.to_string(),
            type_: FieldErrorType::Invalid,
            detail: format!("{value}: {detail}"),
        }
    }

    /// A `field.NotSupported` error: `value` (a string, printed quoted) is none of `supported`.
    #[must_use]
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|v| format!("{v:?}")).collect();
        Self {
            field: field.to_string(),
            type_: FieldErrorType::NotSupported,
            detail: format!("{value:?}: supported values: {}", quoted.join(", ")),
        }
    }

    /// `ErrorBody`: the type and the detail, without the field.
    fn body(&self) -> String {
        format!("{}: {}", self.type_.names().1, self.detail)
    }
}

/// The object an error concerns: `Status.details`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Details {
    /// The object's name.
    pub name: String,
    /// The API group of its resource ("" for core).
    pub group: String,
    /// The resource (plural), which kube-apiserver reports as `details.kind`.
    pub kind: String,
}

/// What Go's `encoding/json` calls a JSON value it cannot decode into a Go type
/// (`UnmarshalTypeError.Value`): `string`, `bool`, `array`, `object`, `number`; a number bound
/// for an integer (`into_integer`) is named with its text (`number 3.5`, `number 1e+30`).
#[must_use]
pub(crate) fn go_value(value: &Value, into_integer: bool) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(_) => "bool".to_string(),
        Value::Number(n) if into_integer => format!("number {n}"),
        Value::Number(_) => "number".to_string(),
        Value::String(_) => "string".to_string(),
        Value::Array(_) => "array".to_string(),
        Value::Object(_) => "object".to_string(),
    }
}

/// Result of a handler step.
pub type ApiResult<T> = std::result::Result<T, ApiError>;

/// `"configmaps"` or `"deployments.apps"`: how kube-apiserver qualifies a resource in messages.
#[must_use]
pub fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
            causes: Vec::new(),
        }
    }

    fn with_details(mut self, group: &str, plural: &str, name: &str) -> Self {
        self.details = Some(Box::new(Details {
            name: name.to_string(),
            group: group.to_string(),
            kind: plural.to_string(),
        }));
        self
    }

    /// 404 `<resource> "<name>" not found`.
    #[must_use]
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, plural)),
        )
        .with_details(group, plural, name)
    }

    /// 404 for a path that names no known resource.
    #[must_use]
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 409 `<resource> "<name>" already exists`.
    #[must_use]
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, plural)),
        )
        .with_details(group, plural, name)
    }

    /// 409 Conflict on a stale `resourceVersion`, with kube-apiserver's wording.
    #[must_use]
    pub fn conflict(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                qualified(group, plural)
            ),
        )
        .with_details(group, plural, name)
    }

    /// 409 `Conflict` of a server-side apply, its causes to be filled (apimachinery's
    /// `NewApplyConflict`: no name, group or kind in the details, only the causes).
    #[must_use]
    pub fn apply_conflict(message: impl Into<String>) -> Self {
        Self::new(409, "Conflict", message)
    }

    /// 400 `BadRequest`.
    #[must_use]
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 400 for a body whose field has the wrong JSON type, as kube-apiserver's decoder answers
    /// it (`endpoints/handlers/rest.go`, `transformDecodeError`, wrapping Go's
    /// `json.UnmarshalTypeError`): `TokenRequest in version "v1" cannot be handled as a
    /// TokenRequest: json: cannot unmarshal string into Go struct field TokenRequest.spec of type
    /// v1.TokenRequestSpec`. `go_struct` is the Go struct holding the field, `path` the field's
    /// JSON path from the object, `go_type` the Go type it decodes into, `found` what Go calls
    /// the value (`go_value`).
    #[must_use]
    pub fn cannot_decode(
        kind: &str,
        version: &str,
        go_struct: &str,
        path: &str,
        go_type: &str,
        found: &str,
    ) -> Self {
        Self::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: json: cannot \
             unmarshal {found} into Go struct field {go_struct}.{path} of type {go_type}"
        ))
    }

    /// 422 Invalid on one object.
    #[must_use]
    pub fn invalid(kind: &str, group: &str, name: &str, message: impl Into<String>) -> Self {
        let what = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut err = Self::new(
            422,
            "Invalid",
            format!("{what} \"{name}\" is invalid: {}", message.into()),
        );
        err.details = Some(Box::new(Details {
            name: name.to_string(),
            group: group.to_string(),
            kind: kind.to_string(),
        }));
        err
    }

    /// 422 Invalid with field errors, as apimachinery's `NewInvalid` builds it: the message
    /// lists the errors (`[a, b]` when there are several) and `details.causes` has one entry
    /// each.
    #[must_use]
    pub fn invalid_fields(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Self {
        let rendered: Vec<String> = errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect();
        let message = match rendered.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut err = Self::invalid(kind, group, name, message);
        err.causes = errors
            .iter()
            .map(|e| Cause {
                reason: e.type_.names().0.to_string(),
                message: e.body(),
                field: e.field.clone(),
            })
            .collect();
        err
    }

    /// 403 Forbidden on one object, with apimachinery's `NewForbidden` message
    /// (`<resource> "<name>" is forbidden: <why>`).
    #[must_use]
    pub fn forbidden(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!(
                "{} \"{name}\" is forbidden: {why}",
                qualified(group, plural)
            ),
        )
        .with_details(group, plural, name)
    }

    /// 403 Forbidden as apimachinery's `NewForbidden` builds it for the authorizer: `<resource>
    /// "<name>" is forbidden: <why>`, `<resource> is forbidden: <why>` without a name, and
    /// `forbidden: <why>` without a resource (a non-resource URL), whose `details` are then
    /// present but empty.
    #[must_use]
    pub fn new_forbidden(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let message = match (resource.is_empty(), name.is_empty()) {
            (true, _) => format!("forbidden: {why}"),
            (false, true) => format!("{} is forbidden: {why}", qualified(group, resource)),
            (false, false) => format!(
                "{} \"{name}\" is forbidden: {why}",
                qualified(group, resource)
            ),
        };
        Self::new(403, "Forbidden", message).with_details(group, resource, name)
    }

    /// 401 Unauthorized, as kube-apiserver answers a token it does not accept.
    #[must_use]
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 504 Timeout for a resourceVersion newer than the server's, as apiserver's
    /// `storage.NewTooLargeResourceVersionError` builds it: a `ResourceVersionTooLarge` cause
    /// (which client-go's reflector looks for) and a retry after one second
    /// (`k8s.io/apiserver/pkg/storage/cacher/watch_cache.go`, `resourceVersionTooHighRetrySeconds`).
    #[must_use]
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut err = Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        );
        err.retry_after = Some(1);
        err.causes = vec![Cause {
            reason: "ResourceVersionTooLarge".to_string(),
            message: "Too large resource version".to_string(),
            field: String::new(),
        }];
        err
    }

    /// 405 `MethodNotAllowed`.
    #[must_use]
    pub fn method_not_allowed(verb: &str, what: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!(
                "the server does not allow this method on the requested resource ({verb} {what})"
            ),
        )
    }

    /// 410 Gone with reason Expired: the requested resourceVersion is older than the history.
    #[must_use]
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 413 `RequestEntityTooLarge`.
    #[must_use]
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 415 `UnsupportedMediaType`, for a body format the server does not read.
    #[must_use]
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({content_type}) - accepted media types include: application/json, application/yaml"
            ),
        )
    }

    /// 415 `UnsupportedMediaType` for a patch type, with the accepted patch types.
    #[must_use]
    pub fn unsupported_patch(strategic: bool) -> Self {
        let mut accepted = String::from(
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        );
        if strategic {
            accepted.push_str(", application/strategic-merge-patch+json");
        }
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted}"
            ),
        )
    }

    /// 429 `TooManyRequests` with `Retry-After`.
    #[must_use]
    pub fn too_many_requests(retry_after: u32) -> Self {
        let mut err = Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        );
        err.retry_after = Some(retry_after);
        err
    }

    /// An injected failure with an arbitrary status code.
    #[must_use]
    pub fn injected(code: u16) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            410 => "Expired",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "Unknown",
        };
        Self::new(code, reason, format!("injected failure (status {code})"))
    }

    /// 500 `InternalError`.
    #[must_use]
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` object for this error.
    #[must_use]
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        // `reason` is `omitempty`: a webhook's denial may carry none.
        if self.reason.is_empty()
            && let Some(map) = status.as_object_mut()
        {
            map.remove("reason");
        }
        let mut details = serde_json::Map::new();
        // `StatusDetails` fields are all `omitempty`; the details themselves are present
        // whenever the error has them, even empty (a non-resource 403).
        if let Some(d) = &self.details {
            for (key, value) in [("name", &d.name), ("group", &d.group), ("kind", &d.kind)] {
                if !value.is_empty() {
                    details.insert(key.into(), json!(value));
                }
            }
        }
        if !self.causes.is_empty() {
            let causes: Vec<Value> = self
                .causes
                .iter()
                .map(|c| {
                    let mut cause = json!({"reason": c.reason, "message": c.message});
                    if !c.field.is_empty() {
                        cause["field"] = json!(c.field);
                    }
                    cause
                })
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(secs) = self.retry_after {
            details.insert("retryAfterSeconds".into(), json!(secs));
        }
        if self.details.is_some() || !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self.to_status().to_string();
        let mut response = (code, body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_the_qualified_resource_and_fills_details() {
        let status = ApiError::not_found("apps", "deployments", "web").to_status();
        assert_eq!(status["message"], "deployments.apps \"web\" not found");
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["code"], 404);
        assert_eq!(status["details"]["kind"], "deployments");
        assert_eq!(status["details"]["group"], "apps");
    }

    #[test]
    fn invalid_in_the_core_group_has_no_dangling_dot() {
        let err = ApiError::invalid("ConfigMap", "", "x", "metadata.name: Required value");
        assert_eq!(
            err.message,
            "ConfigMap \"x\" is invalid: metadata.name: Required value"
        );
    }

    #[test]
    fn too_many_requests_carries_retry_after() {
        let status = ApiError::too_many_requests(3).to_status();
        assert_eq!(status["details"]["retryAfterSeconds"], 3);
        assert_eq!(status["code"], 429);
    }
}
