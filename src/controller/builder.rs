//! [`Controller`]: declares the kind a controller reconciles, the kinds it owns and watches,
//! and runs kube-runtime's scheduler and runner on the informer pool's changes.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use kube::core::{GroupVersionKind, Resource};
use kube::runtime::controller::{self as runtime, Action};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::context::Context;
use super::error::{Error, Result};
use super::reconcile;
use super::relation::Relation;
use super::series::Series;
use super::source;
use super::stub::Stub;
use crate::cache::{Cache, typed};
use crate::controller::ControllerMetrics;
use crate::manager::Manager;

/// How many reconciles of one controller run at once unless set.
///
/// controller-runtime pkg/controller/controller.go: `MaxConcurrentReconciles` defaults to 1.
pub const DEFAULT_CONCURRENCY: u16 = 1;

/// A failed reconcile of `object`, as kube-runtime's runner hands it to the error policy:
/// the runner schedules stubs, and the error policy gets the object the reconcile read.
struct Failed<K, E> {
    object: Arc<K>,
    error: E,
}

impl<K, E: Debug> Debug for Failed<K, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl<K, E: std::fmt::Display> std::fmt::Display for Failed<K, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl<K, E: std::error::Error> std::error::Error for Failed<K, E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// A controller for the kind `K`: what it reconciles (`for`), owns and watches, and how many
/// reconciles run at once. [`Controller::run`] feeds kube-runtime's `Controller` (per-object
/// dedupe, concurrency, `Action::requeue`, the error policy) from the informer pool, so it
/// follows the cache tree across reloads and opens no watch of its own.
///
/// ```no_run
/// # async fn demo(ctx: informant::controller::Context)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use informant::controller::{Action, Context, Controller, default_error_policy};
/// use k8s_openapi::api::batch::v1::{CronJob, Job};
/// use tokio_util::sync::CancellationToken;
///
/// async fn reconcile(cronjob: Arc<CronJob>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
///     // Read through the cache tree, write with ctx.client(), record with ctx.record().
///     Ok(Action::await_change())
/// }
///
/// Controller::<CronJob>::new("cronjob")
///     .owns::<Job>()
///     .concurrency(2)
///     .run(ctx, reconcile, default_error_policy, CancellationToken::new())
///     .await?;
/// # Ok(())
/// # }
/// ```
///
/// # Memory usage
/// The controller holds no object: kube-runtime's runner schedules from a store of [`Stub`]s
/// (name and namespace, about what kube-runtime's `Store` costs per entry with nothing in it),
/// and each reconcile reads its object through the cache tree, decoded once from the compact
/// store (with `unsafeDisableDeepCopy`, the cache's shared `Arc`). So each object is held
/// once, in the cache. `docs/benchmarks.md` (`cargo bench --bench controller_memory`) has the
/// bytes per object and the cost of that read. Owned kinds are not stored: each change decodes
/// only the child's metadata. Watched kinds are decoded per change for the mapper and then
/// dropped.
///
/// The controller sees what the cache holds: with `metadataOnly` for the `for` kind, `K` is
/// decoded from metadata alone (no `spec`, no `status`); objects that do not decode are
/// skipped with a warning.
#[doc(alias = "reconciler")]
pub struct Controller<K: Resource<DynamicType = ()> + Clone + Debug + 'static> {
    name: String,
    relations: Vec<Relation<K>>,
    concurrency: u16,
    metrics: Option<ControllerMetrics>,
    store: Store<Stub<K>>,
    writer: reflector::store::Writer<Stub<K>>,
}

impl<K: Resource<DynamicType = ()> + Clone + Debug + 'static> Debug for Controller<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<&GroupVersionKind> = self.relations.iter().map(|r| &r.gvk).collect();
        f.debug_struct("Controller")
            .field("name", &self.name)
            .field("kind", &K::kind(&()))
            .field("related", &kinds)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

