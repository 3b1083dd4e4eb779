//! Conversions: a `ConversionReview` (apiextensions.k8s.io/v1) from the API server, the
//! `Controller`'s conversion hook called for each step (through the same [`Caller`] as
//! reconciles: exec, persistent exec or webhook, under the hook policy), the converted objects
//! checked as kube-apiserver checks them, and the review's answer, every review ending in one
//! named fate ([`ConversionFate`]), counted (`informant_conversion_total{hook,fate}`) and
//! traced (one `conversion` span each).
//!
//! ```text
//! ConversionReview ─▶ ConversionCall {controller, conversion: {from, to}, objects} ─▶ hook
//!   (one call per step, for every object at that step: a list is not N calls)
//!                     ◀─ ConversionAnswer {objects} | {failed: {namespace, name, message}}
//! converted                        (every object converted and checked)
//! failed, invalid_answer, timed_out (the review fails, naming the object and why)
//! ```
//!
//! Hub-and-spoke (`hub` set): informant takes a spoke to another spoke through the hub, in
//! two calls (controller-runtime's `NewHubSpokeConverter` does the same in Go); pairwise: one
//! call from any listed version to any other.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tracing::{Instrument as _, field};

use super::call::{CallError, Caller};
use super::contract::{API_VERSION, Answer, AnswerError, ControllerRef};
use super::metrics::HookMetrics;
use super::policy::Policy;
use super::resource::{ControllerKey, ConversionHook};

/// How long a review may take before the manager answers it failed: kube-apiserver waits 30
/// seconds for a conversion webhook (apiextensions-apiserver's `webhookConverter`), so the
/// manager answers a second before, with a fate counted, rather than let the API server's own
/// timeout (which no one counts) decide.
pub const CONVERSION_DEADLINE: Duration = Duration::from_secs(29);

/// How one conversion review ended. Exactly one per review.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConversionFate {
    /// Every object was converted, and the answers passed the checks.
    Converted,
    /// The hook failed an object (its `failed` answer), or failed itself (exit status,
    /// refused connection), or the review asked for a version the hook does not convert.
    Failed,
    /// The hook's answer could not be used: not JSON, unknown fields, the wrong number of
    /// objects, an object at the wrong version or with its metadata changed.
    InvalidAnswer,
    /// The hook did not answer in time.
    TimedOut,
    /// The review was larger than the endpoint reads (`--webhook-max-conversion-bytes`): it
    /// was answered 413 unread.
    TooLarge,
    /// The hook was making as many answers as it may at once (`--webhook-max-in-flight`):
    /// the review was answered 429 unread.
    Busy,
}

impl ConversionFate {
    /// Every fate.
    pub const ALL: [ConversionFate; 6] = [
        ConversionFate::Converted,
        ConversionFate::Failed,
        ConversionFate::InvalidAnswer,
        ConversionFate::TimedOut,
        ConversionFate::TooLarge,
        ConversionFate::Busy,
    ];

    /// The fate's label: `converted`, `failed`, `invalid_answer`, `timed_out`, `too_large`
    /// or `busy`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ConversionFate::Converted => "converted",
            ConversionFate::Failed => "failed",
            ConversionFate::InvalidAnswer => "invalid_answer",
            ConversionFate::TimedOut => "timed_out",
            ConversionFate::TooLarge => "too_large",
            ConversionFate::Busy => "busy",
        }
    }
}

impl fmt::Display for ConversionFate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the manager sends a conversion hook for one step.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ConversionCall<'a> {
    /// Always [`API_VERSION`].
    pub api_version: &'static str,
    /// The `Controller` the hook belongs to.
    pub controller: ControllerRef,
    /// The step: from which `apiVersion` to which.
    pub conversion: ConversionStep<'a>,
    /// The objects to convert, all at `conversion.from`.
    pub objects: &'a [Value],
}

/// One step of a conversion, as full `apiVersion`s (`<group>/<version>`).
#[derive(Serialize, Debug)]
pub struct ConversionStep<'a> {
    /// The objects' `apiVersion` now.
    pub from: &'a str,
    /// The `apiVersion` to convert them to.
    pub to: &'a str,
}

