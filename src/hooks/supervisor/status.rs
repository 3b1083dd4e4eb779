//! What a [`Supervisor`](super::Supervisor) tells about its controllers: each `Controller`
//! resource's status (`Valid` and `Ready` conditions, counts, last error), written when it
//! differs from the last one written, and the manager's readiness of each hook controller.

use std::collections::{HashMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::core::DynamicObject;

use super::super::resource::{
    CONTROLLER_CONDITION_READY, CONTROLLER_CONDITION_VALID, Controller, ControllerError,
    ControllerKey, ControllerStatus, ValidatedController,
};
use super::kept::{Kept, REASON_WAITING_FOR_KIND, WAITING_MESSAGE, Waiting, Wants};
use super::{Desired, Running};
use crate::controller::Context;
use crate::manager::{ControllerReadiness, State};

/// Tells `state` which controllers run and which wait for their kinds (as `hook
/// namespace/name`), and that those it was told of before and that are neither are gone.
pub(super) fn report(
    state: &State,
    desired: &Desired,
    running: &HashMap<ControllerKey, Running>,
    waiting: &Waiting,
    reported: &mut HashSet<String>,
) {
    let mut now = HashSet::new();
    for name in desired.keys() {
        let readiness = match (waiting.get(name), running.get(name)) {
            (Some(kept), _) if kept.reason == REASON_WAITING_FOR_KIND => {
                ControllerReadiness::WaitingForKind {
                    reason: kept
                        .message
                        .strip_prefix(WAITING_MESSAGE)
                        .unwrap_or(&kept.message)
                        .to_owned(),
                }
            }
            // Refused by the sharding or the hook policy.
            (Some(kept), _) => ControllerReadiness::KeptBack {
                reason: kept.reason.to_owned(),
                message: kept.message.clone(),
            },
            (None, Some(r)) if r.stats.ready() => ControllerReadiness::Running,
            _ => continue,
        };
        let label = format!("hook {name}");
        state.controller(&label, Some(readiness));
        now.insert(label);
    }
    for gone in reported.difference(&now) {
        state.controller(gone, None);
    }
    *reported = now;
}

/// The status of the `Controller` `name`: validity from `wanted`, the rest from what runs.
fn status_of(
    wanted: &Result<ValidatedController, ControllerError>,
    running: Option<&Running>,
    waiting: Option<&Kept>,
    previous: Option<&ControllerStatus>,
) -> ControllerStatus {
    let now = Time(jiff::Timestamp::now());
    let condition = |type_: &str, ok: bool, reason: &str, message: String| {
        let transition = previous
            .and_then(|p| p.conditions.iter().find(|c| c.type_ == type_))
            .filter(|c| (c.status == "True") == ok)
            .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
        Condition {
            type_: type_.to_owned(),
            status: if ok { "True" } else { "False" }.to_owned(),
            reason: reason.to_owned(),
            message,
            last_transition_time: transition,
            observed_generation: None,
        }
    };
    let (valid, generation) = match wanted {
        Ok(v) => (
            condition(CONTROLLER_CONDITION_VALID, true, "Valid", String::new()),
            v.resource.metadata.generation,
        ),
        Err(e) => (
            condition(
                CONTROLLER_CONDITION_VALID,
                false,
                "Invalid",
                e.errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            running.and_then(|r| r.generation),
        ),
    };
    let ready = running.is_some_and(|r| r.stats.ready());
    let ready = match waiting {
        Some(kept) => condition(
            CONTROLLER_CONDITION_READY,
            false,
            kept.reason,
            kept.message.clone(),
        ),
        None => condition(
            CONTROLLER_CONDITION_READY,
            ready,
            if ready { "Running" } else { "NotRunning" },
            String::new(),
        ),
    };
    ControllerStatus {
        observed_generation: generation,
        conditions: vec![valid, ready],
        reconciles: running.map(|r| i64::try_from(r.stats.reconciles()).unwrap_or(i64::MAX)),
        failures: running.map(|r| i64::try_from(r.stats.failures()).unwrap_or(i64::MAX)),
        last_error: running.and_then(|r| r.stats.last_error()),
        next_schedule_time: running
            .and_then(|r| r.stats.next_tick())
            .map(|t| t.to_string()),
        // Written by the leader's webhook configurations' keeper, under its own field manager.
        admission: Vec::new(),
    }
}

/// Writes every `Controller`'s status that differs from the last one written.
pub(super) async fn write_statuses(
    ctx: &Context,
    desired: &Desired,
    running: &HashMap<ControllerKey, Running>,
    waiting: &Waiting,
    wants: &Wants,
    written: &mut HashMap<ControllerKey, ControllerStatus>,
) {
    written.retain(|name, _| desired.contains_key(name));
    for (name, wanted) in desired {
        if wants.get(name).is_some_and(|w| !w.settled()) {
            // Its kinds are being looked up: the next pass knows whether it runs or waits.
            continue;
        }
        let status = status_of(
            wanted,
            running.get(name),
            waiting.get(name),
            written.get(name),
        );
        if written.get(name) == Some(&status) {
            continue;
        }
        let (namespace, short) = (name.namespace.as_str(), name.name.as_str());
        let api: Api<DynamicObject> = Api::namespaced_with(
            ctx.client().clone(),
            namespace,
            &kube::core::ApiResource::erase::<Controller>(&()),
        );
        let body = serde_json::json!({
            "apiVersion": "informant.dev/v1alpha1",
            "kind": "Controller",
            "status": status,
        });
        let params = PatchParams::apply(crate::manager::FIELD_MANAGER).force();
        match api.patch_status(short, &params, &Patch::Apply(&body)).await {
            Ok(_) => {
                written.insert(name.clone(), status);
            }
            Err(e) => {
                tracing::warn!(controller = %name, error = %crate::telemetry::error_chain(&e), "cannot write the controller's status");
            }
        }
    }
}