impl<K> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// A controller named `name` (its span field and metrics label) reconciling `K`.
    #[must_use]
    pub fn new(name: &str) -> Self {
        let (store, writer) = reflector::store();
        Self {
            name: name.to_owned(),
            relations: Vec::new(),
            concurrency: DEFAULT_CONCURRENCY,
            metrics: None,
            store,
            writer,
        }
    }

    /// Reconciles the controller owner of every `C` that changes (the owner reference with
    /// `controller: true`, as controller-runtime's `Owns`).
    ///
    /// As kube-runtime's own `owns`, a child that leaves the cache without a delete event (a
    /// reload narrowed its scope) triggers nothing.
    #[must_use]
    pub fn owns<C>(mut self) -> Self
    where
        C: Resource<DynamicType = ()> + Send + Sync + 'static,
    {
        self.relations.push(Relation::owns::<C>());
        self
    }

    /// Reconciles the `K`s `mapper` names for every `O` that changes or is deleted.
    #[must_use]
    pub fn watches<O, F>(mut self, mapper: F) -> Self
    where
        O: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        F: Fn(&O) -> Vec<ObjectRef<K>> + Send + Sync + 'static,
    {
        self.relations.push(Relation::watches(mapper));
        self
    }

    /// Runs at most `n` reconciles at once (never two of the same object); 0 means
    /// [`DEFAULT_CONCURRENCY`], as controller-runtime treats it.
    #[must_use]
    pub fn concurrency(mut self, n: u16) -> Self {
        self.concurrency = if n == 0 { DEFAULT_CONCURRENCY } else { n };
        self
    }

    /// Counts reconciles and queue adds in `metrics` under this controller's name.
    #[must_use]
    pub fn metrics(mut self, metrics: &ControllerMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// The controller's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The runner's store (what reconciles are scheduled from): a [`Stub`] (name and
    /// namespace) of each object of `K` the cache tree holds, empty until
    /// [`Controller::run`] has listed the kind, then following the cache tree. The objects
    /// themselves are read through the cache (`Context::get`).
    #[must_use]
    pub fn store(&self) -> Store<Stub<K>> {
        self.store.clone()
    }

    /// Adds the controller to `manager` (controller-runtime's
    /// `ctrl.NewControllerManagedBy(mgr)...Complete`): it runs on the leader once the caches
    /// synced (with `spec.sharding`, on every member, each reconciling its share), reconciles with `reconcile` through [`Context::of`] the manager, retries
    /// failures as `error_policy` says ([`super::default_error_policy`] is
    /// controller-runtime's backoff), and is counted in the manager's
    /// [`ControllerMetrics::of`] under its name.
    ///
    /// ```no_run
    /// # async fn demo(mut manager: informant::manager::Manager) -> Result<(), informant::manager::Error> {
    /// use std::sync::Arc;
    /// use informant::controller::{Action, Context, Controller, default_error_policy};
    /// use k8s_openapi::api::batch::v1::{CronJob, Job};
    ///
    /// async fn reconcile(cronjob: Arc<CronJob>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
    ///     Ok(Action::await_change())
    /// }
    ///
    /// Controller::<CronJob>::new("cronjob")
    ///     .owns::<Job>()
    ///     .add_to(&mut manager, reconcile, default_error_policy);
    /// manager.run(tokio_util::sync::CancellationToken::new()).await
    /// # }
    /// ```
    pub fn add_to<R, Fut, E, P>(self, manager: &mut Manager, reconcile: R, error_policy: P)
    where
        R: Fn(Arc<K>, Arc<Context>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
        P: Fn(Arc<K>, &E, Arc<Context>) -> Action + Send + Sync + 'static,
    {
        let ctx = Context::of(manager);
        let controller = self.metrics(&ControllerMetrics::of(manager));
        let name = controller.name().to_owned();
        manager.add_controller(&name, move |shutdown| async move {
            controller
                .run(ctx, reconcile, error_policy, shutdown)
                .await
                .map_err(Into::into)
        });
    }

    /// Runs the controller until `shutdown`, then lets running reconciles finish.
    ///
    /// It subscribes to the pool's changes of `K` and of every owned and watched kind, then
    /// makes sure their informers exist and synced (subscribing first, so no change between
    /// sync and subscription is lost), lists `K` through the cache into its store, and hands
    /// every change to kube-runtime's scheduler. Each reconcile runs in a `reconcile` span and
    /// is counted; a failed one goes to `error_policy`, whose [`Action`] says when to retry
    /// ([`super::default_error_policy`] is controller-runtime's per-object exponential
    /// backoff). A pool `Resynced` (a relist, or an informer stopped by a reload) lists `K`
    /// again, so objects that left the cache's scope leave the store. Every object is asked
    /// for again once per the `syncPeriod` of the cache serving it ([`super::resync`]).
    ///
    /// # Errors
    /// [`Error::Informer`] when a kind's informers can not start or sync; [`Error::Runner`]
    /// if kube-runtime's runner stops.
    pub async fn run<R, Fut, E, P>(
        self,
        ctx: Context,
        reconcile: R,
        error_policy: P,
        shutdown: CancellationToken,
    ) -> Result<()>
    where
        R: Fn(Arc<K>, Arc<Context>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
        P: Fn(Arc<K>, &E, Arc<Context>) -> Action + Send + Sync + 'static,
    {
        let Self {
            name,
            relations,
            concurrency,
            metrics,
            store,
            writer,
        } = self;
        let ctx = Arc::new(ctx.for_controller());
        let series = Series::new(metrics.as_ref(), &name, concurrency);
        let gvk = typed::gvk_of::<K>();

        // Subscribe before the informers exist or sync, so no change is lost in between.
        let own_events = ctx.pool().subscribe(&gvk);
        let related_events: Vec<_> = relations
            .iter()
            .map(|r| ctx.pool().subscribe(&r.gvk))
            .collect();
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            ensured = ensure_informers(&ctx, &name, &gvk, &relations) => ensured?,
        }

        // Every `Stub<K>` key shares the kind's (empty) dynamic type.
        let dyntype = Arc::new(());
        let resync = super::resync(
            store.clone(),
            Arc::clone(ctx.cache()),
            gvk.clone(),
            Arc::clone(&dyntype),
            series.clone(),
        );
        let changes = super::stubs::<K>(own_events, Arc::clone(ctx.cache()), gvk);
        let (objects, pass) = source::reflected(
            changes,
            writer,
            Arc::clone(&dyntype),
            (*ctx).clone(),
            series.clone(),
        );

        let gained = super::shard_gained(&ctx, store.clone(), Arc::clone(&dyntype), series.clone());
        let mut controller = runtime::Controller::for_stream_with(objects, store, dyntype)
            .with_config(runtime::Config::default().concurrency(concurrency))
            .reconcile_on(pass)
            .reconcile_on(resync)
            .reconcile_on(gained)
            .graceful_shutdown_on(shutdown.cancelled_owned());
        for (relation, events) in relations.into_iter().zip(related_events) {
            controller =
                relation.attach(controller, events, Arc::clone(ctx.cache()), series.clone());
        }

        let label: Arc<str> = name.as_str().into();
        let reconcile = Arc::new(reconcile);
        let retried = series.clone();
        let dropped = series.clone();
        let kind = Arc::new(typed::gvk_of::<K>());
        let results = controller.run(
            move |stub: Arc<Stub<K>>, ctx: Arc<Context>| {
                let (label, series) = (Arc::clone(&label), series.clone());
                let (reconcile, kind) = (Arc::clone(&reconcile), Arc::clone(&kind));
                async move {
                    let answer = ctx
                        .cache()
                        .get_as(&kind, stub.namespace(), stub.name(), &typed::As::<K>::new())
                        .await
                        .and_then(|object| typed::downcast::<K>(&kind, object));
                    let object = match super::stub::read_stub(answer, &stub, &(), &ctx, &series) {
                        Ok(object) => object,
                        Err(action) => return Ok(action),
                    };
                    // With sharding, another member may own the object now: it reconciles it.
                    let Some(admission) = ctx.admit(&label, &K::kind(&()), object.meta()) else {
                        return Ok(Action::await_change());
                    };
                    let reconciled = admission.run(reconcile::instrumented(
                        &label,
                        series,
                        (Arc::clone(&object), stub),
                        Arc::clone(&ctx),
                        move |object, ctx| reconcile(object, ctx),
                    ));
                    reconciled
                        .await
                        .unwrap_or(Ok(Action::await_change()))
                        .map_err(|error| Failed { object, error })
                }
            },
            move |_stub, failed: &Failed<K, E>, ctx| {
                let action = error_policy(Arc::clone(&failed.object), &failed.error, ctx);
                if action != Action::await_change() {
                    retried.queue_retried();
                }
                action
            },
            ctx,
        );
        drive(results, name, dropped).await
    }
}

/// Makes sure the informers of `gvk` and of every related kind exist and synced.
async fn ensure_informers<K>(
    ctx: &Context,
    controller: &str,
    gvk: &GroupVersionKind,
    relations: &[Relation<K>],
) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + Debug + 'static,
{
    let mut kinds = vec![gvk];
    for relation in relations {
        if !kinds.contains(&&relation.gvk) {
            kinds.push(&relation.gvk);
        }
    }
    futures::future::try_join_all(kinds.into_iter().map(|kind| async move {
        ctx.cache()
            .ensure_informer(kind)
            .await
            .map_err(|source| Error::Informer {
                controller: controller.to_owned(),
                gvk: kind.clone(),
                source,
            })
    }))
    .await
    .map(drop)
}

/// Drives kube-runtime's result stream to its end (shutdown, once running reconciles finish).
/// Reconcile failures were logged in their span; an object deleted before its turn is normal.
async fn drive<K, E>(
    results: impl futures::Stream<
        Item = std::result::Result<(ObjectRef<K>, Action), runtime::Error<E, watcher::Error>>,
    >,
    controller: String,
    series: Series,
) -> Result<()>
where
    K: Resource,
    E: std::error::Error + 'static,
{
    let mut results = std::pin::pin!(results);
    while let Some(result) = results.next().await {
        match result {
            Ok(_) | Err(runtime::Error::ReconcilerFailed(..)) => {}
            Err(runtime::Error::ObjectNotFound(object)) => {
                tracing::debug!(object.ref = %object, "object left the store before its reconcile");
                series.dropped(&object);
            }
            Err(runtime::Error::QueueError(error)) => {
                tracing::debug!(error = %crate::telemetry::error_chain(&error), "trigger stream error");
            }
            Err(runtime::Error::RunnerError(source)) => {
                return Err(Error::Runner { controller, source });
            }
        }
    }
    Ok(())
}
