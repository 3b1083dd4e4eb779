//! The hook policy and what a hook may answer, through the manager (`--cache-config`, the
//! `Controller` resources of its namespace, their status written): a `Controller` naming a
//! command, URL or kind outside the policy never runs, with `Ready=False` and a Warning Event
//! naming the rule, while one inside runs; an HTTPS webhook is called when its certificate
//! chains to the declared `caBundle` (presenting the client certificate of a Secret) and
//! refused when it does not; and an answer too large, with an impossible
//! `requeueAfterSeconds` or a wrong type fails with a named error in the status while the
//! manager and the other controllers carry on.

use crate::support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use informant::hooks::{Controller, ControllerStatus, Policy};
use informant::manager::{ConfigSource, Manager, Options};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use support::eventually;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_rustls::rustls;
use tokio_util::sync::CancellationToken;

/// An exec hook: appends a line to the file named by its first argument (its marker), then
/// answers `{}`.
const MARKING_HOOK: &str = "#!/bin/sh\ncat >/dev/null\necho called >>\"$1\"\nprintf '{}'\n";

/// A manager watching the `Controller`s of `default` under `policy`.
struct Running {
    server: support::Server,
    client: kube::Client,
    shutdown: CancellationToken,
    run: tokio::task::JoinHandle<Result<(), informant::manager::Error>>,
}

impl Running {
    async fn start(policy: Policy) -> Self {
        let (server, client) = support::server_with_informant_crds().await;
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
        informant::hooks::add_to_manager_with(&mut manager, policy);
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run(shutdown.clone()));
        server
            .handle()
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": "default", "name": "subject"}}))
            .unwrap();
        Self {
            server,
            client,
            shutdown,
            run,
        }
    }

    /// Creates the `Controller` `name` reconciling `ConfigMap`s with `hook` (and `extra`
    /// spec lines, indented two spaces).
    async fn controller(&self, name: &str, hook: &serde_json::Value, extra: &str) {
        let yaml = format!(
            "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: {name}, namespace: default}}
spec:
  for: {{apiVersion: v1, kind: ConfigMap}}
  hook: {hook}
{extra}"
        );
        let controller: Controller = serde_yaml::from_str(&yaml).unwrap();
        self.controllers()
            .create(&PostParams::default(), &controller)
            .await
            .unwrap();
    }

    fn controllers(&self) -> Api<Controller> {
        Api::namespaced(self.client.clone(), "default")
    }

    async fn status(&self, name: &str) -> ControllerStatus {
        self.controllers()
            .get(name)
            .await
            .unwrap()
            .status
            .unwrap_or_default()
    }

    /// Waits until the `Ready` condition of `name` is `status` with `reason`; its message.
    async fn ready(&self, name: &str, status: &str, reason: &str) -> String {
        let ready = || async {
            let s = self.status(name).await;
            s.conditions
                .into_iter()
                .find(|c| c.type_ == "Ready" && c.status == status && c.reason == reason)
        };
        eventually(&format!("{name} Ready={status} ({reason})"), || async {
            ready().await.is_some()
        })
        .await;
        ready().await.map(|c| c.message).unwrap_or_default()
    }

    /// Waits until the `lastError` of `name` contains `text`, and the controller has failed
    /// at least twice (retried: its task lives on).
    async fn failed_with(&self, name: &str, text: &str) {
        eventually(&format!("{name} failing with {text:?}"), || async {
            let s = self.status(name).await;
            s.failures.unwrap_or(0) >= 2
                && s.last_error.as_deref().is_some_and(|e| e.contains(text))
        })
        .await;
    }

    async fn warnings(&self, reason: &str, controller: &str) -> Vec<Event> {
        Api::<Event>::namespaced(self.client.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.type_.as_deref() == Some("Warning")
                    && e.involved_object.kind.as_deref() == Some("Controller")
                    && e.involved_object.name.as_deref() == Some(controller)
            })
            .collect()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        support::stopped(self.run).await;
        drop(self.server);
    }
}

fn script(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A plain HTTP webhook answering `{}`; the number of requests it got.
async fn counting_webhook(shutdown: CancellationToken) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { return };
                    seen.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(answer(stream));
                }
            }
        }
    });
    (url, count)
}

