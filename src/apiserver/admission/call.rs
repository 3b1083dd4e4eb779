//! One webhook call: the `AdmissionReview` v1 request, posted with the webhook's timeout (the
//! URL carries `?timeout=Ns`, as kube-apiserver's client adds it), and its answer checked as
//! kube-apiserver checks it (`webhook/request`, `VerifyAdmissionResponse`): a malformed answer
//! is a failed call, which `failurePolicy` decides on.

use std::fmt;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use serde_json::{Value, json};

use super::Attributes;
use super::client;
use super::hooks::Hook;
use super::matching::{Matched, to_version};
use crate::apiserver::state::App;
use crate::apiserver::status::{ApiError, Cause};

/// The largest answer read (kube-apiserver reads webhook answers of up to 3 MiB, its request
/// body limit).
const ANSWER_LIMIT: usize = 3 * 1024 * 1024;

/// Why a call failed (the text after `failed calling webhook "NAME": `).
#[derive(Debug)]
pub(super) struct Failure(String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A webhook's valid answer.
#[derive(Debug)]
pub(super) struct Called {
    pub allowed: bool,
    /// `response.status` (the denial's message, reason and code).
    pub status: Value,
    /// The JSON patch of a mutating webhook.
    pub patch: Option<json_patch::Patch>,
    pub warnings: Vec<String>,
}

/// The `AdmissionReview` sent for `attrs` as `matched` sees it.
pub(super) fn review(attrs: &Attributes<'_>, matched: &Matched, uid: &str) -> Value {
    let rt = attrs.rt;
    let kind = |version: &str| json!({"group": rt.group, "version": version, "kind": rt.kind});
    let resource =
        |version: &str| json!({"group": rt.group, "version": version, "resource": rt.plural});
    let object = |o: &Option<Value>| {
        o.as_ref()
            .map_or(Value::Null, |o| to_version(o, &matched.api_version))
    };
    let user = attrs.user;
    let mut user_info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        user_info["uid"] = json!(user.uid);
    }
    if !user.extra.is_empty() {
        user_info["extra"] = json!(user.extra);
    }
    let mut request = json!({
        "uid": uid,
        "kind": kind(&matched.version),
        "resource": resource(&matched.version),
        "requestKind": kind(attrs.version),
        "requestResource": resource(attrs.version),
        "name": attrs.name,
        "operation": attrs.operation.as_str(),
        "userInfo": user_info,
        "object": object(&attrs.object),
        "oldObject": object(&attrs.old_object),
        "dryRun": attrs.dry_run,
        "options": attrs.options_object(),
    });
    if let Some(sub) = attrs.subresource {
        request["subResource"] = json!(sub);
        request["requestSubResource"] = json!(sub);
    }
    if !attrs.namespace.is_empty() {
        request["namespace"] = json!(attrs.namespace);
    }
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request,
    })
}

/// The URL posted to: the webhook's, with `timeout` as kube-apiserver's REST client adds it.
fn url_of(hook: &Hook) -> String {
    format!("{}?timeout={}s", hook.endpoint.url, hook.timeout.as_secs())
}

/// Calls `hook` about `attrs`.
///
/// # Errors
///
/// [`Failure`] when it cannot be reached, times out, answers an error or a malformed review.
pub(super) async fn call(
    app: &App,
    hook: &Hook,
    attrs: &Attributes<'_>,
    matched: &Matched,
) -> Result<Called, Failure> {
    let uid = uuid::Uuid::new_v4().to_string();
    let body = serde_json::to_vec(&review(attrs, matched, &uid))
        .map_err(|e| Failure(format!("failed to encode the review: {e}")))?;
    let url = url_of(hook);
    let post =
        |why: &dyn fmt::Display| Failure(format!("failed to call webhook: Post {url:?}: {why}"));
    let client = client::client(&app.admission, &hook.endpoint.ca_bundle).map_err(|e| post(&e))?;
    let request = http::Request::post(&url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| post(&e))?;
    let exchange = async {
        let response = client
            .request(request)
            .await
            .map_err(|e| post(&chain(&e)))?;
        let status = response.status();
        let bytes = Limited::new(response.into_body(), ANSWER_LIMIT)
            .collect()
            .await
            .map_err(|e| post(&e))?
            .to_bytes();
        Ok::<_, Failure>((status, bytes))
    };
    let (status, bytes) = tokio::time::timeout(hook.timeout, exchange)
        .await
        .map_err(|_| post(&"context deadline exceeded"))??;
    if !status.is_success() {
        return Err(Failure(format!(
            "failed to call webhook: the server responded with the status code {} but did not \
             return more information",
            status.as_u16()
        )));
    }
    let answer: Value = serde_json::from_slice(&bytes)
        .map_err(|e| Failure(format!("failed to call webhook: {e}")))?;
    verify(&answer, &uid)
}

