//! A whole certificate rotation of the managed webhook certificates under a steady request
//! rate: how many requests failed (the figure: 0). Prints what it measured; asserts nothing.
//!
//! Two replicas serve the managed Secret over HTTPS; a client sends 100 requests/s, each
//! trusting only the CA bundle the Secret's `ca.crt` holds at that moment (what the leader
//! injects as `caBundle`), verified at the leader's clock; the leader takes one rotation step
//! a second (the clock moved to each step's due time): four serving renewals, then a new CA
//! added, the serving certificate switched to it, and the old CA dropped.
//!
//! `cargo bench --bench webhook_rotation` (or `--profile dev`: the figure is a count, not a
//! speed).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use informant::apiserver::TestServer;
use informant::serving::managed::{Clock, ManagedCertificates, Settings, Step};
use informant::serving::{InjectTargets, WebhookCertificates, WebhookEndpoint, WebhookRouter};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::time_provider::TimeProvider;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_util::sync::CancellationToken;

const RATE: u32 = 100;

#[derive(Debug)]
struct SetClock(Mutex<SystemTime>);

impl Clock for SetClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl TimeProvider for SetClock {
    fn current_time(&self) -> Option<UnixTime> {
        Some(UnixTime::since_unix_epoch(
            self.now().duration_since(SystemTime::UNIX_EPOCH).ok()?,
        ))
    }
}

/// `GET /healthz` on `addr` trusting only `bundle`; whether it answered 200.
async fn request(addr: SocketAddr, bundle: &[u8], clock: Arc<SetClock>) -> Result<(), String> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(CertificateDer::pem_slice_iter(bundle).filter_map(Result::ok));
    let config = ClientConfig::builder_with_details(Arc::new(ring::default_provider()), clock)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("hooks.default.svc").map_err(|e| e.to_string())?;
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake: {e}"))?;
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: hooks\r\nConnection: close\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    let _ = tls.read_to_end(&mut raw).await;
    if raw.starts_with(b"HTTP/1.1 200") {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&raw).into_owned())
    }
}

#[tokio::main]
async fn main() {
    let server = TestServer::start().await.expect("the embedded API server");
    let client = server.client().await.expect("a client");
    let settings = Settings::new("hooks", "default");
    let clock = Arc::new(SetClock(Mutex::new(SystemTime::now())));
    let leader = ManagedCertificates::new(client.clone(), settings.clone())
        .expect("valid settings")
        .with_clock(clock.clone());
    leader.reconcile().await.expect("the Secret made");
    let shutdown = CancellationToken::new();
    let addrs = replicas(&client, &settings, &shutdown).await;
    let bundle = Arc::new(Mutex::new(Vec::new()));
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let read_bundle = || async {
        let secret = secrets.get("hooks-cert").await.expect("the Secret");
        secret.data.expect("data")["ca.crt"].0.clone()
    };
    *bundle.lock().unwrap_or_else(PoisonError::into_inner) = read_bundle().await;

    // The requests: one every 10 ms, each its own task, trusting the bundle of its moment.
    let stop = CancellationToken::new();
    let sender = {
        let (bundle, clock, stop, addrs) =
            (bundle.clone(), clock.clone(), stop.clone(), addrs.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1) / RATE);
            let mut tasks = Vec::new();
            let mut n = 0usize;
            while !stop.is_cancelled() {
                tick.tick().await;
                let trust = bundle
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                let (addr, clock) = (addrs[n % addrs.len()], clock.clone());
                n += 1;
                tasks.push(tokio::spawn(async move {
                    let started = Instant::now();
                    (request(addr, &trust, clock).await, started.elapsed())
                }));
            }
            let mut out = Vec::new();
            for task in tasks {
                out.push(task.await.expect("a request task"));
            }
            out
        })
    };

    // The leader: one step a second; the bundle the client trusts follows the Secret.
    let started = Instant::now();
    let mut steps = Vec::new();
    while !steps.contains(&Step::DropOldCas) {
        let done = leader.reconcile().await.expect("a step");
        if let Step::Keep { until } = done.step {
            *clock.0.lock().unwrap_or_else(PoisonError::into_inner) = until;
            continue;
        }
        steps.push(done.step);
        *bundle.lock().unwrap_or_else(PoisonError::into_inner) = read_bundle().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    stop.cancel();
    let results = sender.await.expect("the sender");
    shutdown.cancel();
    report(&results, started.elapsed(), &steps);
}

/// Two replicas serving the managed Secret (not leaders: the bench's leader alone writes),
/// once they serve it.
async fn replicas(
    client: &kube::Client,
    settings: &Settings,
    shutdown: &CancellationToken,
) -> Vec<SocketAddr> {
    let mut addrs = Vec::new();
    for _ in 0..2 {
        let endpoint = WebhookEndpoint::bind(
            client.clone(),
            SocketAddr::from(([127, 0, 0, 1], 0)),
            &WebhookCertificates::Managed(settings.clone()),
            InjectTargets::default(),
            WebhookRouter::new(),
        )
        .await
        .expect("bound");
        addrs.push(endpoint.local_addr());
        let mut ready = endpoint.ready();
        tokio::spawn(endpoint.run(watch::channel(false).1, shutdown.child_token()));
        ready.wait_for(|r| *r).await.expect("serving the Secret");
    }
    addrs
}

/// Prints the figures.
fn report(results: &[(Result<(), String>, Duration)], elapsed: Duration, steps: &[Step]) {
    let failed: Vec<&String> = results
        .iter()
        .filter_map(|(r, _)| r.as_ref().err())
        .collect();
    let mut latencies: Vec<Duration> = results.iter().map(|(_, d)| *d).collect();
    latencies.sort();
    let at = |q: f64| {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "an index into a short list"
        )]
        let i = ((latencies.len() as f64 - 1.0) * q).round() as usize;
        latencies.get(i).copied().unwrap_or_default()
    };
    println!(
        "rotation under {RATE} requests/s: {} requests in {:.1} s, {} failed; steps {:?}",
        results.len(),
        elapsed.as_secs_f64(),
        failed.len(),
        steps
    );
    println!(
        "request (connect + TLS handshake + GET /healthz): median {:?}, p99 {:?}",
        at(0.5),
        at(0.99)
    );
    for failure in failed.iter().take(5) {
        println!("failed: {failure}");
    }
}
