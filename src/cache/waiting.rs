//! `WaitingCache`: the cache of a `byObject` kind the API server does not serve yet. It starts
//! nothing and lists nothing; every read fails with [`Error::WaitingForKind`], and its one
//! status row says why, until a plan made once the kind is served replaces it.

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::core::{DynamicObject, GroupVersionKind};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::api::{Cache, ListOptions};
use super::error::{Error, Result};
use super::informer::InformerStatus;
use super::sync_periods::SyncPeriods;
use super::typed::{AnyObject, Decoder};

/// A kind that waits for its `CustomResourceDefinition`.
#[derive(Debug)]
pub(crate) struct WaitingCache {
    gvk: GroupVersionKind,
    reason: String,
}

impl WaitingCache {
    pub(crate) fn new(gvk: GroupVersionKind, reason: &str) -> Self {
        Self {
            gvk,
            reason: reason.to_owned(),
        }
    }

    fn error(&self) -> Error {
        Error::WaitingForKind {
            gvk: self.gvk.clone(),
            reason: self.reason.clone(),
        }
    }
}

impl Cache for WaitingCache {
    fn get<'a>(
        &'a self,
        _gvk: &'a GroupVersionKind,
        _namespace: Option<&'a str>,
        _name: &'a str,
    ) -> BoxFuture<'a, Result<Arc<DynamicObject>>> {
        Box::pin(async move { Err(self.error()) })
    }

    fn list<'a>(
        &'a self,
        _gvk: &'a GroupVersionKind,
        _options: &'a ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Arc<DynamicObject>>>> {
        Box::pin(async move { Err(self.error()) })
    }

    fn get_as<'a>(
        &'a self,
        _gvk: &'a GroupVersionKind,
        _namespace: Option<&'a str>,
        _name: &'a str,
        _decoder: &'a dyn Decoder,
    ) -> BoxFuture<'a, Result<AnyObject>> {
        Box::pin(async move { Err(self.error()) })
    }

    fn list_as<'a>(
        &'a self,
        _gvk: &'a GroupVersionKind,
        _options: &'a ListOptions,
        _decoder: &'a dyn Decoder,
    ) -> BoxFuture<'a, Result<Vec<AnyObject>>> {
        Box::pin(async move { Err(self.error()) })
    }

    fn ensure_informer<'a>(&'a self, _gvk: &'a GroupVersionKind) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move { Err(self.error()) })
    }

    fn start(&self, _tracker: &TaskTracker, _shutdown: &CancellationToken) {}

    fn wait_for_sync<'a>(&'a self, _cancel: &'a CancellationToken) -> BoxFuture<'a, Result<()>> {
        // Nothing to sync: waiting is not failing (the tree serves every other kind).
        Box::pin(async { Ok(()) })
    }

    fn informers(&self) -> Vec<InformerStatus> {
        vec![InformerStatus::waiting_for_kind(&self.gvk, &self.reason)]
    }

    fn sync_periods(&self, _gvk: &GroupVersionKind) -> SyncPeriods {
        // Nothing of the kind is cached, so nothing is resynced.
        SyncPeriods::default()
    }
}
