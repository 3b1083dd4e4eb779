//! Hook `Controller`s on a schedule, through a real manager on the embedded API server:
//! `perObject` ticks call the hook for every object, a `batch` tick sends every object once
//! in one call, the next tick is in the `Controller`'s status, a slow batch skips the ticks
//! that find it running (counted in `informant_hook_schedule_ticks_total`), and only the
//! leader ticks.

use crate::support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use informant::apiserver::TestServer;
use informant::hooks::Controller;
use informant::manager::{ConfigSource, Manager, Options};
use kube::api::{Api, PostParams};
use serde_json::json;
use support::{WAIT, eventually};
use tokio_util::sync::CancellationToken;

/// Logs each call to the file of its first argument: `object NAME` for a per-object call,
/// `batch NAME,NAME,...` for a batch; sleeps its second argument's seconds first.
const LOGGING_HOOK: &str = r#"
import json, sys, time
request = json.load(sys.stdin)
time.sleep(float(sys.argv[2]))
if "objects" in request:
    line = "batch " + ",".join(o["metadata"]["name"] for o in request["objects"])
else:
    line = "object " + request["object"]["metadata"]["name"]
with open(sys.argv[1], "a") as log:
    log.write(line + "\n")
json.dump({}, sys.stdout)
"#;

/// The Python the hooks run with (`INFORMANT_PYTHON`, else `python3`), or `None` when there
/// is none: the test then says it is skipped.
fn python() -> Option<String> {
    let python = std::env::var("INFORMANT_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    std::process::Command::new(&python)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
        .then_some(python)
}

/// A `Controller` named `name` whose hook logs to `log` (after `sleep` seconds), on
/// `schedule` in `mode`.
fn controller(
    (python, hook): (&str, &Path),
    name: &str,
    log: &Path,
    sleep: &str,
    (schedule, mode): (&str, &str),
) -> String {
    format!(
        "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: {name}, namespace: default}}
spec:
  for: {{apiVersion: v1, kind: Secret}}
  hook: {{exec: {{command: [{python}, {}, {}, '{sleep}'], timeout: 30s}}}}
  schedule: '{schedule}'
  scheduleMode: {mode}
",
        hook.display(),
        log.display()
    )
}

fn lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The batch calls of `log` (the hook is also called for each object on its changes).
fn batches(log: &Path) -> Vec<String> {
    lines(log)
        .into_iter()
        .filter(|l| l.starts_with("batch "))
        .collect()
}

fn secret(server: &TestServer, name: &str) {
    server
        .handle()
        .create(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"namespace": "default", "name": name}}))
        .unwrap();
}

