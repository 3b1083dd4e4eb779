//! `informant run --config FILE`, the real binary, as a user runs it: its log written next to
//! the config (`2> run.log` in the same directory), the file edited as `sed -i` edits it, the
//! results read from `/metrics`, the log and the Events. One edit is one reload result; an
//! invalid file is rejected once, not at every event that wakes the watcher.

use crate::support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use informant::apiserver::TestServer;
use k8s_openapi::api::core::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams};
use support::{eventually, http_get, replace};

/// A running `informant run`, killed when dropped.
pub struct Running {
    child: Child,
    /// Its standard error.
    pub log: PathBuf,
    /// Where `/metrics` and `/debug/*` are served.
    pub metrics: SocketAddr,
    /// Where `/healthz` and `/readyz` are served.
    pub health: SocketAddr,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The value of the sample `series` (name and labels exactly as exposed) on `/metrics`.
    pub async fn metric(&self, series: &str) -> Option<String> {
        let (code, body) = http_get(self.metrics, "/metrics").await;
        assert_eq!(code, 200, "{body}");
        body.lines().find_map(|line| {
            let value = line.strip_prefix(series)?.strip_prefix(' ')?;
            Some(value.to_owned())
        })
    }

    /// `informant_config_reloads_total{result}`.
    pub async fn reloads(&self, result: &str) -> u64 {
        let series = format!("informant_config_reloads_total{{result=\"{result}\"}}");
        let value = self.metric(&series).await;
        value
            .and_then(|v| v.parse().ok())
            .expect("the series is exposed")
    }

    /// Waits until `informant_config_reloads_total{result}` is `n`.
    pub async fn reloads_reach(&self, result: &str, n: u64) {
        eventually(&format!("{n} {result} reload(s)"), || async {
            self.reloads(result).await == n
        })
        .await;
    }
}

/// A kubeconfig for `server` in `dir` (JSON is YAML).
pub fn write_kubeconfig(server: &TestServer, dir: &Path) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, serde_json::to_string(&server.kubeconfig()).unwrap()).unwrap();
    path
}

/// Starts `informant run --config <config>` against `kubeconfig` with `args` added, the
/// listeners on free ports of 127.0.0.1 (metrics) and 127.0.0.2 (probes), its standard error
/// in `log`, `RUST_LOG` unset (the default filter); returns once both listeners are bound.
pub async fn run_informant(config: &Path, kubeconfig: &Path, log: &Path, args: &[&str]) -> Running {
    let child = Command::new(env!("CARGO_BIN_EXE_informant"))
        .arg("run")
        .arg("--config")
        .arg(config)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        // Two loopback addresses: equal addresses would share one listener.
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.2:0",
        ])
        .args(args)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let mut running = Running {
        child,
        log: log.to_owned(),
        metrics: SocketAddr::from(([127, 0, 0, 1], 0)),
        health: SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    eventually("both listeners in the log", || {
        let bound = listeners(&running.log()).len();
        async move { bound == 2 }
    })
    .await;
    for (serves, addr) in listeners(&running.log()) {
        if serves.starts_with("serving metrics:") {
            running.metrics = addr;
        } else {
            running.health = addr;
        }
    }
    running
}

/// Each listener's line in `log`: what it says it serves, and its `listen.addr`.
fn listeners(log: &str) -> Vec<(String, SocketAddr)> {
    log.lines()
        .filter_map(|line| {
            let (said, rest) = line.split_once(" listen.addr=")?;
            let serves = said.split(": ").skip(1).collect::<Vec<_>>().join(": ");
            Some((serves, rest.split_whitespace().next()?.parse().ok()?))
        })
        .filter(|(serves, _)| serves.starts_with("serving "))
        .collect()
}

fn document(spec: &str) -> String {
    format!(
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: test, namespace: default}}\nspec: {spec}\n"
    )
}