/// What a conversion hook answers: exactly one of `objects` or `failed`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConversionAnswer {
    /// The objects converted, in the order sent, each at `conversion.to`.
    #[serde(default)]
    pub objects: Option<Vec<Value>>,
    /// The object the hook cannot convert, and why: the whole review fails.
    #[serde(default)]
    pub failed: Option<ConversionFailure>,
}

/// An object a conversion hook cannot convert.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConversionFailure {
    /// Its namespace (none for a cluster-scoped object).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Why.
    pub message: String,
}

impl Answer for ConversionAnswer {
    fn check(&self) -> Result<(), AnswerError> {
        // What is wrong with an answer is checked against the objects sent
        // (`Converter::step`), where it can name them.
        Ok(())
    }
}

/// A conversion review the manager answered, and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversion {
    /// The `ConversionReview` to send back.
    pub review: Value,
    /// Its fate.
    pub fate: ConversionFate,
}

/// Why a body is not a conversion review the manager can answer (an HTTP 400, no fate: no
/// conversion was asked for).
#[derive(Debug, thiserror::Error)]
#[error("not a ConversionReview with a request: {0}")]
pub struct BadConversionReview(String);

/// The conversion hook of one `Controller`, ready to convert the objects of its `for` kind.
pub struct Converter {
    controller: ControllerKey,
    group: String,
    hook: ConversionHook,
    caller: Caller,
    metrics: Option<HookMetrics>,
}

impl fmt::Debug for Converter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Converter")
            .field("controller", &self.controller)
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

/// Why a review ended without converting: its fate and the message for the API server.
type Failure = (ConversionFate, String);

impl Converter {
    /// The conversion hook `hook` of `controller`, converting objects of `group`, called under
    /// `policy` (a webhook's client certificate read from the `Controller`'s namespace through
    /// `client`), its reviews counted in `metrics`. A persistent exec hook keeps one process.
    #[must_use]
    pub fn new(
        controller: ControllerKey,
        group: &str,
        hook: ConversionHook,
        policy: Arc<Policy>,
        client: Option<&kube::Client>,
        metrics: Option<HookMetrics>,
    ) -> Self {
        let secrets = client.map(|c| kube::Api::namespaced(c.clone(), &controller.namespace));
        let caller = Caller::with_processes(
            hook.hook.clone(),
            policy,
            secrets,
            1,
            format!("{controller}/conversion"),
        );
        Self {
            controller,
            group: group.to_owned(),
            hook,
            caller,
            metrics,
        }
    }

    /// Stops the processes of a persistent exec hook, if any.
    pub async fn stop(&self) {
        self.caller.stop().await;
    }

    /// The hook's label in metrics and traces: `<namespace>/<controller>`.
    #[must_use]
    pub fn label(&self) -> String {
        self.controller.to_string()
    }

    /// Counts a review the endpoint refused before it was read: its fate, and a warning in
    /// the log.
    pub fn refused(&self, refusal: crate::serving::Refusal) {
        let fate = match refusal {
            crate::serving::Refusal::TooLarge => ConversionFate::TooLarge,
            crate::serving::Refusal::Busy => ConversionFate::Busy,
        };
        tracing::warn!(hook = %self.label(), %fate, "conversion review refused unread");
        if let Some(metrics) = &self.metrics {
            metrics.conversion(&self.label(), fate);
        }
    }

