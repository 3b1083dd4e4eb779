//! [`Controller`]: declares the kind a controller reconciles, the kinds it owns and watches,
//! and runs kube-runtime's scheduler and runner on the informer pool's changes.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::core::{GroupVersionKind, Resource};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::context::Context;
use super::error::{Error, Result};
use super::predicate::{Filter, Predicate};
use super::reconcile;
use super::relation::Relation;
use super::rules;
use super::runner;
use super::series::Series;
use super::source::SharedWriter;
use super::stub::Stub;
use crate::cache::{Cache, typed};
use crate::controller::ControllerMetrics;
use crate::manager::{ControllerReadiness, Manager, State};
use crate::selector::{FieldSelector, LabelSelector, ShardKey};

/// Whether an object of `K` is in the controller's own scope (its label and field selectors).
type InScope<K> = Arc<dyn Fn(&K) -> bool + Send + Sync>;

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
    report: Option<Arc<State>>,
    predicates: Vec<Predicate>,
    scope: Vec<InScope<K>>,
    event_source: Option<String>,
    /// The RBAC rules of what it reads and writes ([`Controller::rules`]).
    rules: Vec<PolicyRule>,
}

impl<K: Resource<DynamicType = ()> + Clone + Debug + 'static> Debug for Controller<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<&GroupVersionKind> = self.relations.iter().map(|r| &r.gvk).collect();
        f.debug_struct("Controller")
            .field("name", &self.name)
            .field("kind", &K::kind(&()))
            .field("related", &kinds)
            .field("concurrency", &self.concurrency)
            .field("predicates", &self.predicates)
            .field("selectors", &self.scope.len())
            .field("event_source", &self.event_source)
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
            report: None,
            predicates: Vec::new(),
            scope: Vec::new(),
            event_source: None,
            rules: vec![rules::read::<K>()],
        }
    }

    /// Declares that the reconcile writes `C` with `verbs` (`patch` for
    /// [`Context::apply_owned`], `delete` for [`Context::prune_owned`], `create`, `update`
    /// for writes of its own), for [`Controller::rules`].
    #[must_use]
    pub fn writes<C: Resource<DynamicType = ()>>(mut self, verbs: &[&str]) -> Self {
        self.rules.push(rules::rule::<C>(None, verbs));
        self
    }

    /// Declares that the reconcile writes the status subresource of `K` (`patch`, what
    /// [`Context::apply_status`] does), for [`Controller::rules`].
    #[must_use]
    pub fn writes_status(mut self) -> Self {
        self.rules
            .push(rules::rule::<K>(Some("status"), &["patch"]));
        self
    }

    /// The RBAC rules the controller needs: `get`, `list` and `watch` on `K` and on every
    /// owned and watched kind (what the cache's informers do for it), and what it declared
    /// with [`Controller::writes`] and [`Controller::writes_status`], one rule per kind.
    /// The manager's own needs (its `CacheConfig`, Events, the Lease) are
    /// `informant rbac`'s: a binary prints these rules for its `--extra-rules` file.
    ///
    /// ```
    /// use informant::controller::Controller;
    /// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    ///
    /// let controller = Controller::<ConfigMap>::new("demo-secrets")
    ///     .owns::<Secret>()
    ///     .writes::<Secret>(&["patch", "delete"]);
    /// // `informant rbac --config cacheconfig.yaml --extra-rules rules.yaml` adds them.
    /// let yaml = informant::yaml::to_string(&controller.rules()).unwrap();
    /// assert!(yaml.contains("secrets"));
    /// let secrets = &controller.rules()[1];
    /// assert_eq!(secrets.verbs, ["get", "list", "watch", "patch", "delete"]);
    /// ```
    #[must_use]
    pub fn rules(&self) -> Vec<PolicyRule> {
        rules::merged(self.rules.iter().cloned())
    }

    /// Reconciles only the objects whose labels `selector` matches, on top of the cache's
    /// scope (the `CacheConfig` may be edited to hold more; the controller stays to its own):
    /// an object outside it is never handed to the reconcile, whatever triggered it
    /// (controller-runtime's `WithEventFilter` on a label selector, kube-rs's
    /// `watcher::Config::labels`). Several selectors must all match.
    ///
    /// ```
    /// # fn demo() -> Result<(), informant::selector::ParseError> {
    /// use informant::controller::Controller;
    /// use informant::selector::LabelSelector;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    ///
    /// let controller = Controller::<ConfigMap>::new("demo")
    ///     .labels(LabelSelector::parse("app=demo")?);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn labels(mut self, selector: LabelSelector) -> Self {
        self.scope.push(Arc::new(move |object: &K| {
            let labels = object.meta().labels.as_ref();
            selector.matches_with(|key| labels.and_then(|l| l.get(key)).map(String::as_str))
        }));
        self
    }

    /// Reconciles only the objects `selector` matches (the fields of the object as the API
    /// server's field selectors name them: `metadata.name`, `metadata.namespace`,
    /// `spec.nodeName`, ...), on top of the cache's scope, as [`Controller::labels`].
    #[must_use]
    pub fn fields(mut self, selector: FieldSelector) -> Self
    where
        K: serde::Serialize,
    {
        self.scope.push(Arc::new(move |object: &K| {
            serde_json::to_value(object).is_ok_and(|value| selector.matches_object(&value))
        }));
        self
    }

    /// Reconciles on a change of `K` only when `predicate` passes ([`Predicate`]); several
    /// must all pass.
    #[must_use]
    pub fn predicate(mut self, predicate: Predicate) -> Self {
        self.predicates.push(predicate);
        self
    }

    /// The component (`source.component`, `reportingController`) of the Events this
    /// controller's reconciles record through [`Context::record`]; the controller's name
    /// unless set. The `CacheConfig`'s `spec.recorder.component` stays the manager's own (its
    /// `ConfigReloaded`, hook controllers' Events): an operator's identity on its Events is
    /// in its code, not in a file operations may edit.
    #[must_use]
    pub fn event_source(mut self, component: &str) -> Self {
        self.event_source = Some(component.to_owned());
        self
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
        self.rules.push(rules::read::<C>());
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
        self.rules.push(rules::read::<O>());
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

    /// Reports whether the controller runs or waits for its kinds to `state` (the manager's:
    /// `status.controllers`, `/readyz/controllers`); [`Controller::add_to`] does it.
    #[must_use]
    pub fn report_to(mut self, state: Arc<State>) -> Self {
        self.report = Some(state);
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
        let controller = self
            .metrics(&ControllerMetrics::of(manager))
            .report_to(manager.state());
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
    /// It first wants its kinds (`K` and every owned and watched kind) from the cache tree
    /// ([`crate::cache::SharedCache::want`]): while one of them is a custom kind the API
    /// server does not serve (its CRD is not installed or not established), the controller
    /// waits, saying why (a log line, and `WaitingForKind` where [`Controller::report_to`]
    /// reports), and makes no request for it. Once every kind is served, it subscribes to the
    /// pool's changes of each, then makes sure their informers exist and synced (subscribing
    /// first, so no change between sync and subscription is lost), lists `K` through the
    /// cache into its store, and hands every change to kube-runtime's scheduler. Each
    /// reconcile runs in a `reconcile` span and is counted; a failed one goes to
    /// `error_policy`, whose [`Action`] says when to retry ([`super::default_error_policy`] is
    /// controller-runtime's per-object exponential backoff). A pool `Resynced` (a relist, or
    /// an informer stopped by a reload) lists `K` again, so objects that left the cache's
    /// scope leave the store. Every object is asked for again once per the `syncPeriod` of
    /// the cache serving it ([`super::resync`]).
    ///
    /// When one of its kinds stops being served (its CRD was deleted), the runner is dropped:
    /// running reconciles finish, and the requests queued or scheduled for later (requeues,
    /// retries) are dropped with it, counted in the log line, since their objects left the
    /// cache with the kind; the store empties. The controller waits again, and when the kind
    /// is served again a new runner lists every object and reconciles each once.
    ///
    /// # Errors
    /// [`Error::Informer`] when a kind's informers can not start or sync (other than its kind
    /// not being served); [`Error::Runner`] if kube-runtime's runner stops.
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
            store: _,
            writer,
            report,
            predicates,
            scope,
            event_source,
            rules: _,
        } = self;
        let component = event_source.unwrap_or_else(|| name.clone());
        let ctx = ctx.for_controller().with_field_manager(&name);
        let ctx = Arc::new(ctx.with_event_source(&component));
        if let Some(refused) = refuse_relations_by_uid(&ctx, &name, &relations) {
            return Err(refused);
        }
        let report = |readiness: Option<ControllerReadiness>| {
            if let Some(state) = &report {
                state.controller(&name, readiness);
            }
        };
        let runner = Runner {
            name: name.clone(),
            series: Series::new(metrics.as_ref(), &name, concurrency),
            gvk: typed::gvk_of::<K>(),
            relations,
            concurrency,
            writer: Arc::new(std::sync::Mutex::new(writer)),
            reconcile: Arc::new(reconcile),
            error_policy: Arc::new(error_policy),
            predicates,
            scope: scope.into(),
        };
        let mut wanted = ctx.cache().want(&runner.kinds());
        let mut said: Option<String> = None;
        let result = loop {
            if let Some(reason) = wanted.waiting() {
                // A kind not looked up yet is not reported: the tree says soon.
                if wanted.settled() && said.as_ref() != Some(&reason) {
                    tracing::info!(controller = %name, reason = %reason, "a kind of the controller is not served: it waits, and starts when the kind is served");
                    report(Some(ControllerReadiness::WaitingForKind {
                        reason: reason.clone(),
                    }));
                    said = Some(reason);
                }
                tokio::select! {
                    () = shutdown.cancelled() => break Ok(()),
                    () = wanted.changed() => continue,
                }
            }
            said = None;
            let segment = shutdown.child_token();
            let running = runner.run(&ctx, segment.clone(), || {
                report(Some(ControllerReadiness::Running));
            });
            let mut running = std::pin::pin!(running);
            let ended = tokio::select! {
                ended = &mut running => ended,
                reason = wanted.gone() => {
                    segment.cancel();
                    let ended = running.await;
                    let dropped = runner.stopped();
                    tracing::info!(
                        controller = %name,
                        reason = %reason,
                        dropped,
                        "a kind of the controller is not served any more: its runner stopped \
                         (running reconciles finished; queued and scheduled requests dropped, \
                         their objects left the cache with the kind); it starts again, listing \
                         every object, when the kind is served"
                    );
                    match ended {
                        Ok(_) => continue,
                        Err(error) => break Err(error),
                    }
                }
            };
            match ended {
                Ok(Ended::Shutdown) => break Ok(()),
                Ok(Ended::NotServed(error)) => {
                    // The kind went between the check and the informers' start: the tree
                    // says so at its next change; nothing is asked until then.
                    tracing::info!(controller = %name, error = %crate::telemetry::error_chain(&error), "a kind of the controller is not served yet");
                    runner.stopped();
                    report(Some(ControllerReadiness::WaitingForKind {
                        reason: error.to_string(),
                    }));
                    tokio::select! {
                        () = shutdown.cancelled() => break Ok(()),
                        () = wanted.changed() => {}
                    }
                }
                Err(error) => break Err(error),
            }
        };
        report(None);
        result
    }
}

