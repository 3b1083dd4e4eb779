//! Hook controllers against the embedded API server, with a Python exec hook written to a
//! temporary directory: the hook sees the object and its children from the cache; children are
//! applied with controller owner references, re-created when a user deletes them and deleted
//! when the hook drops them; the status is written once; events are recorded and end in
//! fates; a failing hook is retried with backoff while other objects keep flowing; and the
//! supervisor restarts only an edited controller and keeps the previous one running when an
//! edit is invalid, with `Valid=False` in its status.

use crate::support;

use std::path::PathBuf;
use std::sync::Arc;

use informant::apiserver::Verb;
use informant::config::Origin;
use informant::controller::{Context, ControllerMetrics};
use informant::hooks::{
    Controller, ControllerKey, Desired, HookController, HookMetrics, Policy, Stats, Supervisor,
    ValidatedController, validate_controller_value,
};
use informant::recorder::{Fate, FateCounter, KubeSink, Options, Pipeline, SystemClock};
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt, ResourceExt};
use serde_json::{Value, json};
use support::{WAIT, eventually, require};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// See [`Env::related_hook`].
const RELATED_HOOK: &str = r#"
import json, sys
request = json.load(sys.stdin)
names = sorted(o["metadata"]["name"] for o in request["related"])
with open(sys.argv[1], "a") as log:
    # kube-controller-manager publishes kube-root-ca.crt in every namespace (its root CA
    # publisher); the log leaves it out so that it reads the same on a real cluster.
    names = [n for n in names if n != "kube-root-ca.crt"]
    log.write(json.dumps({"name": request["object"]["metadata"]["name"], "related": names}) + "\n")
json.dump({"requeueAfterSeconds": 0.05} if "again" in names else {}, sys.stdout)
"#;

/// The hook: logs each request (one JSON line) to `log`, fails for objects annotated
/// `fail: "true"`, asks for one child `<name>-child` unless the object is annotated
/// `children: none`, sets a status from the object alone, and records one event.
const HOOK: &str = r#"
import json, sys
request = json.load(sys.stdin)
obj = request["object"]
meta = obj["metadata"]
annotations = meta.get("annotations") or {}
with open(sys.argv[1], "a") as log:
    log.write(json.dumps({"name": meta["name"],
        "children": {k: [c["metadata"]["name"] for c in v] for k, v in request["children"].items()},
        "apiVersion": request["apiVersion"], "controller": request["controller"]}) + "\n")
if annotations.get("fail") == "true":
    sys.stderr.write("refusing " + meta["name"] + "\n")
    sys.exit(3)
children = []
if annotations.get("children") != "none":
    children.append({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": meta["name"] + "-child"},
                     "data": {"parent": meta["name"]}})
json.dump({"children": children,
           "status": {"lastScheduleTime": "2026-01-01T00:00:00Z"},
           "events": [{"type": "Normal", "reason": "Synced", "message": "synced " + meta["name"]}]},
          sys.stdout)
"#;

/// The embedded API server, a cache tree over its informer pool, a recorder writing Events to
/// it, and a hook script.
/// The shared [`support::Env`] with controller-runtime's default cache, a recorder that writes
/// to the server, and a directory holding the hook.
struct Env {
    base: support::Env,
    ctx: Context,
    fates: FateCounter,
    dir: tempfile::TempDir,
}

support::wraps_env!(Env);

impl Env {
    async fn new() -> Self {
        Self::with_cache(&informant::cache::Options::default()).await
    }

