//! [`HookController`]: one `Controller` resource running on kube-runtime's scheduler and
//! runner, fed by the informer pool, each reconcile a call of its hook with the object read
//! from the cache tree (the runner schedules [`Stub`]s: the cache holds the only copy).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::{StreamExt, stream};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind, Resource as _};
use kube::runtime::controller::{self as runtime, Action};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, field};

use super::call::Caller;
use super::metrics::HookMetrics;
use super::policy::Policy;
use super::reconcile::{self, ReconcileError};
use super::resource::ControllerKey;
use super::resource::ControllerSettings;
use super::schedule;
use super::shared::{Shared, Written, forget_children};
use super::stats::Stats;
use crate::cache::{self, Cache as _, Discovery, KindInfo, Resolver as _};
use crate::controller::ControllerMetrics;
use crate::controller::{self, Change, Follow, ReconcileResult as Outcome, Series, Stub};
use crate::controller::{Context, bounded, error_backoff, runner};
use crate::recorder::EventType;

/// The reason of the Warning Event recorded on an object whose hook call failed.
pub const REASON_HOOK_FAILED: &str = "HookFailed";

/// Why a [`HookController`] could not start or stopped early. A failed hook call is not one of
/// these: it is retried with the object's backoff.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A kind of the controller is unknown to the API server.
    #[error("hook controller {controller}: cannot resolve {}/{} {}", .gvk.group, .gvk.version, .gvk.kind)]
    Resolve {
        /// The controller.
        controller: String,
        /// The kind.
        gvk: GroupVersionKind,
        /// Why.
        #[source]
        source: cache::Error,
    },
    /// The informers of a kind could not start or sync.
    #[error("hook controller {controller}: cannot start the informers of {}/{} {}", .gvk.group, .gvk.version, .gvk.kind)]
    Informer {
        /// The controller.
        controller: String,
        /// The kind.
        gvk: GroupVersionKind,
        /// Why.
        #[source]
        source: cache::Error,
    },
    /// kube-runtime's runner stopped.
    #[error("hook controller {controller}: the reconcile runner stopped")]
    Runner {
        /// The controller.
        controller: String,
        /// Why.
        #[source]
        source: runtime::RunnerError,
    },
}

/// One `Controller` resource, running: kube-runtime's `Controller` over
/// [`DynamicObject`]s of its `for` kind (per-object dedupe, `concurrency`, requeues, the
/// per-object error backoff), triggered by its objects and its children from the informer
/// pool and by the resync (each object again once per its cache's `syncPeriod`), each
/// reconcile a call of its hook whose answer the manager writes.
///
/// ```no_run
/// # async fn demo(ctx: informant::controller::Context,
/// #     controller: informant::hooks::ValidatedController) -> Result<(), Box<dyn std::error::Error>> {
/// use informant::hooks::HookController;
/// use tokio_util::sync::CancellationToken;
///
/// let hook = HookController::new(controller.settings);
/// let stats = hook.stats(); // reconciles, failures, last error
/// hook.run(ctx, CancellationToken::new()).await?;
/// # let _ = stats;
/// # Ok(())
/// # }
/// ```
pub struct HookController {
    settings: ControllerSettings,
    policy: Arc<Policy>,
    metrics: Option<ControllerMetrics>,
    hook_metrics: Option<HookMetrics>,
    stats: Stats,
    clock: Arc<dyn schedule::Clock>,
}