    /// Answers the `ConversionReview` `body`.
    ///
    /// # Errors
    /// [`BadConversionReview`] when `body` is not a `ConversionReview` with a request (a
    /// `uid`, a `desiredAPIVersion` and a list of `objects`).
    pub async fn convert(&self, body: &[u8]) -> Result<Conversion, BadConversionReview> {
        let raw: Value =
            serde_json::from_slice(body).map_err(|e| BadConversionReview(e.to_string()))?;
        let request = &raw["request"];
        let (Some(uid), Some(desired), Some(objects)) = (
            request["uid"].as_str(),
            request["desiredAPIVersion"].as_str(),
            request["objects"].as_array(),
        ) else {
            return Err(BadConversionReview(
                "request.uid, request.desiredAPIVersion and request.objects are required"
                    .to_owned(),
            ));
        };
        let label = self.label();
        let span = tracing::info_span!(
            "conversion",
            hook = %label,
            to = %desired,
            objects = objects.len(),
            fate = field::Empty,
            message = field::Empty,
        );
        let outcome = tokio::time::timeout(CONVERSION_DEADLINE, self.convert_all(objects, desired))
            .instrument(span.clone())
            .await
            .unwrap_or_else(|_| {
                Err((
                    ConversionFate::TimedOut,
                    format!("no answer within {}s", CONVERSION_DEADLINE.as_secs()),
                ))
            });
        let (response, fate, message) = match outcome {
            Ok(converted) => (
                json!({"uid": uid, "convertedObjects": converted, "result": {"status": "Success"}}),
                ConversionFate::Converted,
                String::new(),
            ),
            Err((fate, reason)) => {
                let message = match fate {
                    // The hook's own words, naming the object.
                    ConversionFate::Failed => reason,
                    _ => format!("informant conversion hook {label} ({fate}): {reason}"),
                };
                span.in_scope(|| {
                    tracing::warn!(hook = %label, %fate, %message, "conversion failed");
                });
                (
                    json!({"uid": uid, "result": {"status": "Failure", "message": message}}),
                    fate,
                    message,
                )
            }
        };
        span.record("fate", fate.as_str());
        span.record("message", message.as_str());
        if let Some(metrics) = &self.metrics {
            metrics.conversion(&label, fate);
        }
        let api_version = raw["apiVersion"]
            .as_str()
            .unwrap_or("apiextensions.k8s.io/v1")
            .to_owned();
        Ok(Conversion {
            review: json!({
                "apiVersion": api_version,
                "kind": "ConversionReview",
                "response": response,
            }),
            fate,
        })
    }

    /// Every object at `desired`, in the order given: the objects of each version converted
    /// together, step by step.
    async fn convert_all(&self, objects: &[Value], desired: &str) -> Result<Vec<Value>, Failure> {
        let failed = |reason: String| (ConversionFate::Failed, reason);
        let to = self.version_of(desired).ok_or_else(|| {
            failed(format!(
                "cannot convert to {desired}: the hook converts {} between {}",
                self.group,
                self.hook.versions.join(", ")
            ))
        })?;
        // The objects of each version, by index, so a list is one call per step.
        let mut by_version: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, object) in objects.iter().enumerate() {
            let api_version = object["apiVersion"].as_str().unwrap_or_default();
            let Some(from) = self.version_of(api_version) else {
                return Err(failed(format!(
                    "cannot convert {}: apiVersion {api_version:?} is not one the hook converts \
                     ({} versions {})",
                    object_ref(object),
                    self.group,
                    self.hook.versions.join(", ")
                )));
            };
            by_version.entry(from).or_default().push(i);
        }
        let mut converted: Vec<Value> = objects.to_vec();
        for (from, indices) in by_version {
            let steps = self.hook.steps(from, to).unwrap_or_default();
            let mut batch: Vec<Value> = indices.iter().map(|&i| objects[i].clone()).collect();
            for (step_from, step_to) in steps {
                batch = self
                    .step(
                        &batch,
                        &format!("{}/{step_from}", self.group),
                        &format!("{}/{step_to}", self.group),
                    )
                    .await?;
            }
            for (i, object) in indices.into_iter().zip(batch) {
                converted[i] = object;
            }
        }
        Ok(converted)
    }

    /// The version of `api_version` when it is `<group>/<version>` of the hook's group and a
    /// version it converts.
    fn version_of<'a>(&self, api_version: &'a str) -> Option<&'a str> {
        let (group, version) = api_version.rsplit_once('/')?;
        (group == self.group && self.hook.versions.iter().any(|v| v == version)).then_some(version)
    }

    /// One call: `objects` (at `from`) converted to `to`, checked.
    async fn step(&self, objects: &[Value], from: &str, to: &str) -> Result<Vec<Value>, Failure> {
        let call = ConversionCall {
            api_version: API_VERSION,
            controller: ControllerRef {
                namespace: self.controller.namespace.clone(),
                name: self.controller.name.clone(),
            },
            conversion: ConversionStep { from, to },
            objects,
        };
        let answer: ConversionAnswer = match self.caller.call_as(&call).await {
            Ok(answer) => answer,
            Err(CallError::Timeout(after)) => {
                return Err((
                    ConversionFate::TimedOut,
                    format!(
                        "no answer within {}s converting {from} to {to}",
                        after.as_secs_f64()
                    ),
                ));
            }
            Err(
                e @ (CallError::Malformed { .. }
                | CallError::Invalid(_)
                | CallError::Envelope { .. }),
            ) => return Err((ConversionFate::InvalidAnswer, e.to_string())),
            Err(e) => {
                return Err((
                    ConversionFate::Failed,
                    format!(
                        "informant conversion hook {} failed converting {from} to {to}: {}",
                        self.label(),
                        crate::telemetry::error_chain(&e)
                    ),
                ));
            }
        };
        checked_answer(objects, answer, to)
    }
}

