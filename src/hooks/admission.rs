//! Admission decisions: an `AdmissionReview` from the API server, the `Controller`'s admission
//! hook called with its request (through the same [`Caller`] as reconciles: exec, persistent
//! exec or webhook, under the hook policy), and the review's answer, every decision ending in
//! one named fate ([`AdmissionFate`]), counted (`informant_admission_total{hook,operation,fate}`)
//! and traced (one `admission` span each).
//!
//! ```text
//! AdmissionReview ─▶ AdmissionCall {controller, admission, request} ─▶ hook
//!                    ◀─ AdmissionAnswer {allowed, message, object | patch, warnings}
//! allowed, denied, patched                       (the hook decided)
//! timed_out, invalid_answer, failed_open|closed  (it did not: failurePolicy decides)
//! too_large, busy                                (not read: the API server's failurePolicy)
//! ```
//!
//! A mutating hook answers the changed `object` (informant computes the JSON patch, RFC 6902,
//! as controller-runtime's `PatchResponseFromRaw` does) or a `patch` of its own, which must
//! apply to the object. A hook that cannot decide in time is answered for, half a second
//! before the API server's `timeoutSeconds`, so the failure policy, not the API server's own
//! timeout, decides, and the fate is counted. A request let in by `failurePolicy: Ignore`
//! carries a warning the client sees.

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tracing::{Instrument as _, field};

use super::call::{CallError, Caller};
use super::contract::{API_VERSION, Answer, AnswerError, ControllerRef};
use super::metrics::HookMetrics;
use super::policy::Policy;
use super::resource::{AdmissionHook, AdmissionType, ControllerKey, FailurePolicy};

/// How one admission request ended. Exactly one per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AdmissionFate {
    /// The hook allowed it unchanged.
    Allowed,
    /// The hook denied it.
    Denied,
    /// The hook allowed it with changes (a mutating hook's patch).
    Patched,
    /// The hook failed (not a timeout or a bad answer) and `failurePolicy: Ignore` let it in.
    FailedOpen,
    /// The hook failed (not a timeout or a bad answer) and `failurePolicy: Fail` refused it.
    FailedClosed,
    /// The hook did not answer in time; the failure policy decided.
    TimedOut,
    /// The hook's answer could not be used; the failure policy decided.
    InvalidAnswer,
    /// The review was larger than the endpoint reads (`--webhook-max-admission-bytes`): it
    /// was answered 413 unread, and the API server's failure policy decided.
    TooLarge,
    /// The hook was making as many answers as it may at once (`--webhook-max-in-flight`):
    /// the review was answered 429 unread, and the API server's failure policy decided.
    Busy,
}

impl AdmissionFate {
    /// Every fate, in the order of [`AdmissionFate::as_str`]'s documentation.
    pub const ALL: [AdmissionFate; 9] = [
        AdmissionFate::Allowed,
        AdmissionFate::Denied,
        AdmissionFate::Patched,
        AdmissionFate::FailedOpen,
        AdmissionFate::FailedClosed,
        AdmissionFate::TimedOut,
        AdmissionFate::InvalidAnswer,
        AdmissionFate::TooLarge,
        AdmissionFate::Busy,
    ];

    /// The fate's label: `allowed`, `denied`, `patched`, `failed_open`, `failed_closed`,
    /// `timed_out`, `invalid_answer`, `too_large` or `busy`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            AdmissionFate::Allowed => "allowed",
            AdmissionFate::Denied => "denied",
            AdmissionFate::Patched => "patched",
            AdmissionFate::FailedOpen => "failed_open",
            AdmissionFate::FailedClosed => "failed_closed",
            AdmissionFate::TimedOut => "timed_out",
            AdmissionFate::InvalidAnswer => "invalid_answer",
            AdmissionFate::TooLarge => "too_large",
            AdmissionFate::Busy => "busy",
        }
    }
}

