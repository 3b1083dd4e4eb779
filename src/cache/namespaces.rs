//! `NamespaceWatch`: the one metadata-only informer on Namespaces that namespace selectors are
//! resolved against. It lives in the [`InformerPool`] like every informer (a tree caching
//! Namespaces metadata-only with no selector shares it), and tells the reloader when a
//! namespace was created, labelled, unlabelled or deleted.

use std::sync::Arc;

use kube::core::GroupVersionKind;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};
use tokio_util::sync::CancellationToken;

use super::error::Result;
use super::informer::InformerEvent;
use super::pool::{InformerKey, InformerPool, PooledInformer};
use super::resolver::BuiltinKinds;
use super::scope::NamespaceLabels;
use super::settings::InformerSettings;

/// `v1 Namespace`.
#[must_use]
pub(crate) fn namespace_gvk() -> GroupVersionKind {
    GroupVersionKind::gvk("", "v1", "Namespace")
}

/// The key of the namespace informer: every Namespace, metadata only, nothing dropped.
#[must_use]
pub fn namespace_informer_key() -> InformerKey {
    let settings = InformerSettings {
        metadata_only: true,
        ..InformerSettings::default()
    };
    InformerKey::new(namespace_gvk(), None, &settings)
}

/// The namespace informer, held (so the pool keeps it running) with a subscription to its
/// changes made before it started, so no change is missed.
pub(crate) struct NamespaceWatch {
    informer: Arc<PooledInformer>,
    events: broadcast::Receiver<InformerEvent>,
}

impl std::fmt::Debug for NamespaceWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceWatch").finish_non_exhaustive()
    }
}

impl NamespaceWatch {
    /// Obtains the namespace informer from `pool` (the running one, or a new one, started if
    /// the pool runs) and subscribes to its changes.
    pub(crate) fn new(pool: &InformerPool) -> Self {
        let events = pool.subscribe(&namespace_gvk());
        let informer = pool.hold(
            &namespace_informer_key(),
            &BuiltinKinds::resolve_now(&namespace_gvk()),
        );
        Self { informer, events }
    }

    /// Waits for the first list of the namespaces, at most until `cancel`.
    ///
    /// # Errors
    /// The informer's error when it cannot list namespaces (RBAC), or a timeout.
    pub(crate) async fn synced(&self, cancel: &CancellationToken) -> Result<()> {
        self.informer.wait_for_sync(cancel).await
    }

    /// Every namespace with its labels, from the informer's store; `None` before it synced.
    pub(crate) fn labels(&self) -> Option<NamespaceLabels> {
        if !self.informer.has_synced() {
            return None;
        }
        let namespaces = self.informer.list(None, None, &[], None).ok()?;
        Some(
            namespaces
                .iter()
                .filter_map(|ns| {
                    let name = ns.metadata.name.clone()?;
                    Some((name, ns.metadata.labels.clone().unwrap_or_default()))
                })
                .collect(),
        )
    }

    /// Waits for the next change of any namespace, then takes every change already queued
    /// behind it too: the caller reads the labels once for the lot.
    pub(crate) async fn changed(&mut self) {
        match self.events.recv().await {
            Ok(_) | Err(RecvError::Lagged(_)) => {}
            // The pool is gone: nothing will change any more.
            Err(RecvError::Closed) => std::future::pending().await,
        }
        loop {
            match self.events.try_recv() {
                Ok(_) | Err(TryRecvError::Lagged(_)) => {}
                Err(TryRecvError::Empty | TryRecvError::Closed) => return,
            }
        }
    }
}

/// Every namespace with its labels, read once (a metadata-only LIST): what a one-shot reader
/// (`informant cache`, `informant explain --kubeconfig`) resolves namespace selectors with.
///
/// # Errors
/// The client's error when namespaces cannot be listed.
pub async fn list_namespace_labels(client: &kube::Client) -> kube::Result<NamespaceLabels> {
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
    let list = api.list_metadata(&kube::api::ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|ns| Some((ns.metadata.name?, ns.metadata.labels.unwrap_or_default())))
        .collect())
}
