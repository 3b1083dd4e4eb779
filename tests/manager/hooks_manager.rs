//! Hook controllers wired into the manager (`informant run --config FILE`): a multi-document
//! file with one `CacheConfig` and a `Controller` runs the controller on the leader, and an
//! edit of the `Controller` document in the file restarts it with the new spec; with
//! `--cache-config NS/NAME`, the `Controller` resources of `NS` run, with their status written,
//! and an invalid edit keeps the previous spec running with `Valid=False`. With leader
//! election, only the leader calls hooks, and the standby calls them once it leads. On a cache
//! sharded by uid, a controller that owns other kinds does not start (`NeedsShardKeyNamespace`).

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use informant::hooks::Controller;
use informant::manager::{ConfigSource, Manager, Options};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{WAIT, eventually, replace, require};
use tokio_util::sync::CancellationToken;

/// Asks for one child named `<object>-<suffix>` (the suffix is the hook's first argument).
const HOOK: &str = r#"
import json, sys
request = json.load(sys.stdin)
name = request["object"]["metadata"]["name"]
json.dump({"children": [{"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": name + "-" + sys.argv[1]}}]}, sys.stdout)
"#;

fn file(hook: &Path, suffix: &str) -> String {
    format!(
        "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {{name: test, namespace: default}}
spec: {{}}
---
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: copies, namespace: default}}
spec:
  for: {{apiVersion: v1, kind: Secret}}
  owns: [{{apiVersion: v1, kind: ConfigMap}}]
  hook: {{exec: {{command: [python3, {}, {suffix}]}}}}
",
        hook.display()
    )
}

