//! The controller runtime against the embedded API server, fed by a `CacheReloader`'s informer
//! pool: reconciles for existing and new objects, owned children triggering their owner,
//! `Action::requeue`, the error backoff with other objects still flowing, reloads that move the
//! cache's scope, and the `CronJob` sample's events, each exactly once.

use crate::support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use informant::cache;
use informant::cache::CacheReloader;
use informant::controller::{Action, Context, Controller, Stub, default_error_policy};
use informant::controller::{ControllerMetrics, ReconcileResult};
use informant::recorder::{
    Fate, FateCounter, NullSink, Options, Pipeline, Recorder, Sink, SinkError, SystemClock,
};
use informant::samples::cronjob::{self, Reconciler, Schedule};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{self as corev1, ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Every awaited condition must hold within this long.
const GUARD: Duration = Duration::from_secs(20);

fn options(yaml: &str) -> cache::Options {
    informant::config::load_str(yaml).unwrap().cache
}

fn by_object(entries: &str) -> String {
    format!(
        "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {{name: test, namespace: default}}
spec:
  byObject:
{entries}"
    )
}

/// The embedded API server, a reloader over its informer pool, and a controller context.
/// The shared [`support::Env`] with controller-runtime's default cache.
struct Env {
    base: support::Env,
    reloader: CacheReloader,
}

support::wraps_env!(Env);

impl Env {
    async fn new() -> Self {
        let base = support::Env::new().await;
        let reloader = base.default_reloader(GUARD).await;
        Self { base, reloader }
    }

    /// The `ConfigMap` `default/name` labelled `app=<app>`.
    fn configmap(&self, name: &str, app: &str) -> serde_json::Value {
        self.base.configmap("default", name, &json!({"app": app}))
    }

    /// A context whose recorder goes nowhere (these controllers record nothing).
    fn context(&self) -> Context {
        let pipeline = Pipeline::new(&Options::default(), NullSink, Arc::new(SystemClock));
        self.context_with(pipeline.recorder())
    }

    fn context_with(&self, recorder: Recorder) -> Context {
        Context::new(
            self.reloader.cache(),
            Arc::clone(self.reloader.pool()),
            self.client.clone(),
            recorder,
        )
    }

    async fn stop(self) {
        self.base.stop().await;
    }
}

/// A running controller: its task, its runner's store (a stub per object), and its shutdown.
struct Running<K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + 'static> {
    task: JoinHandle<informant::controller::Result<()>>,
    store: Store<Stub<K>>,
    shutdown: CancellationToken,
}

impl<K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + 'static> Running<K> {
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.store.state().iter().map(|o| o.name_any()).collect();
        names.sort();
        names
    }

    /// Stops the controller; it must end cleanly once its reconciles finished.
    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(GUARD, self.task)
            .await
            .expect("the controller stops on shutdown")
            .unwrap()
            .unwrap();
    }
}

#[derive(Debug, thiserror::Error)]
#[error("reconcile of {0} failed on purpose")]
struct Failed(String);

/// Runs `controller` with a reconcile that reports each reconciled name on the returned
/// channel and answers what `answer` says.
fn start<K, A>(
    controller: Controller<K>,
    ctx: Context,
    answer: A,
) -> (Running<K>, mpsc::UnboundedReceiver<String>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    A: Fn(&K) -> Result<Action, Failed> + Send + Sync + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let store = controller.store();
    let shutdown = CancellationToken::new();
    let answer = Arc::new(answer);
    let task = tokio::spawn(controller.run(
        ctx,
        move |object: Arc<K>, _ctx| {
            let (tx, answer) = (tx.clone(), Arc::clone(&answer));
            async move {
                let _ = tx.send(object.name_any());
                answer(&object)
            }
        },
        default_error_policy,
        shutdown.clone(),
    ));
    (
        Running {
            task,
            store,
            shutdown,
        },
        rx,
    )
}

async fn next(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(GUARD, rx.recv())
        .await
        .expect("a reconcile within the guard")
        .expect("the controller is running")
}

/// A `ConfigMap` controller named `name` whose one worker holds each object it takes until
/// `open` is sent true: what it took comes out of `reconciled`, the others wait in its queue.
struct Gated {
    open: tokio::sync::watch::Sender<bool>,
    reconciled: mpsc::UnboundedReceiver<String>,
    shutdown: CancellationToken,
    task: JoinHandle<informant::controller::Result<()>>,
}