impl std::fmt::Debug for HookController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookController")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl HookController {
    /// A controller running `settings` (from a valid `Controller`).
    #[must_use]
    pub fn new(settings: ControllerSettings) -> Self {
        Self {
            settings,
            policy: Arc::new(Policy::open()),
            metrics: None,
            hook_metrics: None,
            stats: Stats::default(),
            clock: Arc::new(schedule::SystemClock),
        }
    }

    /// Reads the time of `spec.schedule`'s ticks from `clock`. Default the system's clock;
    /// tests pass a [`TokioClock`](super::TokioClock) on a paused runtime.
    #[must_use]
    pub fn schedule_clock(mut self, clock: Arc<dyn schedule::Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Calls the hook under `policy`: its response limit, and the addresses a webhook may
    /// connect to. Default [`Policy::open`]. Whether the controller may run at all is the
    /// [`Supervisor`](super::Supervisor)'s to check ([`Policy::refusal`]).
    #[must_use]
    pub fn policy(mut self, policy: Arc<Policy>) -> Self {
        self.policy = policy;
        self
    }

    /// Counts reconciles in controller-runtime's series under the controller's name.
    #[must_use]
    pub fn metrics(mut self, metrics: &ControllerMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// Counts hook calls and failures in `metrics`.
    #[must_use]
    pub fn hook_metrics(mut self, metrics: &HookMetrics) -> Self {
        self.hook_metrics = Some(metrics.clone());
        self
    }

    /// The controller's counters, shared with the running controller.
    #[must_use]
    pub fn stats(&self) -> Stats {
        self.stats.clone()
    }

    /// Which `Controller` this runs (shown as `namespace/name`).
    #[must_use]
    pub fn key(&self) -> &ControllerKey {
        &self.settings.key
    }

    /// Runs until `shutdown`, then lets running hook calls finish.
    ///
    /// # Errors
    /// [`Error::Resolve`] for a kind the API server does not serve, [`Error::Informer`] when
    /// informers can not start, [`Error::Runner`] if kube-runtime's runner stops.
    pub async fn run(self, ctx: Context, shutdown: CancellationToken) -> Result<(), Error> {
        let Self {
            settings,
            policy,
            metrics,
            hook_metrics,
            stats,
            clock,
        } = self;
        let name = settings.key.to_string();
        // Failure counts of its own, for the per-object backoff.
        let ctx = ctx.for_controller();
        let (parent, owns, watches) = resolve_kinds(&ctx, &settings).await?;

        // Subscribe before the informers exist or sync, so no change is lost in between.
        let own_events = ctx.pool().subscribe(&settings.for_kind);
        let child_events: Vec<_> = settings
            .owns
            .iter()
            .map(|gvk| ctx.pool().subscribe(gvk))
            .collect();
        let related_events: Vec<_> = settings
            .watches
            .iter()
            .map(|gvk| ctx.pool().subscribe(gvk))
            .collect();
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            ensured = ensure_informers(&ctx, &settings) => ensured?,
        }
        stats.0.ready.store(true, Ordering::Relaxed);

        let (per_object, batches) =
            schedule::tickers(settings.schedule.as_ref(), clock, &stats.0.next_tick);
        let concurrency = settings.calls_at_once();
        let series = Series::new(metrics.as_ref(), &name, concurrency);
        // The runner schedules stubs; their keys share one `ApiResource`.
        let stub_type = Arc::new(parent.resource.clone());
        let writer = reflector::store::Writer::<Stub<DynamicObject>>::new(Arc::clone(&stub_type));
        // The runner's store: what a batch tick sends.
        let store = writer.as_reader();
        let assembly = runner::Assembly {
            events: own_events,
            gvk: settings.for_kind.clone(),
            writer: Arc::new(Mutex::new(writer)),
            dyntype: Arc::clone(&stub_type),
            series: series.clone(),
            concurrency,
            stop: shutdown.clone(),
        };
        let shared = Arc::new(Shared {
            caller: Caller::of(&settings, policy, ctx.client()),
            controller: reconcile::controller_ref(&settings.key),
            field_manager: format!("informant-hook/{name}"),
            settings,
            ctx,
            parent,
            owns,
            watches,
            stats,
            series,
            hook_metrics,
            written: Written::default(),
            status_echo: Mutex::new(HashMap::new()),
            scheduled: per_object.as_ref().map(|(_, o)| Arc::clone(o)),
        });
        let relate = |controller, parents: &reflector::Store<Stub<DynamicObject>>| {
            let controller = watch_owned(controller, &shared, child_events);
            let controller =
                watch_related(controller, &shared, related_events, (parents, &stub_type));
            schedule::with_ticks(controller, per_object, parents, &stub_type, &shared)
        };
        let batches_stop = shutdown.child_token();
        let runner = async {
            let result = runner::run(
                &shared.ctx,
                assembly,
                relate,
                (run_one, error_policy, Arc::clone(&shared)),
            )
            .await;
            batches_stop.cancel();
            result
        };
        let batches = async {
            if let Some(ticker) = batches {
                schedule::run_batches(ticker, Arc::clone(&shared), store, batches_stop.clone())
                    .await;
            }
        };
        let (result, ()) = tokio::join!(runner, batches);
        let result = result.map_err(|source| Error::Runner {
            controller: name.clone(),
            source,
        });
        shared.stats.0.ready.store(false, Ordering::Relaxed);
        // A persistent hook's processes go with the controller (removed, or the manager stops).
        shared.caller.stop().await;
        result
    }
}

