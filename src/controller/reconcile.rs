//! Each reconcile as one unit of work: a `reconcile` span, the controller's metrics, the
//! object's failure count and the controller's timeout, around the caller's reconcile function.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::core::Resource;
use kube::runtime::controller::Action;
use tracing::{Instrument, field};

use super::context::Context;
use super::metrics::ReconcileResult as Outcome;
use super::series::Series;
use super::stub::Stub;

/// How a reconcile failed: its own error, or the controller's timeout cancelled it.
#[derive(Debug)]
pub(super) enum Failure<E> {
    /// The reconcile returned this error (its controller's error policy decides the retry).
    Returned(E),
    /// The reconcile ran past the controller's timeout and was dropped mid-way.
    TimedOut(Duration),
}

impl<E: std::fmt::Display> std::fmt::Display for Failure<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Returned(error) => error.fmt(f),
            Failure::TimedOut(limit) => write!(
                f,
                "the reconcile did not finish within the controller's timeout of {limit:?} and \
                 was cancelled"
            ),
        }
    }
}

impl<E: std::error::Error> std::error::Error for Failure<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Failure::Returned(error) => error.source(),
            Failure::TimedOut(_) => None,
        }
    }
}

/// Runs `reconcile` on `object` (the one `stub` names, read and [taken](Series::taken) from
/// the queue) in a `reconcile` span (fields `controller`, `k8s.namespace`, `object.name`, then
/// `result` and, on failure, `error`), counted in `series`. A failure counts against the
/// object before the error policy runs; a success clears its count. The object's reference
/// is built only when failures are counted.
///
/// With a `timeout`, a reconcile still running when it passes is dropped (its future is not
/// polled again: whatever it awaited is cancelled), which frees its worker. It ends in
/// [`Failure::TimedOut`]: `result=timed_out` in its span, and in the metrics an error (as
/// controller-runtime counts the `context deadline exceeded` its reconciler returns) plus one
/// `controller_runtime_reconcile_timeouts_total`.
pub(super) fn instrumented<K, T, R, Fut, E>(
    controller: &str,
    series: Series,
    (object, stub): (Arc<K>, Arc<Stub<K>>),
    ctx: Arc<Context<T>>,
    timeout: Option<Duration>,
    reconcile: R,
) -> impl Future<Output = Result<Action, Failure<E>>> + Send + 'static + use<K, T, R, Fut, E>
where
    T: Send + Sync + 'static,
    R: FnOnce(Arc<K>, Arc<Context<T>>) -> Fut,
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::error::Error + Send + 'static,
{
    let span = tracing::info_span!(
        "reconcile",
        controller = %controller,
        k8s.namespace = stub.namespace().unwrap_or(""),
        object.name = stub.name(),
        result = field::Empty,
        error = field::Empty,
    );
    let running = span.in_scope(|| reconcile(object, Arc::clone(&ctx)));
    let record = span.clone();
    async move {
        let _worker = series.reconcile_running();
        let started = Instant::now();
        let result = match bounded(timeout, running).await {
            Ok(result) => result.map_err(Failure::Returned),
            Err(limit) => Err(Failure::TimedOut(limit)),
        };
        let outcome = match &result {
            Ok(action) if *action == Action::await_change() => Outcome::Success,
            Ok(_) => Outcome::RequeueAfter,
            Err(_) => Outcome::Error,
        };
        let timed_out = matches!(result, Err(Failure::TimedOut(_)));
        let label = series.reconcile_ended(outcome, timed_out, started.elapsed());
        record.record("result", label);
        match &result {
            Ok(action) => {
                ctx.forget_with(|| stub.key(&()));
                if outcome == Outcome::RequeueAfter {
                    series.queue_retried();
                }
                tracing::debug!(?action, "reconciled");
            }
            Err(error) => {
                ctx.failed(stub.key(&()));
                let error = crate::telemetry::error_chain(error);
                record.record("error", error.as_str());
                // A user's reconcile failing is theirs to look at, not the manager breaking.
                tracing::warn!(%error, "reconcile failed");
            }
        }
        result
    }
    .instrument(span)
}

