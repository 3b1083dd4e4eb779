//! What a reconcile gets besides its object: reads through the cache tree, a client for
//! writes, the recorder, and the count of the object's consecutive failed reconciles.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kube::Client;
use kube::core::{DynamicObject, Resource};
use kube::runtime::reflector::ObjectRef;
use serde::de::DeserializeOwned;

use crate::cache::{self, InformerPool, ListOptions, SharedCache, typed};
use crate::manager::{Admission, Manager, ShardGate};
use crate::recorder::{self, EventType, Recorder};

/// The reconcile context: a reader through the cache tree (never straight to the API server),
/// a kube [`Client`] for writes, and a [`Recorder`].
///
/// Built once by the caller ([`Context::new`]) and handed to
/// [`super::Controller::run`], which gives each reconcile and each error policy call an
/// `Arc` of it.
///
/// ```no_run
/// # async fn demo(ctx: std::sync::Arc<informant::controller::Context>)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// use informant::cache::ListOptions;
/// use informant::recorder::EventType;
/// use k8s_openapi::api::batch::v1::{CronJob, Job};
///
/// let cronjob: CronJob = ctx.get(Some("default"), "hello").await?;
/// let jobs: Vec<Job> = ctx
///     .list(&ListOptions { namespace: Some("default".into()), ..ListOptions::default() })
///     .await?;
/// ctx.record(&cronjob, EventType::Normal, "Seen", &format!("{} jobs", jobs.len()));
/// # Ok(())
/// # }
/// ```
///
/// # User state
/// `Context<T>` also carries the operator's own state (kube-rs's `Context<T>`, now the `Arc<T>`
/// its `Controller::run` hands each reconcile): `T` is given once, with
/// [`super::Controller::add_to_with`] or [`Context::with_data`], and read with
/// [`Context::data`]. The default `T = ()` is a context with no state, so
/// `Arc<Context>` is `Arc<Context<()>>`. There is no `Deref` to `T`: the context's own
/// methods (`get`, `list`, `record`, ...) never hide, nor are hidden by, the state's.
///
/// ```
/// use std::time::Duration;
/// use informant::controller::testing::TestContext;
///
/// struct Settings {
///     requeue: Duration,
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let ctx = TestContext::new().context().with_data(Settings { requeue: Duration::from_secs(300) });
/// assert_eq!(ctx.data().requeue, Duration::from_secs(300));
/// # }
/// ```
pub struct Context<T = ()> {
    cache: Arc<SharedCache>,
    pool: Arc<InformerPool>,
    client: Client,
    recorder: Recorder,
    failures: Failures,
    gate: ShardGate,
    /// The component of the Events [`Context::record`] records; `None`: the recorder's.
    component: Option<Arc<str>>,
    /// The field manager of the context's writes (`Context::apply_owned`, ...).
    field_manager: Option<Arc<str>>,
    /// Where a test kit keeps what [`Context::record`] recorded.
    recorded: Option<Arc<Mutex<Vec<recorder::Event>>>>,
    /// The operator's own state ([`Context::data`]).
    data: Arc<T>,
}

impl<T> Clone for Context<T> {
    fn clone(&self) -> Self {
        Self {
            cache: Arc::clone(&self.cache),
            pool: Arc::clone(&self.pool),
            client: self.client.clone(),
            recorder: self.recorder.clone(),
            failures: self.failures.clone(),
            gate: self.gate.clone(),
            component: self.component.clone(),
            field_manager: self.field_manager.clone(),
            recorded: self.recorded.clone(),
            data: Arc::clone(&self.data),
        }
    }
}

