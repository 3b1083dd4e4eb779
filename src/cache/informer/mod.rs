//! `Informer`: one kube-runtime watcher feeding one reflector store, for one kind × namespace ×
//! selectors; tracks sync and surfaces watcher errors instead of waiting silently.

use std::sync::{Arc, Mutex, PoisonError};

use futures::{Stream, StreamExt, TryStreamExt};
use kube::{
    Api, Client,
    api::TypeMeta,
    core::{ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta},
    runtime::{WatchStreamExt, watcher},
};
use tokio::sync::watch;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::Instrument;

use super::error::{Error, Result};
use super::settings::InformerSettings;
use super::shard::InformerShard;
use super::store::{ObjectStore, StoreWriter};
use crate::selector::LabelSelector;

/// One informer of the cache tree: its kind, scope, sync state and object count (a row of a
/// `CacheConfig`'s `status.informers`).
#[derive(
    Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct InformerStatus {
    /// API version of the watched kind (`v1`, `apps/v1`).
    pub api_version: String,

    /// The watched kind.
    pub kind: String,

    /// The watched namespace; absent for an informer over every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,

    /// The label selector of the list/watch, in canonical form; absent when it selects
    /// everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,

    /// The field selector of the list/watch, in canonical form; absent when it selects
    /// everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<String>,

    /// Whether only metadata (`PartialObjectMetadata`) is cached.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub metadata_only: bool,

    /// Whether the initial list has been stored.
    pub synced: bool,

    /// Objects currently cached by this informer.
    pub objects: i64,

    /// Bytes the cached objects hold (each object's allocations and store key, counted as
    /// events are stored); absent for an informer with `unsafeDisableDeepCopy`, which holds
    /// parsed objects whose heap size is not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,

    /// Bytes the informer's transform saved on the cached objects: what they would hold as
    /// served less what they hold; absent without a transform or with
    /// `unsafeDisableDeepCopy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_bytes: Option<i64>,

    /// The informer's field projection (`keepFields[...] dropFields[...]`); absent when it
    /// keeps every field. A controller reading a field projected away sees it absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection: Option<String>,

    /// The watcher's last error, cleared by the next successful event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,

    /// `WaitingForKind` while the API server does not serve the kind (its
    /// `CustomResourceDefinition` is not established): no informer runs and nothing lists
    /// it until it is, then it starts. Absent for an informer that runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Waiting>,

    /// Why it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Why a row of `status.informers` has no running informer.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub enum Waiting {
    /// The API server does not serve the kind yet.
    WaitingForKind,
}

impl InformerStatus {
    /// The row of a `byObject` kind that waits for the API server to serve it.
    #[must_use]
    pub fn waiting_for_kind(gvk: &GroupVersionKind, reason: &str) -> Self {
        Self {
            api_version: gvk.api_version(),
            kind: gvk.kind.clone(),
            state: Some(Waiting::WaitingForKind),
            message: Some(reason.to_owned()),
            ..Self::default()
        }
    }

    /// Whether this row waits for its kind.
    #[must_use]
    pub fn is_waiting_for_kind(&self) -> bool {
        self.state == Some(Waiting::WaitingForKind)
    }
}

/// A change an informer applied to its store, for subscribers that react to changes (the
/// controller runtime) rather than read ([`super::InformerPool::subscribe`]).
#[derive(Clone, Debug)]
pub enum InformerEvent {
    /// An object was added or updated (after the transform).
    Applied(Arc<DynamicObject>),
    /// An object was deleted.
    Deleted(Arc<DynamicObject>),
    /// The store was replaced by the informer's first list, or an informer of the kind
    /// stopped: objects may have left without a `Deleted`, so read the kind again through the
    /// cache.
    Resynced,
    /// The store was replaced by a list the informer's watcher took again while it ran (after
    /// 410 Gone, or a watch it could not resume): read the kind again, and, as client-go's
    /// informer hands controller-runtime an update of every object after a relist, reconcile
    /// every object again.
    Relisted,
}

/// The informer's sync state, published on a watch channel.
#[derive(Clone, Debug, Default)]
struct Status {
    synced: bool,
    last_error: Option<String>,
    /// The last error will not go away by retrying alone (401, 403, 404): waiters fail fast.
    failed: bool,
}