/// `work` run to its end, or for at most `limit`: then it is dropped (not polled again) and
/// the limit is the error. No limit waits for the end. Rust and hook controllers' timeouts.
pub(crate) async fn bounded<F: Future>(
    limit: Option<Duration>,
    work: F,
) -> Result<F::Output, Duration> {
    match limit {
        None => Ok(work.await),
        Some(limit) => tokio::time::timeout(limit, work).await.map_err(|_| limit),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;
    use crate::controller::{ControllerMetrics, ReconcileResult};

    /// The fields of every `reconcile` span, as `name=value`, in the order they were set.
    #[derive(Clone, Default)]
    struct Spans(Arc<Mutex<Vec<String>>>);

    impl Spans {
        /// A recorder of `reconcile` spans, installed for the current thread until the guard
        /// drops.
        fn install() -> (Self, tracing::subscriber::DefaultGuard) {
            let spans = Self::default();
            let guard = tracing::subscriber::set_default(
                tracing_subscriber::registry().with(spans.clone()),
            );
            (spans, guard)
        }
    }

    struct Visitor<'a>(&'a mut Vec<String>);

    impl tracing::field::Visit for Visitor<'_> {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            self.0.push(format!("{}={value:?}", field.name()));
        }
        fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
            self.0.push(format!("{}={value}", field.name()));
        }
    }

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Spans {
        fn on_new_span(
            &self,
            attrs: &tracing::span::Attributes<'_>,
            _id: &tracing::span::Id,
            _ctx: tracing_subscriber::layer::Context<'_, S>,
        ) {
            if attrs.metadata().name() == "reconcile" {
                attrs.record(&mut Visitor(&mut self.0.lock().unwrap()));
            }
        }

        fn on_record(
            &self,
            _id: &tracing::span::Id,
            values: &tracing::span::Record<'_>,
            _ctx: tracing_subscriber::layer::Context<'_, S>,
        ) {
            values.record(&mut Visitor(&mut self.0.lock().unwrap()));
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("no such thing")]
    struct Failed;

    fn context() -> Arc<Context> {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let pool = crate::cache::InformerPool::new(client.clone());
        let tree = crate::cache::Plan::new(&crate::cache::Options::default())
            .unwrap()
            .instantiate(&crate::cache::Context::new(
                client.clone(),
                Arc::new(crate::cache::BuiltinKinds),
            ));
        let pipeline = crate::recorder::Pipeline::new(
            &crate::recorder::Options::default(),
            crate::recorder::NullSink,
            Arc::new(crate::recorder::SystemClock),
        );
        Arc::new(Context::new(
            Arc::new(crate::cache::SharedCache::new(tree)),
            pool,
            client,
            pipeline.recorder(),
        ))
    }

    fn configmap() -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("shop".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        })
    }

    #[tokio::test(flavor = "current_thread")]
    async fn each_reconcile_is_one_span_with_its_object_and_result_and_is_counted() {
        let (spans, _guard) = Spans::install();
        let metrics = ControllerMetrics::new();
        let series = Series::new(Some(&metrics), "web", 1);
        let (ctx, object) = (context(), configmap());
        let stub = Arc::new(Stub::of(&object.metadata));

        let failed = instrumented(
            "web",
            series.clone(),
            (Arc::clone(&object), Arc::clone(&stub)),
            Arc::clone(&ctx),
            None,
            |_, _| async { Err::<Action, _>(Failed) },
        )
        .await;
        assert!(failed.is_err());
        assert_eq!(ctx.failures(object.as_ref()), 1);
        let requeued = instrumented(
            "web",
            series,
            (Arc::clone(&object), stub),
            Arc::clone(&ctx),
            None,
            |_, _| async { Ok::<_, Failed>(Action::requeue(std::time::Duration::from_secs(1))) },
        )
        .await;
        assert!(requeued.is_ok());
        assert_eq!(
            ctx.failures(object.as_ref()),
            0,
            "a success forgets the failures"
        );

        let fields = spans.0.lock().unwrap().clone();
        assert_eq!(
            fields,
            [
                "controller=web",
                "k8s.namespace=shop",
                "object.name=web",
                "result=error",
                "error=no such thing",
                "controller=web",
                "k8s.namespace=shop",
                "object.name=web",
                "result=requeue_after",
            ]
        );
        let counted = metrics.controller("web", 1);
        assert_eq!(counted.reconciles(ReconcileResult::Error), 1);
        assert_eq!(counted.reconciles(ReconcileResult::RequeueAfter), 1);
        assert_eq!(counted.active_workers(), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_reconcile_past_the_timeout_is_cancelled_counted_and_traced_as_timed_out() {
        let (spans, _guard) = Spans::install();
        let metrics = ControllerMetrics::new();
        let series = Series::new(Some(&metrics), "web", 1);
        let (ctx, object) = (context(), configmap());
        let stub = Arc::new(Stub::of(&object.metadata));
        // Dropped with the reconcile: proof that the hung future was cancelled, not left behind.
        let (held, released) = tokio::sync::oneshot::channel::<()>();

        let hung = instrumented(
            "web",
            series.clone(),
            (Arc::clone(&object), Arc::clone(&stub)),
            Arc::clone(&ctx),
            Some(Duration::from_millis(20)),
            move |_, _| async move {
                let _held = held;
                std::future::pending::<Result<Action, Failed>>().await
            },
        )
        .await;
        assert!(
            matches!(hung, Err(Failure::TimedOut(limit)) if limit == Duration::from_millis(20)),
            "{hung:?}"
        );
        assert!(released.await.is_err(), "the hung reconcile was dropped");
        assert_eq!(
            ctx.failures(object.as_ref()),
            1,
            "a timeout counts as a failure"
        );

        // Within the timeout, the reconcile's own answer stands.
        let quick = instrumented(
            "web",
            series,
            (Arc::clone(&object), stub),
            Arc::clone(&ctx),
            Some(Duration::from_mins(1)),
            |_, _| async { Ok::<_, Failed>(Action::await_change()) },
        )
        .await;
        assert!(quick.is_ok());

        let fields = spans.0.lock().unwrap().clone();
        assert_eq!(
            fields[3..5],
            [
                "result=timed_out",
                "error=the reconcile did not finish within the controller's timeout of 20ms and \
                 was cancelled",
            ]
        );
        assert_eq!(fields.last().map(String::as_str), Some("result=success"));
        let counted = metrics.controller("web", 1);
        assert_eq!(counted.timeouts(), 1);
        assert_eq!(counted.reconciles(ReconcileResult::Error), 1);
        assert_eq!(counted.reconciles(ReconcileResult::Success), 1);
        assert_eq!(counted.active_workers(), 0, "the worker was given back");
    }
}
