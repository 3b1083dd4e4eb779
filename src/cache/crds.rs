//! `CrdWatch`: one watch on `CustomResourceDefinitions`, kept as a small digest per CRD (the kind
//! it defines, the versions it serves, whether it is established), so the reloader knows which
//! custom `byObject` kinds the API server serves, starts their informers when their CRD becomes
//! established and stops them when it is deleted, instead of retrying a LIST of a resource that
//! does not exist.
//!
//! When the CRDs cannot be listed for good (401, 403: no RBAC for `apiextensions.k8s.io`; 404:
//! no CRD API), the watch stops at the first refusal and says so ([`CrdWatch::unavailable`]):
//! no LIST is retried; the reloader asks discovery at a fixed period instead.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::GroupVersionKind;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::Instrument as _;

/// What one CRD says about the kind it defines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CrdKind {
    /// The CRD's name (`<plural>.<group>`).
    pub(crate) name: String,
    /// The group of the kind.
    pub(crate) group: String,
    /// The kind.
    pub(crate) kind: String,
    /// Whether its objects live in namespaces.
    pub(crate) namespaced: bool,
    /// The versions it serves.
    pub(crate) served: Vec<String>,
    /// Whether its `Established` condition is `True`: the API server serves the kind.
    pub(crate) established: bool,
}

impl CrdKind {
    fn of(crd: &CustomResourceDefinition) -> Option<Self> {
        let spec = &crd.spec;
        let established = crd
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        Some(Self {
            name: crd.metadata.name.clone()?,
            group: spec.group.clone(),
            kind: spec.names.kind.clone(),
            namespaced: spec.scope == "Namespaced",
            served: spec
                .versions
                .iter()
                .filter(|v| v.served)
                .map(|v| v.name.clone())
                .collect(),
            established,
        })
    }

    /// Whether it serves `gvk` now; otherwise why not.
    pub(crate) fn serves(&self, gvk: &GroupVersionKind) -> Result<(), String> {
        if !self.established {
            return Err(format!(
                "CustomResourceDefinition {} is not established yet",
                self.name
            ));
        }
        if !self.served.contains(&gvk.version) {
            return Err(format!(
                "CustomResourceDefinition {} does not serve version {} (it serves {})",
                self.name,
                gvk.version,
                self.served.join(", ")
            ));
        }
        Ok(())
    }
}

/// Every CRD's digest, by name; `None` until the first list completed.
type Kinds = Option<Arc<BTreeMap<String, CrdKind>>>;

/// The running watch on CRDs. Dropping it stops the watch.
pub(crate) struct CrdWatch {
    kinds: watch::Receiver<Kinds>,
    /// Why the CRDs cannot be listed, once the watch stopped for good.
    unavailable: watch::Receiver<Option<String>>,
    stop: CancellationToken,
}

impl std::fmt::Debug for CrdWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrdWatch").finish_non_exhaustive()
    }
}