/// Creates the Secret `default/NAME`, which the test controllers reconcile.
fn secret(server: &support::Server, name: &str) {
    server.create(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"namespace": "default", "name": name}}));
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_document_config_file_runs_its_controllers_and_an_edit_restarts_them() {
    require("python3");
    let server = support::Server::start(None).await;
    let client = server.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("hook.py");
    std::fs::write(&hook, HOOK).unwrap();
    let path = dir.path().join("informant.yaml");
    std::fs::write(&path, file(&hook, "v1")).unwrap();
    informant::config::load(&path).expect("the CacheConfig of a multi-document file loads");

    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let options = Options {
        metrics_addr: Some(loopback),
        health_addr: None,
        debounce: Duration::ZERO,
        shutdown_grace: Duration::from_secs(10),
        ..Options::new(ConfigSource::File(path.clone()))
    };
    let mut manager = Manager::new(client.clone(), options).await.unwrap();
    informant::hooks::add_to_manager(&mut manager);
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));

    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), "default");
    secret(&server, "first");
    eventually("the controller of the file applied a child", || async {
        configmaps.get_opt("first-v1").await.unwrap().is_some()
    })
    .await;

    replace(&path, &file(&hook, "v2"));
    eventually("the edited controller re-applied the child", || async {
        configmaps.get_opt("first-v2").await.unwrap().is_some()
            && configmaps.get_opt("first-v1").await.unwrap().is_none()
    })
    .await;

    shutdown.cancel();
    support::stopped(run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_of_the_cacheconfigs_namespace_run_with_their_status_written() {
    require("python3");
    let (server, client) = support::server_with_informant_crds().await;
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("hook.py");
    std::fs::write(&hook, HOOK).unwrap();
    let options = Options {
        metrics_addr: None,
        health_addr: None,
        shutdown_grace: Duration::from_secs(10),
        ..Options::new(ConfigSource::Resource {
            namespace: "default".into(),
            name: "test".into(),
        })
    };
    let mut manager = Manager::new(client.clone(), options).await.unwrap();
    informant::hooks::add_to_manager(&mut manager);
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));

    let controllers = Api::<Controller>::namespaced(client.clone(), "default");
    let document = file(&hook, "v1");
    let controller: Controller =
        serde_yaml::from_str(document.split("---").nth(1).unwrap()).unwrap();
    controllers
        .create(&PostParams::default(), &controller)
        .await
        .unwrap();
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), "default");
    secret(&server, "first");
    eventually("the Controller resource applied a child", || async {
        configmaps.get_opt("first-v1").await.unwrap().is_some()
    })
    .await;
    let condition =
        |status: &Option<informant::hooks::ControllerStatus>, type_: &str, value: &str| {
            status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == type_ && c.status == value)
            })
        };
    eventually(
        "Valid and Ready, with reconciles counted, in the status",
        || async {
            let status = controllers.get("copies").await.unwrap().status;
            condition(&status, "Valid", "True")
                && condition(&status, "Ready", "True")
                && status.as_ref().and_then(|s| s.reconciles).unwrap_or(0) >= 1
        },
    )
    .await;

    // An invalid edit: the previous spec keeps running, Valid=False says why.
    controllers
        .patch(
            "copies",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"hook": {"exec": {"command": []}}}})),
        )
        .await
        .unwrap();
    eventually("Valid=False in the status", || async {
        condition(
            &controllers.get("copies").await.unwrap().status,
            "Valid",
            "False",
        )
    })
    .await;
    secret(&server, "second");
    eventually("the previous spec still reconciles", || async {
        configmaps.get_opt("second-v1").await.unwrap().is_some()
    })
    .await;

    shutdown.cancel();
    support::stopped(run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_by_uid_a_controller_that_owns_a_kind_is_kept_back_naming_the_fix() {
    require("python3");
    let (server, client) = support::server_with_informant_crds().await;
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("hook.py");
    std::fs::write(&hook, HOOK).unwrap();
    create_sharded_config(&client, "uid").await;
    let options = Options {
        metrics_addr: None,
        health_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        shutdown_grace: Duration::from_secs(10),
        ..Options::new(ConfigSource::Resource {
            namespace: "default".into(),
            name: "test".into(),
        })
    };
    let mut manager = Manager::new(client.clone(), options).await.unwrap();
    informant::hooks::add_to_manager(&mut manager);
    let health = manager.health_addr().unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));

    let controllers = Api::<Controller>::namespaced(client.clone(), "default");
    let document = file(&hook, "v1");
    let owning: Controller = serde_yaml::from_str(document.split("---").nth(1).unwrap()).unwrap();
    let mut alone = owning.clone();
    alone.metadata.name = Some("alone".into());
    alone.spec.owns = None;
    for controller in [&owning, &alone] {
        controllers
            .create(&PostParams::default(), controller)
            .await
            .unwrap();
    }
    secret(&server, "first");
    let ready = |name: &'static str| {
        let controllers = controllers.clone();
        async move {
            controllers
                .get(name)
                .await
                .unwrap()
                .status
                .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready"))
                .map(|c| (c.status, c.reason, c.message))
        }
    };
    eventually(
        "the owning controller kept back, naming the fix",
        || async {
            ready("copies")
                .await
                .is_some_and(|(status, reason, message)| {
                    status == "False"
                        && reason == informant::hooks::REASON_NEEDS_SHARD_KEY_NAMESPACE
                        && message.contains("owns or watches (v1 ConfigMap)")
                        && message.contains("set spec.sharding.key: namespace in the CacheConfig")
                })
        },
    )
    .await;
    eventually("the controller that owns nothing runs", || async {
        ready("alone")
            .await
            .is_some_and(|(status, _, _)| status == "True")
    })
    .await;
    let valid = controllers.get("copies").await.unwrap().status.unwrap();
    assert!(
        valid
            .conditions
            .iter()
            .any(|c| c.type_ == "Valid" && c.status == "True"),
        "the spec itself is valid: {valid:?}"
    );
    assert_eq!(
        valid.reconciles, None,
        "a controller kept back never reconciles"
    );
    kept_back_in_status(&client, health).await;

    shutdown.cancel();
    support::stopped(run).await;
}