/// Reads one HTTP/1.1 request from `stream` and answers `200 {}`, closing the connection.
async fn answer<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut stream: S) {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let Ok(n) = stream.read(&mut buffer).await else {
            return;
        };
        if n == 0 {
            return;
        }
        seen.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&seen);
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            if seen.len() >= end + 4 + length {
                break;
            }
        }
    }
    let _ = stream
        .write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\
              Connection: close\r\n\r\n{}",
        )
        .await;
    let _ = stream.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_outside_the_policy_never_runs_and_says_which_rule_one_inside_runs() {
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("allowed/hook.sh");
    let other = dir.path().join("other/hook.sh");
    script(&allowed, MARKING_HOOK);
    script(&other, MARKING_HOOK);
    let policy = Policy::restricted().allow_exec(
        format!("{}/", dir.path().join("allowed").display())
            .parse()
            .unwrap(),
    );
    let env = Running::start(policy).await;
    let (url, webhook_calls) = counting_webhook(env.shutdown.clone()).await;
    let marker = |name: &str| dir.path().join(format!("{name}.called"));
    let exec = |program: &Path, name: &str| json!({"exec": {"command": [program, marker(name)]}});

    env.controller("inside", &exec(&allowed, "inside"), "")
        .await;
    env.controller("outside", &exec(&other, "outside"), "")
        .await;
    env.controller("relative", &json!({"exec": {"command": ["sh", "-c", format!("touch {}", marker("relative").display())]}}), "")
        .await;
    env.controller("webhook", &json!({"webhook": {"url": url}}), "")
        .await;
    env.controller(
        "secrets",
        &exec(&allowed, "secrets"),
        "  owns: [{apiVersion: v1, kind: Secret}]\n",
    )
    .await;

    env.ready("inside", "True", "Running").await;
    eventually("the allowed hook called", || async {
        marker("inside").exists()
    })
    .await;

    let outside = env.ready("outside", "False", "HookNotAllowed").await;
    assert!(
        outside.contains(&format!(
            "spec.hook.exec.command {:?} is not in --hook-allow-exec",
            other.display().to_string()
        )),
        "{outside}"
    );
    let relative = env.ready("relative", "False", "HookNotAllowed").await;
    assert!(
        relative.contains("\"sh\" is not an absolute path"),
        "{relative}"
    );
    let webhook = env.ready("webhook", "False", "HookNotAllowed").await;
    assert!(
        webhook.contains("plain http:// is not allowed without --hook-allow-http"),
        "{webhook}"
    );
    let secrets = env.ready("secrets", "False", "HookNotAllowed").await;
    assert!(
        secrets.contains("spec.owns[0]: v1 Secret objects are not sent to hooks unless the manager runs with --hook-allow-secrets"),
        "{secrets}"
    );
    for name in ["outside", "relative", "webhook", "secrets"] {
        eventually(
            &format!("a HookNotAllowed Warning Event on {name}"),
            || async {
                env.warnings("HookNotAllowed", name).await.iter().any(|e| {
                    e.message
                        .as_deref()
                        .is_some_and(|m| m.contains("hook policy refuses"))
                })
            },
        )
        .await;
    }
    // The allowed controller was called meanwhile; none of the refused ones ever was.
    for name in ["outside", "relative", "secrets"] {
        assert!(!marker(name).exists(), "{name} was called");
    }
    assert_eq!(
        webhook_calls.load(Ordering::SeqCst),
        0,
        "the webhook was called"
    );
    assert_eq!(env.status("outside").await.reconciles, None);
    env.stop().await;
}