impl Gated {
    fn start(env: &Env, name: &str, metrics: &ControllerMetrics) -> Self {
        let (open, gate) = tokio::sync::watch::channel(false);
        let (tx, reconciled) = mpsc::unbounded_channel();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(Controller::<ConfigMap>::new(name).metrics(metrics).run(
            env.context(),
            move |object: Arc<ConfigMap>, _ctx| {
                let mut gate = gate.clone();
                let tx = tx.clone();
                async move {
                    let _ = tx.send(object.name_any());
                    gate.wait_for(|open| *open).await.unwrap();
                    Ok::<_, Failed>(Action::await_change())
                }
            },
            default_error_policy,
            shutdown.clone(),
        ));
        Self {
            open,
            reconciled,
            shutdown,
            task,
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(GUARD, self.task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
}

/// Waits (at most [`GUARD`]) until `depth()` reads `want`.
async fn depth_reaches(what: &str, depth: impl Fn() -> i64, want: i64) {
    let reached = support::holds_within(GUARD, || {
        let now = depth();
        async move { now == want }
    })
    .await;
    assert!(reached, "{what}: depth {}", depth());
}

/// Waits for reconciles until one of `name`, returning the names reconciled before it,
/// sorted, each once.
async fn until(rx: &mut mpsc::UnboundedReceiver<String>, name: &str) -> Vec<String> {
    let mut before = Vec::new();
    loop {
        let reconciled = next(rx).await;
        if reconciled == name {
            break;
        }
        before.push(reconciled);
    }
    before.sort();
    before.dedup();
    before
}

#[tokio::test]
async fn a_reconcile_runs_for_each_existing_object_and_each_new_one() {
    let env = Env::new().await;
    env.configmap("one", "a");
    env.configmap("two", "a");
    let (running, mut reconciled) = start(
        Controller::<ConfigMap>::new("configmaps"),
        env.context(),
        |_| Ok(Action::await_change()),
    );
    let mut first = vec![next(&mut reconciled).await, next(&mut reconciled).await];
    first.sort();
    assert_eq!(first, vec!["one", "two"]);
    assert_eq!(running.names(), vec!["one", "two"]);

    env.configmap("three", "a");
    assert_eq!(next(&mut reconciled).await, "three");
    assert_eq!(running.names(), vec!["one", "three", "two"]);
    running.stop().await;
    env.stop().await;
}

/// The operator's state (kube-rs's `Context<T>`): the context given to `run` carries it to
/// every reconcile and every error policy call.
#[tokio::test]
async fn the_reconcile_and_the_error_policy_read_the_state_the_context_carries() {
    struct State {
        reconciled: mpsc::UnboundedSender<String>,
        failed: mpsc::UnboundedSender<String>,
        retry: Duration,
    }
    let env = Env::new().await;
    env.configmap("one", "a");
    let (reconciled_tx, mut reconciled_rx) = mpsc::unbounded_channel();
    let (failed, mut failures) = mpsc::unbounded_channel();
    let state = State {
        reconciled: reconciled_tx,
        failed,
        retry: Duration::from_hours(1),
    };
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(Controller::<ConfigMap>::new("stateful").run(
        env.context().with_data(state),
        |object: Arc<ConfigMap>, ctx: Arc<Context<State>>| async move {
            let _ = ctx.data().reconciled.send(object.name_any());
            Err::<Action, _>(Failed(object.name_any()))
        },
        |object: Arc<ConfigMap>, _: &Failed, ctx: Arc<Context<State>>| {
            let _ = ctx.data().failed.send(object.name_any());
            // The state says when to retry: not within this test.
            Action::requeue(ctx.data().retry)
        },
        shutdown.clone(),
    ));
    assert_eq!(next(&mut reconciled_rx).await, "one");
    let failed = tokio::time::timeout(GUARD, failures.recv()).await;
    assert_eq!(failed.unwrap().as_deref(), Some("one"));
    shutdown.cancel();
    tokio::time::timeout(GUARD, task)
        .await
        .expect("the controller stops on shutdown")
        .unwrap()
        .unwrap();
    env.stop().await;
}

/// One copy of every object: the runner's store holds a stub (name and namespace) per object,
/// while the reconcile gets the whole object, read from the cache.
#[tokio::test]
async fn the_runner_store_holds_stubs_and_the_reconcile_gets_the_whole_object() {
    let env = Env::new().await;
    env.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": "default", "name": "full", "labels": {"app": "a"},
            "finalizers": ["example.com/keep"]},
        "data": {"key": "value"}}));
    let whole = Arc::new(AtomicBool::new(false));
    let seen = Arc::clone(&whole);
    let (running, mut reconciled) = start(
        Controller::<ConfigMap>::new("stubs"),
        env.context(),
        move |cm: &ConfigMap| {
            let data = cm.data.as_ref().and_then(|d| d.get("key"));
            seen.store(
                data.map(String::as_str) == Some("value")
                    && cm.labels().get("app").map(String::as_str) == Some("a")
                    && cm.uid().is_some(),
                Ordering::SeqCst,
            );
            Ok(Action::await_change())
        },
    );
    assert_eq!(next(&mut reconciled).await, "full");
    assert!(
        whole.load(Ordering::SeqCst),
        "the reconcile got data, labels, uid"
    );
    let stubs = running.store.state();
    assert_eq!(stubs.len(), 1);
    let version = Api::<ConfigMap>::namespaced(env.client.clone(), "default")
        .get("full")
        .await
        .unwrap()
        .metadata
        .resource_version;
    assert_eq!(
        serde_json::to_value(stubs[0].meta()).unwrap(),
        json!({"name": "full", "namespace": "default"}),
        "the runner's store holds no more of the object than its name and namespace"
    );
    assert_eq!(stubs[0].version(), version.as_deref(), "and its version");
    running.stop().await;
    env.stop().await;
}