/// The `CacheConfig`'s `status.controllers` lists the kept-back `copies` with its reason beside the
/// running `alone`, and `/readyz/controllers` stays ready.
async fn kept_back_in_status(client: &kube::Client, health: SocketAddr) {
    use informant::config::CacheConfig;

    let configs = Api::<CacheConfig>::namespaced(client.clone(), "default");
    eventually(
        "the CacheConfig's status lists the kept-back controller with its reason",
        || async {
            let status = configs
                .get("test")
                .await
                .unwrap()
                .status
                .unwrap_or_default();
            status.controllers.iter().any(|c| {
                c.name == "hook default/copies"
                    && !c.ready
                    && c.reason == informant::hooks::REASON_NEEDS_SHARD_KEY_NAMESPACE
                    && c.message
                        .as_deref()
                        .is_some_and(|m| m.contains("spec.sharding.key"))
            }) && status
                .controllers
                .iter()
                .any(|c| c.name == "hook default/alone" && c.ready)
        },
    )
    .await;
    // Its own condition, as an invalid Controller's: every replica would be unready alike.
    let (code, body) = support::http_get(health, "/readyz/controllers").await;
    assert_eq!(
        code, 200,
        "a kept-back controller leaves readiness alone: {body}"
    );
}

/// Creates the `CacheConfig` `default/test`, sharded over the ring `shop` by `key`.
async fn create_sharded_config(client: &kube::Client, key: &str) {
    use informant::config::{CacheConfig, CacheConfigSpec};

    let spec: CacheConfigSpec =
        serde_json::from_value(json!({"sharding": {"ring": "shop", "key": key}})).unwrap();
    Api::<CacheConfig>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &CacheConfig::new("test", spec))
        .await
        .unwrap();
}

/// Appends the object's name to the file named by its first argument; answers nothing.
const LOGGING_HOOK: &str = r#"
import json, sys
request = json.load(sys.stdin)
with open(sys.argv[1], "a") as log:
    log.write(request["object"]["metadata"]["name"] + "\n")
json.dump({}, sys.stdout)
"#;

/// A manager of `identity` with leader election, reading its own config file whose
/// `Controller` logs each hook call to `calls-<identity>.log`.
struct Replica {
    log: std::path::PathBuf,
    leader: tokio::sync::watch::Receiver<bool>,
    shutdown: CancellationToken,
    run: tokio::task::JoinHandle<Result<(), informant::manager::Error>>,
}

impl Replica {
    async fn start(server: &support::Server, dir: &Path, identity: &str) -> Self {
        let hook = dir.join("logging.py");
        std::fs::write(&hook, LOGGING_HOOK).unwrap();
        let log = dir.join(format!("calls-{identity}.log"));
        let path = dir.join(format!("{identity}.yaml"));
        std::fs::write(
            &path,
            format!(
                "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {{name: test, namespace: default}}
spec: {{}}
---
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: logs, namespace: default}}
spec:
  for: {{apiVersion: v1, kind: Secret}}
  hook: {{exec: {{command: [python3, {}, {}]}}}}
",
                hook.display(),
                log.display()
            ),
        )
        .unwrap();
        let options = Options {
            metrics_addr: None,
            health_addr: None,
            debounce: Duration::ZERO,
            shutdown_grace: Duration::from_secs(10),
            leader_election: Some(informant::manager::LeaderElection {
                identity: identity.to_owned(),
                lease_duration: Duration::from_secs(1),
                renew_deadline: Duration::from_millis(600),
                retry_period: Duration::from_millis(100),
                ..informant::manager::LeaderElection::new("informant-hooks-test", "default")
            }),
            ..Options::new(ConfigSource::File(path))
        };
        let client = server.client().await.unwrap();
        let mut manager = Manager::new(client, options).await.unwrap();
        informant::hooks::add_to_manager(&mut manager);
        let leader = manager.is_leader();
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run(shutdown.clone()));
        Self {
            log,
            leader,
            shutdown,
            run,
        }
    }

    /// The names the hook of this replica was called with, in order.
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn leads(&self) -> bool {
        *self.leader.borrow()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.run)
            .await
            .expect("the manager stops within the timeout")
            .unwrap()
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_calls_hooks_and_the_standby_takes_over() {
    require("python3");
    let server = support::Server::start(None).await;
    let dir = tempfile::tempdir().unwrap();
    secret(&server, "s1");
    let a = Replica::start(&server, dir.path(), "a").await;
    let b = Replica::start(&server, dir.path(), "b").await;
    eventually("one replica leads", || async { a.leads() || b.leads() }).await;
    let (leader, standby) = if a.leads() { (a, b) } else { (b, a) };
    eventually("the leader's hook saw s1", || async {
        leader.calls().contains(&"s1".to_owned())
    })
    .await;
    // A change reaches both replicas' informers; only the leader's hook is called.
    secret(&server, "s2");
    eventually("the leader's hook saw s2", || async {
        leader.calls().contains(&"s2".to_owned())
    })
    .await;
    assert!(!standby.leads());
    assert_eq!(
        standby.calls(),
        Vec::<String>::new(),
        "the standby called its hook"
    );

    // The leader goes: the standby leads and calls its hook for every object; the old leader
    // calls no more.
    let calls_of_old = leader.calls();
    leader.stop().await;
    eventually("the standby leads and calls its hook", || async {
        standby.leads() && {
            let calls = standby.calls();
            calls.contains(&"s1".to_owned()) && calls.contains(&"s2".to_owned())
        }
    })
    .await;
    secret(&server, "s3");
    eventually("the new leader's hook saw s3", || async {
        standby.calls().contains(&"s3".to_owned())
    })
    .await;
    let old_log = dir.path().join(if standby.log.ends_with("calls-a.log") {
        "calls-b.log"
    } else {
        "calls-a.log"
    });
    assert_eq!(
        std::fs::read_to_string(old_log)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>(),
        calls_of_old,
        "the stopped replica called its hook"
    );
    standby.stop().await;
}