    /// The environment with its cache tree built from `options`.
    async fn with_cache(options: &informant::cache::Options) -> Self {
        let base = support::Env::new().await;
        let mut reloader = base.default_reloader(WAIT).await;
        reloader.apply(options).await.unwrap();
        let pipeline = Pipeline::new(
            &Options::default(),
            KubeSink::new(base.client.clone()),
            Arc::new(SystemClock),
        );
        let fates = pipeline.fates();
        let ctx = Context::new(
            reloader.cache(),
            Arc::clone(reloader.pool()),
            base.client.clone(),
            pipeline.recorder(),
        );
        base.tracker.spawn(pipeline.run(base.shutdown.clone()));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("hook.py"), HOOK).unwrap();
        // The reloader owns the informers; keep it alive as long as the tracker runs them.
        base.tracker.spawn({
            let shutdown = base.shutdown.clone();
            async move {
                shutdown.cancelled().await;
                drop(reloader);
            }
        });
        Self {
            base,
            ctx,
            fates,
            dir,
        }
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("calls.jsonl")
    }

    /// A hook that logs the names of the related objects it is sent (one JSON line per call)
    /// and asks to be called again in 50 ms while a related object is named "again".
    fn related_hook(&self) -> PathBuf {
        let hook = self.dir.path().join("related.py");
        std::fs::write(&hook, RELATED_HOOK).unwrap();
        hook
    }

    /// A `CronJob` `name` and its `Job` `name-1`, completed as the Job controller completes one:
    /// the status through its subresource with the conditions kube-apiserver requires beside
    /// `completionTime` (`SuccessCriteriaMet` then `Complete`, both `True`; a bare
    /// `completionTime` is a 422 there, k8s.io/kubernetes pkg/apis/batch/validation).
    async fn completed_job_of_cronjob(&self, name: &str) {
        let cronjob = self.cronjob(name, &json!({}));
        let uid = cronjob["metadata"]["uid"].as_str().unwrap();
        self.server
            .create(json!({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"namespace": "default", "name": format!("{name}-1"), "ownerReferences": [
                    {"apiVersion": "batch/v1", "kind": "CronJob", "name": name, "uid": uid,
                     "controller": true}]},
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}],
                                               "restartPolicy": "Never"}}}}));
        let (start, end) = ("2026-11-22T09:59:00Z", "2026-11-22T10:00:00Z");
        let condition = |kind: &str| {
            json!({"type": kind, "status": "True", "lastProbeTime": end,
                   "lastTransitionTime": end})
        };
        Api::<k8s_openapi::api::batch::v1::Job>::namespaced(self.client.clone(), "default")
            .patch_status(
                &format!("{name}-1"),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"startTime": start, "succeeded": 1,
                    "completionTime": end,
                    "conditions": [condition("SuccessCriteriaMet"), condition("Complete")]}})),
            )
            .await
            .unwrap();
    }

    fn controller_yaml(&self, name: &str, extra: &str) -> String {
        format!(
            "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: {name}, namespace: default}}
spec:
  for: {{apiVersion: batch/v1, kind: CronJob}}
  owns: [{{apiVersion: v1, kind: ConfigMap}}]
  hook: {{exec: {{command: [python3, {}, {}], timeout: 10s}}}}
{extra}",
            self.dir.path().join("hook.py").display(),
            self.log().display(),
        )
    }

    fn controller(&self, name: &str, extra: &str) -> ValidatedController {
        let value: Value = serde_yaml::from_str(&self.controller_yaml(name, extra)).unwrap();
        validate_controller_value(value, &Origin::Text, None).unwrap()
    }

    fn start(&self, controller: &ValidatedController) -> (Stats, JoinHandle<()>) {
        self.start_with(controller, &HookMetrics::new())
    }

    fn start_with(
        &self,
        controller: &ValidatedController,
        metrics: &HookMetrics,
    ) -> (Stats, JoinHandle<()>) {
        // The webhooks these tests serve are on loopback, refused unless named (issue 45).
        let policy = Policy::open().allow_url("127.0.0.1".parse().unwrap());
        let hook = HookController::new(controller.settings.clone())
            .hook_metrics(metrics)
            .policy(Arc::new(policy));
        let stats = hook.stats();
        let run = hook.run(self.ctx.clone(), self.shutdown.clone());
        let task = tokio::spawn(async move { run.await.unwrap() });
        (stats, task)
    }

    fn cronjob(&self, name: &str, annotations: &Value) -> Value {
        self.server.create(json!({"apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"namespace": "default", "name": name, "annotations": annotations},
                "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                    "containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}}}}}))
    }

    fn calls(&self) -> Vec<Value> {
        std::fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    async fn configmap(&self, name: &str) -> Option<ConfigMap> {
        Api::<ConfigMap>::namespaced(self.client.clone(), "default")
            .get_opt(name)
            .await
            .unwrap()
    }

    async fn events(&self, reason: &str, object: &str) -> Vec<Event> {
        Api::<Event>::namespaced(self.client.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.involved_object.name.as_deref() == Some(object)
            })
            .collect()
    }

    async fn stop(self, tasks: Vec<JoinHandle<()>>) {
        self.shutdown.cancel();
        for task in tasks {
            tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
        }
        self.base.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hook_sees_the_object_and_its_children_and_its_answer_is_written_once() {
    require("python3");
    let env = Env::new().await;
    let web = env.cronjob("web", &json!({}));
    let uid = web["metadata"]["uid"].as_str().unwrap().to_owned();
    // A child from before, which the hook's answer does not list: it must go.
    env.server
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": "web-old", "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "CronJob", "name": "web", "uid": uid,
                 "controller": true}]}}));
    let (stats, task) = env.start(&env.controller("web-hooks", ""));

    eventually("the child applied and the old child deleted", || async {
        env.configmap("web-child").await.is_some() && env.configmap("web-old").await.is_none()
    })
    .await;
    let first = &env.calls()[0];
    assert_eq!(first["apiVersion"], "hooks.informant.dev/v1");
    assert_eq!(
        first["controller"],
        json!({"namespace": "default", "name": "web-hooks"})
    );
    assert_eq!(first["name"], "web");
    assert_eq!(first["children"], json!({"ConfigMap.v1": ["web-old"]}));

    let child = env.configmap("web-child").await.unwrap();
    let owner = &child.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("CronJob", "web", uid.as_str())
    );
    assert_eq!(owner.controller, Some(true));
    assert_eq!(child.data.as_ref().unwrap()["parent"], "web");

    let cronjobs = Api::<CronJob>::namespaced(env.client.clone(), "default");
    eventually("the status written", || async {
        cronjobs
            .get("web")
            .await
            .unwrap()
            .status
            .is_some_and(|s| s.last_schedule_time.is_some())
    })
    .await;
    eventually("the Synced event created", || async {
        !env.events("Synced", "web").await.is_empty()
    })
    .await;
    assert!(env.fates.get(Fate::Created) >= 1);

    // Touch the object: the hook is called again with the same answer, which writes nothing.
    let handle = env.server.handle();
    let status_and_children_writes = || {
        (
            handle.request_count(Verb::Patch, "cronjobs"),
            handle.request_count(Verb::Patch, "configmaps"),
            handle.request_count(Verb::Delete, "configmaps"),
        )
    };
    eventually(
        "the reconciles triggered by its own writes settled",
        || async {
            let calls = env.calls();
            calls
                .last()
                .is_some_and(|c| c["children"] == json!({"ConfigMap.v1": ["web-child"]}))
                && stats.calls() == u64::try_from(calls.len()).unwrap()
        },
    )
    .await;
    let before = status_and_children_writes();
    assert_eq!(
        before,
        (1, 1, 1),
        "status once, the child once, the old child deleted once"
    );
    let calls = stats.calls();
    cronjobs
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .unwrap();
    eventually("the touched object's hook called", || async {
        stats.calls() > calls
    })
    .await;
    assert_eq!(
        status_and_children_writes(),
        (before.0 + 1, before.1, before.2),
        "only the user's own patch: an unchanged answer writes nothing"
    );
    assert_eq!(stats.failures(), 0);

    children_follow_the_answer(&env, &child).await;
    env.stop(vec![task]).await;
}