/// The error and its sources, `: `-joined (hyper's errors say little at the top).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Checks a webhook's answer as `VerifyAdmissionResponse` does.
fn verify(answer: &Value, uid: &str) -> Result<Called, Failure> {
    let (api_version, kind) = (
        answer["apiVersion"].as_str().unwrap_or_default(),
        answer["kind"].as_str().unwrap_or_default(),
    );
    if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
        return Err(Failure(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got \
             {api_version}, Kind={kind}"
        )));
    }
    let response = &answer["response"];
    if !response.is_object() {
        return Err(Failure("webhook response was absent".into()));
    }
    let got = response["uid"].as_str().unwrap_or_default();
    if got != uid {
        return Err(Failure(format!(
            "expected response.uid={uid:?}, got {got:?}"
        )));
    }
    let patch = match (response["patch"].as_str(), response["patchType"].as_str()) {
        (None | Some(""), None) => None,
        (None | Some(""), Some(_)) => {
            return Err(Failure(
                "webhook returned response.patchType but not response.patch".into(),
            ));
        }
        (Some(_), None) => {
            return Err(Failure(
                "webhook returned response.patch but not response.patchType".into(),
            ));
        }
        (Some(b64), Some("JSONPatch")) => {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| Failure(format!("webhook returned an undecodable patch: {e}")))?;
            Some(
                serde_json::from_slice::<json_patch::Patch>(&raw)
                    .map_err(|e| Failure(format!("webhook returned an invalid patch: {e}")))?,
            )
        }
        (Some(_), Some(other)) => {
            return Err(Failure(format!(
                "webhook returned invalid response.patchType of {other:?}"
            )));
        }
    };
    Ok(Called {
        allowed: response["allowed"].as_bool().unwrap_or(false),
        status: response["status"].clone(),
        patch,
        warnings: response["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str().map(String::from))
            .collect(),
    })
}

/// The `metav1.StatusReason`s a denial may carry; another reason is dropped (a `Status`
/// without reason, as kube-apiserver answers one it was given no reason for).
const REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

/// A denial, as kube-apiserver's `webhookerrors.ToStatusErr` shapes it: `admission webhook
/// "NAME" denied the request: MESSAGE` (the reason without a message, `without explanation`
/// without either), with the webhook's code (400 when it gave none below 400) and reason.
pub(super) fn denied(name: &str, status: &Value) -> ApiError {
    let denied_by = format!("admission webhook {name:?} denied the request");
    let message = status["message"].as_str().filter(|m| !m.is_empty());
    let reason = status["reason"].as_str().filter(|r| !r.is_empty());
    let text = match (message, reason) {
        (Some(m), _) => format!("{denied_by}: {m}"),
        (None, Some(r)) => format!("{denied_by}: {r}"),
        (None, None) => format!("{denied_by} without explanation"),
    };
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .unwrap_or(400);
    let mut err = ApiError::bad_request(text);
    err.code = code;
    err.reason = reason
        .and_then(|r| REASONS.iter().find(|known| **known == r))
        .copied()
        .unwrap_or("");
    err.causes = status["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| Cause {
            reason: c["reason"].as_str().unwrap_or_default().to_string(),
            message: c["message"].as_str().unwrap_or_default().to_string(),
            field: c["field"].as_str().unwrap_or_default().to_string(),
        })
        .collect();
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_reads_as_kube_apiserver_words_it() {
        let err = denied(
            "deny.example.com",
            &json!({"message": "no", "code": 403, "reason": "Forbidden"}),
        );
        assert_eq!(
            err.message,
            "admission webhook \"deny.example.com\" denied the request: no"
        );
        assert_eq!((err.code, err.reason), (403, "Forbidden"));
        let bare = denied("d.e.f", &Value::Null);
        assert_eq!(
            bare.message,
            "admission webhook \"d.e.f\" denied the request without explanation"
        );
        assert_eq!((bare.code, bare.reason), (400, ""));
        assert_eq!(denied("d.e.f", &json!({"code": 200})).code, 400);
    }

    #[test]
    fn an_answer_for_another_request_or_with_a_patch_but_no_type_is_a_failed_call() {
        let answer = |response: Value| json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
        let err = verify(&answer(json!({"uid": "b", "allowed": true})), "a").unwrap_err();
        assert_eq!(err.to_string(), "expected response.uid=\"a\", got \"b\"");
        let err = verify(
            &answer(json!({"uid": "a", "allowed": true, "patch": "W10="})),
            "a",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "webhook returned response.patch but not response.patchType"
        );
        let err = verify(&json!({"kind": "AdmissionReview"}), "a").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("expected webhook response of admission.k8s.io/v1")
        );
        let ok = verify(
            &answer(json!({"uid": "a", "allowed": true, "patch": "W10=", "patchType": "JSONPatch", "warnings": ["w"]})),
            "a",
        )
        .unwrap();
        assert!(ok.allowed && ok.patch.is_some());
        assert_eq!(ok.warnings, ["w"]);
    }
}