/// With `unsafeDisableDeepCopy`, a reconcile gets the cache's own `Arc` (the typed copy the
/// cache keeps for the object): a second reconcile of the unchanged object gets the very same
/// `Arc` as the first, and as a read of the cache, so nothing was decoded or copied for it.
#[tokio::test]
async fn with_unsafe_disable_deep_copy_the_reconcile_gets_the_caches_own_arc() {
    let mut env = Env::new().await;
    env.configmap("shared", "a");
    env.reloader
        .apply(&options(
            "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: test, namespace: default}
spec:
  defaultUnsafeDisableDeepCopy: true
",
        ))
        .await
        .unwrap();
    let (tx, mut objects) = mpsc::unbounded_channel();
    let calls = AtomicUsize::new(0);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(Controller::<ConfigMap>::new("shared").run(
        env.context(),
        move |object: Arc<ConfigMap>, _ctx| {
            let first = calls.fetch_add(1, Ordering::SeqCst) == 0;
            let _ = tx.send(Arc::clone(&object));
            async move {
                // The first reconcile asks for a second one of the unchanged object.
                Ok::<_, Failed>(if first {
                    Action::requeue(Duration::from_millis(1))
                } else {
                    Action::await_change()
                })
            }
        },
        default_error_policy,
        shutdown.clone(),
    ));
    let first = tokio::time::timeout(GUARD, objects.recv())
        .await
        .unwrap()
        .unwrap();
    let second = tokio::time::timeout(GUARD, objects.recv())
        .await
        .unwrap()
        .unwrap();
    let cache = env.reloader.cache();
    let read: Arc<ConfigMap> = cache::typed::get_arc(cache.as_ref(), Some("default"), "shared")
        .await
        .unwrap();
    assert!(
        Arc::ptr_eq(&first, &second),
        "the second reconcile got the first one's object: nothing decoded"
    );
    assert!(
        Arc::ptr_eq(&second, &read),
        "the reconcile's object is the one the cache shares"
    );
    shutdown.cancel();
    tokio::time::timeout(GUARD, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    env.stop().await;
}

/// An object deleted while it waits for its turn is not reconciled (kube-runtime's
/// `ObjectNotFound`, or the cache no longer holding it), and leaves the queue.
#[tokio::test]
async fn an_object_deleted_while_it_waits_for_its_turn_is_not_reconciled() {
    let env = Env::new().await;
    env.configmap("first", "a");
    let metrics = ControllerMetrics::new();
    let mut gated = Gated::start(&env, "deleted", &metrics);
    assert_eq!(next(&mut gated.reconciled).await, "first");
    env.configmap("doomed", "a");
    let series = metrics.controller("deleted", 1);
    depth_reaches("doomed is queued", || series.depth(), 1).await;
    Api::<ConfigMap>::namespaced(env.client.clone(), "default")
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let cache = env.reloader.cache();
    let gone = support::holds_within(GUARD, || async {
        cache::typed::get::<ConfigMap>(cache.as_ref(), Some("default"), "doomed")
            .await
            .is_err()
    })
    .await;
    assert!(gone, "the cache saw the delete");
    gated.open.send(true).unwrap();
    env.configmap("after", "a");
    assert_eq!(
        next(&mut gated.reconciled).await,
        "after",
        "doomed was not reconciled"
    );
    depth_reaches("doomed left the queue", || series.depth(), 0).await;
    gated.stop().await;
    env.stop().await;
}

#[tokio::test]
async fn an_owned_child_change_reconciles_its_controller_owner() {
    let env = Env::new().await;
    let parent = env.configmap("parent", "a");
    env.configmap("bystander", "a");
    let (running, mut reconciled) = start(
        Controller::<ConfigMap>::new("parents").owns::<Secret>(),
        env.context(),
        |_| Ok(Action::await_change()),
    );
    let mut first = vec![next(&mut reconciled).await, next(&mut reconciled).await];
    first.sort();
    assert_eq!(first, vec!["bystander", "parent"]);

    let owner = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "parent",
        "uid": parent["metadata"]["uid"], "controller": true});
    env.create(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"namespace": "default", "name": "child", "ownerReferences": [owner]}}));
    assert_eq!(next(&mut reconciled).await, "parent");

    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "default");
    let label = json!({"metadata": {"labels": {"changed": "yes"}}});
    secrets
        .patch("child", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    assert_eq!(next(&mut reconciled).await, "parent");
    secrets
        .delete("child", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(next(&mut reconciled).await, "parent");
    running.stop().await;
    env.stop().await;
}

/// Projected objects still carry what the cache and the controller need: the owner lookup of
/// a child whose `keepFields` drops its data finds its owner, and a label selector on a kind
/// whose projection keeps neither labels nor data still chooses what is cached (selection is
/// the API server's, before the projection; the kept metadata keeps the labels anyway).
#[tokio::test]
async fn owner_lookups_and_label_selectors_work_on_projected_objects() {
    let mut env = Env::new().await;
    let parent = env.configmap("parent", "a");
    env.configmap("unselected", "b");
    env.reloader
        .apply(&options(&by_object(
            "    - {apiVersion: v1, kind: ConfigMap, labelSelector: app=a, transform: {keepFields: [metadata.annotations]}}
    - {apiVersion: v1, kind: Secret, transform: {keepFields: [type]}}
",
        )))
        .await
        .unwrap();
    let (running, mut reconciled) = start(
        Controller::<ConfigMap>::new("projected").owns::<Secret>(),
        env.context(),
        |_| Ok(Action::await_change()),
    );
    assert_eq!(next(&mut reconciled).await, "parent");

    let owner = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "parent",
        "uid": parent["metadata"]["uid"], "controller": true});
    env.create(
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "data": {"key": "dmFsdWU="},
        "metadata": {"namespace": "default", "name": "child", "ownerReferences": [owner]}}),
    );
    assert_eq!(next(&mut reconciled).await, "parent");
    let cache = env.reloader.cache();
    let child = cache::typed::get::<Secret>(cache.as_ref(), Some("default"), "child")
        .await
        .unwrap();
    assert_eq!(child.data, None, "the projection dropped the data");
    assert_eq!(child.type_.as_deref(), Some("Opaque"), "and kept the type");
    assert_eq!(child.owner_references().len(), 1, "and the owner");

    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "default");
    let label = json!({"metadata": {"labels": {"changed": "yes"}}});
    secrets
        .patch("child", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    assert_eq!(next(&mut reconciled).await, "parent");
    let parent = cache::typed::get::<ConfigMap>(cache.as_ref(), Some("default"), "parent")
        .await
        .unwrap();
    assert_eq!(parent.labels().get("app").map(String::as_str), Some("a"));
    assert!(
        cache::typed::get::<ConfigMap>(cache.as_ref(), Some("default"), "unselected")
            .await
            .is_err(),
        "the selector still leaves the other ConfigMap out"
    );
    running.stop().await;
    env.stop().await;
}

