//! The admission round trip through the embedded API server (`cargo bench --bench admission`):
//! a kube-rs client creates `ConfigMap`s; the API server calls the `ValidatingWebhookConfiguration`
//! (or `Mutating…`) registered for them, `failurePolicy: Fail`, over HTTPS to the manager's
//! webhook endpoint (a `WebhookEndpoint` serving the managed certificate, whose CA the
//! `CaInjector` wrote into the configuration's `caBundle`); the path's `Admitter` calls the
//! hook and answers; the object is stored. Figures: p50/p99 of one create, and creates/s at
//! concurrency 1, 4 and 16, for each kind of hook, beside the same creates with no webhook
//! registered (the baseline: the admission cost is the difference).
//!
//! Hooks, each answering `{"allowed": true}` with no work: a per-call exec hook in `/bin/sh`
//! and in Python, a persistent exec hook (`mode: persistent`, one process answering line by
//! line) in `/bin/sh` and in Python, a webhook hook (a tiny HTTP server in the bench), and a
//! mutating webhook hook answering the object with a label added (informant computes the
//! patch, the API server applies it). Python is `INFORMANT_PYTHON`, else `python3`; without
//! one its figures say they are skipped.
//!
//! Every decision is counted by fate in `informant_admission_total` (`HookMetrics`); the bench
//! checks, for every hook, that the reviews its path received, the sum of its fates and the
//! creates sent are the same number, and prints them.
//!
//! Beside each, the same hook's decision alone (`Admitter::decide` in process, no HTTPS): the
//! embedded API server opens a new TLS connection for every webhook call (kube-apiserver keeps
//! its connections), so the round trip includes a TLS handshake.
//!
//! `INFORMANT_BENCH_REQUESTS` creates per figure (default 300).

#[path = "common/admission.rs"]
mod admission;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use informant::apiserver::TestServer;
use informant::hooks::{AdmissionType, Admitter, Hook, HookMetrics};
use informant::serving::managed::{ManagedCertificates, Settings};
use informant::serving::{
    CaInjector, InjectTargets, WebhookCertificates, WebhookEndpoint, WebhookRouter,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The webhook Service the configurations name (resolved to the endpoint's address).
const SERVICE: (&str, &str) = ("default", "hooks");
const CONCURRENCY: [usize; 3] = [1, 4, 16];
const TIMEOUT: Duration = Duration::from_secs(10);

/// A persistent shell hook allowing every call (the id is the envelope's first field).
const PERSISTENT_SH: &str = r#"while IFS= read -r line; do id=${line#'{"id":'}; id=${id%%,*}; printf '{"id":%s,"response":{"allowed":true}}\n' "$id"; done"#;

/// A persistent Python hook allowing every call.
const PERSISTENT_PY: &str = r#"
import json, sys
for line in sys.stdin:
    sys.stdout.write(json.dumps({"id": json.loads(line)["id"], "response": {"allowed": True}}) + "\n")
    sys.stdout.flush()
"#;

/// A per-call Python hook allowing every call.
const PER_CALL_PY: &str = r#"
import json, sys
json.load(sys.stdin)
sys.stdout.write('{"allowed": true}')
"#;

/// One hook measured: its label, its path on the webhook server, its type, and the hook.
struct Case {
    label: String,
    path: String,
    type_: AdmissionType,
    hook: Hook,
}

/// A hook served on the endpoint: its case, its decisions, the reviews its path received.
struct Served {
    case: Case,
    admitter: Arc<Admitter>,
    seen: Arc<AtomicU64>,
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    // Nearest rank: the sample at or below which `percent` of the samples fall.
    let at = |percent: usize| samples[(samples.len() * percent).div_ceil(100).saturating_sub(1)];
    (at(50), at(99))
}

/// The Python of the Python figures: `INFORMANT_PYTHON`, else `python3`.
fn python() -> Option<String> {
    let python = std::env::var("INFORMANT_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let found = std::process::Command::new(&python)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!("skipped: the Python hooks (no {python}; set INFORMANT_PYTHON)");
    }
    found.then_some(python)
}

fn cases(hook_url: &str, python: Option<&str>, dir: &std::path::Path) -> Vec<Case> {
    let case = |label: &str, type_, hook| Case {
        label: label.to_owned(),
        path: format!(
            "/{}",
            label
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|word| !word.is_empty())
                .collect::<Vec<_>>()
                .join("-")
        ),
        type_,
        hook,
    };
    let sh = |script: &str| vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()];
    let mut cases = vec![
        case(
            "exec (sh)",
            AdmissionType::Validating,
            Hook::Exec {
                env: Vec::new(),
                command: sh(r#"cat >/dev/null; printf '{"allowed": true}'"#),
                timeout: TIMEOUT,
            },
        ),
        case(
            "persistent exec (sh)",
            AdmissionType::Validating,
            Hook::Persistent {
                env: Vec::new(),
                command: sh(PERSISTENT_SH),
                timeout: TIMEOUT,
                calls_per_process: 1,
            },
        ),
    ];
    if let Some(python) = python {
        let script = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("a script written");
            vec![python.to_owned(), path.display().to_string()]
        };
        cases.push(case(
            "exec (python)",
            AdmissionType::Validating,
            Hook::Exec {
                env: Vec::new(),
                command: script("per_call.py", PER_CALL_PY),
                timeout: TIMEOUT,
            },
        ));
        cases.push(case(
            "persistent exec (python)",
            AdmissionType::Validating,
            Hook::Persistent {
                env: Vec::new(),
                command: script("persistent.py", PERSISTENT_PY),
                timeout: TIMEOUT,
                calls_per_process: 1,
            },
        ));
    }
    cases.push(case(
        "webhook",
        AdmissionType::Validating,
        Hook::Webhook {
            url: format!("{hook_url}/validate"),
            timeout: TIMEOUT,
            tls: None,
        },
    ));
    cases.push(case(
        "mutating webhook",
        AdmissionType::Mutating,
        Hook::Webhook {
            url: format!("{hook_url}/mutate"),
            timeout: TIMEOUT,
            tls: None,
        },
    ));
    cases
}

