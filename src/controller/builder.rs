//! [`Controller`]: declares the kind a controller reconciles, the kinds it owns and watches,
//! what it narrows (its own selectors, in `scope`; its predicates) and what it writes; `run`
//! says how a declared controller runs.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::core::{GroupVersionKind, Resource};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef, Store};
use serde::de::DeserializeOwned;

use super::context::Context;
use super::predicate::Predicate;
use super::relation::Relation;
use super::rules;
use super::scope::InScope;
use super::stub::Stub;
use crate::controller::ControllerMetrics;
use crate::manager::{Manager, State};

/// How many reconciles of one controller run at once unless set.
///
/// controller-runtime pkg/controller/controller.go: `MaxConcurrentReconciles` defaults to 1.
pub const DEFAULT_CONCURRENCY: u16 = 1;

/// A controller for the kind `K`: what it reconciles (`for`), owns and watches, and how many
/// reconciles run at once. [`Controller::run`] feeds kube-runtime's `Controller` (per-object
/// dedupe, concurrency, `Action::requeue`, the error policy) from the informer pool, so it
/// follows the cache tree across reloads and opens no watch of its own.
///
/// ```no_run
/// # async fn demo(ctx: informant::controller::Context)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use informant::controller::{Action, Context, Controller, WriteError, default_error_policy};
/// use k8s_openapi::api::batch::v1::{CronJob, Job};
/// use tokio_util::sync::CancellationToken;
///
/// async fn reconcile(cronjob: Arc<CronJob>, ctx: Arc<Context>) -> Result<Action, WriteError> {
///     // Read through the cache tree (ctx.get, ctx.list), write with ctx.apply_owned(&*cronjob,
///     // &job).await? (a WriteError) or ctx.client(), record with ctx.record().
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
    pub(super) name: String,
    pub(super) relations: Vec<Relation<K>>,
    pub(super) concurrency: u16,
    pub(super) timeout: Option<Duration>,
    pub(super) metrics: Option<ControllerMetrics>,
    pub(super) store: Store<Stub<K>>,
    pub(super) writer: reflector::store::Writer<Stub<K>>,
    pub(super) report: Option<Arc<State>>,
    pub(super) predicates: Vec<Predicate>,
    pub(super) scope: Vec<InScope<K>>,
    pub(super) event_source: Option<String>,
    /// The RBAC rules of what it reads and writes ([`Controller::rules`]).
    pub(super) rules: Vec<PolicyRule>,
}

impl<K: Resource<DynamicType = ()> + Clone + Debug + 'static> Debug for Controller<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<&GroupVersionKind> = self.relations.iter().map(|r| &r.gvk).collect();
        f.debug_struct("Controller")
            .field("name", &self.name)
            .field("kind", &K::kind(&()))
            .field("related", &kinds)
            .field("concurrency", &self.concurrency)
            .field("timeout", &self.timeout)
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
            timeout: None,
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
    /// owned and watched kind (what the cache's informers do for it), `update` on `K`'s
    /// `finalizers` when it owns children (their `blockOwnerDeletion`), and what it declared
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
    /// // The owner references it sets block their owner's deletion: that needs its finalizers.
    /// let finalizers = &controller.rules()[2];
    /// assert_eq!(finalizers.resources, Some(vec!["configmaps/finalizers".to_owned()]));
    /// assert_eq!(finalizers.verbs, ["update"]);
    /// ```
    #[must_use]
    pub fn rules(&self) -> Vec<PolicyRule> {
        rules::merged(self.rules.iter().cloned())
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
        // `Context::apply_owned` sets `blockOwnerDeletion`, which the
        // OwnerReferencesPermissionEnforcement admission plugin allows only to whoever may
        // update the owner's `finalizers` (kube-apiserver `plugin/pkg/admission/gc`); the
        // kubebuilder scaffold grants the same.
        self.rules
            .push(rules::rule::<K>(Some("finalizers"), &["update"]));
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

    /// Cancels a reconcile still running `timeout` after it started, so that a hung one
    /// (an API call or a dependency that never answers) gives its worker back. It is dropped
    /// where it waits, counted in `controller_runtime_reconcile_timeouts_total` (and as an
    /// `error` in `controller_runtime_reconcile_total`), traced with `result=timed_out`, and its
    /// object retried after its failure backoff ([`Context::error_backoff`]), whatever the
    /// error policy. Zero, the default, means no timeout: controller-runtime
    /// pkg/controller/controller.go `Options.ReconciliationTimeout` ("By default, there is no
    /// timeout").
    ///
    /// Unlike Go's context deadline, which a reconcile must check, the cancellation needs
    /// nothing from the reconcile: a dropped future is not polled again. A reconcile that
    /// blocks its thread without awaiting is not cancelled; keep blocking work in
    /// `tokio::task::spawn_blocking`.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = (!timeout.is_zero()).then_some(timeout);
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
        self.add_to_with(manager, (), reconcile, error_policy);
    }

    /// [`Controller::add_to`], every reconcile and error policy call reading `data`, the
    /// operator's own state, with [`Context::data`] (kube-rs's `Controller::run(reconcile,
    /// error_policy, Arc::new(data))`). One `data` per controller, shared by its reconciles:
    /// state they change goes behind a lock or an atomic, as in kube-rs.
    ///
    /// ```no_run
    /// # async fn demo(mut manager: informant::manager::Manager) -> Result<(), informant::manager::Error> {
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use informant::controller::{Action, Context, Controller, default_error_policy};
    /// use k8s_openapi::api::core::v1::ConfigMap;
    ///
    /// struct Settings {
    ///     requeue: Duration,
    /// }
    ///
    /// async fn reconcile(
    ///     configmap: Arc<ConfigMap>,
    ///     ctx: Arc<Context<Settings>>,
    /// ) -> Result<Action, kube::Error> {
    ///     Ok(Action::requeue(ctx.data().requeue))
    /// }
    ///
    /// let settings = Settings { requeue: Duration::from_secs(300) };
    /// Controller::<ConfigMap>::new("demo")
    ///     .add_to_with(&mut manager, settings, reconcile, default_error_policy);
    /// manager.run(tokio_util::sync::CancellationToken::new()).await
    /// # }
    /// ```
    pub fn add_to_with<T, R, Fut, E, P>(
        self,
        manager: &mut Manager,
        data: T,
        reconcile: R,
        error_policy: P,
    ) where
        T: Send + Sync + 'static,
        R: Fn(Arc<K>, Arc<Context<T>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
        P: Fn(Arc<K>, &E, Arc<Context<T>>) -> Action + Send + Sync + 'static,
    {
        let ctx = Context::of(manager).with_data(data);
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
}
