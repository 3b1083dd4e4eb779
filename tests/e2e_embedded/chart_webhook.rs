//! The steps of [`crate::chart::Case::Webhook`]'s run ([`crate::chart_rbac`]): what the
//! manager serving admission hooks with managed certificates must have done, each asked of the
//! API server as the administrator, so that a permission taken away shows as a step that does
//! not happen (and the server's refusal of the manager's request).

use std::time::Duration;

use informant::hooks::Controller;
use informant::serving::managed::RESYNC_INTERVAL;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::chart::{DENIAL, INJECTED_CRD, NAMESPACE, SHOP, WEBHOOK_SERVICE};

/// How long the leader may take to replace a garbled Secret: it looks at the Secret at each
/// resync (a minute), not when it changes.
pub const RESYNC_WAIT: Duration = RESYNC_INTERVAL.saturating_add(Duration::from_secs(15));

/// The managed certificates' Secret the chart names (`--webhook-cert-secret`).
fn secret_name() -> String {
    format!("{WEBHOOK_SERVICE}-cert")
}

/// The bundles of the two configurations the manager owns, webhook by webhook; `None` while
/// either is missing.
async fn bundles(admin: &Client) -> Option<(Vec<Option<ByteString>>, Vec<Option<i32>>)> {
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
    let validating = validating.get_opt(WEBHOOK_SERVICE).await.ok()??;
    let mutating = mutating.get_opt(WEBHOOK_SERVICE).await.ok()??;
    let mut bundles = Vec::new();
    let mut timeouts = Vec::new();
    for webhook in validating.webhooks.unwrap_or_default() {
        bundles.push(webhook.client_config.ca_bundle);
        timeouts.push(webhook.timeout_seconds);
    }
    for webhook in mutating.webhooks.unwrap_or_default() {
        bundles.push(webhook.client_config.ca_bundle);
        timeouts.push(webhook.timeout_seconds);
    }
    Some((bundles, timeouts))
}

/// Whether the certificates' Secret exists and both configurations hold webhooks, each with
/// the bundle.
pub async fn certificates_and_configurations(admin: &Client) -> bool {
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    let secret = secrets.get_opt(&secret_name()).await.ok().flatten();
    let Some((bundles, _)) = bundles(admin).await else {
        return false;
    };
    secret.is_some()
        && bundles.len() >= 2
        && bundles
            .iter()
            .all(|b| b.as_ref().is_some_and(|b| !b.0.is_empty()))
}

/// Whether a Secret labelled `deny: "true"` is refused with the validating hook's message (one
/// let in while the hook was not called yet is deleted, for the next try).
pub async fn denied(admin: &Client) -> bool {
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), SHOP);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "denied", "labels": {"deny": "true"}},
    }))
    .unwrap();
    if let Err(error) = secrets.create(&PostParams::default(), &secret).await {
        return error.to_string().contains(DENIAL);
    }
    let _ = secrets.delete("denied", &DeleteParams::default()).await;
    false
}

/// Whether a Secret created in the hooks' scope gets the mutating hook's label (one stored
/// without it is deleted, for the next try).
pub async fn defaulted(admin: &Client) -> bool {
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), SHOP);
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "defaulted"}})).unwrap();
    let Ok(stored) = secrets.create(&PostParams::default(), &secret).await else {
        return false;
    };
    let labelled = stored
        .metadata
        .labels
        .is_some_and(|l| l.get("defaulted").map(String::as_str) == Some("true"));
    let _ = secrets.delete("defaulted", &DeleteParams::default()).await;
    labelled
}

/// Whether the injected CRD's conversion webhook holds a bundle.
pub async fn crd_injected(admin: &Client) -> bool {
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let Ok(crd) = crds.get(INJECTED_CRD).await else {
        return false;
    };
    crd.spec
        .conversion
        .and_then(|c| c.webhook)
        .and_then(|w| w.client_config)
        .and_then(|c| c.ca_bundle)
        .is_some_and(|b| !b.0.is_empty())
}

/// Changes both admission hooks' `timeoutSeconds` to 5.
pub async fn change_hooks(admin: &Client) {
    let controllers: Api<Controller> = Api::namespaced(admin.clone(), NAMESPACE);
    let admission = json!([
        {"name": "deny-labelled", "type": "Validating", "timeoutSeconds": 5},
        {"name": "default-label", "type": "Mutating", "timeoutSeconds": 5},
    ]);
    controllers
        .patch(
            "parents",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"admission": admission}})),
        )
        .await
        .unwrap();
}

/// Whether both configurations carry the changed timeout.
pub async fn hooks_changed(admin: &Client) -> bool {
    bundles(admin)
        .await
        .is_some_and(|(_, timeouts)| timeouts.len() >= 2 && timeouts.iter().all(|t| *t == Some(5)))
}

/// Whether both configurations are gone.
pub async fn configurations_gone(admin: &Client) -> bool {
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
    matches!(validating.get_opt(WEBHOOK_SERVICE).await, Ok(None))
        && matches!(mutating.get_opt(WEBHOOK_SERVICE).await, Ok(None))
}

/// Overwrites the certificates' Secret with a serving certificate that does not parse.
pub async fn garble_secret(admin: &Client) {
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    let garbage = ByteString(b"not a certificate".to_vec());
    secrets
        .patch(
            &secret_name(),
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"tls.crt": garbage}})),
        )
        .await
        .unwrap();
}

/// Whether the certificates' Secret holds a PEM serving certificate again.
pub async fn secret_replaced(admin: &Client) -> bool {
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    let Ok(secret) = secrets.get(&secret_name()).await else {
        return false;
    };
    secret
        .data
        .and_then(|d| d.get("tls.crt").cloned())
        .is_some_and(|c| c.0.starts_with(b"-----BEGIN CERTIFICATE-----"))
}
