//! What the admission benches share (`#[path = "common/admission.rs"] mod admission;`): the
//! manager's side of an admission webhook built from its pieces (an [`Admitter`] behind a path
//! of a `WebhookRouter`, served by a `WebhookEndpoint` with the managed certificate), a tiny
//! HTTP webhook hook, and the webhook configurations registered on the embedded API server.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{MethodRouter, post};
use informant::hooks::{
    AdmissionFate, AdmissionHook, AdmissionType, Admitter, ControllerKey, FailurePolicy, Hook,
    HookMetrics, Policy,
};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The `Controller` the benches' admission hooks belong to.
pub const CONTROLLER: (&str, &str) = ("default", "bench");

/// An admission hook `name` of [`CONTROLLER`] on CREATE and UPDATE, `failurePolicy: Fail`,
/// `timeoutSeconds: 10`, calling `hook`.
pub fn admission_hook(name: &str, type_: AdmissionType, hook: Hook) -> AdmissionHook {
    AdmissionHook {
        name: name.to_owned(),
        type_,
        operations: vec!["CREATE".to_owned(), "UPDATE".to_owned()],
        hook,
        failure_policy: FailurePolicy::Fail,
        timeout: Duration::from_secs(10),
        namespace_selector: None,
        object_selector: None,
        match_conditions: Vec::new(),
    }
}

/// The manager's decision for `hook`, counted in `metrics`.
pub fn admitter(hook: AdmissionHook, metrics: &HookMetrics) -> Arc<Admitter> {
    Arc::new(Admitter::new(
        ControllerKey::new(CONTROLLER.0, CONTROLLER.1),
        hook,
        // Its webhook hooks listen on loopback, refused unless named (issue 45).
        Arc::new(Policy::open().allow_url("127.0.0.1".parse().expect("an address"))),
        None,
        Some(metrics.clone()),
    ))
}

/// The handler of an admission path: the review to `admitter`, its answer back (400 for a body
/// that is not a review); every request seen is counted in `seen`.
pub fn route(admitter: Arc<Admitter>, seen: Arc<AtomicU64>) -> MethodRouter {
    post(move |body: Bytes| async move {
        seen.fetch_add(1, Ordering::Relaxed);
        match admitter.decide(&body).await {
            Ok(decision) => axum::Json(decision.review).into_response(),
            Err(bad) => (StatusCode::BAD_REQUEST, bad.to_string()).into_response(),
        }
    })
}

/// The requests of `operation` to `admitter`'s hook, by fate, and their sum.
pub fn fates(metrics: &HookMetrics, admitter: &Admitter, operation: &str) -> (String, u64) {
    let label = admitter.label();
    let mut total = 0;
    let mut parts = Vec::new();
    for fate in AdmissionFate::ALL {
        let n = metrics.admissions(&label, operation, fate);
        total += n;
        if n > 0 {
            parts.push(format!("{fate} {n}"));
        }
    }
    (parts.join(", "), total)
}

/// A webhook hook on loopback answering every admission call with `{"allowed": true}`, or on
/// `/mutate` with the object labelled `admitted: "yes"`; returns its base URL.
pub async fn webhook_hook(shutdown: CancellationToken) -> String {
    let app = axum::Router::new()
        .route("/validate", post(|| async { r#"{"allowed": true}"# }))
        .route(
            "/mutate",
            post(|body: Bytes| async move {
                let call: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let mut object = call["request"]["object"].clone();
                if let Some(metadata) = object["metadata"].as_object_mut() {
                    let labels = metadata.entry("labels").or_insert_with(|| json!({}));
                    labels["admitted"] = json!("yes");
                }
                axum::Json(json!({"allowed": true, "object": object}))
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("bound"));
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
    });
    url
}

/// A webhook of a configuration on `configmaps` CREATE, calling `path` of Service
/// `namespace/service` (port 443), `failurePolicy: Fail`, with no `caBundle` (the injector
/// writes it).
pub fn webhook(name: &str, (namespace, service): (&str, &str), path: &str) -> Value {
    json!({
        "name": name,
        "clientConfig": {"service": {"namespace": namespace, "name": service, "path": path}},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["configmaps"]}],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 10,
    })
}

/// Registers the `Validating` or `Mutating` configuration `name` with `webhooks`.
pub async fn register(client: &kube::Client, type_: AdmissionType, name: &str, webhooks: &[Value]) {
    let body = json!({"metadata": {"name": name}, "webhooks": webhooks});
    let pp = PostParams::default();
    match type_ {
        AdmissionType::Validating => {
            let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
            let config = serde_json::from_value(body).expect("a webhook configuration");
            api.create(&pp, &config).await.expect("registered");
        }
        AdmissionType::Mutating => {
            let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
            let config = serde_json::from_value(body).expect("a webhook configuration");
            api.create(&pp, &config).await.expect("registered");
        }
    }
}

/// Removes the configuration `name`.
#[allow(dead_code, reason = "the rotation bench keeps its configuration")]
pub async fn unregister(client: &kube::Client, type_: AdmissionType, name: &str) {
    let dp = DeleteParams::default();
    match type_ {
        AdmissionType::Validating => {
            let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
            api.delete(name, &dp).await.expect("unregistered");
        }
        AdmissionType::Mutating => {
            let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
            api.delete(name, &dp).await.expect("unregistered");
        }
    }
}