/// A child deleted by a user is re-created; a child the hook drops is deleted.
async fn children_follow_the_answer(env: &Env, child: &ConfigMap) {
    let cronjobs = Api::<CronJob>::namespaced(env.client.clone(), "default");
    // A user deletes the child: it is re-created.
    let configmaps = Api::<ConfigMap>::namespaced(env.client.clone(), "default");
    let old_uid = child.metadata.uid.clone();
    configmaps
        .delete("web-child", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deleted child re-created", || async {
        env.configmap("web-child")
            .await
            .is_some_and(|c| c.metadata.uid != old_uid)
    })
    .await;

    // The hook drops the child from its answer: it is deleted.
    cronjobs
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"children": "none"}}})),
        )
        .await
        .unwrap();
    eventually("the dropped child deleted", || async {
        env.configmap("web-child").await.is_none()
    })
    .await;
}

/// One sample of the `OpenMetrics` text `text`, 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// A hook controller counts controller-runtime's series as a typed controller does: the
/// workqueue's adds (an object, and its owner when a child changes), retries (each failure's
/// backoff) and depth (back to 0 once every request was taken), and the reconciles by result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_controller_counts_controller_runtime_reconcile_and_workqueue_series() {
    require("python3");
    let env = Env::new().await;
    env.cronjob("bad", &json!({"fail": "true"}));
    env.cronjob("good", &json!({}));
    let metrics = ControllerMetrics::new();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let controller = env.controller("counted", "");
    let hook = HookController::new(controller.settings.clone()).metrics(&metrics);
    let stats = hook.stats();
    let task = tokio::spawn({
        let run = hook.run(env.ctx.clone(), env.shutdown.clone());
        async move { run.await.unwrap() }
    });
    eventually("the good object's child applied", || async {
        env.configmap("good-child").await.is_some()
    })
    .await;
    eventually("the failing hook retried", || async {
        stats.failures() >= 2
    })
    .await;
    let scrape = || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    };
    let text = scrape();
    let name = "name=\"default/counted\",controller=\"default/counted\"";
    let controller = "controller=\"default/counted\"";
    assert!(
        sample(&text, &format!("workqueue_adds_total{{{name}}}")) >= 3.0,
        "two objects and the good one's child: {text}"
    );
    // The error policy, which counts the retry, runs after the failed reconcile is counted.
    eventually("each failure's backoff counted as a retry", || async {
        sample(&scrape(), &format!("workqueue_retries_total{{{name}}}")) >= 2.0
    })
    .await;
    assert!(
        sample(
            &text,
            &format!("controller_runtime_reconcile_total{{{controller},result=\"error\"}}")
        ) >= 2.0,
        "{text}"
    );
    assert!(
        sample(
            &text,
            &format!("controller_runtime_reconcile_total{{{controller},result=\"success\"}}")
        ) >= 1.0,
        "{text}"
    );
    let series = metrics.controller("default/counted", 1);
    eventually("every queued request taken", || async {
        series.depth() == 0
    })
    .await;
    env.stop(vec![task]).await;
}

/// `syncPeriod` reaches hook controllers too: with a 1 s period for the `for` kind, the hook
/// is called again for an object nobody changes, each resync counted as a workqueue add.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_is_called_again_for_an_unchanged_object_after_its_kinds_sync_period() {
    require("python3");
    let options = informant::config::load_str(
        "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: test, namespace: default}
spec:
  byObject:
    - {apiVersion: batch/v1, kind: CronJob, syncPeriod: 1s}
",
    )
    .unwrap()
    .cache;
    let env = Env::with_cache(&options).await;
    env.cronjob("steady", &json!({"children": "none"}));
    let metrics = ControllerMetrics::new();
    let controller = env.controller("resynced", "");
    let hook = HookController::new(controller.settings.clone()).metrics(&metrics);
    let stats = hook.stats();
    let task = tokio::spawn({
        let run = hook.run(env.ctx.clone(), env.shutdown.clone());
        async move { run.await.unwrap() }
    });
    // The first call writes the status, whose echo calls once more; after that only the
    // resync calls the hook.
    eventually("the hook called again and again with no change", || async {
        stats.calls() >= 5
    })
    .await;
    assert!(env.calls().iter().all(|call| call["name"] == "steady"));
    let adds = metrics.controller("default/resynced", 1).adds();
    assert!(adds >= 5, "each resync is a queue add: {adds}");
    env.stop(vec![task]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_hook_is_retried_with_backoff_while_other_objects_flow() {
    require("python3");
    let env = Env::new().await;
    env.cronjob("bad", &json!({"fail": "true"}));
    let metrics = HookMetrics::new();
    let (stats, task) = env.start_with(&env.controller("retry", ""), &metrics);
    env.cronjob("good", &json!({}));

    eventually("the good object's child applied", || async {
        env.configmap("good-child").await.is_some()
    })
    .await;
    eventually("the failing hook retried", || async {
        stats.failures() >= 3
    })
    .await;
    let warnings = env.events("HookFailed", "bad").await;
    assert!(!warnings.is_empty(), "a HookFailed event on the object");
    assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));
    assert!(
        warnings[0]
            .message
            .as_deref()
            .unwrap()
            .contains("exited with exit status: 3"),
        "{warnings:?}"
    );
    assert!(stats.last_error().unwrap().starts_with("default/bad: "));
    assert!(metrics.calls("default/retry", "exit") >= 3);
    assert!(
        metrics.calls("default/retry", "none") >= 1,
        "the good object's call"
    );

    // Fixed: the next retry succeeds.
    Api::<CronJob>::namespaced(env.client.clone(), "default")
        .patch(
            "bad",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"fail": "false"}}})),
        )
        .await
        .unwrap();
    eventually("the fixed object's child applied", || async {
        env.configmap("bad-child").await.is_some()
    })
    .await;
    env.stop(vec![task]).await;
}