#[tokio::test]
async fn a_watched_object_reconciles_what_its_mapper_names() {
    let env = Env::new().await;
    env.configmap("target", "a");
    env.configmap("other", "a");
    let controller = Controller::<ConfigMap>::new("mapped").watches(|secret: &Secret| {
        let target = secret.labels().get("target").cloned();
        target
            .map(|name| ObjectRef::new(&name).within(&secret.namespace().unwrap_or_default()))
            .into_iter()
            .collect()
    });
    let (running, mut reconciled) =
        start(controller, env.context(), |_| Ok(Action::await_change()));
    let mut first = vec![next(&mut reconciled).await, next(&mut reconciled).await];
    first.sort();
    assert_eq!(first, vec!["other", "target"]);

    env.create(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"namespace": "default", "name": "pointer", "labels": {"target": "target"}}}));
    assert_eq!(next(&mut reconciled).await, "target");
    running.stop().await;
    env.stop().await;
}

#[tokio::test]
async fn requeue_after_reconciles_the_object_again_without_any_change() {
    let env = Env::new().await;
    env.configmap("ticker", "a");
    let runs = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&runs);
    let (running, mut reconciled) = start(
        Controller::<ConfigMap>::new("ticker"),
        env.context(),
        move |_| {
            if counted.fetch_add(1, Ordering::SeqCst) < 2 {
                Ok(Action::requeue(Duration::from_millis(20)))
            } else {
                Ok(Action::await_change())
            }
        },
    );
    for _ in 0..3 {
        assert_eq!(next(&mut reconciled).await, "ticker");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    running.stop().await;
    env.stop().await;
}

/// `syncPeriod` is the floor on how often each object is reconciled: with a 1 s period for the
/// kind (its `byObject` entry), an object nobody changes is reconciled again, and each resync is
/// a workqueue add.
#[tokio::test]
async fn an_unchanged_object_is_reconciled_again_after_its_kinds_sync_period() {
    let mut env = Env::new().await;
    env.configmap("steady", "a");
    env.reloader
        .apply(&options(&by_object(
            "    - {apiVersion: v1, kind: ConfigMap, syncPeriod: 1s}\n",
        )))
        .await
        .unwrap();
    let metrics = ControllerMetrics::new();
    let (running, mut reconciled) = start(
        Controller::<ConfigMap>::new("resynced").metrics(&metrics),
        env.context(),
        |_| Ok(Action::await_change()),
    );
    assert_eq!(next(&mut reconciled).await, "steady", "the first list");
    assert_eq!(next(&mut reconciled).await, "steady", "the first resync");
    assert_eq!(next(&mut reconciled).await, "steady", "the second resync");
    let series = metrics.controller("resynced", 1);
    assert!(
        series.adds() >= 3,
        "the list and each resync are queue adds: {}",
        series.adds()
    );
    running.stop().await;
    env.stop().await;
}

