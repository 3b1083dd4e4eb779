//! A whole certificate rotation of the managed webhook certificates under a steady 100
//! admission requests/s: how many failed (the figure: 0). Prints what it measured, with each
//! replica's fates beside the reviews it received; checks only that the rotation happened.
//!
//! A kube-rs client creates a `ConfigMap` every 10 ms through the embedded API server, which
//! calls the two webhooks of a `ValidatingWebhookConfiguration` (`failurePolicy: Fail`), one per
//! replica of the manager's webhook endpoint (two `WebhookEndpoint`s serving the managed Secret,
//! each with an `Admitter` whose webhook hook allows): every create goes through both replicas,
//! over HTTPS verified against the configuration's `caBundle`. The leader is the real one
//! (`ManagedCertificates::run` with a `CaInjector` writing that `caBundle`), on the system
//! clock, with lifetimes short enough for a whole rotation in under a minute (CA 45 s, serving
//! certificate 15 s, overlap 3 s): two serving renewals, then a new CA added, the serving
//! certificate switched to it, and the old CA dropped. The bench watches the Secret to name
//! the steps, and keeps the load on for 3 s after the last one.
//!
//! `cargo bench --bench webhook_rotation` (or `--profile dev`: the figure is a count, not a
//! speed).

#[path = "common/admission.rs"]
mod admission;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use informant::apiserver::TestServer;
use informant::hooks::{AdmissionType, Admitter, Hook, HookMetrics};
use informant::serving::managed::{Certificates, ManagedCertificates, Settings};
use informant::serving::{
    CaInjector, InjectTargets, WebhookCertificates, WebhookEndpoint, WebhookRouter,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const RATE: u32 = 100;
/// The configuration both replicas' webhooks are in (the injector's target).
const CONFIGURATION: &str = "bench-rotation";
/// The Services of the two replicas (both names are in the serving certificate).
const REPLICAS: [(&str, &str); 2] = [("default", "hooks"), ("default", "hooks-b")];
/// How long the load goes on after the rotation's last step.
const AFTER: Duration = Duration::from_secs(3);
/// The rotation must be over by then.
const BOUND: Duration = Duration::from_secs(90);

/// The settings: a rotation in under a minute (the steps as with the defaults, sooner).
fn settings() -> Settings {
    let mut settings = Settings::new(REPLICAS[0].1, REPLICAS[0].0);
    settings.ca_validity = Duration::from_secs(45);
    settings.serving_validity = Duration::from_secs(15);
    settings.overlap = Duration::from_secs(3);
    settings.extra_names = vec![format!("{}.{}.svc", REPLICAS[1].1, REPLICAS[1].0)];
    settings
}

/// One replica of the webhook endpoint: its address, its `Admitter` and the reviews received.
struct Replica {
    addr: SocketAddr,
    admitter: Arc<Admitter>,
    seen: Arc<AtomicU64>,
}

/// Replica `index` serving the managed Secret (not the leader: the bench's leader alone
/// writes), once it serves it; its hook is named after it, so its fates are its own.
async fn replica(
    index: usize,
    client: &kube::Client,
    settings: &Settings,
    hook_url: &str,
    metrics: &HookMetrics,
    shutdown: &CancellationToken,
) -> Replica {
    let hook = Hook::Webhook {
        url: format!("{hook_url}/validate"),
        timeout: Duration::from_secs(10),
        tls: None,
    };
    let admitter = admission::admitter(
        admission::admission_hook(&format!("allow-{index}"), AdmissionType::Validating, hook),
        metrics,
    );
    let seen = Arc::new(AtomicU64::new(0));
    let router = WebhookRouter::new()
        .register(
            "/validate",
            admission::route(admitter.clone(), seen.clone()),
        )
        .expect("a path");
    let endpoint = WebhookEndpoint::bind(
        client.clone(),
        SocketAddr::from(([127, 0, 0, 1], 0)),
        &WebhookCertificates::Managed(settings.clone()),
        InjectTargets::default(),
        router,
    )
    .await
    .expect("bound");
    let addr = endpoint.local_addr();
    let mut ready = endpoint.ready();
    tokio::spawn(endpoint.run(watch::channel(false).1, shutdown.child_token()));
    ready.wait_for(|r| *r).await.expect("serving the Secret");
    Replica {
        addr,
        admitter,
        seen,
    }
}

/// The step between two states of the Secret, by what changed.
fn step_between(before: &Certificates, after: &Certificates) -> Option<&'static str> {
    match (before.ca_count(), after.ca_count()) {
        (1, 2) => Some("AddCa"),
        (2, 1) => Some("DropOldCas"),
        _ if before.serving_pem() == after.serving_pem() => None,
        (2, 2) => Some("SwitchServing"),
        _ => Some("RenewServing"),
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(run());
}

#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
async fn run() {
    let server = TestServer::start().await.expect("the embedded API server");
    let client = server.client().await.expect("a client");
    let settings = settings();
    let shutdown = CancellationToken::new();
    let hook_url = admission::webhook_hook(shutdown.clone()).await;
    let metrics = HookMetrics::new();

    // The configuration: one webhook per replica, its caBundle written by the injector.
    let webhooks: Vec<_> = REPLICAS
        .iter()
        .map(|&(namespace, service)| {
            admission::webhook(
                &format!("{service}.bench.informant.dev"),
                (namespace, service),
                "/validate",
            )
        })
        .collect();
    admission::register(&client, AdmissionType::Validating, CONFIGURATION, &webhooks).await;
    let injector = CaInjector::new(
        client.clone(),
        InjectTargets {
            validating: vec![CONFIGURATION.to_owned()],
            ..InjectTargets::default()
        },
    );
    let leader =
        ManagedCertificates::new(client.clone(), settings.clone()).expect("valid settings");
    let first = leader.reconcile().await.expect("the Secret made");
    injector
        .inject(&first.certificates.bundle_pem())
        .await
        .expect("the caBundle injected");
    let mut replicas = Vec::new();
    for (index, &(namespace, service)) in REPLICAS.iter().enumerate() {
        let replica = replica(index, &client, &settings, &hook_url, &metrics, &shutdown).await;
        server
            .handle()
            .resolve_service(namespace, service, 443, replica.addr);
        replicas.push(replica);
    }
    // From here the real leader loop: each step when due, the bundle injected after it.
    tokio::spawn(leader.run(
        Some(injector),
        watch::channel(true).1,
        shutdown.child_token(),
    ));

    // The requests: a create every 10 ms, each its own task.
    let stop = CancellationToken::new();
    let sender = {
        let (stop, client) = (stop.clone(), client.clone());
        tokio::spawn(async move {
            let cms: Api<ConfigMap> = Api::namespaced(client, "default");
            let names = Arc::new(AtomicUsize::new(0));
            let mut tick = tokio::time::interval(Duration::from_secs(1) / RATE);
            let mut tasks = Vec::new();
            while !stop.is_cancelled() {
                tick.tick().await;
                let (cms, names) = (cms.clone(), names.clone());
                tasks.push(tokio::spawn(async move {
                    let name = format!("cm-{}", names.fetch_add(1, Ordering::Relaxed));
                    let cm: ConfigMap =
                        serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))
                            .expect("a ConfigMap");
                    let started = Instant::now();
                    let done = cms.create(&PostParams::default(), &cm).await;
                    (
                        done.map(|_| ()).map_err(|e| e.to_string()),
                        started.elapsed(),
                    )
                }));
            }
            let mut out = Vec::new();
            for task in tasks {
                out.push(task.await.expect("a request task"));
            }
            out
        })
    };

    // The steps, as the Secret shows them (read every 50 ms).
    let observer = ManagedCertificates::new(client.clone(), settings).expect("valid settings");
    let started = Instant::now();
    let mut steps: Vec<(&str, Duration)> = Vec::new();
    let mut last = first.certificates;
    while !steps.iter().any(|(step, _)| *step == "DropOldCas") {
        assert!(
            started.elapsed() < BOUND,
            "no whole rotation within {BOUND:?}: {steps:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        let Ok(Some(now)) = observer.current().await else {
            continue;
        };
        if let Some(step) = step_between(&last, &now) {
            steps.push((step, started.elapsed()));
        }
        last = now;
    }
    tokio::time::sleep(AFTER).await;
    stop.cancel();
    let results = sender.await.expect("the sender");
    let elapsed = started.elapsed();
    shutdown.cancel();
    report(&results, elapsed, &steps, &replicas, &metrics);
}