/// The value of the series `informant_hook_schedule_ticks_total` of `controller` and
/// `result` on the manager's `/metrics`.
async fn ticks(metrics: SocketAddr, controller: &str, result: &str) -> u64 {
    let (_, body) = support::http_get(metrics, "/metrics").await;
    let series = format!(
        "informant_hook_schedule_ticks_total{{controller=\"{controller}\",result=\"{result}\"}} "
    );
    body.lines()
        .find_map(|line| line.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_controllers_call_every_object_per_object_and_in_one_batch() {
    let Some(python) = python() else {
        println!("skipped: no python3 (set INFORMANT_PYTHON) for the schedule hooks");
        return;
    };
    let (server, client) = support::server_with_informant_crds().await;
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("log.py");
    std::fs::write(&hook, LOGGING_HOOK).unwrap();
    secret(&server, "s1");
    secret(&server, "s2");
    let options = Options {
        metrics_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        health_addr: None,
        shutdown_grace: Duration::from_secs(10),
        ..Options::new(ConfigSource::Resource {
            namespace: "default".into(),
            name: "test".into(),
        })
    };
    let mut manager = Manager::new(client.clone(), options).await.unwrap();
    informant::hooks::add_to_manager(&mut manager);
    let metrics = manager.metrics_addr().unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));

    let (per_object_log, batch_log) = (dir.path().join("per.log"), dir.path().join("batch.log"));
    let controllers = Api::<Controller>::namespaced(client.clone(), "default");
    for document in [
        controller(
            (&python, &hook),
            "sweep",
            &per_object_log,
            "0",
            ("*/2 * * * * *", "perObject"),
        ),
        controller(
            (&python, &hook),
            "report",
            &batch_log,
            "0",
            ("@every 2s", "batch"),
        ),
    ] {
        let resource: Controller = serde_yaml::from_str(&document).unwrap();
        controllers
            .create(&PostParams::default(), &resource)
            .await
            .unwrap();
    }

    // perObject: the change of each Secret calls the hook once, each tick once more.
    eventually(
        "two ticks of sweep called the hook for each Secret",
        || async {
            let calls = lines(&per_object_log);
            ["s1", "s2"].iter().all(|name| {
                calls
                    .iter()
                    .filter(|l| **l == format!("object {name}"))
                    .count()
                    >= 3
            })
        },
    )
    .await;
    // batch: nothing but ticks, each with every object once.
    eventually("two batches of report", || async {
        batches(&batch_log).len() >= 2
    })
    .await;
    for line in batches(&batch_log) {
        assert_eq!(line, "batch s1,s2", "a batch sends every object once");
    }
    assert!(ticks(metrics, "default/report", "run").await >= 2);
    assert!(ticks(metrics, "default/sweep", "run").await >= 2);

    // The next tick is in the status: on an even second, in the future.
    eventually("the next tick in report's status", || async {
        let status = controllers.get("report").await.unwrap().status;
        status
            .and_then(|s| s.next_schedule_time)
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .is_some_and(|t| {
                t.as_second() % 2 == 0
                    && t > jiff::Timestamp::now() - jiff::SignedDuration::from_secs(5)
            })
    })
    .await;

    shutdown.cancel();
    support::stopped(run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_batch_skips_the_ticks_that_find_it_running_and_counts_them() {
    let Some(python) = python() else {
        println!("skipped: no python3 (set INFORMANT_PYTHON) for the schedule hooks");
        return;
    };
    let server = TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("log.py");
    std::fs::write(&hook, LOGGING_HOOK).unwrap();
    secret(&server, "s1");
    let log = dir.path().join("slow.log");
    let path = dir.path().join("informant.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\n\
             metadata: {{name: test, namespace: default}}\nspec: {{}}\n---\n{}",
            // Each call takes 2.5 s; a tick comes every second.
            controller(
                (&python, &hook),
                "slow",
                &log,
                "2.5",
                ("* * * * * *", "batch")
            )
        ),
    )
    .unwrap();
    let options = Options {
        metrics_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        health_addr: None,
        debounce: Duration::ZERO,
        shutdown_grace: Duration::from_secs(10),
        ..Options::new(ConfigSource::File(path))
    };
    let mut manager = Manager::new(client, options).await.unwrap();
    informant::hooks::add_to_manager(&mut manager);
    let metrics = manager.metrics_addr().unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));

    eventually("two slow batches ran", || async {
        batches(&log).len() >= 2
    })
    .await;
    let (run_ticks, skipped) = (
        ticks(metrics, "default/slow", "run").await,
        ticks(metrics, "default/slow", "skipped").await,
    );
    // Between two calls of 2.5 s, at least two ticks of a second each found one running.
    assert!(run_ticks >= 2, "run {run_ticks}");
    assert!(
        skipped >= 2 * (run_ticks - 1),
        "each call of 2.5 s skips the two ticks after it: run {run_ticks}, skipped {skipped}"
    );
    // Never two calls at once: each call's line is whole, one per run tick at most.
    assert!(batches(&log).len() as u64 <= run_ticks);

    shutdown.cancel();
    support::stopped(run).await;
}