/// Each change of a child (an `owns` kind) reconciles its owners of the controller's kind, and
/// makes the memo of that child's last write stale.
fn watch_owned(
    mut controller: runtime::Controller<Stub<DynamicObject>>,
    shared: &Shared,
    events: Vec<tokio::sync::broadcast::Receiver<cache::InformerEvent>>,
) -> runtime::Controller<Stub<DynamicObject>> {
    let kinds = shared.settings.owns.iter().zip(&shared.owns);
    for ((gvk, info), events) in kinds.zip(events) {
        let memo = Arc::clone(&shared.written);
        let plural = info.resource.plural.clone();
        let (added, owner) = (shared.series.clone(), shared.parent.resource.clone());
        let children = controller::changes(
            events,
            Arc::clone(shared.ctx.cache()),
            gvk.clone(),
            decode,
            Follow::Trigger,
        )
        .inspect(move |change| forget_children(&memo, &plural, change))
        .flat_map(|change: Change<DynamicObject>| stream::iter(change.into_objects()))
        .map(move |child| {
            // The owners kube-runtime's `trigger_owners` enqueues: every owner reference of
            // the parent kind, in the child's namespace.
            for reference in child.metadata.owner_references.iter().flatten() {
                let namespace = child.metadata.namespace.as_deref();
                if let Some(target) =
                    ObjectRef::<DynamicObject>::from_owner_ref(namespace, reference, owner.clone())
                {
                    added.queue_added(&target);
                }
            }
            Ok::<_, watcher::Error>(child)
        });
        controller = controller.owns_stream_with(children, info.resource.clone());
    }
    controller
}

/// Each change of a related object (a `watches` kind) reconciles the objects of the controller
/// it maps to (`mapTo`; by default every one in its namespace, every one for a cluster-scoped
/// related kind).
fn watch_related(
    mut controller: runtime::Controller<Stub<DynamicObject>>,
    shared: &Shared,
    events: Vec<tokio::sync::broadcast::Receiver<cache::InformerEvent>>,
    parents: (&reflector::Store<Stub<DynamicObject>>, &Arc<ApiResource>),
) -> runtime::Controller<Stub<DynamicObject>> {
    let (parents, stub_type) = parents;
    let settings = &shared.settings;
    let watched = settings.watches.iter().zip(&settings.map_to);
    for (((gvk, map_to), info), events) in watched.zip(&shared.watches).zip(events) {
        let related = controller::changes(
            events,
            Arc::clone(shared.ctx.cache()),
            gvk.clone(),
            decode,
            Follow::Trigger,
        )
        .flat_map(|change: Change<DynamicObject>| stream::iter(change.into_objects()))
        .map(Ok::<_, watcher::Error>);
        let parents = parents.clone();
        let stub_type = Arc::clone(stub_type);
        let map_to = map_to.clone();
        let added = shared.series.clone();
        // A stub carries the name and namespace the mapping compares.
        let mapper = move |other: DynamicObject| {
            let targets = parents
                .state()
                .iter()
                .filter(|p| map_to.maps(&other.metadata, p.meta()))
                .map(|p| ObjectRef::from_obj_with(p.as_ref(), Arc::clone(&stub_type)))
                .collect::<Vec<_>>();
            for target in &targets {
                added.queue_added(target);
            }
            targets
        };
        controller = controller.watches_stream_with(related, mapper, info.resource.clone());
    }
    controller
}