async fn next_failure(failures: &mut mpsc::UnboundedReceiver<(String, u32)>) -> (String, u32) {
    tokio::time::timeout(GUARD, failures.recv())
        .await
        .expect("a failure within the guard")
        .unwrap()
}

#[tokio::test]
async fn a_failing_object_backs_off_per_object_while_other_objects_keep_flowing() {
    let env = Env::new().await;
    env.configmap("bad", "a");
    let metrics = ControllerMetrics::new();
    let failing = Arc::new(AtomicBool::new(true));
    let (failures_tx, mut failures) = mpsc::unbounded_channel();
    let (tx, mut reconciled) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let fail = Arc::clone(&failing);
    let task = tokio::spawn(
        Controller::<ConfigMap>::new("backoff")
            .metrics(&metrics)
            .run(
                env.context(),
                move |object: Arc<ConfigMap>, _ctx| {
                    let fails = object.name_any() == "bad" && fail.load(Ordering::SeqCst);
                    let _ = tx.send((object.name_any(), !fails));
                    async move {
                        if fails {
                            Err(Failed(object.name_any()))
                        } else {
                            Ok(Action::await_change())
                        }
                    }
                },
                move |object: Arc<ConfigMap>, error: &Failed, ctx: Arc<Context>| {
                    let _ = failures_tx.send((error.0.clone(), ctx.failures(object.as_ref())));
                    default_error_policy(object, error, ctx)
                },
                shutdown.clone(),
            ),
    );
    let mut succeeded = async |name: &str| loop {
        let (reconciled, ok) = tokio::time::timeout(GUARD, reconciled.recv())
            .await
            .expect("a reconcile within the guard")
            .unwrap();
        if reconciled == name && ok {
            return;
        }
    };

    // The failures of one object count up, each retried after its backoff (5 ms, 10 ms, ...).
    let mut seen = Vec::new();
    for _ in 0..4 {
        let (name, n) = next_failure(&mut failures).await;
        assert_eq!(name, "bad");
        seen.push(n);
    }
    assert_eq!(seen, vec![1, 2, 3, 4]);

    // With one worker and "bad" still failing, new objects are reconciled.
    env.configmap("good-1", "a");
    succeeded("good-1").await;
    env.configmap("good-2", "a");
    succeeded("good-2").await;

    // Its next retry succeeds, which forgets its failures: the next one is the first again.
    failing.store(false, Ordering::SeqCst);
    succeeded("bad").await;
    while failures.try_recv().is_ok() {}
    failing.store(true, Ordering::SeqCst);
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), "default");
    let touch = json!({"metadata": {"labels": {"touched": "yes"}}});
    configmaps
        .patch("bad", &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .unwrap();
    assert_eq!(next_failure(&mut failures).await, ("bad".to_string(), 1));

    let series = metrics.controller("backoff", 1);
    assert!(series.reconciles(ReconcileResult::Error) >= 5);
    assert!(series.reconciles(ReconcileResult::Success) >= 3);
    shutdown.cancel();
    tokio::time::timeout(GUARD, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    env.stop().await;
}

#[tokio::test]
async fn a_reload_that_narrows_the_selector_removes_objects_that_left_the_scope_from_the_store() {
    let mut env = Env::new().await;
    env.configmap("a-1", "a");
    env.configmap("b-1", "b");
    let select = |app: &str| {
        options(&by_object(&format!(
            "    - {{apiVersion: v1, kind: ConfigMap, labelSelector: 'app={app}'}}\n"
        )))
    };
    env.reloader.apply(&select("a")).await.unwrap();
    let (running, mut reconciled) = start(
        Controller::<ConfigMap>::new("scoped"),
        env.context(),
        |_| Ok(Action::await_change()),
    );
    assert_eq!(next(&mut reconciled).await, "a-1");
    assert_eq!(running.names(), vec!["a-1"]);

    let change = env.reloader.apply(&select("b")).await.unwrap();
    assert_eq!(change.stopped.len(), 1, "{change:?}");
    // A change made after the reload is reconciled after everything the reload did.
    env.configmap("b-2", "b");
    until(&mut reconciled, "b-2").await;
    assert_eq!(running.names(), vec!["b-1", "b-2"], "a-1 left the scope");
    running.stop().await;
    env.stop().await;
}

/// A reload keeps the objects it brought into the cache in the runner's store and reconciles
/// them, and nothing the store held already: the list the controller takes after it passes
/// over the new objects only.
#[tokio::test]
async fn a_reload_that_adds_a_namespace_keeps_and_reconciles_its_objects_not_the_ones_held() {
    let mut env = Env::new().await;
    for (ns, name) in [("team-a", "a-1"), ("team-b", "b-1"), ("team-b", "b-2")] {
        env.create(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"namespace": ns, "name": name}}));
    }
    let namespaces = |list: &str| {
        options(&by_object(&format!(
            "    - {{apiVersion: v1, kind: Secret, namespaces: {list}}}\n"
        )))
    };
    env.reloader
        .apply(&namespaces("{team-a: {}}"))
        .await
        .unwrap();
    let (running, mut reconciled) =
        start(Controller::<Secret>::new("secrets"), env.context(), |_| {
            Ok(Action::await_change())
        });
    assert_eq!(next(&mut reconciled).await, "a-1");

    let change = env
        .reloader
        .apply(&namespaces("{team-a: {}, team-b: {}}"))
        .await
        .unwrap();
    assert_eq!(change.summary(), "started 1 informer, stopped 0, kept 1");
    // A change made after the reload is reconciled after everything the reload did.
    env.create(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"namespace": "team-a", "name": "a-2"}}));
    assert_eq!(
        until(&mut reconciled, "a-2").await,
        ["b-1", "b-2"],
        "a-1 was held already"
    );
    assert_eq!(running.names(), vec!["a-1", "a-2", "b-1", "b-2"]);
    running.stop().await;
    env.stop().await;
}