async fn events_with_reason(client: &Client, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

#[tokio::test]
async fn one_edit_is_one_result_and_an_invalid_file_is_rejected_once_with_its_log_beside_it() {
    let server = TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(&server, dir.path());
    let conf = dir.path().join("conf");
    std::fs::create_dir(&conf).unwrap();
    let config = conf.join("config.yaml");
    std::fs::write(&config, document("{}")).unwrap();
    // No debounce: every event that wakes the watcher (the log's own lines included) reloads.
    // The hook policy said open, so the only warning is the rejected edit's (an implicit open
    // policy warns once at start).
    let informant = run_informant(
        &config,
        &kubeconfig,
        &conf.join("run.log"),
        &["--debounce", "0s", "--hook-policy", "open"],
    )
    .await;
    eventually("ready", || async {
        http_get(informant.health, "/readyz").await.0 == 200
    })
    .await;

    // A valid edit: one applied, nothing else (the start counted nothing either).
    replace(&config, &document("{syncPeriod: 5h}"));
    informant.reloads_reach("applied", 1).await;

    // An invalid edit: rejected, said once in the log.
    replace(&config, &document("{syncPeriod: 90 minutes}"));
    informant.reloads_reach("rejected", 1).await;
    eventually("the warning in the log", || async {
        informant.log().contains(" WARN ")
    })
    .await;
    eventually("an InvalidConfig event", || async {
        !events_with_reason(&client, "InvalidConfig")
            .await
            .is_empty()
    })
    .await;

    // A second valid edit, after the log lines the rejection wrote: the rejection was not
    // repeated meanwhile, and is not after.
    replace(&config, &document("{syncPeriod: 6h}"));
    informant.reloads_reach("applied", 2).await;
    assert_eq!(
        informant.reloads("rejected").await,
        1,
        "{}",
        informant.log()
    );
    assert_eq!(
        informant.reloads("unchanged").await,
        0,
        "{}",
        informant.log()
    );
    // A comment edited: the text changed, the config did not.
    replace(
        &config,
        &format!("# six hours\n{}", document("{syncPeriod: 6h}")),
    );
    informant.reloads_reach("unchanged", 1).await;
    assert_eq!(informant.reloads("rejected").await, 1);
    assert_eq!(informant.reloads("applied").await, 2);

    let log = informant.log();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains(" WARN ")).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(
        warnings[0].contains(" config_reload{reload.result=\"rejected\"}: "),
        "the result once, in its span: {}",
        warnings[0]
    );
    assert!(
        warnings[0].contains("spec.syncPeriod: unknown unit"),
        "{}",
        warnings[0]
    );
    let invalid = events_with_reason(&client, "InvalidConfig").await;
    assert_eq!(invalid.len(), 1, "{invalid:?}");
    assert_eq!(invalid[0].count, Some(1), "{invalid:?}");
    // notify's info about watches of replaced files is not for users.
    assert!(!log.contains("notify::"), "{log}");
}

#[tokio::test]
async fn an_edit_of_sharding_is_rejected_until_a_restart_and_said_where_every_rejection_is() {
    let server = TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(&server, dir.path());
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, document("{syncPeriod: 5h}")).unwrap();
    let informant = run_informant(
        &config,
        &kubeconfig,
        &dir.path().join("run.log"),
        &["--debounce", "0s"],
    )
    .await;
    eventually("ready", || async {
        http_get(informant.health, "/readyz").await.0 == 200
    })
    .await;

    // Valid on its own, but the running replica does not shard.
    replace(
        &config,
        &document("{syncPeriod: 6h, sharding: {ring: shop, key: uid}}"),
    );
    informant.reloads_reach("rejected", 1).await;
    let said = "spec.sharding: changing sharding needs a restart of every replica; the replicas \
                run with no sharding, this config asks for sharding {ring: shop, key: uid}";
    eventually("the warning in the log", || async {
        informant
            .log()
            .lines()
            .any(|l| l.contains(" WARN ") && l.contains(said))
    })
    .await;
    let (code, body) = http_get(informant.metrics, "/debug/status").await;
    assert_eq!(code, 200, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    let valid = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Valid")
        .unwrap();
    assert_eq!(valid["status"], "False", "{body}");
    assert!(valid["message"].as_str().unwrap().contains(said), "{body}");
    eventually(
        "a Warning InvalidConfig event naming spec.sharding",
        || async {
            events_with_reason(&client, "InvalidConfig")
                .await
                .iter()
                .any(|e| e.message.as_deref().is_some_and(|m| m.contains(said)))
        },
    )
    .await;
    assert_eq!(
        informant.reloads("applied").await,
        0,
        "the edit waits whole"
    );

    // The same edit without the sharding: applied, valid again.
    replace(&config, &document("{syncPeriod: 6h}"));
    informant.reloads_reach("applied", 1).await;
    assert_eq!(transition_time(&informant, "Valid").await.0, "True");
}