/// A CA, and a certificate it signed for `127.0.0.1` (PEM certificate, PEM key).
struct Authority {
    ca: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl Authority {
    fn new(name: &str) -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let ca = rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap())
            .unwrap();
        Self { ca }
    }

    fn bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.ca.pem())
    }

    fn issue(&self, name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .signed_by(&key, &self.ca)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// An HTTPS webhook on `127.0.0.1` presenting a certificate of `server_ca`, requiring a
/// client certificate of `client_ca` if any; its URL and the number of requests it answered.
async fn tls_webhook(
    server_ca: &Authority,
    client_ca: Option<&Authority>,
    shutdown: CancellationToken,
) -> (String, Arc<AtomicUsize>) {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let (cert, key) = server_ca.issue("127.0.0.1");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(CertificateDer::from_pem_slice(ca.ca.pem().as_bytes()).unwrap())
                .unwrap();
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/sync", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let answered = Arc::clone(&count);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { return };
                    let acceptor = acceptor.clone();
                    let answered = Arc::clone(&answered);
                    tokio::spawn(async move {
                        if let Ok(tls) = acceptor.accept(stream).await {
                            answered.fetch_add(1, Ordering::SeqCst);
                            answer(tls).await;
                        }
                    });
                }
            }
        }
    });
    (url, count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_webhook_is_called_with_its_private_ca_and_refused_with_another() {
    let (trusted, stranger, clients) = (
        Authority::new("hooks"),
        Authority::new("stranger"),
        Authority::new("clients"),
    );
    // The client certificate comes from a Secret: only under a policy that allows it
    // (`--hook-allow-secrets`).
    let policy = Policy::restricted()
        .allow_url("127.0.0.1".parse().unwrap())
        .allow_secrets(true);
    let env = Running::start(policy).await;
    let (url, good_calls) = tls_webhook(&trusted, None, env.shutdown.clone()).await;
    let (mutual_url, mutual_calls) =
        tls_webhook(&trusted, Some(&clients), env.shutdown.clone()).await;
    let (other_url, other_calls) = tls_webhook(&stranger, None, env.shutdown.clone()).await;
    let (crt, key) = clients.issue("informant");
    env.server
        .handle()
        .create(
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"namespace": "default", "name": "hook-client"},
            "data": {"tls.crt": base64::engine::general_purpose::STANDARD.encode(crt),
                     "tls.key": base64::engine::general_purpose::STANDARD.encode(key)}}),
        )
        .unwrap();

    let webhook = |url: &str| json!({"webhook": {"url": url, "caBundle": trusted.bundle()}});
    env.controller("private-ca", &webhook(&url), "").await;
    let mut mutual = webhook(&mutual_url);
    mutual["webhook"]["clientCertSecretRef"] = json!({"name": "hook-client"});
    env.controller("client-cert", &mutual, "").await;
    env.controller("other-ca", &webhook(&other_url), "").await;

    eventually("the webhook with the declared CA called", || async {
        good_calls.load(Ordering::SeqCst) >= 1
            && env.status("private-ca").await.reconciles.unwrap_or(0) >= 1
    })
    .await;
    eventually(
        "the webhook requiring a client certificate called",
        || async {
            mutual_calls.load(Ordering::SeqCst) >= 1
                && env.status("client-cert").await.reconciles.unwrap_or(0) >= 1
        },
    )
    .await;
    assert_eq!(env.status("private-ca").await.failures, Some(0));
    assert_eq!(env.status("client-cert").await.failures, Some(0));
    env.failed_with("other-ca", "invalid peer certificate: UnknownIssuer")
        .await;
    let error = env.status("other-ca").await.last_error.unwrap();
    assert!(
        error.contains(&format!("cannot call webhook {other_url}")),
        "{error}"
    );
    assert_eq!(
        other_calls.load(Ordering::SeqCst),
        0,
        "no request got through"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_answer_is_a_named_failure_in_the_status_and_the_manager_carries_on() {
    let env = Running::start(Policy::open()).await;
    let sh = |script: &str| json!({"exec": {"command": ["sh", "-c", format!("cat >/dev/null; {script}")]}});
    // 10 MiB, written in one go.
    env.controller("huge", &sh("head -c 10485760 /dev/zero | tr '\\0' ' '"), "")
        .await;
    env.controller("far", &sh("printf '{\"requeueAfterSeconds\": 1e20}'"), "")
        .await;
    env.controller(
        "negative",
        &sh("printf '{\"requeueAfterSeconds\": -1}'"),
        "",
    )
    .await;
    env.controller(
        "string",
        &sh("printf '{\"requeueAfterSeconds\": \"x\"}'"),
        "",
    )
    .await;
    env.controller("fine", &sh("printf '{\"requeueAfterSeconds\": 0.2}'"), "")
        .await;

    env.failed_with("huge", "hook response too large (over 4194304 bytes)")
        .await;
    env.failed_with(
        "far",
        "hook answer is invalid: requeueAfterSeconds: 100000000000000000000 is more than the \
         maximum; write a number of seconds from 0 (no requeue) to 31536000 (365 days)",
    )
    .await;
    env.failed_with("negative", "requeueAfterSeconds: -1 is negative")
        .await;
    env.failed_with(
        "string",
        "hook answer is not a hooks.informant.dev/v1 response: invalid type: string \"x\", \
         expected f64",
    )
    .await;
    // The manager and the good controller carry on: it keeps being called every 0.2 s.
    let before = env.status("fine").await.reconciles.unwrap_or(0);
    eventually("the good controller called again and again", || async {
        env.status("fine").await.reconciles.unwrap_or(0) >= before + 3
    })
    .await;
    assert_eq!(env.status("fine").await.failures, Some(0));
    assert!(!env.run.is_finished(), "the manager runs");
    for name in ["huge", "far", "negative", "string"] {
        let error = env.status(name).await.last_error.unwrap();
        assert!(error.len() < 1100, "{name}: a short error: {}", error.len());
    }
    env.stop().await;
}