impl fmt::Display for AdmissionFate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the manager sends an admission hook.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCall<'a> {
    /// Always [`API_VERSION`].
    pub api_version: &'static str,
    /// The `Controller` the hook belongs to.
    pub controller: ControllerRef,
    /// Which of its admission hooks is called.
    pub admission: AdmissionName<'a>,
    /// The `AdmissionReview`'s `request`, exactly as the API server sent it.
    pub request: &'a Value,
}

/// The admission hook a call is for.
#[derive(Serialize, Debug)]
pub struct AdmissionName<'a> {
    /// Its name in the `Controller`.
    pub name: &'a str,
    /// `Validating` or `Mutating`.
    #[serde(rename = "type")]
    pub type_: &'static str,
}

/// What an admission hook answers.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionAnswer {
    /// Whether the request may go on. Required.
    pub allowed: bool,
    /// Why (shown to the client when denied).
    #[serde(default)]
    pub message: Option<String>,
    /// The HTTP status of a denial, 400 to 599. Default 403 (controller-runtime's `Denied`).
    #[serde(default)]
    pub code: Option<u16>,
    /// A mutating hook's changed object (informant computes the patch).
    #[serde(default)]
    pub object: Option<Value>,
    /// A mutating hook's own JSON patch (RFC 6902), instead of `object`.
    #[serde(default)]
    pub patch: Option<Value>,
    /// Warnings for the client (`kubectl` prints them).
    #[serde(default)]
    pub warnings: Option<Vec<String>>,
}

impl Answer for AdmissionAnswer {
    fn check(&self) -> Result<(), AnswerError> {
        if self.object.is_some() && self.patch.is_some() {
            return Err(AnswerError::Admission(
                "both object and patch: answer one of them".to_owned(),
            ));
        }
        if let Some(code) = self.code
            && !(400..=599).contains(&code)
        {
            return Err(AnswerError::Admission(format!(
                "code {code} is not an HTTP error status (400 to 599)"
            )));
        }
        Ok(())
    }
}

/// The default status of a denial: 403 Forbidden, as controller-runtime's
/// `pkg/webhook/admission/response.go` `Denied`.
const DENIED_CODE: u16 = 403;
/// The status of a refusal by `failurePolicy: Fail`: 500, as controller-runtime's `Errored`
/// with an internal error.
const FAILED_CODE: u16 = 500;

/// The `operation` label of a review refused unread.
pub const UNREAD_OPERATION: &str = "UNKNOWN";

/// An admission review the manager answered, and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The `AdmissionReview` to send back.
    pub review: Value,
    /// Its fate.
    pub fate: AdmissionFate,
}

/// Why a body is not an admission review the manager can answer (an HTTP 400, no fate: no
/// decision was asked for).
#[derive(Debug, thiserror::Error)]
#[error("not an AdmissionReview with a request: {0}")]
pub struct BadReview(String);

/// One admission hook of one `Controller`, ready to decide.
pub struct Admitter {
    controller: ControllerKey,
    hook: AdmissionHook,
    caller: Caller,
    metrics: Option<HookMetrics>,
}

impl fmt::Debug for Admitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admitter")
            .field("controller", &self.controller)
            .field("hook", &self.hook.name)
            .finish_non_exhaustive()
    }
}

impl Admitter {
    /// The admission hook `hook` of `controller`, called under `policy` (a webhook's client
    /// certificate read from the `Controller`'s namespace through `client`), its decisions
    /// counted in `metrics`. A persistent exec hook keeps one process.
    #[must_use]
    pub fn new(
        controller: ControllerKey,
        hook: AdmissionHook,
        policy: Arc<Policy>,
        client: Option<&kube::Client>,
        metrics: Option<HookMetrics>,
    ) -> Self {
        let secrets = client.map(|c| kube::Api::namespaced(c.clone(), &controller.namespace));
        let name = format!("{controller}/{}", hook.name);
        let caller = Caller::with_processes(hook.hook.clone(), policy, secrets, 1, name);
        Self {
            controller,
            hook,
            caller,
            metrics,
        }
    }