/// A `Controller` with `finalize: true` whose hook logs each call to `log`, and one without
/// (`plain`, the control): the YAML of both.
fn finalizing_controllers(hook: &Path, log: &Path) -> [String; 2] {
    ["holds", "plain"].map(|name| {
        let finalize = if name == "holds" { "true" } else { "false" };
        format!(
            "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: {name}, namespace: default}}
spec:
  for: {{apiVersion: v1, kind: Secret}}
  finalize: {finalize}
  hook: {{exec: {{command: [python3, {}, {}]}}}}
",
            hook.display(),
            log.display()
        )
    })
}

/// On a shard member that does not lead, a hook controller that holds its objects with a
/// finalizer starts only once the leader held its `Controller` with the controller finalizer:
/// started before, its objects could carry the finalizer of a `Controller` deleted without
/// it, which no member would release. A controller without a finalizer runs at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_member_starts_a_finalizing_controller_only_once_the_leader_held_it() {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Secret;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    require("python3");
    let (server, client) = support::server_with_informant_crds().await;
    let dir = tempfile::tempdir().unwrap();
    let (hook, log) = (dir.path().join("hook.py"), dir.path().join("calls.log"));
    std::fs::write(&hook, LOGGING_HOOK).unwrap();
    create_sharded_config(&client, "namespace").await;
    // Another manager leads, for the whole test.
    let mut lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "informant-standby-test", "namespace": "default"},
        "spec": {"holderIdentity": "the-leader", "leaseDurationSeconds": 3600}}))
    .unwrap();
    if let Some(spec) = lease.spec.as_mut() {
        spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
    }
    Api::<Lease>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &lease)
        .await
        .unwrap();
    let options = Options {
        leader_election: Some(informant::manager::LeaderElection {
            identity: "standby".to_owned(),
            ..informant::manager::LeaderElection::new("informant-standby-test", "default")
        }),
        shard: informant::manager::ShardOptions {
            identity: "standby".to_owned(),
            lease_namespace: "default".to_owned(),
            ..informant::manager::ShardOptions::default()
        },
        ..support::manager_options(ConfigSource::Resource {
            namespace: "default".into(),
            name: "test".into(),
        })
    };
    let mut manager = Manager::new(client.clone(), options).await.unwrap();
    assert!(manager.is_sharded());
    informant::hooks::add_to_manager(&mut manager);
    let leads = manager.is_leader();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));

    secret(&server, "s1");
    let controllers = Api::<Controller>::namespaced(client.clone(), "default");
    for text in finalizing_controllers(&hook, &log) {
        let controller: Controller = serde_yaml::from_str(&text).unwrap();
        controllers
            .create(&PostParams::default(), &controller)
            .await
            .unwrap();
    }
    let secrets = Api::<Secret>::namespaced(client.clone(), "default");
    let calls = || std::fs::read_to_string(&log).unwrap_or_default();
    eventually("the control's hook saw s1", || async {
        calls().lines().any(|l| l == "s1")
    })
    .await;
    assert!(!*leads.borrow(), "the standby must not lead");
    let finalizers = |secret: Secret| secret.metadata.finalizers.unwrap_or_default();
    assert_eq!(
        finalizers(secrets.get("s1").await.unwrap()),
        Vec::<String>::new(),
        "the finalizing controller ran before the leader held its Controller"
    );
    // Counted by name: on a real cluster the control's hook also sees the cluster's Secrets.
    assert_eq!(
        calls().lines().filter(|l| *l == "s1").count(),
        1,
        "only the control's hook: {}",
        calls()
    );

    // The leader holds the Controller: the standby starts it, and it holds s1.
    controllers
        .patch(
            "holds",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": [informant::hooks::CONTROLLER_FINALIZER]}}),
            ),
        )
        .await
        .unwrap();
    eventually("the finalizing controller holds s1", || async {
        finalizers(secrets.get("s1").await.unwrap())
            .contains(&"hooks.informant.dev/default.holds".to_owned())
    })
    .await;

    shutdown.cancel();
    support::stopped(run).await;
}