/// How one run of a controller's runner ended.
enum Ended {
    /// `shutdown` (or the segment's own stop): reconciles in flight finished.
    Shutdown,
    /// A kind's informers could not start because the API server does not serve it.
    NotServed(crate::cache::Error),
}

/// What a controller's runner is made of, kept across its runs: a run ends when a kind of the
/// controller stops being served, and a new one starts when it is served again.
struct Runner<K, R, P>
where
    K: Resource<DynamicType = ()> + Clone + Debug + 'static,
{
    name: String,
    series: Series,
    gvk: GroupVersionKind,
    relations: Vec<Relation<K>>,
    concurrency: u16,
    writer: SharedWriter<Stub<K>>,
    reconcile: Arc<R>,
    error_policy: Arc<P>,
    predicates: Vec<Predicate>,
    scope: Arc<[InScope<K>]>,
}

impl<K, R, P> Runner<K, R, P>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Runs kube-runtime's runner until `stop`; `running` is called once the informers of
    /// every kind synced.
    async fn run<Fut, E>(
        &self,
        ctx: &Arc<Context>,
        stop: CancellationToken,
        running: impl FnOnce(),
    ) -> Result<Ended>
    where
        R: Fn(Arc<K>, Arc<Context>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
        P: Fn(Arc<K>, &E, Arc<Context>) -> Action + Send + Sync + 'static,
    {
        let Self {
            name,
            series,
            gvk,
            relations,
            concurrency,
            ..
        } = self;
        // Subscribe before the informers exist or sync, so no change is lost in between.
        let own_events = ctx.pool().subscribe(gvk);
        let related_events: Vec<_> = relations
            .iter()
            .map(|r| ctx.pool().subscribe(&r.gvk))
            .collect();
        tokio::select! {
            () = stop.cancelled() => return Ok(Ended::Shutdown),
            ensured = ensure_informers(ctx, name, gvk, relations) => match ensured {
                Err(Error::Informer { source, gvk, .. }) if not_served(&gvk, &source) => {
                    return Ok(Ended::NotServed(source));
                }
                ensured => ensured?,
            },
        }
        running();

        // Every `Stub<K>` key shares the kind's (empty) dynamic type.
        let assembly = runner::Assembly {
            events: own_events,
            gvk: gvk.clone(),
            writer: Arc::clone(&self.writer),
            dyntype: Arc::new(()),
            series: series.clone(),
            concurrency: *concurrency,
            stop,
        };
        let relate = |mut controller, _: &Store<Stub<K>>| {
            for (relation, events) in relations.iter().zip(related_events) {
                controller =
                    relation.attach(controller, events, Arc::clone(ctx.cache()), series.clone());
            }
            controller
        };
        let label: Arc<str> = name.as_str().into();
        let reconcile = Arc::clone(&self.reconcile);
        let error_policy = Arc::clone(&self.error_policy);
        let reconciled = series.clone();
        let retried = series.clone();
        let kind = Arc::new(typed::gvk_of::<K>());
        let filter = self.change_filter(ctx);
        let narrowing = (Arc::clone(&self.scope), filter.clone());
        let run_one = move |stub: Arc<Stub<K>>, ctx: Arc<Context>| {
            let (label, series) = (Arc::clone(&label), reconciled.clone());
            let (reconcile, kind) = (Arc::clone(&reconcile), Arc::clone(&kind));
            let (scope, seen) = narrowing.clone();
            async move {
                let answer = read_object::<K>(&ctx, &kind, &stub).await;
                let object = match super::stub::read_stub(answer, &stub, &(), &ctx, &series) {
                    Ok(object) => object,
                    Err(action) => return Ok(action),
                };
                // Outside the controller's own selectors (whatever the cache holds), or with
                // sharding another member's now (it reconciles it): not reconciled here.
                let in_scope = narrowed(&scope, seen.as_deref(), &object);
                let admitted = in_scope.then(|| ctx.admit(&label, &K::kind(&()), object.meta()));
                let Some(admission) = admitted.flatten() else {
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
        };
        let retry = move |_stub, failed: &Failed<K, E>, ctx| {
            let action = error_policy(Arc::clone(&failed.object), &failed.error, ctx);
            if action != Action::await_change() {
                retried.queue_retried();
            }
            action
        };
        runner::run_filtered(
            ctx,
            assembly,
            filter.map(|filter| {
                Box::new(move |stub: &Stub<K>| filter.admits(stub)) as runner::ChangeFilter<K>
            }),
            relate,
            (run_one, retry, Arc::clone(ctx)),
        )
        .await
        .map_err(|source| Error::Runner {
            controller: name.clone(),
            source,
        })?;
        Ok(Ended::Shutdown)
    }

    /// The controller's kind, then each owned and watched kind, once.
    fn kinds(&self) -> Vec<GroupVersionKind> {
        let mut kinds = vec![self.gvk.clone()];
        for relation in &self.relations {
            if !kinds.contains(&relation.gvk) {
                kinds.push(relation.gvk.clone());
            }
        }
        kinds
    }

    /// The filter of the changes of `K` by the controller's predicates; `None` without any.
    fn change_filter(&self, ctx: &Context) -> Option<Arc<Filter<K>>> {
        (!self.predicates.is_empty()).then(|| {
            Arc::new(Filter::new(
                self.predicates.clone(),
                Arc::clone(ctx.cache()),
            ))
        })
    }

    /// The runner was dropped because a kind is not served: the store empties (its objects
    /// left the cache with the kind) and the queue with it; how many queued requests were
    /// dropped.
    fn stopped(&self) -> usize {
        let mut writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        drop(writer);
        self.series.clear()
    }
}

/// Reads the object `stub` names through the cache tree, as `K`.
async fn read_object<K>(
    ctx: &Context,
    kind: &GroupVersionKind,
    stub: &Stub<K>,
) -> crate::cache::Result<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    ctx.cache()
        .get_as(kind, stub.namespace(), stub.name(), &typed::As::<K>::new())
        .await
        .and_then(|object| typed::downcast::<K>(kind, object))
}

/// Whether `object` is in the controller's own selectors; the predicates' memory (`seen`)
/// notes what a reconcile read either way.
fn narrowed<K>(scope: &[InScope<K>], seen: Option<&Filter<K>>, object: &K) -> bool
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    if let Some(filter) = seen {
        filter.saw(object.meta());
    }
    scope.iter().all(|in_scope| in_scope(object))
}

/// Whether `error` says the API server does not serve the custom kind `gvk` (its CRD went,
/// or discovery does not know it): the controller waits for the kind instead of failing. A
/// built-in kind the server does not serve is an error (nothing would bring it).
fn not_served(gvk: &GroupVersionKind, error: &crate::cache::Error) -> bool {
    crate::kinds::builtin(&gvk.group, &gvk.version, &gvk.kind).is_none()
        && matches!(
            error,
            crate::cache::Error::WaitingForKind { .. } | crate::cache::Error::UnknownKind { .. }
        )
}

/// Makes sure the informers of `gvk` and of every related kind exist and synced.
/// Sharded by uid, an object's children and related objects are on other members: a
/// controller that owns or watches a kind is refused ([`Error::NeedsShardKeyNamespace`]).
fn refuse_relations_by_uid<K>(ctx: &Context, name: &str, relations: &[Relation<K>]) -> Option<Error>
where
    K: Resource<DynamicType = ()> + Clone + Debug + 'static,
{
    let relation = relations.first()?;
    (ctx.shard_gate().key() == Some(ShardKey::Uid)).then(|| Error::NeedsShardKeyNamespace {
        controller: name.to_owned(),
        related: relation.gvk.clone(),
    })
}

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
