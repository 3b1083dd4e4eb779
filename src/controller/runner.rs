//! The one assembly of a controller's runner: kube-runtime's `Controller` fed from the informer
//! pool, and the one [`drive`] of its results. Rust controllers ([`super::Controller`]) and
//! hook controllers (`crate::hooks::HookController`) both run through [`run`], so their
//! triggers, shutdown and logs can not drift apart.
//!
//! ```text
//! pool changes of the kind ─▶ stubs ─▶ store + for stream ─┐
//! list pass, resync, shard gain ───────── reconcile_on ────┤─▶ kube-runtime Controller ─▶ drive
//! owned and watched kinds ───────────────── relate ────────┘    (concurrency, graceful
//!                                                                 shutdown on `stop`)
//! ```

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use futures::{StreamExt as _, TryFuture};
use kube::core::{GroupVersionKind, Resource};
use kube::runtime::controller::{self as runtime, Action};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::context::Context;
use super::series::Series;
use super::source::{self, SharedWriter};
use super::stub::Stub;
use crate::cache::InformerEvent;

/// What one run of a controller's runner is made of, besides its owned and watched kinds and
/// its reconcile.
pub(crate) struct Assembly<K: Resource + 'static>
where
    K::DynamicType: Clone + Eq + Hash,
{
    /// The pool's changes of the controller's own kind, subscribed to before its informers
    /// synced (so no change between sync and subscription is lost).
    pub(crate) events: broadcast::Receiver<InformerEvent>,
    /// The controller's own kind.
    pub(crate) gvk: GroupVersionKind,
    /// The runner's store of stubs, kept by the caller (a Rust controller hands out its
    /// reader, and keeps it across runs).
    pub(crate) writer: SharedWriter<Stub<K>>,
    /// The dynamic type every stub key shares.
    pub(crate) dyntype: Arc<K::DynamicType>,
    /// controller-runtime's series of the controller.
    pub(crate) series: Series,
    /// How many reconciles run at once (never two of the same object).
    pub(crate) concurrency: u16,
    /// Stops the runner gracefully: no new reconcile starts, running ones finish.
    pub(crate) stop: CancellationToken,
}

/// Runs kube-runtime's runner until `assembly.stop` and its running reconciles finished.
///
/// Its triggers: the pool's changes of the controller's kind, reflected into the store; each
/// list's pass over the objects it brought or changed ([`source::reflected_into`]); the resync
/// ([`super::resync`]); the objects of a gained part of the shard ring
/// ([`super::shard_gained`]); and whatever `relate` attaches for the owned and watched kinds
/// (it gets the runner's store, to map related objects to the controller's). A runner stopped
/// before its store was ever listed ends at once ([`super::stopped_before_ready`]).
///
/// # Errors
/// kube-runtime's [`runtime::RunnerError`] if its runner stops.
// Reason: hook controllers run through it (Rust controllers through `run_filtered`).
#[cfg_attr(not(feature = "hooks"), allow(dead_code))]
pub(crate) async fn run<K, C, R, Fut, P>(
    ctx: &Context,
    assembly: Assembly<K>,
    relate: impl FnOnce(runtime::Controller<Stub<K>>, &Store<Stub<K>>) -> runtime::Controller<Stub<K>>,
    reconciling: (R, P, Arc<C>),
) -> Result<(), runtime::RunnerError>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Debug + Eq + Hash + Send + Sync + 'static,
    R: FnMut(Arc<Stub<K>>, Arc<C>) -> Fut,
    Fut: TryFuture<Ok = Action> + Send + 'static,
    Fut::Error: std::error::Error + Send + 'static,
    P: Fn(Arc<Stub<K>>, &Fut::Error, Arc<C>) -> Action,
    C: Send + Sync + 'static,
{
    run_filtered(ctx, assembly, None, relate, reconciling).await
}

/// Whether a change of the controller's own kind (the stub it brought) triggers a reconcile:
/// a Rust controller's predicates ([`super::Predicate`]).
pub(crate) type ChangeFilter<K> =
    Box<dyn Fn(&Stub<K>) -> futures::future::BoxFuture<'static, bool> + Send + Sync>;