impl Drop for CrdWatch {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl CrdWatch {
    /// Starts watching CRDs through `client` on `tracker`, until `shutdown` or drop.
    pub(crate) fn start(
        client: Client,
        tracker: &TaskTracker,
        shutdown: &CancellationToken,
    ) -> Self {
        let (tx, kinds) = watch::channel(None);
        let (refused, unavailable) = watch::channel(None);
        let stop = shutdown.child_token();
        let token = stop.clone();
        let api: Api<CustomResourceDefinition> = Api::all(client);
        let span = tracing::info_span!("crd_watch");
        tracker.spawn(
            async move {
                let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
                let mut events = std::pin::pin!(events);
                let mut current: BTreeMap<String, CrdKind> = BTreeMap::new();
                let mut listing: BTreeMap<String, CrdKind> = BTreeMap::new();
                loop {
                    let event = tokio::select! {
                        () = token.cancelled() => return,
                        event = events.next() => event,
                    };
                    let publish = match event {
                        None => return,
                        Some(Err(error)) if super::is_permanent(&error) => {
                            // Retrying will not help (RBAC, no CRD API): stop here, and let
                            // discovery tell which kinds are served.
                            tracing::warn!(
                                error = %crate::telemetry::error_chain(&error),
                                "cannot list or watch CustomResourceDefinitions: custom kinds are \
                                 looked up by discovery at a fixed period instead (grant list and \
                                 watch on customresourcedefinitions to follow CRDs as they change)"
                            );
                            refused.send_replace(Some(crate::telemetry::error_chain(&error)));
                            return;
                        }
                        Some(Err(error)) => {
                            tracing::warn!(error = %crate::telemetry::error_chain(&error), "cannot list or watch CustomResourceDefinitions");
                            false
                        }
                        Some(Ok(watcher::Event::Init)) => {
                            listing.clear();
                            false
                        }
                        Some(Ok(watcher::Event::InitApply(crd))) => {
                            if let Some(kind) = CrdKind::of(&crd) {
                                listing.insert(kind.name.clone(), kind);
                            }
                            false
                        }
                        Some(Ok(watcher::Event::InitDone)) => {
                            current = std::mem::take(&mut listing);
                            true
                        }
                        Some(Ok(watcher::Event::Apply(crd))) => {
                            CrdKind::of(&crd).is_some_and(|kind| {
                                current.insert(kind.name.clone(), kind.clone()) != Some(kind)
                            })
                        }
                        Some(Ok(watcher::Event::Delete(crd))) => crd
                            .metadata
                            .name
                            .as_ref()
                            .is_some_and(|name| current.remove(name).is_some()),
                    };
                    if publish {
                        tx.send_replace(Some(Arc::new(current.clone())));
                    }
                }
            }
            .instrument(span),
        );
        Self {
            kinds,
            unavailable,
            stop,
        }
    }

    /// Waits until the first list of CRDs completed (true), or the CRDs turned out not to be
    /// listable, or `cancel` (false).
    pub(crate) async fn synced(&mut self, cancel: &CancellationToken) -> bool {
        tokio::select! {
            () = cancel.cancelled() => false,
            synced = self.kinds.wait_for(Option::is_some) => synced.is_ok(),
            _ = self.unavailable.wait_for(Option::is_some) => false,
        }
    }

    /// Why the CRDs cannot be listed, once the watch stopped for good.
    pub(crate) fn unavailable(&self) -> Option<String> {
        self.unavailable.borrow().clone()
    }

    /// Whether the first list of CRDs completed.
    pub(crate) fn is_synced(&self) -> bool {
        self.kinds.borrow().is_some()
    }

    /// Waits until a CRD is created, changed or deleted (after the first list), or the watch
    /// stopped for good.
    pub(crate) async fn changed(&mut self) {
        // The refusal first: when the watch stops, the digest's sender goes with it.
        let changed = tokio::select! {
            biased;
            changed = self.unavailable.changed() => changed,
            changed = self.kinds.changed() => changed,
        };
        if changed.is_err() {
            // The watch ended (shutdown): nothing will change any more.
            std::future::pending::<()>().await;
        }
    }

    /// The CRD defining `gvk`'s group and kind, if one exists; `None` also before the first
    /// list completed.
    pub(crate) fn crd_of(&self, gvk: &GroupVersionKind) -> Option<CrdKind> {
        let kinds = self.kinds.borrow();
        kinds
            .as_ref()?
            .values()
            .find(|k| k.group == gvk.group && k.kind == gvk.kind)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(established: &str, served: bool) -> CustomResourceDefinition {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": served, "storage": true}]},
            "status": {"conditions": [{"type": "Established", "status": established}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_crd_serves_its_kind_once_established_and_only_in_served_versions() {
        let widget = GroupVersionKind::gvk("example.com", "v1", "Widget");
        let kind = CrdKind::of(&crd("True", true)).unwrap();
        assert!(kind.namespaced);
        assert_eq!(kind.serves(&widget), Ok(()));
        let pending = CrdKind::of(&crd("False", true)).unwrap();
        assert_eq!(
            pending.serves(&widget).unwrap_err(),
            "CustomResourceDefinition widgets.example.com is not established yet"
        );
        let v2 = GroupVersionKind::gvk("example.com", "v2", "Widget");
        assert!(
            kind.serves(&v2)
                .unwrap_err()
                .contains("does not serve version v2")
        );
    }
}