/// An `AdmissionReview` of a `ConfigMap` CREATE, as the embedded API server sends it.
fn review() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "requestKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "requestResource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "direct",
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "admin", "groups": ["system:masters"]},
            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "direct", "namespace": "default"}, "data": {"key": "value"}},
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    }))
    .expect("a review")
}

/// Creates `ConfigMap`s named from `names`; each create's time.
async fn create(cms: &Api<ConfigMap>, names: &AtomicUsize) -> Duration {
    let name = format!("cm-{}", names.fetch_add(1, Ordering::Relaxed));
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name}, "data": {"key": "value"}
    }))
    .expect("a ConfigMap");
    let started = Instant::now();
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("the create admitted");
    started.elapsed()
}

/// p50/p99 of `n` creates one after another, then creates/s of `n` creates at each
/// [`CONCURRENCY`]; prints them under `label`. Returns the creates sent.
async fn measure(cms: &Api<ConfigMap>, names: &Arc<AtomicUsize>, label: &str, n: usize) -> u64 {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        samples.push(create(cms, names).await);
    }
    let (p50, p99) = percentiles(samples);
    let mut rates = Vec::new();
    for concurrency in CONCURRENCY {
        let left = Arc::new(AtomicUsize::new(n));
        let started = Instant::now();
        let workers: Vec<_> = (0..concurrency)
            .map(|_| {
                let (cms, names, left) = (cms.clone(), names.clone(), left.clone());
                tokio::spawn(async move {
                    while left
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(1))
                        .is_ok()
                    {
                        create(&cms, &names).await;
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.await.expect("a worker");
        }
        #[allow(clippy::cast_precision_loss, reason = "a few thousand creates")]
        rates.push(format!("{:.0}", n as f64 / started.elapsed().as_secs_f64()));
    }
    println!(
        "{label}: create p50 {p50:.2?}, p99 {p99:.2?} ({n} creates); creates/s at concurrency 1/4/16: {}",
        rates.join(" / ")
    );
    (n * (1 + CONCURRENCY.len())) as u64
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(run());
}

async fn run() {
    let n: usize = std::env::var("INFORMANT_BENCH_REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let server = TestServer::start().await.expect("the embedded API server");
    let client = server.client().await.expect("a client");
    let shutdown = CancellationToken::new();
    let settings = Settings::new(SERVICE.1, SERVICE.0);
    let bundle = ManagedCertificates::new(client.clone(), settings.clone())
        .expect("valid settings")
        .reconcile()
        .await
        .expect("the certificate Secret made")
        .certificates
        .bundle_pem();
    let hook_url = admission::webhook_hook(shutdown.clone()).await;
    let dir = tempfile::tempdir().expect("a scratch directory");
    let python = python();
    let metrics = HookMetrics::new();
    let mut router = WebhookRouter::new();
    let mut hooks = Vec::new();
    for case in cases(&hook_url, python.as_deref(), dir.path()) {
        // Each its own name: its fates are counted under its own label.
        let name = case.path.trim_start_matches('/');
        let hook = admission::admission_hook(name, case.type_, case.hook.clone());
        let admitter = admission::admitter(hook, &metrics);
        let seen = Arc::new(AtomicU64::new(0));
        router = router
            .register(&case.path, admission::route(admitter.clone(), seen.clone()))
            .expect("a path of its own");
        hooks.push(Served {
            case,
            admitter,
            seen,
        });
    }
    let endpoint = WebhookEndpoint::bind(
        client.clone(),
        SocketAddr::from(([127, 0, 0, 1], 0)),
        &WebhookCertificates::Managed(settings),
        InjectTargets::default(),
        router,
    )
    .await
    .expect("the webhook endpoint bound");
    server
        .handle()
        .resolve_service(SERVICE.0, SERVICE.1, 443, endpoint.local_addr());
    let mut ready = endpoint.ready();
    // Not the leader: the Secret is made above, and the bundle injected for each case below.
    let serving = tokio::spawn(endpoint.run(watch::channel(false).1, shutdown.child_token()));
    ready
        .wait_for(|r| *r)
        .await
        .expect("serving the managed certificate");

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let names = Arc::new(AtomicUsize::new(0));
    println!(
        "admission round trip: client -> embedded API server -> webhook endpoint (HTTPS) -> hook -> back"
    );
    measure(&cms, &names, "no webhook (baseline)", n).await;
    for hook in &hooks {
        bench_hook(&client, &cms, &names, hook, &bundle, &metrics, n).await;
    }
    shutdown.cancel();
    let _ = serving.await;
}

/// Registers the configuration of `served`'s path, injects `bundle`, measures, checks the
/// fates and removes the configuration.
async fn bench_hook(
    client: &kube::Client,
    cms: &Api<ConfigMap>,
    names: &Arc<AtomicUsize>,
    served: &Served,
    bundle: &str,
    metrics: &HookMetrics,
    n: usize,
) {
    let Served {
        case,
        admitter,
        seen,
    } = served;
    let name = format!("bench{}", case.path.replace('/', "-"));
    let webhook = admission::webhook(&format!("{name}.bench.informant.dev"), SERVICE, &case.path);
    admission::register(client, case.type_, &name, &[webhook]).await;
    let targets = match case.type_ {
        AdmissionType::Validating => InjectTargets {
            validating: vec![name.clone()],
            ..InjectTargets::default()
        },
        AdmissionType::Mutating => InjectTargets {
            mutating: vec![name.clone()],
            ..InjectTargets::default()
        },
    };
    CaInjector::new(client.clone(), targets)
        .inject(bundle)
        .await
        .expect("the caBundle injected");
    // The first create starts a persistent hook's process: not a round trip.
    create(cms, names).await;
    let sent = 1 + measure(cms, names, &case.label, n).await;
    if case.type_ == AdmissionType::Mutating {
        let last = format!("cm-{}", names.load(Ordering::Relaxed) - 1);
        let stored = cms.get(&last).await.expect("the last object");
        let labels = stored.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get("admitted").map(String::as_str),
            Some("yes"),
            "the mutating hook's change is stored"
        );
    }
    let seen = seen.load(Ordering::Relaxed);
    let (fates, total) = admission::fates(metrics, admitter, "CREATE");
    println!("  fates: {fates}; sum {total} = reviews received {seen} = creates sent {sent}");
    assert_eq!(
        (total, seen),
        (sent, sent),
        "{}: every create is one review and one fate",
        case.label
    );
    // The same decisions without the API server and its HTTPS call: the hook's share.
    let review = review();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        admitter.decide(&review).await.expect("a review");
        samples.push(started.elapsed());
    }
    let (p50, p99) = percentiles(samples);
    println!("  the Admitter alone (in process, no HTTPS): decide p50 {p50:.2?}, p99 {p99:.2?}");
    admission::unregister(client, case.type_, &name).await;
    admitter.stop().await;
}