async fn install_controller_crd(server: &support::Server) {
    if server.is_real() {
        // informant's CRDs stay installed on the real cluster (applied, waited for).
        support::backend::install_informant_crds(&server.client().await.unwrap()).await;
        return;
    }
    let crd: CustomResourceDefinition = Controller::crd();
    server.create(serde_json::to_value(crd).unwrap());
}

async fn next_pass(progress: &mut watch::Receiver<informant::hooks::Progress>) {
    // Two passes: the second one certainly started after the change was sent.
    let target = progress.borrow().passes + 2;
    tokio::time::timeout(WAIT, progress.wait_for(|p| p.passes >= target))
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_restarts_only_that_controller_and_an_invalid_one_keeps_the_previous_running() {
    require("python3");
    let env = Env::new().await;
    install_controller_crd(&env.server).await;
    let api = Api::<Controller>::namespaced(env.client.clone(), "default");
    let mut desired = Desired::new();
    for name in ["one", "two"] {
        let c = env.controller(name, "");
        api.create(&PostParams::default(), &c.resource)
            .await
            .unwrap();
        desired.insert(ControllerKey::new("default", name), Ok(c));
    }
    let (send, receive) = watch::channel(desired.clone());
    let supervisor = Supervisor::new(receive)
        .metrics(&ControllerMetrics::new(), &HookMetrics::new())
        .write_status(true);
    let mut progress = supervisor.progress();
    let task = tokio::spawn(supervisor.run(env.ctx.clone(), env.shutdown.clone()));
    tokio::time::timeout(WAIT, progress.wait_for(|p| p.starts == 2))
        .await
        .unwrap()
        .unwrap();

    // Edit "one": only it restarts.
    desired.insert(
        ControllerKey::new("default", "one"),
        Ok(env.controller("one", "  concurrency: 2\n")),
    );
    send.send_replace(desired.clone());
    next_pass(&mut progress).await;
    assert_eq!(progress.borrow().starts, 3, "one restart, not two");

    // An invalid edit of "one": nothing restarts, and the previous "one" keeps running.
    let invalid: Value =
        serde_yaml::from_str(&env.controller_yaml("one", "  concurrency: 0\n")).unwrap();
    let error = validate_controller_value(invalid, &Origin::Text, None).unwrap_err();
    desired.insert(ControllerKey::new("default", "one"), Err(error));
    send.send_replace(desired.clone());
    next_pass(&mut progress).await;
    assert_eq!(progress.borrow().starts, 3);
    env.cronjob("later", &json!({}));
    eventually("the previous controller still reconciles", || async {
        env.configmap("later-child").await.is_some()
    })
    .await;
    eventually("Valid=False in the invalid controller's status", || async {
        let status = api.get("one").await.unwrap().status;
        status.is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "Valid"
                    && c.status == "False"
                    && c.message.contains("spec.concurrency: must be at least 1")
            })
        })
    })
    .await;
    let two = api.get("two").await.unwrap().status.unwrap();
    assert!(
        two.conditions
            .iter()
            .any(|c| c.type_ == "Valid" && c.status == "True")
    );

    // Deleting "two" stops it; "one" keeps running.
    desired.remove(&ControllerKey::new("default", "two"));
    send.send_replace(desired);
    next_pass(&mut progress).await;
    assert_eq!(progress.borrow().starts, 3);
    env.stop(vec![task]).await;
}

/// A controller from its spec (YAML, indented two spaces).
fn controller_with_spec(name: &str, spec: &str) -> ValidatedController {
    let yaml = format!(
        "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: {name}, namespace: default}}
spec:
{spec}"
    );
    let value: Value = serde_yaml::from_str(&yaml).unwrap();
    validate_controller_value(value, &Origin::Text, None).unwrap()
}

fn example(file: &str) -> String {
    format!("{}/examples/hooks/{file}", env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cronjob_example_records_saw_completed_job_on_the_parent_once() {
    require("python3");
    let env = Env::new().await;
    env.completed_job_of_cronjob("nightly").await;
    let spec = format!(
        "  for: {{apiVersion: batch/v1, kind: CronJob}}
  owns: [{{apiVersion: batch/v1, kind: Job}}]
  hook: {{exec: {{command: [python3, {}]}}}}
",
        example("cronjob.py")
    );
    let (stats, task) = env.start(&controller_with_spec("cronjob-watch", &spec));
    eventually("SawCompletedJob on the CronJob", || async {
        !env.events("SawCompletedJob", "nightly").await.is_empty()
    })
    .await;
    let cronjobs = Api::<CronJob>::namespaced(env.client.clone(), "default");
    eventually("the last successful time in the status", || async {
        cronjobs
            .get("nightly")
            .await
            .unwrap()
            .status
            .and_then(|s| s.last_successful_time)
            .is_some()
    })
    .await;
    let reconciles = stats.reconciles();
    cronjobs
        .patch(
            "nightly",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .unwrap();
    eventually("the touched CronJob reconciled", || async {
        stats.reconciles() > reconciles
    })
    .await;
    let events = env.events("SawCompletedJob", "nightly").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0].count,
        Some(1),
        "seen once, not on every reconcile"
    );
    let jobs = Api::<k8s_openapi::api::batch::v1::Job>::namespaced(env.client.clone(), "default");
    assert!(
        jobs.get_opt("nightly-1").await.unwrap().is_some(),
        "the Jobs are left alone: no children in the answer"
    );
    assert_eq!(stats.failures(), 0);
    env.stop(vec![task]).await;
}

/// Starts the Python web server `python3 ARGS...`, which prints its port on its first line.
async fn serve(args: &[String]) -> (tokio::process::Child, String) {
    let mut server = tokio::process::Command::new("python3")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(server.stdout.take().unwrap()));
    let port = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    (server, port)
}