    /// Stops the processes of a persistent exec hook, if any.
    pub async fn stop(&self) {
        self.caller.stop().await;
    }

    /// The hook's label in metrics and traces: `<namespace>/<controller>/<hook>`.
    #[must_use]
    pub fn label(&self) -> String {
        format!("{}/{}", self.controller, self.hook.name)
    }

    /// Counts a review the endpoint refused before it was read: its fate, under operation
    /// `UNKNOWN` (the review was not read), and a warning in the log.
    pub fn refused(&self, refusal: crate::serving::Refusal) {
        let fate = match refusal {
            crate::serving::Refusal::TooLarge => AdmissionFate::TooLarge,
            crate::serving::Refusal::Busy => AdmissionFate::Busy,
        };
        tracing::warn!(hook = %self.label(), %fate, "admission review refused unread; the API server's failure policy decides");
        if let Some(metrics) = &self.metrics {
            metrics.admission(&self.label(), UNREAD_OPERATION, fate);
        }
    }

    /// Answers the `AdmissionReview` `body`.
    ///
    /// # Errors
    /// [`BadReview`] when `body` is not an `AdmissionReview` with a request.
    pub async fn decide(&self, body: &[u8]) -> Result<Decision, BadReview> {
        let raw: Value = serde_json::from_slice(body).map_err(|e| BadReview(e.to_string()))?;
        // Read from the value by reference: the request is not copied.
        let review = AdmissionReview::<DynamicObject>::deserialize(&raw)
            .map_err(|e| BadReview(e.to_string()))?;
        let request: AdmissionRequest<DynamicObject> =
            review.try_into().map_err(|e| BadReview(format!("{e}")))?;
        let operation = serde_json::to_value(&request.operation)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let label = self.label();
        let span = tracing::info_span!(
            "admission",
            hook = %label,
            operation = %operation,
            k8s.namespace = request.namespace.as_deref().unwrap_or(""),
            object.name = %request.name,
            fate = field::Empty,
            allowed = field::Empty,
            message = field::Empty,
        );
        let call = AdmissionCall {
            api_version: API_VERSION,
            controller: ControllerRef {
                namespace: self.controller.namespace.clone(),
                name: self.controller.name.clone(),
            },
            admission: AdmissionName {
                name: &self.hook.name,
                type_: self.hook.type_.as_str(),
            },
            request: &raw["request"],
        };
        let answer = tokio::time::timeout(self.hook.deadline(), self.caller.call_as(&call))
            .instrument(span.clone())
            .await;
        let (response, fate, message) =
            span.in_scope(|| self.respond(&request.uid, &raw["request"]["object"], answer));
        span.record("fate", fate.as_str());
        span.record("allowed", response["allowed"].as_bool().unwrap_or(false));
        span.record("message", message.as_str());
        if let Some(metrics) = &self.metrics {
            metrics.admission(&label, &operation, fate);
        }
        let api_version = raw["apiVersion"]
            .as_str()
            .unwrap_or("admission.k8s.io/v1")
            .to_owned();
        Ok(Decision {
            review: json!({
                "apiVersion": api_version,
                "kind": "AdmissionReview",
                "response": response,
            }),
            fate,
        })
    }