/// Keeps every Event the pipeline writes: reason → messages, and how many patches.
#[derive(Clone, Default)]
struct CaptureSink {
    created: Arc<Mutex<BTreeMap<String, Vec<String>>>>,
    patched: Arc<AtomicU32>,
    writes: Option<mpsc::UnboundedSender<()>>,
}

impl Sink for CaptureSink {
    async fn create(&self, event: &corev1::Event) -> Result<(), SinkError> {
        self.created
            .lock()
            .unwrap()
            .entry(event.reason.clone().unwrap_or_default())
            .or_default()
            .push(event.message.clone().unwrap_or_default());
        if let Some(writes) = &self.writes {
            let _ = writes.send(());
        }
        Ok(())
    }

    async fn patch(
        &self,
        _namespace: &str,
        _name: &str,
        _body: &serde_json::Value,
    ) -> Result<(), SinkError> {
        self.patched.fetch_add(1, Ordering::SeqCst);
        if let Some(writes) = &self.writes {
            let _ = writes.send(());
        }
        Ok(())
    }
}

impl CaptureSink {
    fn messages(&self, reason: &str) -> Vec<String> {
        self.created
            .lock()
            .unwrap()
            .get(reason)
            .cloned()
            .unwrap_or_default()
    }
}

/// A recorder pipeline writing to a [`CaptureSink`], with an observer counting what was
/// recorded.
struct Recording {
    sink: CaptureSink,
    writes: mpsc::UnboundedReceiver<()>,
    observed: mpsc::Receiver<Arc<informant::recorder::Event>>,
    fates: FateCounter,
    recorder: Recorder,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), std::convert::Infallible>>,
}

impl Recording {
    fn start(component: &str) -> Self {
        let (writes_tx, writes) = mpsc::unbounded_channel();
        let sink = CaptureSink {
            writes: Some(writes_tx),
            ..CaptureSink::default()
        };
        let options = Options {
            component: component.into(),
            ..Options::default()
        };
        let mut pipeline = Pipeline::new(&options, sink.clone(), Arc::new(SystemClock));
        let observed = pipeline.subscribe(1000);
        let fates = pipeline.fates();
        let recorder = pipeline.recorder();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(pipeline.run(shutdown.clone()));
        Self {
            sink,
            writes,
            observed,
            fates,
            recorder,
            shutdown,
            task,
        }
    }

    /// Waits until `n` events were written (created or patched).
    async fn written(&mut self, n: u64) {
        while self.fates.get(Fate::Created) + self.fates.get(Fate::Patched) < n {
            tokio::time::timeout(GUARD, self.writes.recv())
                .await
                .expect("every event is written")
                .unwrap();
        }
    }

    /// Stops the pipeline once what was queued is written; returns how many events were
    /// recorded.
    async fn finish(mut self) -> (CaptureSink, FateCounter, u64) {
        drop(self.recorder);
        self.shutdown.cancel();
        let Ok(()) = tokio::time::timeout(GUARD, self.task)
            .await
            .unwrap()
            .unwrap();
        let mut recorded = 0;
        while self.observed.try_recv().is_ok() {
            recorded += 1;
        }
        (self.sink, self.fates, recorded)
    }
}

