//! `InformerCache`: one informer per kind for one namespace (or all) and one set of settings,
//! created on first read unless `readerFailOnMissingInformer` (controller-runtime's
//! `informerCache` + `internal.Informers`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use kube::{
    Client,
    core::{DynamicObject, GroupVersionKind},
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::api::{Cache, ListOptions};
use super::error::{Error, Result};
use super::informer::{Informer, InformerStatus};
use super::pool::{InformerKey, InformerPool, PooledInformer};
use super::resolver::Resolver;
use super::settings::InformerSettings;
use super::sync_periods::SyncPeriods;
use super::typed::{AnyObject, Decoder};

/// What every cache of one tree shares: the client, kind resolution, and read behaviour.
#[derive(Clone)]
pub struct Context {
    /// The client informers list and watch with.
    pub client: Client,
    /// Maps kinds to resources and scopes.
    pub resolver: Arc<dyn Resolver>,
    /// Owns the informers; trees built on the same pool share informers of equal identity.
    pub pool: Arc<InformerPool>,
    /// Reads of a kind without informer fail with [`Error::KindNotCached`] instead of
    /// starting one (controller-runtime `ReaderFailOnMissingInformer`, default false).
    pub reader_fail_on_missing_informer: bool,
    /// How long a read waits for a new informer to sync before [`Error::Timeout`]; `None`
    /// waits until shutdown, as controller-runtime waits for the caller's context.
    pub sync_timeout: Option<Duration>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field(
                "reader_fail_on_missing_informer",
                &self.reader_fail_on_missing_informer,
            )
            .field("sync_timeout", &self.sync_timeout)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// A context for trees whose informers list and watch through `client`, with a new pool,
    /// kinds resolved by `resolver`, informers started on first read and reads waiting for
    /// sync until shutdown (controller-runtime's defaults).
    #[must_use]
    pub fn new(client: Client, resolver: Arc<dyn Resolver>) -> Self {
        Self {
            pool: InformerPool::new(client.clone()),
            client,
            resolver,
            reader_fail_on_missing_informer: false,
            sync_timeout: None,
        }
    }

    /// A context whose client is never used: unit tests feed informers by hand and resolve
    /// kinds from the built-in table.
    #[cfg(test)]
    pub(crate) fn offline(reader_fail_on_missing_informer: bool) -> Self {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Self {
            reader_fail_on_missing_informer,
            ..Self::new(
                Client::try_from(config).unwrap(),
                Arc::new(super::resolver::BuiltinKinds),
            )
        }
    }
}

/// The shutdown token the cache was started with.
#[derive(Clone)]
struct Running {
    shutdown: CancellationToken,
}

/// Informers for any kind, all in one namespace (or all namespaces) with one set of settings.
#[doc(alias = "informerCache")]
pub struct InformerCache {
    context: Context,
    namespace: Option<String>,
    settings: InformerSettings,
    /// Looked up on every read: hashed with foldhash, not `SipHash` (a kind is no attacker's
    /// input).
    informers: Mutex<HashMap<GroupVersionKind, Arc<PooledInformer>, foldhash::fast::RandomState>>,
    running: OnceLock<Running>,
}

