//! `batch` ticks: at each tick, one call of the hook with every object of the controller in
//! the request's `objects` (shell-operator's `group`), unless the previous tick's call still
//! runs. Its answer may carry `events` only: there is no one object for a status or children.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use jiff::Timestamp;
use kube::core::DynamicObject;
use kube::runtime::reflector::Store;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::Ticker;
use crate::cache::Cache as _;
use crate::controller::Stub;
use crate::hooks::call::CallError;
use crate::hooks::contract::{self, BatchRequest, Response};
use crate::hooks::reconcile::ReconcileError;
use crate::hooks::shared::Shared;
use crate::recorder::{self, EventType};

type Call = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Calls the hook of `shared` once per tick of `ticker` with every object of `store`, until
/// `stop`; a call still running at `stop` finishes. A tick that finds the previous call still
/// running is skipped; both are counted in `informant_hook_schedule_ticks_total`.
pub(in crate::hooks) async fn run_batches(
    mut ticker: Ticker,
    shared: Arc<Shared>,
    store: Store<Stub<DynamicObject>>,
    stop: CancellationToken,
) {
    let name = shared.settings.key.to_string();
    let mut running: Option<Call> = None;
    loop {
        let call = async {
            match running.as_mut() {
                Some(call) => call.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stop.cancelled() => break,
            () = call => running = None,
            at = ticker.tick() => {
                let started = running.is_none();
                if let Some(m) = &shared.hook_metrics {
                    m.schedule_tick(&name, started);
                }
                if started {
                    running = Some(Box::pin(batch(at, Arc::clone(&shared), store.clone())));
                } else {
                    tracing::info!(controller = %name, tick = %at, "schedule tick skipped: the previous tick's call still runs");
                }
            }
        }
    }
    if let Some(call) = running {
        call.await;
    }
}

/// One batch call at the tick `at`, counted and, when it fails, recorded as a `HookFailed`
/// Warning Event on the `Controller`.
async fn batch(at: Timestamp, shared: Arc<Shared>, store: Store<Stub<DynamicObject>>) {
    let span = tracing::info_span!("schedule", controller = %shared.settings.key, tick = %at);
    let started = Instant::now();
    let result = call(at, &shared, &store).instrument(span.clone()).await;
    let _entered = span.enter();
    let elapsed = started.elapsed();
    let name = shared.settings.key.to_string();
    shared.stats.0.reconciles.fetch_add(1, Ordering::Relaxed);
    if let Some(m) = &shared.hook_metrics {
        let reason = result.as_ref().err().map_or("none", ReconcileError::reason);
        m.observe(&name, reason, elapsed);
    }
    if let Err(error) = result {
        shared.stats.0.failures.fetch_add(1, Ordering::Relaxed);
        let text = crate::hooks::controller::status_text(&crate::telemetry::error_chain(&error));
        tracing::warn!(error = %text, "batch hook call failed");
        *shared
            .stats
            .0
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(format!("batch at {at}: {text}"));
        shared.ctx.recorder().record(
            &controller_ref(&shared),
            EventType::Warning,
            crate::hooks::REASON_HOOK_FAILED,
            &text,
        );
    }
}

async fn call(
    at: Timestamp,
    shared: &Shared,
    store: &Store<Stub<DynamicObject>>,
) -> Result<(), ReconcileError> {
    let mut stubs = store.state();
    stubs.sort_by(|a, b| (a.namespace(), a.name()).cmp(&(b.namespace(), b.name())));
    let (name, kind) = (
        shared.settings.key.to_string(),
        &shared.parent.resource.kind,
    );
    let mut objects = Vec::with_capacity(stubs.len());
    for stub in &stubs {
        let read = shared
            .ctx
            .cache()
            .get(&shared.settings.for_kind, stub.namespace(), stub.name())
            .await;
        // An object gone since the store saw it is not sent.
        let Ok(object) = read else { continue };
        // With sharding, each member sends the objects it owns: each object once in the ring.
        let owned = shared.ctx.admit(&name, kind, &object.metadata).is_some();
        if owned && crate::hooks::controller::selected(&object, shared) {
            objects.push(serde_json::to_value(object.as_ref()).unwrap_or(Value::Null));
        }
    }
    let request = BatchRequest {
        api_version: contract::API_VERSION.to_owned(),
        controller: shared.controller.clone(),
        scheduled_time: at.to_string(),
        objects,
    };
    let _call = shared.hook_called();
    let response = shared.caller.call(&request).await?;
    only_events(&response)?;
    record_events(&request, &response, shared);
    Ok(())
}

/// A batch answer may carry `events` only.
fn only_events(response: &Response) -> Result<(), CallError> {
    let extra = [
        ("children", response.children.is_some()),
        ("status", response.status.is_some()),
        (
            "requeueAfterSeconds",
            response.requeue_after_seconds.is_some(),
        ),
        ("finalized", response.finalized.is_some()),
    ];
    match extra.iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(CallError::Malformed {
            reason: format!(
                "a batch answer carries only events, not {field}: a batch call is about no one \
                 object"
            ),
        }),
        None => Ok(()),
    }
}

/// The `Controller` itself, which a batch's events without `regarding` are about.
fn controller_ref(shared: &Shared) -> Arc<recorder::ObjectRef> {
    Arc::new(recorder::ObjectRef::new(
        "informant.dev/v1alpha1",
        "Controller",
        &shared.settings.key.namespace,
        &shared.settings.key.name,
        "",
    ))
}

/// Records the answer's events, each against the object its `regarding` names (its uid taken
/// from the request's objects when it is one of them) or the `Controller`.
fn record_events(request: &BatchRequest, response: &Response, shared: &Shared) {
    crate::hooks::reconcile::record_answer_events(
        response,
        shared,
        || controller_ref(shared),
        None,
        &request.objects.iter(),
    );
}