/// `serve-exec.py` in front of the test hook: its answers are written as the exec hook's are,
/// and a non-zero exit is a failed call (HTTP 500 with the hook's standard error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serve_exec_example_serves_an_exec_hook_as_a_webhook() {
    require("python3");
    let env = Env::new().await;
    let hook = env.dir.path().join("hook.py").display().to_string();
    let log = env.log().display().to_string();
    let (mut server, port) = serve(&[
        example("serve-exec.py"),
        "0".into(),
        "python3".into(),
        hook,
        log,
    ])
    .await;
    env.cronjob("bad", &json!({"fail": "true"}));
    env.cronjob("good", &json!({}));
    let spec = format!(
        "  for: {{apiVersion: batch/v1, kind: CronJob}}
  owns: [{{apiVersion: v1, kind: ConfigMap}}]
  hook: {{webhook: {{url: 'http://127.0.0.1:{port}/', timeout: 10s}}}}
"
    );
    let metrics = HookMetrics::new();
    let (_stats, task) = env.start_with(&controller_with_spec("served", &spec), &metrics);
    eventually("the good object's child applied", || async {
        env.configmap("good-child").await.is_some()
    })
    .await;
    eventually("the failing object's HookFailed event", || async {
        !env.events("HookFailed", "bad").await.is_empty()
    })
    .await;
    let warning = &env.events("HookFailed", "bad").await[0];
    let message = warning.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("500") && message.contains("python3 exited 3"),
        "{message}"
    );
    assert!(metrics.calls("default/served", "http") >= 1);
    // A call is counted once its reconcile ends: the good object's may still write its status
    // after its child appeared.
    eventually("the good object's call counted", || async {
        metrics.calls("default/served", "none") >= 1
    })
    .await;
    env.stop(vec![task]).await;
    server.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_copier_example_webhook_copies_a_configmap_into_a_secret() {
    require("python3");
    let env = Env::new().await;
    let (mut copier, port) = serve(&[example("copier.py"), "0".into()]).await;
    let spec = format!(
        "  for: {{apiVersion: v1, kind: ConfigMap, labelSelector: 'informant.dev/copy-to-secret=true'}}
  owns: [{{apiVersion: v1, kind: Secret}}]
  hook: {{webhook: {{url: 'http://127.0.0.1:{port}/sync', timeout: 5s}}}}
"
    );
    let (stats, task) = env.start(&controller_with_spec("copier", &spec));
    env.server
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": "settings",
                         "labels": {"informant.dev/copy-to-secret": "true"}},
            "data": {"greeting": "hello"}}));
    env.server
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": "private"}, "data": {"k": "v"}}));
    let secrets =
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(env.client.clone(), "default");
    eventually("the Secret copied", || async {
        secrets.get_opt("settings").await.unwrap().is_some()
    })
    .await;
    let secret = secrets.get("settings").await.unwrap();
    assert_eq!(secret.data.unwrap()["greeting"].0, b"hello");
    assert_eq!(
        secret.metadata.owner_references.unwrap()[0].name,
        "settings"
    );
    assert!(
        secrets.get_opt("private").await.unwrap().is_none(),
        "not selected"
    );
    assert_eq!(stats.failures(), 0);
    env.stop(vec![task]).await;
    copier.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shell_example_counts_keys_with_jq() {
    require("jq");
    let env = Env::new().await;
    let spec = format!(
        "  for: {{apiVersion: v1, kind: ConfigMap}}
  hook: {{exec: {{command: [sh, {}]}}}}
",
        example("count-keys.sh")
    );
    let (_stats, task) = env.start(&controller_with_spec("count-keys", &spec));
    env.server
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": "pair"}, "data": {"a": "1", "b": "2"}}));
    eventually("the Counted event", || async {
        env.events("Counted", "pair")
            .await
            .first()
            .is_some_and(|e| e.message.as_deref() == Some("2 keys in pair"))
    })
    .await;
    env.stop(vec![task]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_that_hangs_is_killed_at_its_timeout_and_fails() {
    let env = Env::new().await;
    env.cronjob("slow", &json!({}));
    let spec = "  for: {apiVersion: batch/v1, kind: CronJob}
  hook: {exec: {command: [sh, -c, 'sleep 30'], timeout: 200ms}}
";
    let (stats, task) = env.start(&controller_with_spec("hangs", spec));
    eventually("the timeout reported", || async {
        stats
            .last_error()
            .is_some_and(|e| e.contains("hook gave no answer within 0.2s"))
    })
    .await;
    env.stop(vec![task]).await;
}

/// A hook that logs each call (the object's `burst` annotation) and, on the first call only,
/// waits for the FIFO `argv[2]` to be opened and closed by the test before it answers `{}`.
const GATED_HOOK: &str = r#"
import json, sys
request = json.load(sys.stdin)
meta = request["object"]["metadata"]
with open(sys.argv[1], "a") as log:
    log.write(json.dumps({"burst": (meta.get("annotations") or {}).get("burst")}) + "\n")
with open(sys.argv[1]) as log:
    first = len(log.readlines()) == 1
if first:
    with open(sys.argv[2]) as gate:
        gate.read()
json.dump({}, sys.stdout)
"#;

/// Call compaction (shell-operator's and addon-operator's queue compaction): ten changes of an
/// object while its hook runs end in one more call, which sees the last of them, not ten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_changes_while_the_hook_runs_ends_in_one_more_call() {
    require("python3");
    require("mkfifo");
    let env = Env::new().await;
    let hook = env.dir.path().join("gated.py");
    std::fs::write(&hook, GATED_HOOK).unwrap();
    let gate = env.dir.path().join("gate");
    let made = std::process::Command::new("mkfifo")
        .arg(&gate)
        .status()
        .unwrap();
    assert!(made.success());
    let spec = format!(
        "  for: {{apiVersion: batch/v1, kind: CronJob}}
  hook: {{exec: {{command: [python3, {}, {}, {}], timeout: 60s}}}}
",
        hook.display(),
        env.log().display(),
        gate.display()
    );
    env.cronjob("busy", &json!({}));
    let metrics = ControllerMetrics::new();
    let controller = controller_with_spec("compacted", &spec);
    let hook = HookController::new(controller.settings.clone()).metrics(&metrics);
    let task = tokio::spawn({
        let run = hook.run(env.ctx.clone(), env.shutdown.clone());
        async move { run.await.unwrap() }
    });
    let burst = |value: String| {
        let cronjobs = Api::<CronJob>::namespaced(env.client.clone(), "default");
        async move {
            let patch = json!({"metadata": {"annotations": {"burst": value}}});
            cronjobs
                .patch("busy", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    };
    eventually("the first call, held by the hook", || async {
        env.calls().len() == 1
    })
    .await;

    let series = metrics.controller("default/compacted", 1);
    let before = series.adds();
    for n in 1..=10 {
        burst(n.to_string()).await;
    }
    eventually("the ten changes reached the controller's queue", || async {
        series.adds() >= before + 10
    })
    .await;
    // Opening the FIFO for writing and closing it lets the first call answer.
    tokio::task::spawn_blocking(move || std::fs::OpenOptions::new().write(true).open(gate))
        .await
        .unwrap()
        .unwrap();
    eventually("one more call", || async { env.calls().len() >= 2 }).await;
    // A change after the burst is called for on its own: every call before it is on record.
    burst("last".to_owned()).await;
    eventually("the call for the last change", || async {
        env.calls().last().is_some_and(|c| c["burst"] == "last")
    })
    .await;
    let bursts: Vec<Value> = env.calls().iter().map(|c| c["burst"].clone()).collect();
    assert_eq!(
        bursts,
        [Value::Null, json!("10"), json!("last")],
        "ten changes during the first call made one call, with the last of them"
    );
    env.stop(vec![task]).await;
}

/// `spec.timeout` bounds the whole reconcile, under the hook's own timeout: the hanging call
/// is cancelled (its process killed), counted as a timeout, and retried with backoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_past_spec_timeout_is_cancelled_counted_and_retried() {
    let env = Env::new().await;
    env.cronjob("slow", &json!({}));
    let spec = "  for: {apiVersion: batch/v1, kind: CronJob}
  hook: {exec: {command: [sh, -c, 'sleep 30'], timeout: 60s}}
  timeout: 300ms
";
    let metrics = ControllerMetrics::new();
    let controller = controller_with_spec("bounded", spec);
    let hook = HookController::new(controller.settings.clone()).metrics(&metrics);
    let stats = hook.stats();
    let task = tokio::spawn({
        let run = hook.run(env.ctx.clone(), env.shutdown.clone());
        async move { run.await.unwrap() }
    });
    let series = metrics.controller("default/bounded", 1);
    eventually(
        "two reconciles timed out: the first, and its retry",
        || async { series.timeouts() >= 2 },
    )
    .await;
    assert!(
        stats
            .last_error()
            .is_some_and(|e| e.contains("did not finish within spec.timeout (300ms)")),
        "{:?}",
        stats.last_error()
    );
    assert!(series.reconciles(informant::controller::ReconcileResult::Error) >= 2);
    env.stop(vec![task]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn related_objects_are_sent_and_trigger_and_requeue_after_calls_again() {
    require("python3");
    let env = Env::new().await;
    env.cronjob("one", &json!({}));
    let hook = env.related_hook();
    let spec = format!(
        "  for: {{apiVersion: batch/v1, kind: CronJob}}
  watches: [{{apiVersion: v1, kind: ConfigMap}}]
  hook: {{exec: {{command: [python3, {}, {}]}}}}
",
        hook.display(),
        env.log().display()
    );
    let (stats, task) = env.start(&controller_with_spec("related", &spec));
    eventually("the first call", || async { stats.reconciles() >= 1 }).await;
    assert_eq!(env.calls()[0]["related"], json!([]));

    env.server
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": "again"}}));
    eventually(
        "a related object triggers, then requeues call again",
        || async {
            env.calls()
                .iter()
                .filter(|c| c["related"] == json!(["again"]))
                .count()
                >= 3
        },
    )
    .await;
    env.stop(vec![task]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_map_to_a_related_object_reconciles_only_the_objects_its_annotation_names() {
    require("python3");
    let env = Env::new().await;
    env.cronjob("one", &json!({}));
    env.cronjob("two", &json!({}));
    let hook = env.related_hook();
    let spec = format!(
        "  for: {{apiVersion: batch/v1, kind: CronJob}}
  watches: [{{apiVersion: v1, kind: ConfigMap, mapTo: {{annotation: informant.dev/for}}}}]
  hook: {{exec: {{command: [python3, {}, {}]}}}}
  concurrency: 4
",
        hook.display(),
        env.log().display()
    );
    let (stats, task) = env.start(&controller_with_spec("mapped", &spec));
    eventually("a call for each CronJob", || async { stats.calls() >= 2 }).await;
    let calls_of = |name: &str| -> Vec<Value> {
        env.calls()
            .into_iter()
            .filter(|c| c["name"] == name)
            .collect()
    };
    let configmap = |name: &str, target: &str| {
        env.server
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": "default", "name": name,
                             "annotations": {"informant.dev/for": target}}}));
    };
    configmap("for-two", "two");
    eventually("the ConfigMap naming two reconciles two", || async {
        calls_of("two")
            .iter()
            .any(|c| c["related"] == json!(["for-two"]))
    })
    .await;
    // A ConfigMap naming one: one is called once more, with only its own related object; the
    // ConfigMap naming two did not reconcile it (it would have been a call of its own).
    configmap("for-one", "default/one");
    eventually("the ConfigMap naming one reconciles one", || async {
        calls_of("one")
            .iter()
            .any(|c| c["related"] == json!(["for-one"]))
    })
    .await;
    let one = calls_of("one");
    assert_eq!(one.len(), 2, "{one:?}");
    assert_eq!(one[0]["related"], json!([]));
    assert!(
        calls_of("two")
            .iter()
            .all(|c| c["related"] != json!(["for-one"])
                && c["related"] != json!(["for-one", "for-two"])),
        "{:?}",
        env.calls()
    );
    env.stop(vec![task]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_finalize_a_deleted_object_goes_once_the_hook_says_finalized() {
    require("python3");
    let env = Env::new().await;
    let hook = env.dir.path().join("finalize.py");
    std::fs::write(
        &hook,
        r#"
import json, sys
request = json.load(sys.stdin)
with open(sys.argv[1], "a") as log:
    log.write(json.dumps({"name": request["object"]["metadata"]["name"],
                          "finalizing": request["finalizing"]}) + "\n")
json.dump({"finalized": True} if request["finalizing"] else {}, sys.stdout)
"#,
    )
    .unwrap();
    let spec = format!(
        "  for: {{apiVersion: batch/v1, kind: CronJob}}
  hook: {{exec: {{command: [python3, {}, {}]}}}}
  finalize: true
",
        hook.display(),
        env.log().display()
    );
    let (stats, task) = env.start(&controller_with_spec("fin", &spec));
    env.cronjob("held", &json!({}));
    let cronjobs = Api::<CronJob>::namespaced(env.client.clone(), "default");
    eventually("the finalizer added", || async {
        cronjobs.get("held").await.unwrap().finalizers() == ["hooks.informant.dev/default.fin"]
    })
    .await;
    cronjobs
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the object gone once finalized", || async {
        cronjobs.get_opt("held").await.unwrap().is_none()
    })
    .await;
    assert!(
        env.calls()
            .iter()
            .any(|c| c["finalizing"] == json!(true) && c["name"] == "held")
    );
    assert_eq!(stats.failures(), 0);
    env.stop(vec![task]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_of_a_kind_not_owned_fails_the_answer_before_anything_is_recorded() {
    let env = Env::new().await;
    env.cronjob("greedy", &json!({}));
    let answer = r#"{"events": [{"type": "Normal", "reason": "ShouldNotAppear", "message": "x"}],
        "children": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}]}"#;
    let spec = format!(
        "  for: {{apiVersion: batch/v1, kind: CronJob}}
  owns: [{{apiVersion: v1, kind: ConfigMap}}]
  hook: {{exec: {{command: [sh, -c, 'cat >/dev/null; echo {}']}}}}
",
        serde_json::to_string(&answer.replace('\n', " ")).unwrap()
    );
    let (stats, task) = env.start(&controller_with_spec("greedy", &spec));
    eventually("the answer refused", || async {
        stats.failures() >= 2 && !env.events("HookFailed", "greedy").await.is_empty()
    })
    .await;
    assert!(
        stats.last_error().unwrap().contains(
            "children[0]: v1 Secret is not one of the controller's spec.owns kinds; add it there"
        ),
        "{:?}",
        stats.last_error()
    );
    assert!(env.events("ShouldNotAppear", "greedy").await.is_empty());
    env.stop(vec![task]).await;
}

/// A shard member that comes to lead starts the finalizing controller it kept waiting for
/// the leader's hold at once, holding its `Controller` itself: not at the supervisor's next
/// timed pass (lengthened here to an hour, so only the leadership change can start it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_comes_to_lead_starts_its_waiting_finalizing_controller_at_once() {
    require("python3");
    let env = Env::new().await;
    install_controller_crd(&env.server).await;
    let api = Api::<Controller>::namespaced(env.client.clone(), "default");
    let holds = env.controller("holds", "  finalize: true\n");
    api.create(&PostParams::default(), &holds.resource)
        .await
        .unwrap();
    let mut desired = Desired::new();
    desired.insert(ControllerKey::new("default", "holds"), Ok(holds));
    let (_send, receive) = watch::channel(desired);
    let (leads, is_leader) = watch::channel(false);
    let supervisor = Supervisor::new(receive)
        .hold_controllers(true)
        .leader(is_leader)
        .interval(std::time::Duration::from_hours(1));
    let mut progress = supervisor.progress();
    let task = tokio::spawn(supervisor.run(env.ctx.clone(), env.shutdown.clone()));
    tokio::time::timeout(WAIT, progress.wait_for(|p| p.passes >= 1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        progress.borrow().starts,
        0,
        "it waits for the leader's hold"
    );

    leads.send_replace(true);
    tokio::time::timeout(WAIT, progress.wait_for(|p| p.starts == 1))
        .await
        .expect("started when this member came to lead, not at the next timed pass")
        .unwrap();
    let finalizers = api.get("holds").await.unwrap().metadata.finalizers;
    assert!(
        finalizers
            .unwrap_or_default()
            .contains(&informant::hooks::CONTROLLER_FINALIZER.to_owned()),
        "the new leader held its Controller before starting it"
    );
    env.shutdown.cancel();
    task.await.unwrap();
}

/// A persistent hook (`exec.mode: persistent`): appends its process id to `sys.argv[1]` at
/// start, exits once (remembered by the file `died` beside it) at the first request for an
/// object annotated `die: once`, and answers every other request with a status.
const PERSISTENT_HOOK: &str = r#"
import json, os, sys
log = sys.argv[1]
with open(log, "a") as f:
    f.write(f"{os.getpid()}\n")
died = os.path.join(os.path.dirname(log), "died")
for line in sys.stdin:
    message = json.loads(line)
    meta = message["request"]["object"]["metadata"]
    if (meta.get("annotations") or {}).get("die") == "once" and not os.path.exists(died):
        open(died, "w").close()
        os._exit(7)
    response = {"status": {"lastScheduleTime": "2026-01-01T00:00:00Z"}}
    sys.stdout.write(json.dumps({"id": message["id"], "response": response}) + "\n")
    sys.stdout.flush()
"#;

fn running(pid: u32) -> bool {
    // A zombie has exited: only a process still running counts.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| !stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z')))
}

impl Env {
    /// Writes [`PERSISTENT_HOOK`]; returns its command and the file of its process ids.
    fn persistent_hook(&self) -> (String, PathBuf) {
        let script = self.dir.path().join("persistent.py");
        std::fs::write(&script, PERSISTENT_HOOK).unwrap();
        let pids = self.dir.path().join("pids");
        (
            format!("[python3, {}, {}]", script.display(), pids.display()),
            pids,
        )
    }
}

fn pids(file: &std::path::Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

async fn scheduled(env: &Env, name: &str) -> bool {
    Api::<CronJob>::namespaced(env.client.clone(), "default")
        .get(name)
        .await
        .unwrap()
        .status
        .and_then(|s| s.last_schedule_time)
        .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_hook_serves_every_object_from_one_process_retries_a_call_its_death_failed_and_stops_with_the_manager()
 {
    require("python3");
    let env = Env::new().await;
    let (command, pid_file) = env.persistent_hook();
    for i in 0..8 {
        env.cronjob(&format!("job-{i}"), &json!({}));
    }
    env.cronjob("fragile", &json!({"die": "once"}));
    let spec = format!(
        "  for: {{apiVersion: batch/v1, kind: CronJob}}
  hook: {{exec: {{command: {command}, mode: persistent, timeout: 10s}}}}
"
    );
    let (stats, task) = env.start(&controller_with_spec("persistent", &spec));
    for name in (0..8).map(|i| format!("job-{i}")).chain(["fragile".into()]) {
        eventually(&format!("{name}'s status written"), || {
            scheduled(&env, &name)
        })
        .await;
    }
    // The process died once, mid-call: that call failed by name and was retried on the
    // restarted process; every other call was answered by one of the two processes.
    let started = pids(&pid_file);
    assert_eq!(started.len(), 2, "{started:?}");
    assert!(stats.failures() >= 1);
    assert!(!running(started[0]), "the dead process is reaped");
    assert!(running(started[1]));
    env.stop(vec![task]).await;
    assert!(
        !running(started[1]),
        "the manager stopped and left its hook process running"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_controllers_persistent_processes_are_gone() {
    require("python3");
    let env = Env::new().await;
    let (command, pid_file) = env.persistent_hook();
    for i in 0..4 {
        env.cronjob(&format!("job-{i}"), &json!({}));
    }
    let spec = format!(
        "  for: {{apiVersion: batch/v1, kind: CronJob}}
  hook: {{exec: {{command: {command}, mode: persistent, callsPerProcess: 2}}}}
  concurrency: 2
"
    );
    let controller = controller_with_spec("removed", &spec);
    let hook = HookController::new(controller.settings);
    let stats = hook.stats();
    // The supervisor removes a controller by cancelling its token and awaiting its task.
    let stop = env.shutdown.child_token();
    let task = tokio::spawn(hook.run(env.ctx.clone(), stop.clone()));
    eventually("every object reconciled", || async {
        stats.reconciles() >= 4
    })
    .await;
    let started = pids(&pid_file);
    assert!(!started.is_empty() && started.len() <= 2, "{started:?}");
    stop.cancel();
    tokio::time::timeout(WAIT, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    for pid in &started {
        assert!(!running(*pid), "process {pid} outlived its controller");
    }
    env.stop(Vec::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_persistent_cronjob_example_records_saw_completed_job() {
    require("python3");
    let env = Env::new().await;
    env.completed_job_of_cronjob("nightly").await;
    let spec = format!(
        "  for: {{apiVersion: batch/v1, kind: CronJob}}
  owns: [{{apiVersion: batch/v1, kind: Job}}]
  hook: {{exec: {{command: [python3, {}], mode: persistent}}}}
",
        example("cronjob-persistent.py")
    );
    let (stats, task) = env.start(&controller_with_spec("cronjob-persistent", &spec));
    eventually("SawCompletedJob on the CronJob", || async {
        !env.events("SawCompletedJob", "nightly").await.is_empty()
    })
    .await;
    assert_eq!(stats.failures(), 0);
    env.stop(vec![task]).await;
}

/// A persistent hook that answers requests two at a time, in reverse order: it needs two
/// calls in flight on its one process.
const PAIRS_HOOK: &str = r#"
import json, sys
pairs = []
for line in sys.stdin:
    pairs.append(json.loads(line)["id"])
    if len(pairs) == 2:
        for id in reversed(pairs):
            sys.stdout.write(json.dumps({"id": id, "response": {}}) + "\n")
        sys.stdout.flush()
        pairs = []
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_per_process_lets_one_process_take_that_many_calls_at_once() {
    require("python3");
    let env = Env::new().await;
    let script = env.dir.path().join("pairs.py");
    std::fs::write(&script, PAIRS_HOOK).unwrap();
    for i in 0..4 {
        env.cronjob(&format!("job-{i}"), &json!({}));
    }
    // concurrency 1 and callsPerProcess 2: one process, two calls at once. With one call at
    // once the first call would wait for a second that never comes, and fail at the timeout.
    let spec = format!(
        "  for: {{apiVersion: batch/v1, kind: CronJob}}
  hook: {{exec: {{command: [python3, {}], mode: persistent, callsPerProcess: 2, timeout: 5m}}}}
  concurrency: 1
",
        script.display()
    );
    let (stats, task) = env.start(&controller_with_spec("pairs", &spec));
    eventually("every object reconciled in pairs", || async {
        stats.reconciles() >= 4
    })
    .await;
    assert_eq!(stats.failures(), 0);
    env.stop(vec![task]).await;
}