impl std::fmt::Debug for InformerCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerCache")
            .field("namespace", &self.namespace)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl InformerCache {
    /// A cache for `namespace` (`None`: all namespaces); no informer exists until a read or
    /// [`Cache::ensure_informer`].
    #[must_use]
    pub fn new(context: Context, namespace: Option<String>, settings: InformerSettings) -> Self {
        Self {
            context,
            namespace,
            settings,
            informers: Mutex::default(),
            running: OnceLock::new(),
        }
    }

    /// The settings applied to every informer of this cache.
    #[must_use]
    pub fn settings(&self) -> &InformerSettings {
        &self.settings
    }

    /// Takes over the pool's informers of this cache's namespace and settings whose kind
    /// `wanted` accepts, so that a tree built for a new config keeps serving the kinds the old
    /// tree had started, from the same stores.
    pub(crate) fn adopt(&self, wanted: &dyn Fn(&GroupVersionKind) -> bool) {
        let adopted = self
            .context
            .pool
            .adopt(self.namespace.as_deref(), &self.settings, wanted);
        let mut informers = self
            .informers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (gvk, informer) in adopted {
            informers.entry(gvk).or_insert(informer);
        }
    }

    fn peek(&self, gvk: &GroupVersionKind) -> Option<Arc<PooledInformer>> {
        self.informers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(gvk)
            .cloned()
    }

    /// The informer for `gvk`, created (and started, if the cache runs) when missing.
    async fn informer(&self, gvk: &GroupVersionKind) -> Result<Arc<PooledInformer>> {
        if let Some(informer) = self.peek(gvk) {
            return Ok(informer);
        }
        let kind = self.context.resolver.resolve(gvk).await?;
        let mut informers = self
            .informers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Another reader may have created it while we resolved the kind. The pool starts it
        // when the pool runs (it does once this cache was started).
        let informer = informers.entry(gvk.clone()).or_insert_with(|| {
            let key = InformerKey::for_kind(
                gvk.clone(),
                self.namespace.clone(),
                &self.settings,
                kind.namespaced,
            );
            self.context.pool.obtain(&key, &kind)
        });
        Ok(Arc::clone(informer))
    }

    /// The informer a read uses: fails fast when it may not be created or the cache is not
    /// started, otherwise waits for it to sync (controller-runtime `Informers.Get`). A read
    /// before start still registers the informer, so that starting the cache starts it, as
    /// controller-runtime's `addInformerToMap` does before `ErrCacheNotStarted` is returned.
    async fn informer_for_read(&self, gvk: &GroupVersionKind) -> Result<Arc<PooledInformer>> {
        let informer = match self.peek(gvk) {
            Some(informer) => informer,
            None if self.context.reader_fail_on_missing_informer => {
                return Err(Error::KindNotCached { gvk: gvk.clone() });
            }
            None => self.informer(gvk).await?,
        };
        let Some(running) = self.running.get() else {
            return Err(Error::NotStarted);
        };
        if !informer.has_synced() {
            self.wait(&informer, &running.shutdown).await?;
        }
        Ok(informer)
    }

    /// The informer a list uses and the list's exact field requirements, checked in the
    /// reader's order (`pkg/cache/internal/cache_reader.go`).
    async fn informer_for_list<'o>(
        &self,
        gvk: &GroupVersionKind,
        options: &'o ListOptions,
    ) -> Result<(Arc<PooledInformer>, Vec<(&'o str, &'o str)>)> {
        let informer = self.informer_for_read(gvk).await?;
        if options
            .continue_token
            .as_deref()
            .is_some_and(|c| !c.is_empty())
        {
            return Err(Error::ContinueNotSupported);
        }
        let fields = match &options.field_selector {
            Some(selector) => super::matching::exact_requirements(selector)?,
            None => Vec::new(),
        };
        Ok((informer, fields))
    }

    async fn wait(&self, informer: &Informer, shutdown: &CancellationToken) -> Result<()> {
        let cancel = shutdown.child_token();
        let wait = informer.wait_for_sync(&cancel);
        match self.context.sync_timeout {
            None => wait.await,
            Some(timeout) => tokio::time::timeout(timeout, wait)
                .await
                .unwrap_or_else(|_| {
                    Err(Error::Timeout {
                        gvk: informer.gvk().clone(),
                    })
                }),
        }
    }

    /// Puts a (test-fed) informer in place for `gvk`.
    #[cfg(test)]
    pub(crate) fn insert_informer(&self, informer: Arc<Informer>) {
        self.informers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(informer.gvk().clone(), PooledInformer::unpooled(informer));
    }

    /// The informer for `gvk`, if one exists.
    #[cfg(test)]
    pub(crate) fn informer_of(&self, gvk: &GroupVersionKind) -> Option<Arc<Informer>> {
        self.peek(gvk).map(|p| Arc::clone(p.informer()))
    }

    fn all_informers(&self) -> Vec<Arc<PooledInformer>> {
        self.informers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }
}

impl Cache for InformerCache {
    fn get<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Arc<DynamicObject>>> {
        Box::pin(async move { self.informer_for_read(gvk).await?.get(namespace, name) })
    }

    fn list<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        options: &'a ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Arc<DynamicObject>>>> {
        Box::pin(async move {
            let (informer, fields) = self.informer_for_list(gvk, options).await?;
            informer.list(
                options.namespace.as_deref(),
                options.label_selector.as_ref(),
                &fields,
                options.limit.filter(|l| *l > 0),
            )
        })
    }

    fn get_as<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: &'a str,
        decoder: &'a dyn Decoder,
    ) -> BoxFuture<'a, Result<AnyObject>> {
        Box::pin(async move {
            self.informer_for_read(gvk)
                .await?
                .get_as(namespace, name, decoder)
        })
    }

    fn list_as<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        options: &'a ListOptions,
        decoder: &'a dyn Decoder,
    ) -> BoxFuture<'a, Result<Vec<AnyObject>>> {
        Box::pin(async move {
            let (informer, fields) = self.informer_for_list(gvk, options).await?;
            informer.list_as(
                options.namespace.as_deref(),
                options.label_selector.as_ref(),
                &fields,
                options.limit.filter(|l| *l > 0),
                decoder,
            )
        })
    }

    fn ensure_informer<'a>(&'a self, gvk: &'a GroupVersionKind) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let informer = self.informer(gvk).await?;
            if let Some(running) = self.running.get() {
                self.wait(&informer, &running.shutdown).await?;
            }
            Ok(())
        })
    }

    fn start(&self, tracker: &TaskTracker, shutdown: &CancellationToken) {
        let running = Running {
            shutdown: shutdown.clone(),
        };
        if self.running.set(running).is_err() {
            return;
        }
        self.context.pool.start(tracker, shutdown);
        // Pooled informers run now; this starts the ones fed by hand (tests).
        for informer in self.all_informers() {
            informer
                .informer()
                .start(self.context.client.clone(), tracker, shutdown.child_token());
        }
    }

    fn wait_for_sync<'a>(&'a self, cancel: &'a CancellationToken) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            for informer in self.all_informers() {
                informer.wait_for_sync(cancel).await?;
            }
            Ok(())
        })
    }

    fn informers(&self) -> Vec<InformerStatus> {
        let mut infos: Vec<InformerStatus> =
            self.all_informers().iter().map(|i| i.status()).collect();
        infos.sort_by(|a, b| (&a.api_version, &a.kind).cmp(&(&b.api_version, &b.kind)));
        infos
    }

    fn sync_periods(&self, _gvk: &GroupVersionKind) -> SyncPeriods {
        let period = self.settings.sync_period;
        match &self.namespace {
            // A cluster-scoped kind is cached whole whatever the namespace.
            Some(namespace) => SyncPeriods::default()
                .with_namespace(namespace, period)
                .with_cluster(period),
            None => SyncPeriods::everywhere(period),
        }
    }
}