    /// The review's `response` for the hook's `answer` (or its failure), its fate and the
    /// message traced.
    fn respond(
        &self,
        uid: &str,
        original: &Value,
        answer: Result<Result<AdmissionAnswer, CallError>, tokio::time::error::Elapsed>,
    ) -> (Value, AdmissionFate, String) {
        let failed = |fate: AdmissionFate, reason: String| self.failed(uid, fate, &reason);
        let answer = match answer {
            Err(_) | Ok(Err(CallError::Timeout(_))) => {
                return failed(
                    AdmissionFate::TimedOut,
                    format!(
                        "no answer within {:?} (timeoutSeconds {} less half a second)",
                        self.hook.deadline(),
                        self.hook.timeout.as_secs()
                    ),
                );
            }
            Ok(Err(
                e @ (CallError::Malformed { .. }
                | CallError::Invalid(_)
                | CallError::Envelope { .. }),
            )) => {
                return failed(AdmissionFate::InvalidAnswer, e.to_string());
            }
            Ok(Err(e)) => {
                let fate = match self.hook.failure_policy {
                    FailurePolicy::Fail => AdmissionFate::FailedClosed,
                    FailurePolicy::Ignore => AdmissionFate::FailedOpen,
                };
                return failed(fate, crate::telemetry::error_chain(&e));
            }
            Ok(Ok(answer)) => answer,
        };
        let changes = answer.object.is_some() || answer.patch.is_some();
        if changes && self.hook.type_ == AdmissionType::Validating {
            return failed(
                AdmissionFate::InvalidAnswer,
                "a Validating hook answered object or patch: it can not change the object; \
                 make it Mutating"
                    .to_owned(),
            );
        }
        let message = answer.message.clone().unwrap_or_default();
        let mut response = json!({"uid": uid, "allowed": answer.allowed});
        if let Some(warnings) = &answer.warnings {
            response["warnings"] = json!(warnings);
        }
        if !answer.allowed {
            response["status"] = json!({
                "code": answer.code.unwrap_or(DENIED_CODE),
                "message": message,
            });
            return (response, AdmissionFate::Denied, message);
        }
        let patch = match patch_of(original, &answer) {
            Ok(patch) => patch,
            Err(reason) => return failed(AdmissionFate::InvalidAnswer, reason),
        };
        if patch.0.is_empty() {
            return (response, AdmissionFate::Allowed, message);
        }
        match serde_json::to_vec(&patch) {
            Ok(bytes) => {
                response["patchType"] = json!("JSONPatch");
                response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
                (response, AdmissionFate::Patched, message)
            }
            Err(e) => failed(AdmissionFate::InvalidAnswer, e.to_string()),
        }
    }

    /// The response when the hook did not decide: the failure policy's answer, the reason in
    /// the status (refused) or in a warning (let in).
    fn failed(
        &self,
        uid: &str,
        fate: AdmissionFate,
        reason: &str,
    ) -> (Value, AdmissionFate, String) {
        let message = format!(
            "informant admission hook {} ({fate}): {reason}",
            self.label()
        );
        let response = match self.hook.failure_policy {
            FailurePolicy::Fail => json!({
                "uid": uid,
                "allowed": false,
                "status": {"code": FAILED_CODE, "message": message},
            }),
            FailurePolicy::Ignore => json!({
                "uid": uid,
                "allowed": true,
                "warnings": [format!("{message}; let in by failurePolicy Ignore")],
            }),
        };
        tracing::warn!(hook = %self.label(), %fate, %reason, "admission hook did not decide");
        (response, fate, message)
    }
}

/// The JSON patch of a mutating hook's answer on `original`: computed from its `object`, or
/// its own `patch` checked to apply.
fn patch_of(original: &Value, answer: &AdmissionAnswer) -> Result<json_patch::Patch, String> {
    if let Some(object) = &answer.object {
        if original.is_null() {
            return Err("object answered for a request without one (DELETE)".to_owned());
        }
        return Ok(json_patch::diff(original, object));
    }
    let Some(patch) = &answer.patch else {
        return Ok(json_patch::Patch(Vec::new()));
    };
    let patch: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| format!("patch is not a JSON patch (RFC 6902): {e}"))?;
    let mut patched = original.clone();
    json_patch::patch(&mut patched, &patch)
        .map_err(|e| format!("patch does not apply to the object: {e}"))?;
    Ok(patch)
}

mod owned;
mod refused;
mod served;

pub use owned::{OwnedConfigurations, OwnedPass};
pub use refused::report as report_registered;
pub use served::{AdmissionRoutes, ServedHook, admission_path};

#[cfg(test)]
mod tests;