/// One kind × namespace × selectors, cached by a kube-runtime watcher into a reflector store.
///
/// # Memory usage
/// With deep-copying reads (the default) the store holds [`super::CompactObject`]s: about the
/// object's JSON size; each read decodes a fresh object. With `unsafeDisableDeepCopy` it holds
/// parsed `DynamicObject`s (several times the JSON size) that reads share without copying.
#[doc(alias = "informer")]
pub struct Informer {
    gvk: GroupVersionKind,
    resource: ApiResource,
    types: TypeMeta,
    namespaced: bool,
    namespace: Option<String>,
    settings: InformerSettings,
    store: ObjectStore,
    writer: Mutex<Option<StoreWriter>>,
    status: watch::Sender<Status>,
    events: Option<tokio::sync::broadcast::Sender<InformerEvent>>,
    /// Test-only fault: ignore the relist after the first sync (after 410 Gone); see
    /// [`InformerPool::skip_relist_after_gone`](super::InformerPool::skip_relist_after_gone).
    skip_relist_after_gone: bool,
}

impl std::fmt::Debug for Informer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer")
            .field("gvk", &self.gvk)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// Whether retrying alone will not fix the watcher error (the API server refused the request:
/// 401, 403, 404), so readers waiting for sync should fail with the reason.
pub(crate) fn is_permanent(error: &watcher::Error) -> bool {
    let client_error = match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        watcher::Error::WatchError(status) => return matches!(status.code, 401 | 403 | 404),
        watcher::Error::NoResourceVersion => return true,
    };
    matches!(client_error, kube::Error::Api(status) if matches!(status.code, 401 | 403 | 404))
}

impl Informer {
    /// Creates an informer; nothing runs until [`Informer::start`] (or
    /// `Informer::run_events` in tests).
    #[must_use]
    pub fn new(
        gvk: GroupVersionKind,
        resource: ApiResource,
        namespaced: bool,
        namespace: Option<String>,
        settings: InformerSettings,
    ) -> Self {
        let (store, writer) =
            ObjectStore::new(gvk.clone(), &resource, settings.unsafe_disable_deep_copy);
        let (status, _) = watch::channel(Status::default());
        let namespace = if namespaced { namespace } else { None };
        // Cluster-scoped kinds are cached whole on every member of a shard ring.
        let settings = if namespaced {
            settings
        } else {
            InformerSettings {
                shard: None,
                ..settings
            }
        };
        let types = TypeMeta {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        };
        Self {
            gvk,
            resource,
            types,
            namespaced,
            namespace,
            settings,
            store,
            writer: Mutex::new(Some(writer)),
            status,
            events: None,
            skip_relist_after_gone: false,
        }
    }

    /// The test-only fault of
    /// [`InformerPool::skip_relist_after_gone`](super::InformerPool::skip_relist_after_gone).
    #[must_use]
    pub(crate) fn skipping_relist_after_gone(mut self, on: bool) -> Self {
        self.skip_relist_after_gone = on;
        self
    }

    /// Sends every change this informer applies to `events` (while it has receivers).
    #[must_use]
    pub(crate) fn with_events(
        mut self,
        events: tokio::sync::broadcast::Sender<InformerEvent>,
    ) -> Self {
        self.events = Some(events);
        self
    }