/// The objects of a hook's `answer` to the conversion of `sent` to `to`, checked as
/// kube-apiserver checks a converted list (`apiextensions-apiserver`'s webhook converter: as
/// many objects, each at the desired `apiVersion`, of the same kind, its metadata unchanged
/// but labels and annotations), or the fate and message of what is wrong, naming the object.
///
/// # Errors
/// [`ConversionFate::Failed`] for the hook's own `failed` answer (naming an object sent),
/// [`ConversionFate::InvalidAnswer`] for anything else wrong.
pub fn checked_answer(
    sent: &[Value],
    answer: ConversionAnswer,
    to: &str,
) -> Result<Vec<Value>, (ConversionFate, String)> {
    let invalid = |reason: String| (ConversionFate::InvalidAnswer, reason);
    let back = match (answer.objects, answer.failed) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "both objects and failed: answer one of them".to_owned(),
            ));
        }
        (None, None) => {
            return Err(invalid(
                "neither objects nor failed: answer the converted objects, or the object that \
                 cannot be converted"
                    .to_owned(),
            ));
        }
        (None, Some(failure)) => {
            let named = sent.iter().any(|o| {
                o["metadata"]["name"].as_str() == Some(failure.name.as_str())
                    && o["metadata"]["namespace"].as_str() == failure.namespace.as_deref()
            });
            let object = match &failure.namespace {
                Some(namespace) => format!("{namespace}/{}", failure.name),
                None => failure.name.clone(),
            };
            if !named {
                return Err(invalid(format!(
                    "failed names {object}, which is not one of the objects sent"
                )));
            }
            return Err((
                ConversionFate::Failed,
                format!("cannot convert {object}: {}", failure.message),
            ));
        }
        (Some(objects), None) => objects,
    };
    if back.len() != sent.len() {
        return Err(invalid(format!(
            "answered {} objects for the {} sent; answer each, in order",
            back.len(),
            sent.len()
        )));
    }
    for (sent, back) in sent.iter().zip(&back) {
        let object = object_ref(sent);
        if back["apiVersion"].as_str() != Some(to) {
            return Err(invalid(format!(
                "{object}: converted to apiVersion {}, not {to:?}",
                back["apiVersion"]
            )));
        }
        if back["kind"] != sent["kind"] {
            return Err(invalid(format!(
                "{object}: kind changed from {} to {}",
                sent["kind"], back["kind"]
            )));
        }
        if let Some(field) = changed_metadata(&sent["metadata"], &back["metadata"]) {
            return Err(invalid(format!(
                "{object}: metadata.{field} changed; a conversion may change only labels and \
                 annotations"
            )));
        }
    }
    Ok(back)
}

/// The first field of `metadata` other than labels and annotations that differs between
/// `sent` and `back`, if any.
fn changed_metadata(sent: &Value, back: &Value) -> Option<String> {
    let fields = |meta: &Value| -> BTreeMap<String, Value> {
        meta.as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| *k != "labels" && *k != "annotations")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let (sent, back) = (fields(sent), fields(back));
    sent.keys()
        .chain(back.keys())
        .find(|k| sent.get(*k) != back.get(*k))
        .cloned()
}

/// `namespace/name` of an object, or `name` for a cluster-scoped one.
fn object_ref(object: &Value) -> String {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match object["metadata"]["namespace"].as_str() {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

mod owned;
mod served;

pub use owned::{ConversionPass, OwnedCrds};
pub use served::{ConversionRoutes, ServedConversion, conversion_path};

#[cfg(test)]
mod tests;
