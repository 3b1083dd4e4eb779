//! A Rust controller's reconcile timeout against the embedded API server: a reconcile that
//! hangs is cancelled, gives its one worker back to the next object, is counted and retried.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use informant::controller::ReconcileResult;
use informant::controller::{Action, Context, Controller, ControllerMetrics, default_error_policy};
use informant::recorder::{NullSink, Options, Pipeline, SystemClock};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt as _;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Every awaited condition must hold within this long.
const GUARD: Duration = Duration::from_secs(20);

#[derive(Debug, thiserror::Error)]
#[error("never returned")]
struct Never;

/// What one call of the reconcile saw: the object's name and the how-manieth call it was.
type Call = (String, u32);

async fn next(calls: &mut mpsc::UnboundedReceiver<Call>) -> Call {
    tokio::time::timeout(GUARD, calls.recv())
        .await
        .expect("a reconcile within the guard")
        .expect("the controller is running")
}

#[tokio::test]
async fn a_hung_reconcile_is_cancelled_at_its_timeout_frees_its_worker_and_is_retried() {
    let env = support::Env::new().await;
    let reloader = env.default_reloader(GUARD).await;
    let pipeline = Pipeline::new(&Options::default(), NullSink, Arc::new(SystemClock));
    let ctx = Context::new(
        reloader.cache(),
        Arc::clone(reloader.pool()),
        env.client.clone(),
        pipeline.recorder(),
    );
    let metrics = ControllerMetrics::new();
    let (tx, mut calls) = mpsc::unbounded_channel::<Call>();
    // Taken by the hung reconcile and dropped with it: closed once the timeout cancelled it.
    let (held, mut released) = mpsc::channel::<()>(1);
    let held = Arc::new(std::sync::Mutex::new(Some(held)));
    let hung_calls = Arc::new(AtomicU32::new(0));
    let shutdown = CancellationToken::new();

    env.configmap("default", "hung", &json!({}));
    let controller = Controller::<ConfigMap>::new("timeouts")
        .metrics(&metrics)
        .concurrency(1)
        .timeout(Duration::from_millis(300));
    let counted = Arc::clone(&hung_calls);
    let task = tokio::spawn(controller.run(
        ctx,
        move |object: Arc<ConfigMap>, _ctx| {
            let name = object.name_any();
            let call = if name == "hung" {
                counted.fetch_add(1, Ordering::SeqCst) + 1
            } else {
                1
            };
            let _ = tx.send((name.clone(), call));
            // Only the first call of `hung` hangs; it holds the sender until it is dropped.
            let holds = (name == "hung" && call == 1)
                .then(|| held.lock().unwrap().take())
                .flatten();
            async move {
                if let Some(sender) = holds {
                    let _held = sender;
                    std::future::pending::<()>().await;
                }
                Ok::<_, Never>(Action::await_change())
            }
        },
        default_error_policy,
        shutdown.clone(),
    ));

    assert_eq!(next(&mut calls).await, ("hung".to_owned(), 1));
    // The one worker is held by `hung`: `next` can run only once the timeout freed it.
    env.configmap("default", "next", &json!({}));
    let mut seen = vec![next(&mut calls).await, next(&mut calls).await];
    seen.sort();
    assert_eq!(
        seen,
        [("hung".to_owned(), 2), ("next".to_owned(), 1)],
        "the worker went on to the next object and the timed-out one was retried"
    );
    assert!(
        tokio::time::timeout(GUARD, released.recv())
            .await
            .expect("the hung reconcile was dropped")
            .is_none(),
        "the hung reconcile's future was dropped, not left running"
    );

    let series = metrics.controller("timeouts", 1);
    let settled = support::holds_within(GUARD, || {
        let done = series.reconciles(ReconcileResult::Success) == 2;
        async move { done }
    })
    .await;
    assert!(settled, "both objects reconciled after the timeout");
    assert_eq!(series.timeouts(), 1);
    assert_eq!(series.reconciles(ReconcileResult::Error), 1);
    assert_eq!(
        hung_calls.load(Ordering::SeqCst),
        2,
        "retried once, then done"
    );

    shutdown.cancel();
    tokio::time::timeout(GUARD, task)
        .await
        .expect("the controller stops on shutdown")
        .unwrap()
        .unwrap();
    env.stop().await;
}

#[test]
fn a_zero_timeout_is_no_timeout_as_in_controller_runtime() {
    let none = Controller::<ConfigMap>::new("c").timeout(Duration::ZERO);
    assert!(format!("{none:?}").contains("timeout: None"), "{none:?}");
    let some = Controller::<ConfigMap>::new("c").timeout(Duration::from_secs(5));
    assert!(
        format!("{some:?}").contains("timeout: Some(5s)"),
        "{some:?}"
    );
}
