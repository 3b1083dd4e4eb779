//! The manager's answers to `/healthz`, `/readyz`, `/debug/cache` and `/debug/status`, from its
//! state.

use std::sync::Arc;

use tokio::sync::watch;

use super::http::{Check, Probes};
use super::state::State;
use super::status::{ControllerReadiness, Readiness};
use crate::cache::{Cache as _, InformerPool, SharedCache};
use crate::config::source;

/// `/healthz`, `/readyz`, `/debug/cache` and `/debug/status` from the manager's state.
pub(super) struct ManagerProbes {
    pub(super) state: Arc<State>,
    pub(super) cache: Arc<SharedCache>,
    pub(super) pool: Arc<InformerPool>,
    pub(super) observed: Option<watch::Receiver<Option<source::Observed>>>,
}

impl Probes for ManagerProbes {
    fn health_checks(&self) -> Vec<Check> {
        vec![Check::ok("ping")]
    }

    fn ready_checks(&self) -> Vec<Check> {
        let snapshot = self.state.snapshot();
        // As Prometheus: ready once a valid config runs; a later invalid edit keeps the
        // last good one serving and says so in Valid=False, the Warning Event and
        // informant_config_last_reload_successful, not here.
        let config = if snapshot.valid_once {
            Check::ok("config")
        } else {
            Check::failed(
                "config",
                format!(
                    "no valid cacheconfig yet (controller-runtime's defaults run): {}",
                    snapshot.invalid.join("; ")
                ),
            )
        };
        let informers = match snapshot.readiness() {
            Readiness::Synced => Check::ok("informers"),
            Readiness::Syncing { pending } => {
                Check::failed("informers", format!("syncing: {}", pending.join("; ")))
            }
            Readiness::Failed { failed } => {
                Check::failed("informers", format!("failed: {}", failed.join("; ")))
            }
            Readiness::WaitingForKind { waiting } => Check::failed(
                "informers",
                format!("waiting for kind: {}", waiting.join("; ")),
            ),
            Readiness::Forbidden { missing } => {
                Check::failed("informers", format!("forbidden: {}", missing.join("; ")))
            }
        };
        let permissions = if snapshot.missing_permissions.is_empty() {
            Check::ok("permissions")
        } else {
            Check::failed(
                "permissions",
                super::access::event_message(&snapshot.missing_permissions),
            )
        };
        let waiting: Vec<String> = snapshot
            .controllers
            .iter()
            .filter_map(|(name, readiness)| match readiness {
                ControllerReadiness::WaitingForKind { reason } => Some(format!("{name}: {reason}")),
                ControllerReadiness::Running | ControllerReadiness::KeptBack { .. } => None,
            })
            .collect();
        let controllers = if waiting.is_empty() {
            Check::ok("controllers")
        } else {
            Check::failed(
                "controllers",
                format!("waiting for kind: {}", waiting.join("; ")),
            )
        };
        vec![
            Check::ok("ping"),
            config,
            informers,
            permissions,
            controllers,
        ]
    }

    fn debug_cache(&self) -> serde_json::Value {
        let snapshot = self.state.snapshot();
        let tree = snapshot.plan.as_ref().map(crate::cache::Plan::describe);
        let stats = self.pool.stats();
        serde_json::json!({
            "tree": tree,
            "readerFailOnMissingInformer": snapshot.config.cache.reader_fail_on_missing_informer,
            "informers": self.cache.informers(),
            "pool": {
                "running": stats.running,
                "startedTotal": stats.started_total,
                "stoppedTotal": stats.stopped_total,
            },
        })
    }

    fn debug_status(&self) -> Option<serde_json::Value> {
        let generation = self
            .observed
            .as_ref()
            .and_then(|o| o.borrow().as_ref().and_then(|o| o.generation));
        serde_json::to_value(self.state.status(generation)).ok()
    }
}