/// Makes sure the informers of every kind of the controller exist and synced.
async fn ensure_informers(ctx: &Context, settings: &ControllerSettings) -> Result<(), Error> {
    let mut kinds: Vec<&GroupVersionKind> = vec![&settings.for_kind];
    for gvk in settings.owns.iter().chain(&settings.watches) {
        if !kinds.contains(&gvk) {
            kinds.push(gvk);
        }
    }
    futures::future::try_join_all(kinds.into_iter().map(|gvk| async move {
        ctx.cache()
            .ensure_informer(gvk)
            .await
            .map_err(|source| Error::Informer {
                controller: settings.key.to_string(),
                gvk: gvk.clone(),
                source,
            })
    }))
    .await
    .map(drop)
}

/// The API resources of the controller's `for`, `owns` and `watches` kinds.
async fn resolve_kinds(
    ctx: &Context,
    settings: &ControllerSettings,
) -> Result<(KindInfo, Vec<KindInfo>, Vec<KindInfo>), Error> {
    let resolver = Discovery::new(ctx.client().clone());
    let resolve = |gvk: &GroupVersionKind| {
        let resolver = &resolver;
        let gvk = gvk.clone();
        async move {
            resolver
                .resolve(&gvk)
                .await
                .map_err(|source| Error::Resolve {
                    controller: settings.key.to_string(),
                    gvk: gvk.clone(),
                    source,
                })
        }
    };
    let parent = resolve(&settings.for_kind).await?;
    let mut owns = Vec::new();
    for gvk in &settings.owns {
        owns.push(resolve(gvk).await?);
    }
    let mut watches = Vec::new();
    for gvk in &settings.watches {
        watches.push(resolve(gvk).await?);
    }
    Ok((parent, owns, watches))
}

#[allow(
    clippy::unnecessary_wraps,
    clippy::needless_pass_by_value,
    reason = "the shape of every source::Decode"
)]
fn decode(_gvk: &GroupVersionKind, object: Arc<DynamicObject>) -> Option<DynamicObject> {
    Some(Arc::unwrap_or_clone(object))
}