impl<T> std::fmt::Debug for Context<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("cache", &self.cache)
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// A context for unit tests: the default cache tree with no API server behind it (a
    /// client of a closed port), events dropped.
    #[cfg(test)]
    pub(crate) fn offline() -> Self {
        let config = kube::Config::new(http::Uri::from_static("http://127.0.0.1:9"));
        let client = Client::try_from(config).expect("a static URL");
        let tree = crate::cache::Plan::new(&crate::cache::Options::default())
            .expect("the default options plan")
            .instantiate(&crate::cache::Context::offline(false));
        let pipeline = crate::recorder::Pipeline::new(
            &crate::recorder::Options::default(),
            crate::recorder::NullSink,
            Arc::new(crate::recorder::SystemClock),
        );
        Self::new(
            Arc::new(SharedCache::new(tree)),
            InformerPool::new(client.clone()),
            client,
            pipeline.recorder(),
        )
    }

    /// A context reading through `cache` (whose informers `pool` owns), writing with `client`
    /// and recording with `recorder`: what the manager hands every controller.
    #[must_use]
    pub fn new(
        cache: Arc<SharedCache>,
        pool: Arc<InformerPool>,
        client: Client,
        recorder: Recorder,
    ) -> Self {
        Self {
            cache,
            pool,
            client,
            recorder,
            failures: Failures::default(),
            gate: ShardGate::open(),
            component: None,
            field_manager: None,
            recorded: None,
            data: Arc::new(()),
        }
    }

    /// What a reconcile of a controller of `manager` gets: reads through the manager's cache
    /// tree, follows its informer pool, writes with its client, records with its recorder,
    /// asks its shard gate.
    #[must_use]
    pub fn of(manager: &Manager) -> Self {
        Self::new(
            manager.cache(),
            manager.pool(),
            manager.client(),
            manager.recorder(),
        )
        .with_shard_gate(manager.shard_gate())
    }
}

impl<D> Context<D> {
    /// The same context carrying `data`, the operator's own state, instead of its own:
    /// every reconcile and error policy call reads it with [`Context::data`].
    #[must_use]
    pub fn with_data<U>(self, data: U) -> Context<U> {
        Context {
            cache: self.cache,
            pool: self.pool,
            client: self.client,
            recorder: self.recorder,
            failures: self.failures,
            gate: self.gate,
            component: self.component,
            field_manager: self.field_manager,
            recorded: self.recorded,
            data: Arc::new(data),
        }
    }

    /// The operator's own state, given with [`Context::with_data`] or
    /// [`super::Controller::add_to_with`] (`&()` without).
    #[must_use]
    pub fn data(&self) -> &D {
        &self.data
    }

    /// The same context without the operator's state (the same cache, client, recorder and
    /// failure counts): what the runner's own plumbing, shared with hook controllers, reads.
    pub(crate) fn without_data(&self) -> Context {
        Context {
            cache: Arc::clone(&self.cache),
            pool: Arc::clone(&self.pool),
            client: self.client.clone(),
            recorder: self.recorder.clone(),
            failures: self.failures.clone(),
            gate: self.gate.clone(),
            component: self.component.clone(),
            field_manager: self.field_manager.clone(),
            recorded: self.recorded.clone(),
            data: Arc::new(()),
        }
    }

    /// The same context, the Events it records stamped with `component` (their
    /// `source.component` and `reportingController`) instead of the recorder's: what
    /// [`super::Controller::event_source`] sets, the controller's name by default.
    #[must_use]
    pub fn with_event_source(mut self, component: &str) -> Self {
        self.component = Some(component.into());
        self
    }

    /// The same context, its reconciles asking `gate` first whether this member of a shard
    /// ring may act on their object now (and logged, with a reconcile log).
    #[must_use]
    pub fn with_shard_gate(mut self, gate: ShardGate) -> Self {
        self.gate = gate;
        self
    }

    /// The same context, its writes (`Context::apply_owned`, `Context::prune_owned`,
    /// `Context::apply_status`) made as the field manager `name`: what
    /// [`super::Controller::run`] sets, the controller's name.
    #[must_use]
    pub fn with_field_manager(mut self, name: &str) -> Self {
        self.field_manager = Some(name.into());
        self
    }

    /// The field manager of the context's writes: the controller's name, else
    /// [`crate::manager::FIELD_MANAGER`].
    #[must_use]
    pub fn field_manager(&self) -> &str {
        self.field_manager
            .as_deref()
            .unwrap_or(crate::manager::FIELD_MANAGER)
    }

