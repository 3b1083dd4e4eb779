//! How a declared [`Controller`] runs: it waits for its kinds to be served, runs
//! kube-runtime's runner on the informer pool's changes while they are, and drops the runner
//! when one of them goes (a deleted CRD), to start again when it is back.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::core::{GroupVersionKind, Resource};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::builder::Controller;
use super::context::Context;
use super::error::{Error, Result};
use super::predicate::{Filter, Predicate};
use super::reconcile::{self, Failure};
use super::relation::Relation;
use super::runner;
use super::scope::{InScope, narrowed};
use super::series::Series;
use super::source::SharedWriter;
use super::stub::Stub;
use crate::cache::{Cache, typed};
use crate::manager::ControllerReadiness;
use crate::selector::ShardKey;

impl<K> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
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
    pub async fn run<T, R, Fut, E, P>(
        self,
        ctx: Context<T>,
        reconcile: R,
        error_policy: P,
        shutdown: CancellationToken,
    ) -> Result<()>
    where
        T: Send + Sync + 'static,
        R: Fn(Arc<K>, Arc<Context<T>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
        P: Fn(Arc<K>, &E, Arc<Context<T>>) -> Action + Send + Sync + 'static,
    {
        let Self {
            name,
            relations,
            concurrency,
            timeout,
            metrics,
            store: _,
            writer,
            report,
            predicates,
            scope,
            event_source,
            rules: _,
        } = self;
        let ctx = ctx.for_controller().with_field_manager(&name);
        let ctx = Arc::new(ctx.with_event_source(event_source.as_deref().unwrap_or(&name)));
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
            timeout,
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

/// A failed reconcile of `object`, as kube-runtime's runner hands it to the error policy:
/// the runner schedules stubs, and the error policy gets the object the reconcile read.
struct Failed<K, E> {
    object: Arc<K>,
    error: Failure<E>,
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

/// The runner's error policy, each retry counted: the controller's own policy for the errors
/// its reconcile returned; after a timeout (no error of the reconcile's type to give it), the
/// object's failure backoff, as controller-runtime requeues, rate limited, a reconcile whose
/// deadline passed.
#[allow(
    clippy::type_complexity,
    reason = "kube-runtime's error policy shape, spelled once"
)]
fn retry<K, T, E, P>(
    error_policy: Arc<P>,
    retried: Series,
) -> impl Fn(Arc<Stub<K>>, &Failed<K, E>, Arc<Context<T>>) -> Action
where
    K: Resource<DynamicType = ()>,
    P: Fn(Arc<K>, &E, Arc<Context<T>>) -> Action,
{
    move |_stub, failed, ctx| {
        let action = match &failed.error {
            Failure::Returned(error) => error_policy(Arc::clone(&failed.object), error, ctx),
            Failure::TimedOut(_) => Action::requeue(ctx.error_backoff(failed.object.as_ref())),
        };
        if action != Action::await_change() {
            retried.queue_retried();
        }
        action
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
    timeout: Option<Duration>,
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
    async fn run<T, Fut, E>(
        &self,
        ctx: &Arc<Context<T>>,
        stop: CancellationToken,
        running: impl FnOnce(),
    ) -> Result<Ended>
    where
        T: Send + Sync + 'static,
        R: Fn(Arc<K>, Arc<Context<T>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
        P: Fn(Arc<K>, &E, Arc<Context<T>>) -> Action + Send + Sync + 'static,
    {
        let Self {
            name,
            series,
            gvk,
            relations,
            concurrency,
            timeout,
            ..
        } = self;
        // The runner's plumbing (shared with hook controllers) reads no user state.
        let plain = ctx.without_data();
        // Subscribe before the informers exist or sync, so no change is lost in between.
        let own_events = ctx.pool().subscribe(gvk);
        let related_events: Vec<_> = relations
            .iter()
            .map(|r| ctx.pool().subscribe(&r.gvk))
            .collect();
        tokio::select! {
            () = stop.cancelled() => return Ok(Ended::Shutdown),
            ensured = ensure_informers(&plain, name, gvk, relations) => match ensured {
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
        let reconciled = series.clone();
        let kind = Arc::new(typed::gvk_of::<K>());
        let filter = self.change_filter(&plain);
        let narrowing = (Arc::clone(&self.scope), filter.clone());
        let timeout = *timeout;
        let run_one = move |stub: Arc<Stub<K>>, ctx: Arc<Context<T>>| {
            let (label, series) = (Arc::clone(&label), reconciled.clone());
            let (reconcile, kind) = (Arc::clone(&reconcile), Arc::clone(&kind));
            let (scope, seen) = narrowing.clone();
            async move {
                let answer = read_object::<K, T>(&ctx, &kind, &stub).await;
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
                    timeout,
                    move |object, ctx| reconcile(object, ctx),
                ));
                reconciled
                    .await
                    .unwrap_or(Ok(Action::await_change()))
                    .map_err(|error| Failed { object, error })
            }
        };
        let retry = retry(Arc::clone(&self.error_policy), series.clone());
        runner::run_filtered(
            &plain,
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
async fn read_object<K, T>(
    ctx: &Context<T>,
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
fn refuse_relations_by_uid<K, T>(
    ctx: &Context<T>,
    name: &str,
    relations: &[Relation<K>],
) -> Option<Error>
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
