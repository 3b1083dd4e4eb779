//! A hook controller's finalizer (`spec.finalize: true`) is let go of when the controller
//! stops holding its objects: a `Controller` dropped from the config file, or edited to
//! `finalize: false`, has its finalizer removed from every object (and nobody else's), so an
//! object deleted afterwards goes; a `Controller` resource is held by
//! `informant.dev/release-hook-finalizers` until its objects are released, even when it is
//! deleted while no manager runs; and a manager that shuts down strips nothing.

use crate::support;

use std::path::{Path, PathBuf};

use informant::hooks::CONTROLLER_FINALIZER;
use informant::hooks::Controller;
use informant::manager::{ConfigSource, Manager};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use support::{eventually, manager_options, replace, require, stopped};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The finalizer of the `Controller` `default/holds`.
const FINALIZER: &str = "hooks.informant.dev/default.holds";

/// Someone else's finalizer, which must survive every release.
const OTHERS: &str = "example.com/keep";

/// Logs each request (`{"name", "finalizers"}`, one JSON line) to the file named by its first
/// argument; answers `finalized: true` to a finalizing request.
const HOOK: &str = r#"
import json, sys
request = json.load(sys.stdin)
meta = request["object"]["metadata"]
with open(sys.argv[1], "a") as log:
    log.write(json.dumps({"name": meta["name"], "finalizers": meta.get("finalizers") or []}) + "\n")
json.dump({"finalized": True} if request["finalizing"] else {}, sys.stdout)
"#;

/// The embedded API server with the two Secrets `a` (no finalizer) and `b` (someone else's),
/// and the hook in a temporary directory.
struct Env {
    base: support::Env,
    dir: tempfile::TempDir,
}

support::wraps_env!(Env);

impl Env {
    async fn new() -> Self {
        require("python3");
        let base = support::Env::with_informant_crds().await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("hook.py"), HOOK).unwrap();
        let env = Self { base, dir };
        env.secret("a", &[]);
        env.secret("b", &[OTHERS]);
        env
    }

    fn secret(&self, name: &str, finalizers: &[&str]) {
        self.create(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"namespace": "default", "name": name, "finalizers": finalizers}}));
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("calls.jsonl")
    }

    /// The `Controller` `default/holds` on Secrets, `finalize: <finalize>`.
    fn controller(&self, finalize: bool) -> String {
        self.controller_for("Secret", finalize)
    }

    /// The `Controller` `default/holds` on `v1` `kind`, `finalize: <finalize>`.
    fn controller_for(&self, kind: &str, finalize: bool) -> String {
        format!(
            "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: holds, namespace: default}}
spec:
  for: {{apiVersion: v1, kind: {kind}}}
  finalize: {finalize}
  hook: {{exec: {{command: [python3, {}, {}], timeout: 10s}}}}
",
            self.dir.path().join("hook.py").display(),
            self.log().display(),
        )
    }

    fn write_file(&self, controller: Option<&str>) -> PathBuf {
        let path = self.dir.path().join("informant.yaml");
        replace(&path, &file(controller));
        path
    }

    /// A manager with hook controllers from `source`, running.
    async fn manager(
        &self,
        source: ConfigSource,
    ) -> (
        CancellationToken,
        JoinHandle<Result<(), informant::manager::Error>>,
    ) {
        let mut manager = Manager::new(self.client.clone(), manager_options(source))
            .await
            .unwrap();
        informant::hooks::add_to_manager(&mut manager);
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run(shutdown.clone()));
        (shutdown, run)
    }

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), "default")
    }

    fn controllers(&self) -> Api<Controller> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// The finalizers of Secret `name`; `None` once it is gone.
    async fn finalizers(&self, name: &str) -> Option<Vec<String>> {
        self.secrets()
            .get_opt(name)
            .await
            .unwrap()
            .map(|s| s.metadata.finalizers.unwrap_or_default())
    }

    /// Waits until the hook was called with both Secrets holding the controller's finalizer:
    /// then the finalizer is on them and in the cache the controller reads.
    async fn held(&self) {
        eventually("the hook saw a and b held by its finalizer", || async {
            let log = std::fs::read_to_string(self.log()).unwrap_or_default();
            let calls: Vec<Value> = log
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            ["a", "b"].iter().all(|name| {
                calls.iter().any(|c| {
                    c["name"] == *name
                        && c["finalizers"]
                            .as_array()
                            .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
                })
            })
        })
        .await;
    }

    /// Waits until `a` and `b` no longer carry the controller's finalizer, `b` still with
    /// someone else's; then deletes `a` and waits until it is gone.
    async fn released(&self) {
        eventually(
            "a and b released, b keeping someone else's finalizer",
            || async {
                self.finalizers("a").await == Some(vec![])
                    && self.finalizers("b").await == Some(vec![OTHERS.to_owned()])
            },
        )
        .await;
        self.secrets()
            .delete("a", &DeleteParams::default())
            .await
            .unwrap();
        eventually("a deleted after the release is gone", || async {
            self.finalizers("a").await.is_none()
        })
        .await;
    }

    async fn create_controller(&self) {
        let controller: Controller = serde_yaml::from_str(&self.controller(true)).unwrap();
        self.controllers()
            .create(&PostParams::default(), &controller)
            .await
            .unwrap();
    }

    /// Waits until the `Controller` carries the release finalizer.
    async fn controller_held(&self) {
        eventually(
            "the Controller is held by the release finalizer",
            || async {
                self.controller_finalizers()
                    .await
                    .is_some_and(|f| f.iter().any(|f| f == CONTROLLER_FINALIZER))
            },
        )
        .await;
    }

    async fn controller_finalizers(&self) -> Option<Vec<String>> {
        self.controllers()
            .get_opt("holds")
            .await
            .unwrap()
            .map(|c| c.metadata.finalizers.unwrap_or_default())
    }
}