/// The `lastTransitionTime` of condition `type_` in `/debug/status`.
async fn transition_time(informant: &Running, type_: &str) -> (String, jiff::Timestamp) {
    let (code, body) = http_get(informant.metrics, "/debug/status").await;
    assert_eq!(code, 200, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    let condition = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {body}"));
    let time = condition["lastTransitionTime"].as_str().unwrap();
    (
        condition["status"].as_str().unwrap().to_owned(),
        time.parse().unwrap(),
    )
}

/// Waits until the wall clock is in a later second than `time` (status times are in
/// seconds): a request from then on would see its own time if the status carried it.
async fn a_second_after(time: jiff::Timestamp) {
    eventually("a later second", || async {
        jiff::Timestamp::now().as_second() > time.as_second()
    })
    .await;
}

#[tokio::test]
async fn debug_status_serves_when_each_condition_flipped_not_the_time_of_the_request() {
    let server = TestServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(&server, dir.path());
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, document("{}")).unwrap();
    let informant = run_informant(
        &config,
        &kubeconfig,
        &dir.path().join("run.log"),
        &["--debounce", "0s"],
    )
    .await;
    eventually("ready", || async {
        http_get(informant.health, "/readyz").await.0 == 200
    })
    .await;

    let (valid, started) = transition_time(&informant, "Valid").await;
    assert_eq!(valid, "True");
    let (_, ready) = transition_time(&informant, "Ready").await;
    a_second_after(started.max(ready)).await;
    assert_eq!(
        transition_time(&informant, "Valid").await,
        ("True".to_owned(), started)
    );
    assert_eq!(transition_time(&informant, "Ready").await.1, ready);

    // The flip to invalid is timed at the reload that saw it, and stays.
    replace(&config, &document("{syncPeriod: 90 minutes}"));
    informant.reloads_reach("rejected", 1).await;
    let (invalid, flipped) = transition_time(&informant, "Valid").await;
    assert_eq!(invalid, "False");
    assert!(flipped >= started, "{flipped} < {started}");
    a_second_after(flipped).await;
    assert_eq!(
        transition_time(&informant, "Valid").await,
        ("False".to_owned(), flipped)
    );
    assert_eq!(
        transition_time(&informant, "Ready").await.1,
        ready,
        "Ready did not flip"
    );
}