    /// The same context, each Event it records also kept in `recorded` (the test kit's).
    pub(super) fn recording_into(mut self, recorded: Arc<Mutex<Vec<recorder::Event>>>) -> Self {
        self.recorded = Some(recorded);
        self
    }

    /// The gate reconciles ask first ([`Context::admit`]).
    #[must_use]
    pub fn shard_gate(&self) -> &ShardGate {
        &self.gate
    }

    /// Whether a reconcile of `meta` (of `kind`, for `controller`) may start now: `None`
    /// when another member of the shard ring does it (the reconcile is dropped without
    /// error); else the admission to run the reconcile under ([`Admission::run`]).
    #[must_use]
    pub fn admit(
        &self,
        controller: &str,
        kind: &str,
        meta: &kube::api::ObjectMeta,
    ) -> Option<Admission> {
        self.gate.admit(controller, kind, meta)
    }

    /// The same context with failure counts of its own (one per running controller).
    #[must_use]
    pub fn for_controller(&self) -> Self {
        Self {
            failures: Failures::default(),
            ..self.clone()
        }
    }

    /// The cache tree, following every reload.
    #[must_use]
    pub fn cache(&self) -> &Arc<SharedCache> {
        &self.cache
    }

    /// The informer pool behind the cache tree.
    #[must_use]
    pub fn pool(&self) -> &Arc<InformerPool> {
        &self.pool
    }

    /// The client, for writes (reads go through [`Context::get`] and [`Context::list`]).
    #[must_use]
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The recorder.
    #[must_use]
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// Reads one `T` through the cache tree. `namespace` is ignored for cluster-scoped kinds.
    ///
    /// # Errors
    /// As [`cache::Cache::get`]: `NotFound`, or why the cache can not answer.
    pub async fn get<T>(&self, namespace: Option<&str>, name: &str) -> cache::Result<T>
    where
        T: Resource<DynamicType = ()> + DeserializeOwned + Clone + Send + Sync + 'static,
    {
        typed::get(self.cache.as_ref(), namespace, name).await
    }

    /// Lists `T` through the cache tree.
    ///
    /// # Errors
    /// As [`cache::Cache::list`].
    pub async fn list<T>(&self, options: &ListOptions) -> cache::Result<Vec<T>>
    where
        T: Resource<DynamicType = ()> + DeserializeOwned + Clone + Send + Sync + 'static,
    {
        typed::list(self.cache.as_ref(), options).await
    }

    /// Records an event about `object` (client-go `Eventf`); see [`Recorder::record`].
    pub fn record<T>(&self, object: &T, event_type: EventType, reason: &str, message: &str)
    where
        T: Resource<DynamicType = ()>,
    {
        let mut event = self
            .recorder
            .event(&object_ref(object), event_type, reason, message);
        if let Some(component) = &self.component {
            let source = recorder::Source::new(component, &event.source.host);
            event.reporting_controller = Arc::clone(&source.component);
            event.source = Arc::new(source);
        }
        if let Some(recorded) = &self.recorded {
            recorded
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(event.clone());
        }
        self.recorder.record_event(event);
    }

    /// How many reconciles of `object` failed in a row, counting the one that just failed
    /// when asked from an error policy; 0 after a successful reconcile.
    #[must_use]
    pub fn failures<T>(&self, object: &T) -> u32
    where
        T: Resource<DynamicType = ()>,
    {
        self.failures.get(&ObjectRef::from_obj(object).erase())
    }

    /// How long to wait before reconciling `object` again after its last failure:
    /// controller-runtime's per-object exponential backoff ([`super::error_backoff`]).
    #[must_use]
    pub fn error_backoff<T>(&self, object: &T) -> Duration
    where
        T: Resource<DynamicType = ()>,
    {
        super::error_backoff(self.failures(object))
    }