    fn publish(&self, event: &watcher::Event<DynamicObject>) {
        let Some(events) = self.events.as_ref().filter(|e| e.receiver_count() > 0) else {
            return;
        };
        let event = match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                InformerEvent::Applied(Arc::new(o.clone()))
            }
            watcher::Event::Delete(o) => InformerEvent::Deleted(Arc::new(o.clone())),
            // The status says synced from the first list on (it is set after this).
            watcher::Event::InitDone if self.has_synced() => InformerEvent::Relisted,
            watcher::Event::InitDone => InformerEvent::Resynced,
            watcher::Event::Init => return,
        };
        // No receiver left is fine: nobody is interested any more.
        let _ = events.send(event);
    }

    /// The kind this informer caches.
    #[must_use]
    pub fn gvk(&self) -> &GroupVersionKind {
        &self.gvk
    }

    /// Whether the kind's objects live in namespaces.
    #[must_use]
    pub(crate) fn is_namespaced(&self) -> bool {
        self.namespaced
    }

    /// The settings this informer runs with (a cluster-scoped kind's without a shard).
    #[must_use]
    pub fn settings(&self) -> &InformerSettings {
        &self.settings
    }

    /// How many objects the store holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether the store holds no object.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.store.len() == 0
    }

    /// Whether the first list has completed.
    #[must_use]
    pub fn has_synced(&self) -> bool {
        self.status.borrow().synced
    }

    fn watcher_config(&self) -> watcher::Config {
        let mut config = watcher::Config::default();
        if let Some(labels) = &self.settings.label_selector {
            config = config.labels(&labels.to_string());
        }
        if let Some(fields) = &self.settings.field_selector
            && !fields.is_empty()
        {
            config = config.fields(&fields.to_string());
        }
        if !self.settings.enable_watch_bookmarks {
            config = config.disable_bookmarks();
        }
        config
    }

    /// Starts the watcher on `tracker`; it stops when `shutdown` is cancelled. Starting twice
    /// does nothing.
    pub fn start(
        self: &Arc<Self>,
        client: Client,
        tracker: &TaskTracker,
        shutdown: CancellationToken,
    ) {
        let Some(writer) = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return;
        };
        let config = self.watcher_config();
        // A member's share of a kind sharded by uid: the API server selects it when it can.
        let client = match &self.settings.shard {
            Some(InformerShard {
                selector: Some(selector),
                server_side: true,
            }) => super::sharded_client::sharded_client(&client, selector),
            _ => client,
        };
        let events = if self.settings.metadata_only {
            let api: Api<PartialObjectMeta<DynamicObject>> = match &self.namespace {
                Some(ns) => Api::namespaced_with(client, ns, &self.resource),
                None => Api::all_with(client, &self.resource),
            };
            let types = self.types.clone();
            watcher::watcher(api, config)
                .default_backoff()
                .map_ok(move |event| map_event(event, |meta| metadata_to_dynamic(meta, &types)))
                .boxed()
        } else {
            let api: Api<DynamicObject> = match &self.namespace {
                Some(ns) => Api::namespaced_with(client, ns, &self.resource),
                None => Api::all_with(client, &self.resource),
            };
            let types = self.types.clone();
            watcher::watcher(api, config)
                .default_backoff()
                .map_ok(move |event| map_event(event, |obj| with_types(obj, &types)))
                .boxed()
        };
        let this = Arc::clone(self);
        let span = tracing::info_span!(
            "informer",
            k8s.gvk = %super::error::gvk_string(&self.gvk),
            k8s.namespace = self.namespace.as_deref().unwrap_or(""),
        );
        tracker
            .spawn(async move { this.run_events(events, writer, shutdown).await }.instrument(span));
    }

    /// Drives the store from a stream of watcher events until the stream ends or `shutdown` is
    /// cancelled: transforms each object, applies it to the store (encoded compactly unless
    /// reads share objects), tracks sync and errors.
    pub(crate) async fn run_events<S>(
        &self,
        events: S,
        mut writer: StoreWriter,
        shutdown: CancellationToken,
    ) where
        S: Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>> + Send,
    {
        let mut events = std::pin::pin!(events);
        // Only for the test-only fault of `skip_relist_after_gone`.
        let mut relisting_skipped = false;
        loop {
            let next = tokio::select! {
                () = shutdown.cancelled() => {
                    // Readers still waiting for the first list must not wait forever.
                    self.status.send_if_modified(|s| {
                        let waiting = !s.synced && !s.failed;
                        if waiting {
                            s.failed = true;
                            s.last_error = Some("informer stopped before it synced".into());
                        }
                        waiting
                    });
                    break;
                }
                next = events.next() => next,
            };
            match next {
                None => break,
                Some(Ok(event)) => {
                    if self.skip_relist_after_gone && self.has_synced() {
                        match event {
                            watcher::Event::Init => relisting_skipped = true,
                            watcher::Event::InitDone => relisting_skipped = false,
                            _ => {}
                        }
                        if relisting_skipped || matches!(event, watcher::Event::InitDone) {
                            continue;
                        }
                    }
                    if !self.keeps(&event) {
                        continue;
                    }
                    let event = if self.settings.transform.is_identity() {
                        writer.apply(&event);
                        event
                    } else {
                        // What the object would hold as served, so that the store counts
                        // what the transform saves (one more encoding per object).
                        let served = match &event {
                            watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)
                                if writer.counts_bytes() =>
                            {
                                super::CompactObject::encode(obj)
                                    .ok()
                                    .map(|c| c.held_bytes())
                            }
                            _ => None,
                        };
                        let event = event
                            .modify(|obj| super::transform::apply(&self.settings.transform, obj));
                        writer.apply_transformed(&event, served);
                        event
                    };
                    self.publish(&event);
                    let init_done = matches!(event, watcher::Event::InitDone);
                    self.status.send_if_modified(|s| {
                        let changed = s.last_error.is_some() || (init_done && !s.synced);
                        s.last_error = None;
                        s.failed = false;
                        s.synced |= init_done;
                        changed
                    });
                    if init_done {
                        tracing::info!(objects = self.store.len(), "informer synced");
                    }
                }
                Some(Err(error)) => {
                    let permanent = is_permanent(&error);
                    let reason = crate::telemetry::error_chain(&error);
                    if permanent {
                        tracing::warn!(error = %reason, "informer can not list or watch");
                    } else {
                        tracing::debug!(error = %reason, "informer retrying");
                    }
                    self.status.send_modify(|s| {
                        s.last_error = Some(reason);
                        s.failed = permanent;
                    });
                }
            }
        }
    }

    /// Whether `event` concerns an object of this member's share (always, unsharded): a
    /// server without `shardSelector` sends every object, and one with it only the member's,
    /// which this checks again for nothing.
    fn keeps(&self, event: &watcher::Event<DynamicObject>) -> bool {
        let Some(shard) = &self.settings.shard else {
            return true;
        };
        match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) | watcher::Event::Delete(o) => {
                shard.keeps(o.metadata.uid.as_deref().unwrap_or_default())
            }
            watcher::Event::Init | watcher::Event::InitDone => true,
        }
    }

    /// Takes the store's writer for [`Informer::run_events`] (tests feed their own streams).
    /// `None` once the informer was started.
    #[cfg(test)]
    pub(crate) fn take_writer(&self) -> Option<StoreWriter> {
        self.writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Waits until the first list completed.
    ///
    /// # Errors
    /// [`Error::Timeout`] when `cancel` fires first; [`Error::InformerFailed`] as soon as the
    /// watcher reports an error retrying will not fix (e.g. 403 Forbidden).
    pub async fn wait_for_sync(&self, cancel: &CancellationToken) -> Result<()> {
        let mut rx = self.status.subscribe();
        let outcome = tokio::select! {
            () = cancel.cancelled() => return Err(Error::Timeout { gvk: self.gvk.clone() }),
            outcome = rx.wait_for(|s| s.synced || s.failed) => outcome.map(|s| s.clone()),
        };
        match outcome {
            Ok(s) if s.synced => Ok(()),
            Ok(s) => Err(Error::InformerFailed {
                gvk: self.gvk.clone(),
                namespace: self.namespace.clone(),
                reason: s.last_error.unwrap_or_default(),
            }),
            // The sender lives in `self`; it can not be dropped while we borrow it.
            Err(_) => Err(Error::Timeout {
                gvk: self.gvk.clone(),
            }),
        }
    }

    /// Reads one object: a fresh copy, or the cached `Arc` itself with
    /// `unsafe_disable_deep_copy`. The namespace is ignored for cluster-scoped kinds.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the object is not in the store; [`Error::Decode`] if a stored
    /// object can not be decoded (a bug).
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Result<Arc<DynamicObject>> {
        let namespace = namespace.filter(|_| self.namespaced);
        self.store
            .get(namespace, name)?
            .ok_or_else(|| Error::NotFound {
                gvk: self.gvk.clone(),
                namespace: namespace.map(str::to_string),
                name: name.to_string(),
            })
    }

    /// Lists objects in `namespace` (all when `None`) matching the label selector and exact
    /// field requirements, sorted by namespace and name, at most `limit`.
    ///
    /// # Errors
    /// [`Error::Decode`] if a stored object can not be decoded (a bug).
    pub fn list(
        &self,
        namespace: Option<&str>,
        labels: Option<&LabelSelector>,
        fields: &[(&str, &str)],
        limit: Option<usize>,
    ) -> Result<Vec<Arc<DynamicObject>>> {
        self.store.list(
            namespace.filter(|_| self.namespaced),
            labels,
            fields,
            limit.unwrap_or(usize::MAX),
        )
    }

    /// Reads one object as `decoder`'s type (a typed read, see [`super::typed`]): decoded once
    /// from the compact store, or, with `unsafe_disable_deep_copy`, the typed copy kept beside
    /// the shared object (made by the first typed read). The namespace is ignored for
    /// cluster-scoped kinds.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the object is not in the store; [`Error::Convert`] when it
    /// does not fit the type.
    pub fn get_as(
        &self,
        namespace: Option<&str>,
        name: &str,
        decoder: &dyn super::typed::Decoder,
    ) -> Result<super::typed::AnyObject> {
        let namespace = namespace.filter(|_| self.namespaced);
        self.store
            .get_as(namespace, name, decoder)?
            .ok_or_else(|| Error::NotFound {
                gvk: self.gvk.clone(),
                namespace: namespace.map(str::to_string),
                name: name.to_string(),
            })
    }

    /// What [`Informer::list`] selects, as `decoder`'s type (see [`Informer::get_as`]).
    ///
    /// # Errors
    /// [`Error::Convert`] when an object does not fit the type.
    pub fn list_as(
        &self,
        namespace: Option<&str>,
        labels: Option<&LabelSelector>,
        fields: &[(&str, &str)],
        limit: Option<usize>,
        decoder: &dyn super::typed::Decoder,
    ) -> Result<Vec<super::typed::AnyObject>> {
        self.store.list_as(
            namespace.filter(|_| self.namespaced),
            labels,
            fields,
            limit.unwrap_or(usize::MAX),
            decoder,
        )
    }

    /// What this informer reports about itself.
    #[must_use]
    pub fn status(&self) -> InformerStatus {
        let status = self.status.borrow().clone();
        InformerStatus {
            api_version: self.resource.api_version.clone(),
            kind: self.resource.kind.clone(),
            namespace: self.namespace.clone(),
            label_selector: self
                .settings
                .label_selector
                .as_ref()
                .map(ToString::to_string),
            field_selector: self
                .settings
                .field_selector
                .as_ref()
                .map(ToString::to_string),
            metadata_only: self.settings.metadata_only,
            synced: status.synced,
            objects: i64::try_from(self.store.len()).unwrap_or(i64::MAX),
            bytes: self.store.bytes(),
            saved_bytes: self
                .store
                .saved_bytes()
                .filter(|_| !self.settings.transform.is_identity()),
            projection: Some(self.settings.transform.projection.describe())
                .filter(|p| !p.is_empty()),
            error: status.last_error,
            state: None,
            message: None,
        }
    }
}

fn map_event<A, B>(event: watcher::Event<A>, f: impl Fn(A) -> B) -> watcher::Event<B> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(f(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(f(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(f(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// `obj` with the informer's `apiVersion` and `kind` when it has none: the items of a list of a
/// built-in kind carry none (kube-apiserver leaves them out; watch events have them), and a
/// cached object says what it is whichever way it came, as controller-runtime's cache reader
/// sets the kind on what it returns (`pkg/cache/internal/cache_reader.go`) and client-go's
/// `UnstructuredList` gives its items the list's kind.
fn with_types(mut obj: DynamicObject, types: &TypeMeta) -> DynamicObject {
    if obj.types.is_none() {
        obj.types = Some(types.clone());
    }
    obj
}

/// Keeps only the metadata: the object's data is an empty map, which allocates nothing.
fn metadata_to_dynamic(meta: PartialObjectMeta<DynamicObject>, types: &TypeMeta) -> DynamicObject {
    DynamicObject {
        types: Some(types.clone()),
        metadata: meta.metadata,
        data: serde_json::Value::Object(serde_json::Map::new()),
    }
}

#[cfg(test)]
mod tests;