/// Runs the `CronJob` sample's controller; each finished reconcile is reported on the
/// returned channel.
fn start_cronjob_controller(
    ctx: Context,
    shutdown: &CancellationToken,
) -> (
    JoinHandle<informant::controller::Result<()>>,
    mpsc::UnboundedReceiver<()>,
) {
    let (done_tx, done) = mpsc::unbounded_channel();
    let reconciler = Arc::new(Reconciler::new());
    let task = tokio::spawn(Reconciler::controller().run(
        ctx,
        move |cronjob, ctx| {
            let (reconciler, done) = (Arc::clone(&reconciler), done_tx.clone());
            async move {
                let result = reconciler.reconcile(cronjob, ctx).await;
                let _ = done.send(());
                result
            }
        },
        default_error_policy,
        shutdown.clone(),
    ));
    (task, done)
}

#[tokio::test]
async fn the_cronjob_sample_records_each_completion_and_delete_once_and_keeps_the_history_limit() {
    let env = Env::new().await;
    env.create(json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"namespace": "default", "name": "hello"},
        "spec": {"schedule": "* * * * *", "successfulJobsHistoryLimit": 2,
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure",
                "containers": [{"name": "hello", "image": "busybox:1.28"}]}}}}}}));
    let cronjobs: Api<CronJob> = Api::namespaced(env.client.clone(), "default");
    let hello = cronjobs.get("hello").await.unwrap();
    let mut recording = Recording::start(cronjob::NAME);
    let shutdown = CancellationToken::new();
    let (controller, mut done) =
        start_cronjob_controller(env.context_with(recording.recorder.clone()), &shutdown);
    tokio::time::timeout(GUARD, done.recv()).await.unwrap();

    // Five runs: each completes the previous Job and creates the next.
    let mut schedule = Schedule::new(env.client.clone(), recording.recorder.clone(), hello);
    let mut names = Vec::new();
    for _ in 0..5 {
        names.push(schedule.tick().await.unwrap());
    }
    // Jobs 1-4 completed: four SawCompletedJob; with a limit of 2, jobs 1 and 2 deleted.
    let expected = 5 + 4 + 2;
    recording.written(expected).await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let mut left: Vec<String> = jobs
        .list(&ListParams::default())
        .await
        .unwrap()
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    left.sort();
    assert_eq!(
        left,
        names[2..].to_vec(),
        "the two oldest completed jobs are gone"
    );

    // Reconciling again (the CronJob changed) records nothing new and deletes nothing.
    for n in 0..2 {
        let touch = json!({"metadata": {"labels": {"touched": n.to_string()}}});
        cronjobs
            .patch("hello", &PatchParams::default(), &Patch::Merge(&touch))
            .await
            .unwrap();
        tokio::time::timeout(GUARD, done.recv()).await.unwrap();
    }
    shutdown.cancel();
    tokio::time::timeout(GUARD, controller)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    drop(schedule);
    let (sink, fates, recorded) = recording.finish().await;

    let messages = |format: &dyn Fn(&String) -> String, jobs: &[String]| -> Vec<String> {
        jobs.iter().map(format).collect()
    };
    assert_eq!(
        sink.messages("SawCompletedJob"),
        messages(
            &|job| format!("Saw completed job: {job}, status: Complete"),
            &names[..4]
        )
    );
    assert_eq!(
        sink.messages("SuccessfulDelete"),
        messages(&|job| format!("Deleted job {job}"), &names[..2])
    );
    assert_eq!(
        sink.messages("SuccessfulCreate"),
        messages(&|job| format!("Created job {job}"), &names)
    );
    assert_eq!(
        sink.patched.load(Ordering::SeqCst),
        0,
        "no event was repeated"
    );
    // Conservation: every recorded event ended in exactly one fate.
    assert_eq!(recorded, expected);
    assert_eq!(fates.total(), recorded);
    assert_eq!(fates.get(Fate::Created), recorded);
    env.stop().await;
}

#[tokio::test]
async fn workqueue_depth_counts_the_objects_waiting_for_a_worker() {
    let env = Env::new().await;
    env.configmap("first", "a");
    let metrics = ControllerMetrics::new();
    let mut gated = Gated::start(&env, "depth", &metrics);
    assert_eq!(next(&mut gated.reconciled).await, "first");
    let series = metrics.controller("depth", 1);
    assert_eq!(
        series.depth(),
        0,
        "the first object was taken by the worker"
    );

    for name in ["second", "third", "fourth"] {
        env.configmap(name, "a");
    }
    depth_reaches(
        "three objects wait for the busy worker",
        || series.depth(),
        3,
    )
    .await;

    gated.open.send(true).unwrap();
    for _ in 0..3 {
        next(&mut gated.reconciled).await;
    }
    assert_eq!(series.depth(), 0, "every waiting object was taken");
    gated.stop().await;
    env.stop().await;
}

