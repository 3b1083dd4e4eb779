//! Stopping a controller whose runner never started: kube-runtime's runner holds every task
//! until its store is ready (`delay_tasks_until(store.wait_until_ready())` in its `applier`),
//! and keeps waiting for that even after a graceful shutdown ended its triggers. Upstream the
//! store's writer lives in the trigger stream, which the shutdown drops, so the wait fails
//! with `WriterDropped`; here the writer lives on (a Rust controller keeps it to empty its store
//! when its kind goes, a hook controller's stream keeps it until the applier is dropped), so a
//! controller stopped between its start and its first list would wait for ever, and so would
//! whoever awaits it (the hooks supervisor's restart of an edited `Controller` did).
//!
//! [`stopped_before_ready`] ends the result stream instead: at the stop, a runner whose store
//! is not ready has run nothing, so ending it there loses no reconcile. A ready one is left to
//! kube-runtime's graceful shutdown (its running reconciles finish).

use futures::FutureExt as _;
use kube::runtime::reflector::Lookup;
use kube::runtime::reflector::Store;
use tokio_util::sync::CancellationToken;

/// Resolves once `stop` is cancelled while `store` is not ready yet; never when it is ready by
/// then. For `results.take_until(stopped_before_ready(..))` on a controller's result stream.
pub(crate) async fn stopped_before_ready<K>(store: Store<K>, stop: CancellationToken)
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    stop.cancelled().await;
    if store.wait_until_ready().now_or_never().is_some() {
        std::future::pending::<()>().await;
    }
    tracing::debug!(
        "controller stopped before its store was ready: nothing ran, nothing to wait for"
    );
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use futures::StreamExt as _;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::controller::{Action, Controller};
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;

    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("never")]
    struct Never;

    /// A kube-runtime controller on a store no list ever made ready, stopped gracefully: its
    /// result stream ends with the guard, and never without it (the hang the guard is for).
    async fn stops(guarded: bool) -> bool {
        let writer = Writer::<ConfigMap>::default();
        let store = writer.as_reader();
        let stop = CancellationToken::new();
        let triggers = futures::stream::pending::<Result<ConfigMap, watcher::Error>>();
        let results = Controller::for_stream(triggers, store.clone())
            .graceful_shutdown_on(stop.clone().cancelled_owned())
            .run(
                |_: Arc<ConfigMap>, _: Arc<()>| async { Ok::<_, Never>(Action::await_change()) },
                |_, _, _| Action::await_change(),
                Arc::new(()),
            );
        stop.cancel();
        let ended = async {
            if guarded {
                let guard = stopped_before_ready(store, stop.clone());
                results.take_until(guard).for_each(|_| async {}).await;
            } else {
                results.for_each(|_| async {}).await;
            }
        };
        let stopped = tokio::time::timeout(Duration::from_mins(1), ended)
            .await
            .is_ok();
        drop(writer);
        stopped
    }

    #[tokio::test(start_paused = true)]
    async fn a_controller_stopped_before_its_store_is_ready_ends_and_would_hang_without_the_guard()
    {
        assert!(stops(true).await, "ended at the stop");
        assert!(
            !stops(false).await,
            "kube-runtime's runner alone waits for its store (if this fails, upstream fixed it: the guard can go)"
        );
    }

    /// A ready store leaves the shutdown to kube-runtime: the guard never resolves.
    #[tokio::test(start_paused = true)]
    async fn with_a_ready_store_the_guard_leaves_the_graceful_shutdown_alone() {
        let mut writer = Writer::<ConfigMap>::default();
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let stop = CancellationToken::new();
        stop.cancel();
        let guard = stopped_before_ready(writer.as_reader(), stop);
        assert!(
            tokio::time::timeout(Duration::from_mins(1), guard)
                .await
                .is_err()
        );
    }
}