/// A manager of `identity` with leader election whose scheduled `Controller` logs each call
/// to `calls-<identity>.log`.
async fn replica(
    server: &TestServer,
    dir: &Path,
    (python, hook): (&str, &Path),
    identity: &str,
) -> (
    PathBuf,
    tokio::sync::watch::Receiver<bool>,
    CancellationToken,
    tokio::task::JoinHandle<Result<(), informant::manager::Error>>,
) {
    let log = dir.join(format!("calls-{identity}.log"));
    let path = dir.join(format!("{identity}.yaml"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\n\
             metadata: {{name: test, namespace: default}}\nspec: {{}}\n---\n{}",
            controller((python, hook), "ticks", &log, "0", ("* * * * * *", "batch"))
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
            ..informant::manager::LeaderElection::new("informant-schedule-test", "default")
        }),
        ..Options::new(ConfigSource::File(path))
    };
    let client = server.client().await.unwrap();
    let mut manager = Manager::new(client, options).await.unwrap();
    informant::hooks::add_to_manager(&mut manager);
    let leader = manager.is_leader();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    (log, leader, shutdown, run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_ticks() {
    let Some(python) = python() else {
        println!("skipped: no python3 (set INFORMANT_PYTHON) for the schedule hooks");
        return;
    };
    let server = TestServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("log.py");
    std::fs::write(&hook, LOGGING_HOOK).unwrap();
    secret(&server, "s1");
    let a = replica(&server, dir.path(), (&python, &hook), "a").await;
    let b = replica(&server, dir.path(), (&python, &hook), "b").await;
    eventually("one replica leads", || async {
        *a.1.borrow() || *b.1.borrow()
    })
    .await;
    let (leader, standby) = if *a.1.borrow() { (a, b) } else { (b, a) };
    eventually("the leader ticked three times", || async {
        batches(&leader.0).len() >= 3
    })
    .await;
    assert!(!*standby.1.borrow());
    assert_eq!(
        lines(&standby.0),
        Vec::<String>::new(),
        "the standby called its hook"
    );
    for (_, _, shutdown, run) in [leader, standby] {
        shutdown.cancel();
        tokio::time::timeout(WAIT, run)
            .await
            .expect("the manager stops within the timeout")
            .unwrap()
            .unwrap();
    }
}

/// Logs `start NAME` when called for an object and `object NAME` when done; a call for
/// `blocker` waits, before it is done, until the file of its second argument exists.
const GATED_HOOK: &str = r#"
import json, os, sys, time
request = json.load(sys.stdin)
name = request["object"]["metadata"]["name"]
with open(sys.argv[1], "a") as log:
    log.write("start " + name + "\n")
while name == "blocker" and not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
with open(sys.argv[1], "a") as log:
    log.write("object " + name + "\n")
json.dump({}, sys.stdout)
"#;

/// The value of `workqueue_depth` of `controller` on the manager's `/metrics`.
async fn depth(metrics: SocketAddr, controller: &str) -> u64 {
    let (_, body) = support::http_get(metrics, "/metrics").await;
    let name = format!("name=\"{controller}\"");
    body.lines()
        .filter(|line| line.starts_with("workqueue_depth{") && line.contains(&name))
        .find_map(|line| line.rsplit(' ').next()?.trim().parse().ok())
        .unwrap_or(0)
}

/// A tick's call for an object that already waits in the controller's queue (here: created
/// while the only worker is busy) merges with it: the hook is called once for both. Were the
/// tick's request queued apart, `x` would be called twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticks_call_for_an_object_already_queued_merges_with_it() {
    let Some(python) = python() else {
        println!("skipped: no python3 (set INFORMANT_PYTHON) for the schedule hooks");
        return;
    };
    let (server, client) = support::server_with_informant_crds().await;
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("gated.py");
    std::fs::write(&hook, GATED_HOOK).unwrap();
    let (log, gate) = (dir.path().join("calls.log"), dir.path().join("open"));
    secret(&server, "blocker");
    let options = Options {
        metrics_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        health_addr: None,
        shutdown_grace: Duration::from_secs(10),
        ..Options::new(ConfigSource::Resource {
            namespace: "default".into(),
            name: "test".into(),
        })
    };
    let mut manager = Manager::new(client.clone(), options).await.unwrap();
    informant::hooks::add_to_manager(&mut manager);
    let metrics = manager.metrics_addr().unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));

    // One tick, far enough ahead for the set-up below (a cron of one second of the day, UTC).
    let tick =
        jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC) + jiff::Span::new().seconds(15);
    let document = format!(
        "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: merge, namespace: default}}
spec:
  for: {{apiVersion: v1, kind: Secret}}
  hook: {{exec: {{command: [{python}, {}, {}, {}], timeout: 60s}}}}
  schedule: '{} {} {} * * *'
",
        hook.display(),
        log.display(),
        gate.display(),
        tick.second(),
        tick.minute(),
        tick.hour(),
    );
    let resource: Controller = serde_yaml::from_str(&document).unwrap();
    Api::<Controller>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &resource)
        .await
        .unwrap();

    // The only worker (concurrency 1) is held by blocker; x's change waits in the queue.
    eventually("the worker is held by blocker", || async {
        lines(&log).contains(&"start blocker".to_owned())
    })
    .await;
    secret(&server, "x");
    eventually("x waits in the queue", || async {
        depth(metrics, "default/merge").await >= 1
    })
    .await;
    assert_eq!(
        ticks(metrics, "default/merge", "run").await,
        0,
        "the tick came before x was queued: the set-up took longer than its 15 s"
    );
    eventually("the tick ran while x waited", || async {
        ticks(metrics, "default/merge", "run").await == 1
    })
    .await;

    std::fs::write(&gate, "").unwrap();
    // blocker answers its first call, then the tick's (it was running when the tick came).
    eventually(
        "x called, and blocker called again for the tick",
        || async {
            let calls = lines(&log);
            calls.contains(&"object x".to_owned())
                && calls.iter().filter(|l| *l == "object blocker").count() == 2
        },
    )
    .await;
    let x_calls = || async {
        lines(&log)
            .iter()
            .filter(|l| l.ends_with(" x") && l.starts_with("start"))
            .count()
    };
    assert!(
        !support::holds_within(Duration::from_secs(3), || async { x_calls().await > 1 }).await,
        "x was called twice: {:?}",
        lines(&log)
    );
    assert_eq!(x_calls().await, 1);

    shutdown.cancel();
    support::stopped(run).await;
}