/// Issue #38: with the generation predicate a write that changes only an object's status
/// reconciles nothing, and a spec change (a new generation) does. The Deployment `z`, created
/// after the status write, comes down the same ordered stream of changes to one worker: were
/// the status write let through, `web` would be reconciled again before `z`.
#[tokio::test]
async fn with_the_generation_predicate_a_status_only_update_does_not_reconcile() {
    use informant::controller::Predicate;
    use k8s_openapi::api::apps::v1::Deployment;
    let env = Env::new().await;
    let deployment = |name: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"namespace": "default", "name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})
    };
    env.create(deployment("web"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let (running, mut reconciled) = start(
        Controller::<Deployment>::new("generations").predicate(Predicate::GenerationChanged),
        env.context(),
        move |d: &Deployment| {
            let observed = d.status.as_ref().and_then(|s| s.observed_generation);
            log.lock()
                .unwrap()
                .push((d.name_any(), d.metadata.generation, observed));
            Ok(Action::await_change())
        },
    );
    assert_eq!(next(&mut reconciled).await, "web");
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), "default");
    deployments
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"observedGeneration": 7}})),
        )
        .await
        .unwrap();
    env.create(deployment("z"));
    assert_eq!(
        next(&mut reconciled).await,
        "z",
        "the status write reconciled nothing"
    );
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(next(&mut reconciled).await, "web");
    let web = |(name, generation, observed): &(String, Option<i64>, Option<i64>)| {
        (name == "web").then_some((*generation, *observed))
    };
    let seen: Vec<_> = seen.lock().unwrap().iter().filter_map(web).collect();
    assert_eq!(seen, [(Some(1), None), (Some(2), Some(7))]);
    running.stop().await;
    env.stop().await;
}

/// A label selector on the builder narrows what the cache holds: an object outside it is not
/// reconciled, and is once a label change brings it in.
#[tokio::test]
async fn a_label_selector_on_the_builder_reconciles_only_the_objects_it_matches() {
    use informant::selector::LabelSelector;
    let env = Env::new().await;
    env.configmap("out", "b");
    env.configmap("in", "a");
    let (running, mut reconciled) = start(
        Controller::<ConfigMap>::new("selected").labels(LabelSelector::parse("app=a").unwrap()),
        env.context(),
        |_| Ok(Action::await_change()),
    );
    assert_eq!(next(&mut reconciled).await, "in");
    env.configmap("in-2", "a");
    assert_eq!(next(&mut reconciled).await, "in-2");
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), "default");
    configmaps
        .patch(
            "out",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "a"}}})),
        )
        .await
        .unwrap();
    assert_eq!(next(&mut reconciled).await, "out");
    running.stop().await;
    env.stop().await;
}

/// The write helpers of `Context`: children applied with the owner's controller reference as
/// the controller's field manager, the unwanted ones pruned (another owner's left alone), and
/// the status applied to the status subresource.
#[tokio::test]
async fn the_context_applies_owned_children_prunes_the_unwanted_and_applies_status() {
    use k8s_openapi::api::apps::v1::Deployment;
    let env = Env::new().await;
    let owner: ConfigMap = serde_json::from_value(env.configmap("owner", "a")).unwrap();
    let stranger: ConfigMap = serde_json::from_value(env.configmap("stranger", "a")).unwrap();
    let ctx = env.context().with_field_manager("helpers");
    let secret = |name: &str| Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        string_data: None,
        data: Some(BTreeMap::from([(
            "k".to_owned(),
            k8s_openapi::ByteString(b"v".to_vec()),
        )])),
        ..Secret::default()
    };
    for name in ["keep", "drop"] {
        let applied = ctx.apply_owned(&owner, &secret(name)).await.unwrap();
        let reference = &applied.owner_references()[0];
        assert_eq!(
            (reference.uid.as_str(), reference.controller),
            (owner.uid().unwrap().as_str(), Some(true))
        );
        let managers: Vec<_> = applied
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter_map(|m| m.manager.clone())
            .collect();
        assert_eq!(managers, ["helpers"]);
    }
    ctx.apply_owned(&stranger, &secret("theirs")).await.unwrap();
    support::eventually("the cache holds the three Secrets", || async {
        let listed: Vec<Secret> = ctx
            .list(&cache::ListOptions::default())
            .await
            .unwrap_or_default();
        listed.len() == 3
    })
    .await;
    let pruned = ctx
        .prune_owned::<_, Secret>(&owner, &["keep"])
        .await
        .unwrap();
    assert_eq!(pruned, ["drop"]);
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "default");
    let mut left: Vec<String> = secrets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    left.sort();
    assert_eq!(left, ["keep", "theirs"]);

    let deployment: Deployment = serde_json::from_value(env.create(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"namespace": "default", "name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})))
    .unwrap();
    let stored = ctx
        .apply_status(&deployment, json!({"observedGeneration": 1, "replicas": 0}))
        .await
        .unwrap();
    let status = stored.status.unwrap();
    assert_eq!(
        (status.observed_generation, status.replicas),
        (Some(1), Some(0))
    );
    assert_eq!(
        stored.metadata.generation,
        Some(1),
        "a status write is no spec change"
    );
    env.stop().await;
}