/// A valid `Controller` with `spec.admission` is kept back (`Ready=False`,
/// `AdmissionNotServed`) while the manager serves no admission webhook: an admission hook that
/// nothing calls must not look active.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_with_admission_or_conversion_hooks_is_kept_back_while_they_are_not_served() {
    let (_server, client) = support::server_with_informant_crds().await;
    let options = Options {
        metrics_addr: None,
        health_addr: None,
        shutdown_grace: Duration::from_secs(10),
        ..Options::new(ConfigSource::Resource {
            namespace: "default".into(),
            name: "test".into(),
        })
    };
    let mut manager = Manager::new(client.clone(), options).await.unwrap();
    informant::hooks::add_to_manager(&mut manager);
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    let controllers = Api::<Controller>::namespaced(client.clone(), "default");
    let guarded: Controller = serde_yaml::from_str(
        "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: guarded, namespace: default}
spec:
  for: {apiVersion: v1, kind: ConfigMap}
  hook: {exec: {command: [sh, -c, 'echo {}']}}
  admission: [{name: require-owner, type: Validating}]
",
    )
    .unwrap();
    controllers
        .create(&PostParams::default(), &guarded)
        .await
        .unwrap();
    let converting: Controller = serde_yaml::from_str(
        "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: converting, namespace: default}
spec:
  for: {apiVersion: example.com/v1, kind: Widget}
  hook: {exec: {command: [sh, -c, 'echo {}']}}
  conversion: {versions: [v1alpha1, v1], hub: v1}
",
    )
    .unwrap();
    controllers
        .create(&PostParams::default(), &converting)
        .await
        .unwrap();
    eventually(
        "converting kept back: its conversion hook is not served",
        || async {
            let status = controllers.get("converting").await.unwrap().status;
            status.is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "Ready"
                        && c.status == "False"
                        && c.reason == informant::hooks::REASON_CONVERSION_NOT_SERVED
                })
            })
        },
    )
    .await;
    eventually(
        "guarded kept back: its admission hooks are not served",
        || async {
            let status = controllers.get("guarded").await.unwrap().status;
            let conditions = status.map(|s| s.conditions).unwrap_or_default();
            conditions
                .iter()
                .any(|c| c.type_ == "Valid" && c.status == "True")
                && conditions.iter().any(|c| {
                    c.type_ == "Ready"
                        && c.status == "False"
                        && c.reason == informant::hooks::REASON_ADMISSION_NOT_SERVED
                })
        },
    )
    .await;
    shutdown.cancel();
    support::stopped(run).await;
}
