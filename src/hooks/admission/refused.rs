//! The admission hooks as registered, for their `Controller`'s status: where each is called
//! and, when the API server refused its webhook (422), why; the entries a refusal names.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::served::ServedHook;
use crate::hooks::resource::{AdmissionHookStatus, ControllerKey};

/// The status of `hook` registered as `webhook`: its effective namespaces, and whether they
/// were narrowed from what it declared.
pub(super) fn registered(hook: &ServedHook, webhook: &Value) -> AdmissionHookStatus {
    let effective: Option<LabelSelector> =
        serde_json::from_value(webhook["namespaceSelector"].clone()).ok();
    let declared = hook.hook.namespace_selector.as_ref();
    let narrowed = effective.as_ref() != declared
        && effective
            .as_ref()
            .is_some_and(|e| e != &LabelSelector::default());
    AdmissionHookStatus {
        name: hook.hook.name.clone(),
        registered: true,
        message: narrowed.then(|| {
            if declared.is_some() {
                "its namespaceSelector is narrowed to the Controller's cache scope (both must \
                 select a namespace)"
                    .to_owned()
            } else {
                "called in the Controller's cache scope (it declares no namespaceSelector)"
                    .to_owned()
            }
        }),
        namespace_selector: effective,
    }
}

/// How many times a configuration is written again without the entries the API server
/// refused: it names every bad entry at once, so the second write is the last but for an
/// entry only a write without its neighbours shows bad.
pub(super) const REFUSAL_ROUNDS: usize = 4;

/// Why a write of a configuration failed: refused as invalid (422, with the API server's
/// message), or anything else.
pub(super) enum Failure {
    /// 422: `text` says what was written, `message` is the API server's.
    Refused {
        /// What failed, for the log.
        text: String,
        /// The API server's message.
        message: String,
    },
    /// Anything else, for the log.
    Other(String),
}

impl Failure {
    /// The failure `e` of a write, said by `text`.
    pub(super) fn of(text: String, e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) if status.code == 422 => Self::Refused {
                text,
                message: status.message,
            },
            _ => Self::Other(text),
        }
    }
}

/// The entries a 422's message names (`webhooks[N]…`, `N` below `count`), each with the
/// message's part about it, by index.
pub(super) fn refused_entries(message: &str, count: usize) -> BTreeMap<usize, String> {
    const FIELD: &str = "webhooks[";
    let starts: Vec<usize> = message.match_indices(FIELD).map(|(at, _)| at).collect();
    let mut entries: BTreeMap<usize, String> = BTreeMap::new();
    for (n, &start) in starts.iter().enumerate() {
        let rest = &message[start + FIELD.len()..];
        let Some(index) = rest
            .split(']')
            .next()
            .and_then(|digits| digits.parse::<usize>().ok())
            .filter(|&i| i < count)
        else {
            continue;
        };
        let end = starts.get(n + 1).copied().unwrap_or(message.len());
        let part = message[start..end]
            .trim_end()
            .trim_end_matches(',')
            .trim_end_matches(']');
        let why = entries.entry(index).or_default();
        if !why.is_empty() {
            why.push_str("; ");
        }
        why.push_str(part);
    }
    entries
}

/// The hooks of the webhooks `refused` (by webhook name, through `by_webhook`).
pub(super) fn refused_hooks(
    refused: Vec<(String, String)>,
    by_webhook: &HashMap<String, (ControllerKey, String)>,
) -> Vec<(ControllerKey, String, String)> {
    refused
        .into_iter()
        .filter_map(|(webhook, why)| {
            let (controller, hook) = by_webhook.get(&webhook)?.clone();
            Some((controller, hook, why))
        })
        .collect()
}

/// The field manager of `status.admission`: its own, so that the supervisor's apply of the
/// rest of the status (another manager) leaves it alone.
const STATUS_FIELD_MANAGER: &str = "informant-admission";

/// Logs every hook of `pass` the API server refused and, when `write` (the `Controller`s are
/// resources), writes each `Controller`'s `status.admission` that differs from `written`.
pub async fn report(
    client: &kube::Client,
    pass: &super::OwnedPass,
    write: bool,
    written: &mut BTreeMap<ControllerKey, Vec<AdmissionHookStatus>>,
) {
    for (controller, hook, why) in &pass.refused {
        tracing::warn!(%controller, hook = %hook, %why, "the API server refused the webhook of an admission hook: left out, the others registered");
    }
    if !write {
        return;
    }
    written.retain(|key, _| pass.statuses.contains_key(key));
    for (key, statuses) in &pass.statuses {
        if written.get(key) == Some(statuses) {
            continue;
        }
        let api: kube::Api<kube::core::DynamicObject> = kube::Api::namespaced_with(
            client.clone(),
            &key.namespace,
            &kube::core::ApiResource::erase::<crate::hooks::resource::Controller>(&()),
        );
        let body = serde_json::json!({
            "apiVersion": "informant.dev/v1alpha1",
            "kind": "Controller",
            "status": {"admission": statuses},
        });
        let params = kube::api::PatchParams::apply(STATUS_FIELD_MANAGER).force();
        match api
            .patch_status(&key.name, &params, &kube::api::Patch::Apply(&body))
            .await
        {
            Ok(_) => {
                written.insert(key.clone(), statuses.clone());
            }
            Err(e) => {
                tracing::warn!(controller = %key, error = %crate::telemetry::error_chain(&e), "cannot write the admission hooks' status");
            }
        }
    }
}

#[cfg(test)]
mod tests;