#[tokio::test]
async fn an_invalid_edit_keeps_the_manager_ready_and_shows_in_valid_the_event_and_the_gauges() {
    let server = TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(&server, dir.path());
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, document("{}")).unwrap();
    let informant = run_informant(
        &config,
        &kubeconfig,
        &dir.path().join("run.log"),
        &["--debounce", "0s"],
    )
    .await;
    let successful = "informant_config_last_reload_successful";
    let success_at = "informant_config_last_reload_success_timestamp_seconds";
    eventually("ready", || async {
        http_get(informant.health, "/readyz").await.0 == 200
    })
    .await;
    // The load at start sets the gauges, as Prometheus's does.
    assert_eq!(informant.metric(successful).await.as_deref(), Some("1"));
    let started_text = informant.metric(success_at).await.unwrap();
    let started: f64 = started_text.parse().unwrap();
    assert!(started > 1.7e9, "{started}");

    replace(&config, &document("{syncPeriod: 90 minutes}"));
    informant.reloads_reach("rejected", 1).await;
    // Ready: the last good config serves; the edit shows everywhere else.
    assert_eq!(
        http_get(informant.health, "/readyz?verbose").await,
        (
            200,
            "[+]config ok\n[+]controllers ok\n[+]informers ok\n[+]permissions ok\n[+]ping ok\nhealthz check passed\n"
                .to_owned()
        )
    );
    assert_eq!(informant.metric(successful).await.as_deref(), Some("0"));
    assert_eq!(
        informant.metric(success_at).await,
        Some(started_text),
        "the time of the last success stays"
    );
    assert_eq!(transition_time(&informant, "Valid").await.0, "False");
    eventually("a Warning InvalidConfig event", || async {
        events_with_reason(&client, "InvalidConfig")
            .await
            .iter()
            .any(|e| e.type_.as_deref() == Some("Warning"))
    })
    .await;

    replace(&config, &document("{syncPeriod: 5h}"));
    informant.reloads_reach("applied", 1).await;
    assert_eq!(informant.metric(successful).await.as_deref(), Some("1"));
    let fixed: f64 = informant.metric(success_at).await.unwrap().parse().unwrap();
    assert!(fixed >= started, "{fixed} < {started}");
    assert_eq!(transition_time(&informant, "Valid").await.0, "True");
    let log = informant.log();
    assert!(
        log.lines()
            .any(|l| l.contains(" INFO ") && l.contains("cacheconfig valid again")),
        "{log}"
    );
}

#[tokio::test]
async fn each_listener_says_what_it_serves_and_serves_just_that() {
    let server = TestServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(&server, dir.path());
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, document("{}")).unwrap();
    let informant = run_informant(&config, &kubeconfig, &dir.path().join("run.log"), &[]).await;
    let said = listeners(&informant.log());
    assert_eq!(
        said,
        [
            (
                "serving metrics: /metrics, /debug/cache, /debug/status".to_owned(),
                informant.metrics
            ),
            (
                "serving health probes: /healthz, /readyz".to_owned(),
                informant.health
            ),
        ],
        "{}",
        informant.log()
    );
    eventually("ready", || async {
        http_get(informant.health, "/readyz").await.0 == 200
    })
    .await;
    for path in ["/metrics", "/debug/cache", "/debug/status"] {
        assert_eq!(http_get(informant.metrics, path).await.0, 200, "{path}");
        assert_eq!(http_get(informant.health, path).await.0, 404, "{path}");
    }
    for path in ["/healthz", "/readyz"] {
        assert_eq!(http_get(informant.health, path).await.0, 200, "{path}");
        assert_eq!(http_get(informant.metrics, path).await.0, 404, "{path}");
    }
    drop(informant);

    // One address for both: one listener, one line that says both.
    let log = dir.path().join("shared.log");
    let child = Command::new(env!("CARGO_BIN_EXE_informant"))
        .arg("run")
        .arg("--config")
        .arg(&config)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ])
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let shared = Running {
        child,
        log,
        metrics: SocketAddr::from(([127, 0, 0, 1], 0)),
        health: SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    eventually("the listener in the log", || {
        let bound = listeners(&shared.log()).len();
        async move { bound == 1 }
    })
    .await;
    let said = listeners(&shared.log());
    assert_eq!(
        said[0].0,
        "serving metrics and health probes: /metrics, /debug/cache, /debug/status, /healthz, /readyz"
    );
    assert_eq!(http_get(said[0].1, "/metrics").await.0, 200);
    assert_eq!(http_get(said[0].1, "/healthz").await.0, 200);
}
