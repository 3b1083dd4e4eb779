//! The leader-elected group's work: once this replica leads, the leader-elected runnables
//! (controllers) start and the status writer keeps the `CacheConfig`'s status current.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::options::{BoxError, Error};
use super::state::State;
use super::status::{StatusWriter, desired_status};
use crate::config::source;

/// How often the status is recomputed even when nothing was reloaded (object counts and sync
/// state change between reloads); a status equal to the last written one makes no request.
const STATUS_INTERVAL: Duration = Duration::from_secs(10);

/// A runnable that runs only on the leader.
pub(super) type LeaderRunnable = Box<
    dyn FnOnce(CancellationToken) -> futures::future::BoxFuture<'static, Result<(), BoxError>>
        + Send,
>;

/// The leader-elected part: waits to lead, then runs the status writer and the runnables.
pub(super) struct LeaderWork {
    pub(super) is_leader: watch::Receiver<bool>,
    pub(super) runnables: Vec<(String, LeaderRunnable)>,
    pub(super) writer: Option<StatusWriter>,
    pub(super) state: Arc<State>,
    pub(super) observed: Option<watch::Receiver<Option<source::Observed>>>,
}

impl LeaderWork {
    /// Waits to lead, then runs the runnables and the status writer until `shutdown`; returns
    /// once every runnable has returned, so that the Lease is released only then (see
    /// [`super::run`]'s `add_leader_elected`).
    pub(super) async fn run(
        mut self,
        failures: &mpsc::UnboundedSender<Error>,
        shutdown: CancellationToken,
    ) {
        tokio::select! {
            () = shutdown.cancelled() => return,
            led = self.is_leader.wait_for(|leader| *leader) => if led.is_err() { return },
        }
        tracing::info!("leading: starting leader-elected runnables");
        let running = TaskTracker::new();
        for (name, run) in self.runnables {
            let token = shutdown.child_token();
            let failures = failures.clone();
            running.spawn(async move {
                if let Err(source) = run(token).await {
                    let _ = failures.send(Error::Runnable { name, source });
                }
            });
        }
        running.close();
        match self.writer {
            Some(writer) => write_status(writer, &self.state, self.observed, shutdown).await,
            None => shutdown.cancelled().await,
        }
        running.wait().await;
        tracing::info!("leading: leader-elected runnables stopped");
    }
}

/// Writes the status whenever the state changes, and every [`STATUS_INTERVAL`].
async fn write_status(
    mut writer: StatusWriter,
    state: &State,
    observed: Option<watch::Receiver<Option<source::Observed>>>,
    shutdown: CancellationToken,
) {
    let mut changes = state.subscribe();
    let mut observed = observed;
    let mut tick = tokio::time::interval(STATUS_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut uid = None;
    loop {
        let seen = observed.as_ref().and_then(|o| o.borrow().clone());
        let generation = seen.as_ref().and_then(|o| o.generation);
        let seen_uid = seen.map(|o| o.uid);
        if seen_uid != uid {
            // A recreated object has no status: write it even if equal to the last one.
            writer.forget();
            uid = seen_uid;
        }
        let snapshot = state.snapshot();
        let previous = writer
            .last_written()
            .cloned()
            .or_else(|| snapshot.config.resource.status.clone());
        let desired = desired_status(previous.as_ref(), &snapshot.status_input(generation));
        if let Err(error) = writer.write(&desired).await {
            tracing::warn!(error = %crate::telemetry::error_chain(&error), "cannot write the cacheconfig status");
        }
        let observed_changed = async {
            match observed.as_mut() {
                Some(o) => o.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = changes.changed() => {}
            _ = observed_changed => {}
            _ = tick.tick() => {}
        }
    }
}
