//! Each reconcile as one unit of work: a `reconcile` span, the controller's metrics, and the
//! object's failure count, around the caller's reconcile function.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use kube::core::Resource;
use kube::runtime::{controller::Action, reflector::ObjectRef};
use tracing::{Instrument, field};

use super::context::Context;
use super::metrics::{Outcome, Series};

/// Runs `reconcile` on `object` in a `reconcile` span (fields `controller`, `k8s.namespace`,
/// `object.name`, then `result` and, on failure, `error`), counted in `series`. A failure
/// counts against the object before the error policy runs; a success clears its count.
pub(super) fn instrumented<K, R, Fut, E>(
    controller: &str,
    series: Series,
    object: Arc<K>,
    ctx: Arc<Context>,
    reconcile: R,
) -> impl Future<Output = Result<Action, E>> + Send + 'static + use<K, R, Fut, E>
where
    R: FnOnce(Arc<K>, Arc<Context>) -> Fut,
    K: Resource<DynamicType = ()>,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::error::Error + Send + 'static,
{
    let meta = object.meta();
    let span = tracing::info_span!(
        "reconcile",
        controller = %controller,
        k8s.namespace = meta.namespace.as_deref().unwrap_or(""),
        object.name = meta.name.as_deref().unwrap_or(""),
        result = field::Empty,
        error = field::Empty,
    );
    let key = ObjectRef::from_obj(object.as_ref()).erase();
    let running = span.in_scope(|| reconcile(object, Arc::clone(&ctx)));
    let record = span.clone();
    async move {
        let _worker = series.reconcile_started();
        let started = Instant::now();
        let result = running.await;
        let outcome = match &result {
            Ok(action) if *action == Action::await_change() => Outcome::Success,
            Ok(_) => Outcome::RequeueAfter,
            Err(_) => Outcome::Error,
        };
        series.reconcile_finished(outcome, started.elapsed());
        record.record("result", outcome.as_str());
        match &result {
            Ok(action) => {
                ctx.forget(&key);
                if outcome == Outcome::RequeueAfter {
                    series.queue_retried();
                }
                tracing::debug!(?action, "reconciled");
            }
            Err(error) => {
                ctx.failed(key);
                let error = super::chain(error);
                record.record("error", error.as_str());
                // A user's reconcile failing is theirs to look at, not the manager breaking.
                tracing::warn!(%error, "reconcile failed");
            }
        }
        result
    }
    .instrument(span)
}
