//! A member process of a shard ring with a Rust controller: `informant run` hosts hook
//! controllers only, so the sharding tests start this test binary again, running
//! [`rust_member_process`] alone, as a member (`tests/shard_harness`, `Launch::Program`).
//! Re-running the test binary needs no other target to be built (an example or a `[[bin]]`
//! would not be, under a filter such as `cargo test --test manager shard_`) and no cargo
//! while tests run.
//!
//! The process is what `informant run --config FILE` is, a `Manager` from the file with the
//! harness's identity, timings and reconcile log (`ShardOptions`, what `--shard-identity`,
//! `--leader-elect-*` and `--reconcile-log` set), plus a Rust `Controller` of `ConfigMap`s
//! (gated by the ring as every controller of a sharded manager is) whose reconcile
//! writes the harness's reconcile log (a line when it starts, one when it ends) and holds a
//! hot object ([`HOLD_ANNOTATION`]) as the harness's hook does.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use informant::controller::{Action, Context, Controller, default_error_policy};
use informant::manager::{ConfigSource, Manager, Options, ShardOptions};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::config::KubeConfigOptions;
use tokio_util::sync::CancellationToken;

use crate::shard_harness::{HOLD_ANNOTATION, LEASE_NAMESPACE, Launch, SKIP_HANDOVER_ENV, now_us};

/// The environment variable that makes [`rust_member_process`] a member; without it the test
/// does nothing.
const IDENTITY: &str = "INFORMANT_SHARD_IDENTITY";

/// How the harness starts a Rust member: this binary, this test alone.
pub fn launch() -> Launch {
    Launch::Program {
        program: std::env::current_exe().unwrap(),
        args: [
            "--exact",
            "shard_rust_member::rust_member_process",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ]
        .map(String::from)
        .to_vec(),
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set by the harness"))
}

fn duration(name: &str) -> Duration {
    informant::config::parse_duration(&env(name)).unwrap()
}

/// The reconcile log, one write per line.
struct Log(Mutex<std::fs::File>);

impl Log {
    fn line(&self, text: &str) {
        let mut file = self.0.lock().unwrap();
        let _ = file.write_all(format!("{text}\n").as_bytes());
    }
}

async fn reconcile(
    object: Arc<ConfigMap>,
    _ctx: Arc<Context>,
    identity: Arc<str>,
    log: Arc<Log>,
) -> Result<Action, kube::Error> {
    let start = now_us();
    let uid = object.metadata.uid.clone().unwrap_or_default();
    log.line(&format!("{identity} {uid} {start} -"));
    let hold = object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HOLD_ANNOTATION))
        .and_then(|s| s.parse::<f64>().ok());
    let action = match hold {
        Some(seconds) => {
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            Action::requeue(Duration::from_millis(50))
        }
        None => Action::await_change(),
    };
    log.line(&format!("{identity} {uid} {start} {}", now_us()));
    Ok(action)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a member process the sharding tests start (this binary run again); nothing alone"]
async fn rust_member_process() {
    let Ok(identity) = std::env::var(IDENTITY) else {
        return;
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter("info")
        .init();
    let kubeconfig = kube::config::Kubeconfig::read_from(env("KUBECONFIG")).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let shard = ShardOptions {
        identity: identity.clone(),
        lease_namespace: LEASE_NAMESPACE.to_owned(),
        lease_duration: duration("INFORMANT_SHARD_LEASE"),
        renew_deadline: duration("INFORMANT_SHARD_RENEW"),
        retry_period: duration("INFORMANT_SHARD_RETRY"),
        reconcile_log: std::env::var_os("INFORMANT_RECONCILE_LOG").map(PathBuf::from),
        skip_handover: std::env::var(SKIP_HANDOVER_ENV).is_ok_and(|v| v == "true"),
    };
    let options = Options {
        metrics_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        shard,
        ..Options::new(ConfigSource::File(PathBuf::from(env(
            "INFORMANT_SHARD_CONFIG",
        ))))
    };
    let mut manager = Manager::new(client, options).await.unwrap();
    let log = Arc::new(Log(Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(env("INFORMANT_SHARD_LOG"))
            .unwrap(),
    )));
    let identity: Arc<str> = identity.into();
    Controller::<ConfigMap>::new("rust").concurrency(16).add_to(
        &mut manager,
        move |object, ctx| reconcile(object, ctx, identity.clone(), log.clone()),
        default_error_policy,
    );
    // Until the harness kills it.
    manager.run(CancellationToken::new()).await.unwrap();
}