/// Prints the figures; checks that each replica's reviews each ended in one fate.
fn report(
    results: &[(Result<(), String>, Duration)],
    elapsed: Duration,
    steps: &[(&str, Duration)],
    replicas: &[Replica],
    metrics: &HookMetrics,
) {
    let failed: Vec<&String> = results
        .iter()
        .filter_map(|(r, _)| r.as_ref().err())
        .collect();
    let mut latencies: Vec<Duration> = results.iter().map(|(_, d)| *d).collect();
    latencies.sort();
    let at = |percent: usize| {
        latencies
            .get((latencies.len() * percent).div_ceil(100).saturating_sub(1))
            .copied()
            .unwrap_or_default()
    };
    let steps: Vec<String> = steps
        .iter()
        .map(|(step, at)| format!("{step} at {:.1} s", at.as_secs_f64()))
        .collect();
    println!(
        "rotation under {RATE} admission requests/s: {} failed of {} creates in {:.1} s; steps: {}",
        failed.len(),
        results.len(),
        elapsed.as_secs_f64(),
        steps.join(", ")
    );
    println!(
        "create (client -> API server -> 2 replicas' webhooks over HTTPS -> hook): p50 {:.2?}, p99 {:.2?}",
        at(50),
        at(99)
    );
    for failure in failed.iter().take(5) {
        println!("failed: {failure}");
    }
    for (i, replica) in replicas.iter().enumerate() {
        let (fates, total) = admission::fates(metrics, &replica.admitter, "CREATE");
        let seen = replica.seen.load(Ordering::Relaxed);
        let verdict = if total == seen {
            "=".to_owned()
        } else {
            format!(
                "!= ({} reviews with no fate: the API server gave up on them mid-call)",
                seen.abs_diff(total)
            )
        };
        println!("replica {i}: fates {fates}; sum {total} {verdict} reviews received {seen}");
    }
}