/// One reconcile in a `reconcile` span, counted, of the object the cache holds for `stub`; a
/// failure is a `HookFailed` Warning Event on the object and counts against it.
fn run_one(
    stub: Arc<Stub<DynamicObject>>,
    shared: Arc<Shared>,
) -> impl Future<Output = Result<Action, ReconcileError>> + Send + 'static {
    let span = tracing::info_span!(
        "reconcile",
        controller = %shared.settings.key,
        hook = true,
        k8s.namespace = stub.namespace().unwrap_or(""),
        object.name = stub.name(),
        result = field::Empty,
        error = field::Empty,
    );
    let record = span.clone();
    let name = shared.settings.key.to_string();
    async move {
        // A tick of `spec.schedule` waiting for this object is answered by this reconcile.
        let _tick = shared.scheduled.as_ref().and_then(|o| o.claim(&stub));
        let key = stub.key(&shared.parent.resource);
        let answer = shared
            .ctx
            .cache()
            .get(&shared.settings.for_kind, stub.namespace(), stub.name())
            .await;
        let object = match controller::read(answer, &key, &shared.ctx, &shared.series) {
            Ok(object) => object,
            Err(action) => return Ok(action),
        };
        if !selected(&object, &shared) {
            return Ok(Action::await_change());
        }
        // With sharding, another member may own the object now: it reconciles it.
        let kind = &shared.parent.resource.kind;
        let Some(admission) = shared.ctx.admit(&name, kind, &object.metadata) else {
            return Ok(Action::await_change());
        };
        let _worker = shared.series.reconcile_started(&key);
        let started = Instant::now();
        // Dropped mid-way: a one-shot hook's process is killed, a persistent hook's call is
        // abandoned (its late answer is discarded); writes already sent stand.
        let reconciling = async {
            bounded(
                shared.settings.timeout,
                reconcile::reconcile(&object, &shared),
            )
            .await
            .unwrap_or_else(|limit| Err(ReconcileError::TimedOut(limit)))
        };
        let Some(result) = admission.run(reconciling).await else {
            return Ok(Action::await_change());
        };
        let elapsed = started.elapsed();
        shared.stats.0.reconciles.fetch_add(1, Ordering::Relaxed);
        let outcome = match &result {
            Ok((action, _)) if *action == Action::await_change() => Outcome::Success,
            Ok(_) => Outcome::RequeueAfter,
            Err(_) => Outcome::Error,
        };
        let timed_out = matches!(result, Err(ReconcileError::TimedOut(_)));
        let label = shared.series.reconcile_ended(outcome, timed_out, elapsed);
        record.record("result", label);
        if let Some(m) = &shared.hook_metrics {
            let reason = result.as_ref().err().map_or("none", ReconcileError::reason);
            m.observe(&shared.settings.key.to_string(), reason, elapsed);
        }
        match result {
            Ok((action, writes)) => {
                shared.ctx.forget(&key);
                if outcome == Outcome::RequeueAfter {
                    shared.series.queue_retried();
                }
                tracing::debug!(?action, ?writes, "hook answered");
                Ok(action)
            }
            Err(error) => {
                shared.ctx.failed(key);
                shared.stats.0.failures.fetch_add(1, Ordering::Relaxed);
                // Each part a hook wrote is already an excerpt; the whole stays short too.
                let text = status_text(&crate::telemetry::error_chain(&error));
                record.record("error", text.as_str());
                tracing::warn!(error = %text, "hook reconcile failed");
                let what = format!(
                    "{}/{}: {text}",
                    object.metadata.namespace.as_deref().unwrap_or_default(),
                    object.metadata.name.as_deref().unwrap_or_default()
                );
                *shared
                    .stats
                    .0
                    .last_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(what);
                shared.ctx.recorder().record(
                    &reconcile::object_ref(&object, &shared.parent),
                    EventType::Warning,
                    REASON_HOOK_FAILED,
                    &text,
                );
                Err(error)
            }
        }
    }
    .instrument(span)
}

/// The most characters of a failure's text in the `Controller`'s status, its Event and log.
const STATUS_TEXT_CHARS: usize = 1024;

/// `text` as one line of at most [`STATUS_TEXT_CHARS`] characters.
pub(super) fn status_text(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if line.chars().count() <= STATUS_TEXT_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(STATUS_TEXT_CHARS).collect();
    cut.push('…');
    cut
}

/// controller-runtime's per-object exponential backoff on the object's failures in a row.
#[allow(
    clippy::needless_pass_by_value,
    reason = "kube-runtime's error policy shape"
)]
fn error_policy(
    stub: Arc<Stub<DynamicObject>>,
    _error: &ReconcileError,
    shared: Arc<Shared>,
) -> Action {
    let key = stub.key(&shared.parent.resource);
    shared.series.queue_retried();
    Action::requeue(error_backoff(shared.ctx.failures_of(&key).max(1)))
}

/// Whether the object matches the controller's `for` selectors.
pub(super) fn selected(object: &DynamicObject, shared: &Shared) -> bool {
    let settings = &shared.settings;
    if settings.label_selector.is_none() && settings.field_selector.is_none() {
        return true;
    }
    let value = serde_json::to_value(object).unwrap_or_default();
    settings
        .label_selector
        .as_ref()
        .is_none_or(|s| s.matches_object(&value))
        && settings
            .field_selector
            .as_ref()
            .is_none_or(|s| s.matches_object(&value))
}