/// A config file: the `CacheConfig`, then `controller` if any.
fn file(controller: Option<&str>) -> String {
    let mut text = support::cache_config("  {}\n");
    if let Some(c) = controller {
        text.push_str("\n---\n");
        text.push_str(c);
    }
    text
}

fn file_source(path: &Path) -> ConfigSource {
    ConfigSource::File(path.to_owned())
}

fn resource_source() -> ConfigSource {
    ConfigSource::Resource {
        namespace: "default".into(),
        name: "test".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_dropped_from_the_file_releases_its_finalizer_and_no_one_elses() {
    let env = Env::new().await;
    let path = env.write_file(Some(&env.controller(true)));
    let (shutdown, run) = env.manager(file_source(&path)).await;
    env.held().await;
    assert_eq!(
        env.finalizers("b").await,
        Some(vec![OTHERS.to_owned(), FINALIZER.to_owned()])
    );

    env.write_file(None);
    env.released().await;

    shutdown.cancel();
    stopped(run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_edited_to_finalize_false_releases_its_finalizer() {
    let env = Env::new().await;
    let path = env.write_file(Some(&env.controller(true)));
    let (shutdown, run) = env.manager(file_source(&path)).await;
    env.held().await;

    env.write_file(Some(&env.controller(false)));
    env.released().await;

    shutdown.cancel();
    stopped(run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_moved_to_another_kind_releases_the_old_kinds_objects() {
    let env = Env::new().await;
    let path = env.write_file(Some(&env.controller(true)));
    let (shutdown, run) = env.manager(file_source(&path)).await;
    env.held().await;

    // Same finalizer name, another kind: the Secrets are no longer this controller's.
    env.write_file(Some(&env.controller_for("ConfigMap", true)));
    env.released().await;

    shutdown.cancel();
    stopped(run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_controller_resource_goes_only_after_its_objects_are_released() {
    let env = Env::new().await;
    let (shutdown, run) = env.manager(resource_source()).await;
    env.create_controller().await;
    env.held().await;
    env.controller_held().await;

    env.controllers()
        .delete("holds", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deleted Controller is gone", || async {
        env.controller_finalizers().await.is_none()
    })
    .await;
    // It went only once its objects were released: no more waiting for that.
    assert_eq!(env.finalizers("a").await, Some(vec![]));
    assert_eq!(env.finalizers("b").await, Some(vec![OTHERS.to_owned()]));
    env.released().await;

    shutdown.cancel();
    stopped(run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_strips_nothing_and_the_next_leader_releases_a_controller_deleted_meanwhile() {
    let env = Env::new().await;
    let (shutdown, run) = env.manager(resource_source()).await;
    env.create_controller().await;
    env.held().await;
    env.controller_held().await;
    shutdown.cancel();
    stopped(run).await;

    // The manager is gone and wrote its last: everything it held is still held.
    assert_eq!(env.finalizers("a").await, Some(vec![FINALIZER.to_owned()]));
    assert_eq!(
        env.finalizers("b").await,
        Some(vec![OTHERS.to_owned(), FINALIZER.to_owned()])
    );
    assert_eq!(
        env.controller_finalizers().await,
        Some(vec![CONTROLLER_FINALIZER.to_owned()])
    );

    // Deleted while no manager runs: the Controller waits for one.
    env.controllers()
        .delete("holds", &DeleteParams::default())
        .await
        .unwrap();
    let waiting = env.controllers().get("holds").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());

    let (shutdown, run) = env.manager(resource_source()).await;
    eventually("the next manager let the deleted Controller go", || async {
        env.controller_finalizers().await.is_none()
    })
    .await;
    assert_eq!(env.finalizers("a").await, Some(vec![]));
    env.released().await;

    shutdown.cancel();
    stopped(run).await;
}