/// [`run`], with the changes of the controller's own kind that `filter` refuses triggering
/// nothing (the store still follows them). Every other trigger is left alone.
///
/// # Errors
/// kube-runtime's [`runtime::RunnerError`] if its runner stops.
pub(crate) async fn run_filtered<K, C, R, Fut, P>(
    ctx: &Context,
    assembly: Assembly<K>,
    filter: Option<ChangeFilter<K>>,
    relate: impl FnOnce(runtime::Controller<Stub<K>>, &Store<Stub<K>>) -> runtime::Controller<Stub<K>>,
    (reconcile, error_policy, context): (R, P, Arc<C>),
) -> Result<(), runtime::RunnerError>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Debug + Eq + Hash + Send + Sync + 'static,
    R: FnMut(Arc<Stub<K>>, Arc<C>) -> Fut,
    Fut: TryFuture<Ok = Action> + Send + 'static,
    Fut::Error: std::error::Error + Send + 'static,
    P: Fn(Arc<Stub<K>>, &Fut::Error, Arc<C>) -> Action,
    C: Send + Sync + 'static,
{
    let Assembly {
        events,
        gvk,
        writer,
        dyntype,
        series,
        concurrency,
        stop,
    } = assembly;
    let store = writer
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .as_reader();
    let changes = super::stubs::<K>(events, Arc::clone(ctx.cache()), gvk.clone());
    let (objects, pass) = source::reflected_into(
        changes,
        writer,
        Arc::clone(&dyntype),
        ctx.clone(),
        series.clone(),
    );
    let objects = objects.filter(move |change| match (&filter, change) {
        (Some(admits), Ok(stub)) => futures::future::Either::Left(admits(stub)),
        _ => futures::future::Either::Right(futures::future::ready(true)),
    });
    let resync = super::resync(
        store.clone(),
        Arc::clone(ctx.cache()),
        gvk,
        Arc::clone(&dyntype),
        series.clone(),
    );
    let gained = super::shard_gained(ctx, store.clone(), Arc::clone(&dyntype), series.clone());
    let controller = runtime::Controller::for_stream_with(objects, store.clone(), dyntype)
        .with_config(runtime::Config::default().concurrency(concurrency))
        .reconcile_on(pass)
        .reconcile_on(resync)
        .reconcile_on(gained)
        .graceful_shutdown_on(stop.clone().cancelled_owned());
    let controller = relate(controller, &store);
    let results = controller
        .run(reconcile, error_policy, context)
        .take_until(super::stopped_before_ready(store, stop));
    drive(results, &series).await
}

/// Drives kube-runtime's result stream to its end (shutdown, once running reconciles finish).
/// Reconcile failures were logged in their span; an object deleted before its turn is normal.
async fn drive<K, E>(
    results: impl futures::Stream<
        Item = Result<(ObjectRef<K>, Action), runtime::Error<E, watcher::Error>>,
    >,
    series: &Series,
) -> Result<(), runtime::RunnerError>
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
            Err(runtime::Error::RunnerError(source)) => return Err(source),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// How a module would build kube-runtime's runner by itself.
    const ASSEMBLING: [&str; 4] = [
        "for_stream",
        "applier(",
        "runtime::Controller::new",
        "kube::runtime::Controller",
    ];

    fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }

    /// The code of a source file: no comment, nothing from its first `#[cfg(test)]` on (a
    /// test may build a bare runner to show kube-runtime's own behaviour).
    fn code(text: &str) -> String {
        text.lines()
            .take_while(|line| line.trim() != "#[cfg(test)]")
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Issue #34: every controller, Rust or hook, gets its runner from this module, so their
    /// triggers, shutdown and result handling can not drift apart again.
    #[test]
    fn one_module_assembles_every_controllers_runner() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&root, &mut files);
        let mut assembling: Vec<String> = files
            .iter()
            .filter(|path| {
                let code = code(&std::fs::read_to_string(path).unwrap());
                ASSEMBLING.iter().any(|pattern| code.contains(pattern))
            })
            .map(|path| {
                let relative = path.strip_prefix(&root).unwrap();
                relative.to_string_lossy().replace('\\', "/")
            })
            .collect();
        assembling.sort();
        assert_eq!(assembling, ["controller/runner.rs"]);
    }
}