    /// [`Context::failures`] by reference, for controllers of dynamic objects.
    pub(crate) fn failures_of(&self, object: &ObjectRef<DynamicObject>) -> u32 {
        self.failures.get(object)
    }

    /// A reconcile of `object` failed: one more failure in a row.
    pub(crate) fn failed(&self, object: ObjectRef<DynamicObject>) {
        self.failures.failed(object);
    }

    /// A reconcile of `object` succeeded, or it was deleted: its failures are forgotten.
    pub fn forget(&self, object: &ObjectRef<DynamicObject>) {
        self.failures.forget(object);
    }

    /// [`Context::forget`] of the object `key` makes, made only when some object failed (a
    /// reconcile that succeeds builds no reference when nothing failed).
    pub(crate) fn forget_with(&self, key: impl FnOnce() -> ObjectRef<DynamicObject>) {
        let mut map = self.failures.map();
        if !map.is_empty() {
            map.remove(&key());
        }
    }
}

/// The event reference of `object` (its apiVersion, kind, namespace, name and uid), to record
/// events about it.
#[must_use]
pub fn object_ref<T>(object: &T) -> Arc<recorder::ObjectRef>
where
    T: Resource<DynamicType = ()>,
{
    let meta = object.meta();
    Arc::new(recorder::ObjectRef::new(
        &T::api_version(&()),
        &T::kind(&()),
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
        meta.uid.as_deref().unwrap_or_default(),
    ))
}

/// Consecutive failed reconciles per object (client-go's `ItemExponentialFailureRateLimiter`
/// failure map): incremented by a failed reconcile, removed by a successful one or when the
/// object is deleted.
#[derive(Clone, Debug, Default)]
struct Failures(Arc<Mutex<HashMap<ObjectRef<DynamicObject>, u32>>>);

impl Failures {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectRef<DynamicObject>, u32>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn get(&self, object: &ObjectRef<DynamicObject>) -> u32 {
        self.map().get(object).copied().unwrap_or(0)
    }

    fn failed(&self, object: ObjectRef<DynamicObject>) {
        let mut map = self.map();
        let n = map.entry(object).or_insert(0);
        *n = n.saturating_add(1);
    }

    fn forget(&self, object: &ObjectRef<DynamicObject>) {
        self.map().remove(object);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::CronJob;
    use kube::api::ObjectMeta;

    fn cronjob(name: &str) -> CronJob {
        CronJob {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                ..ObjectMeta::default()
            },
            ..CronJob::default()
        }
    }

    #[test]
    fn object_ref_carries_the_identity_events_are_keyed_on() {
        let r = object_ref(&cronjob("hello"));
        assert_eq!(
            *r,
            recorder::ObjectRef::new("batch/v1", "CronJob", "default", "hello", "uid-hello")
        );
    }

    #[tokio::test]
    async fn with_data_carries_the_state_and_keeps_one_failure_count_per_object() {
        let ctx = Context::offline();
        let key = ObjectRef::from_obj(&cronjob("a")).erase();
        ctx.failed(key.clone());
        let with = ctx.clone().with_data(String::from("state"));
        assert_eq!(with.data(), "state");
        assert_eq!(with.failures_of(&key), 1);
        with.failed(key.clone());
        assert_eq!(
            ctx.failures_of(&key),
            2,
            "the same failure counts, with state or not"
        );
        assert_eq!(with.without_data().failures_of(&key), 2);
        assert_eq!(with.field_manager(), ctx.field_manager());
    }

    #[test]
    fn failures_count_per_object_until_forgotten() {
        let failures = Failures::default();
        let a = ObjectRef::from_obj(&cronjob("a")).erase();
        let b = ObjectRef::from_obj(&cronjob("b")).erase();
        failures.failed(a.clone());
        failures.failed(a.clone());
        failures.failed(b.clone());
        assert_eq!((failures.get(&a), failures.get(&b)), (2, 1));
        failures.forget(&a);
        assert_eq!((failures.get(&a), failures.get(&b)), (0, 1));
    }
}
