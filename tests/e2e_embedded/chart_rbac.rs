//! The Helm chart's RBAC, run for real: the chart rendered by Helm's own engine
//! ([`crate::chart`]), its CRDs, `ServiceAccount`, Roles, bindings and `CacheConfig` created on
//! the embedded API server with RBAC on, and `informant run` started with exactly the arguments
//! (and environment) of the chart's Deployment, holding the `ServiceAccount`'s token from
//! `TokenRequest` — for four sets of values that together render every kind of rule the chart
//! has ([`Case`]), sharding and the admission webhook endpoint included.
//!
//! **Enough**: the manager becomes ready, writes its status, holds (renews) its Lease, records
//! Events (created, then patched by deduplication: the hooks', and `ConfigReloaded` after two
//! edits), and a hook `Controller` (with `finalize: true`) applies a child, holds its object and
//! itself with finalizers and releases them when deleted; sharded, it holds its member Lease
//! and deletes it when stopped; its secure `/metrics` (the chart's default) answers a scrape
//! with a token bound to the chart's `metrics-reader` (the manager reviewing the token and the
//! access with the API server), 401 without a token and 403 to a token without the grant;
//! serving admission hooks ([`Case::Webhook`]), it makes its certificates' Secret, creates both
//! webhook configurations with the bundle, which the embedded server then calls (a Secret
//! denied with the hook's message, another defaulted), writes the bundle into the injected
//! CRD, updates the configurations when a hook changes, deletes them when the hooks are gone,
//! and replaces a garbled Secret; the server refuses none of its requests.
//!
//! **No more than enough**: for every permission the chart renders (each verb of each resource
//! of each rule), a run without it must show the server refusing a request that permission
//! allowed, and the refusal where a user looks (the `CacheConfig`'s conditions,
//! `/readyz/permissions` or `/readyz/informers`, an Event, a `Controller`'s status, or a log
//! line). A permission no request needed is named as dead weight.
//!
//! Ignored by a plain `cargo test` (it needs Python with helm-python-sdk, which `scripts/test`
//! installs into `target/tools` and names with `INFORMANT_PYTHON`); run with
//! `--include-ignored`, a missing Python or module is a failure, never a pass.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use futures::future::BoxFuture;
use informant::apiserver::{Refusal, TestServer};
use informant::config::CacheConfig;
use informant::hooks::Controller;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::chart::{
    Case, Grant, HOOK, NAMESPACE, RELEASE, SCRAPER, SHOP, WEBHOOK_SERVICE, free_port, grants,
    python, refused_by_absence_of, render, root, scraper_objects, without,
};
use crate::chart_webhook as webhook;

/// How long a run waits for each step.
const WAIT: Duration = Duration::from_secs(20);

/// Polls `check` every 20 ms until it holds or `limit` passes; whether it held.
async fn until<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What every run of a case shares: the rendered chart, the Deployment's arguments and
/// environment, the hook.
struct Scenario {
    case: Case,
    python: PathBuf,
    dir: tempfile::TempDir,
    docs: Vec<Value>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    health_port: u16,
    metrics_port: u16,
    webhook_port: u16,
}

impl Scenario {
    /// `case`'s chart, rendered with `extra` rules in `rbac.extraRules`.
    fn new(case: Case, extra: &[Value]) -> Self {
        let python = python();
        let health_port = free_port();
        let metrics_port = free_port();
        let webhook_port = free_port();
        let docs = render(
            &python,
            &case.values((metrics_port, health_port, webhook_port), extra, &python),
        );
        let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<String> = serde_json::from_value(container["args"].clone()).unwrap();
        let env = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                // The downward API's pod name, as the kubelet would fill it in.
                let value = if e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name" {
                    crate::chart::POD_NAME
                } else {
                    e["value"].as_str().unwrap()
                };
                (e["name"].as_str().unwrap().to_owned(), value.to_owned())
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("hook.py"), HOOK).unwrap();
        Self {
            case,
            python,
            dir,
            docs,
            args,
            env,
            health_port,
            metrics_port,
            webhook_port,
        }
    }

    fn health(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.health_port))
    }

    fn metrics(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.metrics_port))
    }

    /// A fresh server holding `docs` (those of the chart's objects an API server without
    /// workloads serves), the CRDs, the hook's `Controller`s and their parents; then `informant
    /// run` as the chart's Deployment runs it.
    async fn start(&self, docs: &[Value], run: usize) -> Running {
        let server = TestServer::start_with_rbac().await.unwrap();
        let handle = server.handle();
        // The chart's webhook Service, which the embedded server has no network to reach.
        handle.resolve_service(
            NAMESPACE,
            WEBHOOK_SERVICE,
            443,
            SocketAddr::from(([127, 0, 0, 1], self.webhook_port)),
        );
        for crd in std::fs::read_dir(root().join("charts/informant/crds")).unwrap() {
            let text = std::fs::read_to_string(crd.unwrap().path()).unwrap();
            for object in informant::apiserver::parse_yaml(&text).unwrap() {
                handle.create(object).unwrap();
            }
        }
        let kinds = [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "CacheConfig",
        ];
        let chart_objects = docs
            .iter()
            .filter(|d| kinds.iter().any(|k| d["kind"] == *k));
        let hook = self.dir.path().join("hook.py");
        for object in self
            .case
            .namespaces()
            .into_iter()
            .chain(chart_objects.cloned())
            .chain(self.case.objects(&self.python, &hook))
            .chain(scraper_objects())
        {
            handle.create(object).unwrap();
        }
        let token = server.token(NAMESPACE, RELEASE).await.unwrap();
        let scraper_token = server.token(NAMESPACE, SCRAPER).await.unwrap();
        let kubeconfig = self.dir.path().join(format!("kubeconfig-{run}"));
        let yaml = informant::yaml::to_string(&handle.kubeconfig_with_token(Some(&token)));
        std::fs::write(&kubeconfig, yaml.unwrap()).unwrap();
        let log = self.dir.path().join(format!("manager-{run}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_informant"))
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let admin = server.client().await.unwrap();
        Running {
            server,
            admin,
            child: tokio::sync::Mutex::new(child),
            log,
            case: self.case,
            metrics: self.metrics(),
            scraper_token,
            manager_token: token,
        }
    }
}

/// One run: the server, the administrator's client, the manager process and its log.
struct Running {
    server: TestServer,
    admin: Client,
    child: tokio::sync::Mutex<Child>,
    log: PathBuf,
    case: Case,
    /// The secure `/metrics` listener.
    metrics: SocketAddr,
    /// A token of the scraper's account, bound to `metrics-reader`.
    scraper_token: String,
    /// The manager's own token (not bound to `metrics-reader`).
    manager_token: String,
}

/// The largest count of the Events with `reason` in `namespace` (a core `count` or an
/// `events.k8s.io` series' count).
async fn event_count(admin: &Client, namespace: &str, reason: &str) -> i32 {
    event_counts(admin, namespace, reason)
        .await
        .into_iter()
        .max()
        .unwrap_or(0)
}

/// How many times an Event with `reason` was recorded in `namespace`: the counts of all its
/// Events added up (two occurrences with different messages are two Events).
async fn event_total(admin: &Client, namespace: &str, reason: &str) -> i32 {
    event_counts(admin, namespace, reason)
        .await
        .into_iter()
        .sum()
}

/// The count of each Event with `reason` in `namespace`.
async fn event_counts(admin: &Client, namespace: &str, reason: &str) -> Vec<i32> {
    Api::<Event>::namespaced(admin.clone(), namespace)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| {
            let series = e.series.as_ref().and_then(|s| s.count).unwrap_or(0);
            e.count.unwrap_or(1).max(series)
        })
        .collect()
}

impl Running {
    fn refusals(&self) -> Vec<Refusal> {
        self.server
            .handle()
            .refusals()
            .into_iter()
            .filter(|r| r.user == crate::chart::ACCOUNT)
            .collect()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the hooks did their work: the child exists, the parent carries the
    /// Controller's finalizer, the hooks' Events were recorded twice (created, then patched).
    async fn reconciled(&self) -> bool {
        let child = Api::<ConfigMap>::namespaced(self.admin.clone(), SHOP)
            .get_opt("p-child")
            .await
            .unwrap();
        let parent = Api::<Secret>::namespaced(self.admin.clone(), SHOP)
            .get("p")
            .await
            .unwrap();
        let held = parent
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f.starts_with("hooks.informant.dev/"));
        let namespace_seen = self.case != Case::Namespaced
            || event_count(&self.admin, "default", "NamespaceSeen").await >= 2;
        child.is_some()
            && held
            && event_count(&self.admin, SHOP, "ChildApplied").await >= 2
            && namespace_seen
    }

    /// Edits the `CacheConfig` (the `ConfigMap` label selector) and waits until the manager
    /// recorded `ConfigReloaded` `times` times or `stop` holds. Counted over every such Event:
    /// the two reloads' summaries may differ (an informer that a read in flight held past the
    /// reload's sweep is stopped by the next sweep, not counted in the summary), and two
    /// messages are two Events rather than one patched.
    async fn reload(&self, times: i32, stop: &dyn Fn() -> bool) -> bool {
        let configs: Api<CacheConfig> = Api::namespaced(self.admin.clone(), NAMESPACE);
        let mut config = configs.get(RELEASE).await.unwrap();
        if let Some(first) = config.spec.by_object.as_mut().and_then(|b| b.first_mut()) {
            first.label_selector = Some(format!("edit!={times}"));
        }
        configs
            .patch(
                RELEASE,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": config.spec})),
            )
            .await
            .unwrap();
        until(WAIT, || async {
            stop() || event_total(&self.admin, NAMESPACE, "ConfigReloaded").await >= times
        })
        .await
    }

    async fn delete_controllers(&self) {
        let controllers: Api<Controller> = Api::namespaced(self.admin.clone(), NAMESPACE);
        controllers
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
            .unwrap();
    }

    /// Whether the deleted `Controller`s are gone and the parent released.
    async fn released(&self) -> bool {
        let parent = Api::<Secret>::namespaced(self.admin.clone(), SHOP)
            .get("p")
            .await
            .unwrap();
        let controllers: Api<Controller> = Api::namespaced(self.admin.clone(), NAMESPACE);
        let gone = controllers
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty();
        gone && parent.metadata.finalizers.unwrap_or_default().is_empty()
    }

    /// Whether the Lease was renewed since it was acquired.
    async fn renewed(&self) -> bool {
        let leases: Api<Lease> = Api::namespaced(self.admin.clone(), NAMESPACE);
        let Some(spec) = leases.get_opt(RELEASE).await.unwrap().and_then(|l| l.spec) else {
            return false;
        };
        spec.holder_identity.is_some_and(|h| !h.is_empty())
            && spec.renew_time.map(|t| t.0) > spec.acquire_time.map(|t| t.0)
    }

    /// The member Lease of the ring the chart names (`informant.dev/ring=<release>`), if any.
    async fn member_lease(&self) -> Option<Lease> {
        let leases: Api<Lease> = Api::namespaced(self.admin.clone(), NAMESPACE);
        let ring = format!("informant.dev/ring={RELEASE}");
        leases
            .list(&ListParams::default().labels(&ring))
            .await
            .unwrap()
            .items
            .into_iter()
            .next()
    }

    /// Whether the member Lease is held by the pod's name and was renewed since it was
    /// created.
    async fn member_renewed(&self) -> bool {
        let Some(spec) = self.member_lease().await.and_then(|l| l.spec) else {
            return false;
        };
        spec.holder_identity.as_deref() == Some(crate::chart::POD_NAME)
            && spec.renew_time.map(|t| t.0) > spec.acquire_time.map(|t| t.0)
    }

    /// Stops the manager as the kubelet does (SIGTERM) and waits until it exits.
    async fn terminate(&self) {
        let mut child = self.child.lock().await;
        if let Some(pid) = child.id() {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
        }
        let _ = tokio::time::timeout(WAIT, child.wait()).await;
    }

    /// Whether the manager is ready and its `CacheConfig` says `Ready=True`.
    async fn ready(&self, health: SocketAddr) -> bool {
        let configs: Api<CacheConfig> = Api::namespaced(self.admin.clone(), NAMESPACE);
        let ready = configs.get(RELEASE).await.unwrap().status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        ready
            && tokio::net::TcpStream::connect(health).await.is_ok()
            && crate::support::http_get(health, "/readyz").await.0 == 200
    }

    /// The status code of a scrape of the secure `/metrics` with `token`, and its body; `None`
    /// while nothing answers HTTPS there.
    async fn scrape(&self, token: Option<&str>) -> Option<(u16, String)> {
        crate::support::https::get(self.metrics, "/metrics", token)
            .await
            .ok()
            .map(|r| (r.code, r.body))
    }

    /// Whether a scrape with the scraper's token got the metrics.
    async fn scraped(&self) -> bool {
        self.scrape(Some(&self.scraper_token))
            .await
            .is_some_and(|(code, body)| code == 200 && body.contains("informant_"))
    }

    /// Whether the manager wrote a status (ready or not).
    async fn started(&self) -> bool {
        let configs: Api<CacheConfig> = Api::namespaced(self.admin.clone(), NAMESPACE);
        let config = configs.get(RELEASE).await.unwrap();
        config.status.is_some_and(|s| !s.conditions.is_empty())
    }

    /// Drives the scenario, step by step, until `stop` holds: a status written, the hooks'
    /// work, two config edits, the `Controller`s' deletion and release, a renewal of the
    /// Lease. Each step that does not happen within [`WAIT`] is named (the rest are still
    /// driven).
    async fn drive(&self, stop: &dyn Fn() -> bool) -> Vec<&'static str> {
        let mut missed = Vec::new();
        if !until(WAIT, || async { stop() || self.started().await }).await {
            missed.push("a status written");
        }
        if stop() {
            return missed;
        }
        if !until(WAIT, || async { stop() || self.scraped().await }).await {
            missed.push("a scrape of the secure /metrics with a metrics-reader token");
        }
        if stop() {
            return missed;
        }
        if self.case == Case::Webhook {
            missed.extend(self.serve_admission(stop).await);
            if stop() {
                return missed;
            }
        }
        if !until(WAIT, || async { stop() || self.reconciled().await }).await {
            missed.push("the hooks' child, finalizer and Events (created then patched)");
        }
        for times in 1..=2 {
            if stop() {
                return missed;
            }
            if !self.reload(times, stop).await {
                missed.push("ConfigReloaded recorded twice");
            }
        }
        if stop() {
            return missed;
        }
        self.delete_controllers().await;
        if !until(WAIT, || async { stop() || self.released().await }).await {
            missed.push("the deleted Controllers' release");
        }
        if stop() {
            return missed;
        }
        if self.case == Case::Webhook
            && !until(WAIT, || async {
                stop() || webhook::configurations_gone(&self.admin).await
            })
            .await
        {
            missed.push("the webhook configurations deleted once no hook is declared");
        }
        if stop() {
            return missed;
        }
        if !until(WAIT, || async { stop() || self.renewed().await }).await {
            missed.push("the Lease renewed");
        }
        if self.case == Case::Webhook && !stop() {
            // Last: the leader looks at the Secret once a resync, so this step is the slow one.
            webhook::garble_secret(&self.admin).await;
            if !until(webhook::RESYNC_WAIT, || async {
                stop() || webhook::secret_replaced(&self.admin).await
            })
            .await
            {
                missed.push("the garbled certificates' Secret replaced by the leader");
            }
        }
        if self.case != Case::Sharded || stop() {
            return missed;
        }
        if !until(WAIT, || async { stop() || self.member_renewed().await }).await {
            missed.push("the member Lease held by the pod's name and renewed");
        }
        if stop() {
            return missed;
        }
        self.terminate().await;
        if !until(WAIT, || async {
            stop() || self.member_lease().await.is_none()
        })
        .await
        {
            missed.push("the member Lease deleted at a graceful stop");
        }
        missed
    }

    /// The admission steps of [`Case::Webhook`]: the certificates and both configurations with
    /// the bundle, a Secret denied and another defaulted through them, the CRD's bundle, and
    /// the configurations updated after a hook changes. Each step missed is named.
    async fn serve_admission(&self, stop: &dyn Fn() -> bool) -> Vec<&'static str> {
        type Check = for<'a> fn(&'a Client) -> BoxFuture<'a, bool>;
        let admin = &self.admin;
        let mut missed = Vec::new();
        let steps: [(&'static str, Check); 4] = [
            (
                "the certificates' Secret and both webhook configurations with the bundle",
                |admin| Box::pin(webhook::certificates_and_configurations(admin)),
            ),
            (
                "a Secret denied with the validating hook's message",
                |admin| Box::pin(webhook::denied(admin)),
            ),
            ("a Secret labelled by the mutating hook", |admin| {
                Box::pin(webhook::defaulted(admin))
            }),
            ("the bundle written into the injected CRD", |admin| {
                Box::pin(webhook::crd_injected(admin))
            }),
        ];
        for (step, check) in steps {
            if stop() {
                return missed;
            }
            if !until(WAIT, || async { stop() || check(admin).await }).await {
                missed.push(step);
            }
        }
        if stop() {
            return missed;
        }
        webhook::change_hooks(admin).await;
        if !until(WAIT, || async {
            stop() || webhook::hooks_changed(admin).await
        })
        .await
        {
            missed.push("the webhook configurations updated after a hook changed");
        }
        missed
    }

    /// Everything a user reads: the manager's log, the `CacheConfig`'s and `Controller`s'
    /// status, every Event, `/readyz/permissions` and `/readyz/informers`.
    async fn surfaces(&self, health: SocketAddr) -> String {
        let mut text = self.log();
        let configs: Api<CacheConfig> = Api::namespaced(self.admin.clone(), NAMESPACE);
        for config in configs.list(&ListParams::default()).await.unwrap() {
            text.push_str(&serde_json::to_string(&config.status).unwrap());
        }
        let controllers: Api<Controller> = Api::namespaced(self.admin.clone(), NAMESPACE);
        for controller in controllers.list(&ListParams::default()).await.unwrap() {
            text.push_str(&serde_json::to_string(&controller.status).unwrap());
        }
        let events = Api::<Event>::all(self.admin.clone())
            .list(&ListParams::default())
            .await
            .unwrap();
        for event in events {
            text.push_str(event.message.as_deref().unwrap_or_default());
            text.push('\n');
        }
        for path in ["/readyz/permissions", "/readyz/informers"] {
            if tokio::net::TcpStream::connect(health).await.is_ok() {
                text.push_str(&crate::support::http_get(health, path).await.1);
            }
        }
        text
    }

    async fn stop(self) {
        let mut child = self.child.into_inner();
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

/// The manager with every permission the chart renders: every step happens, nothing refused.
async fn everything_works(scenario: &Scenario) {
    let running = scenario.start(&scenario.docs, 0).await;
    let ready = until(WAIT, || running.ready(scenario.health())).await;
    assert!(
        ready,
        "{:?}: the manager is not ready\n{}",
        scenario.case,
        running.log()
    );
    // Before the drive: a sharded drive ends by stopping the manager.
    assert_eq!(
        running.scrape(None).await.map(|(code, _)| code),
        Some(401),
        "{:?}: a scrape without a token",
        scenario.case
    );
    let manager_token = running.manager_token.clone();
    assert_eq!(
        running
            .scrape(Some(&manager_token))
            .await
            .map(|(code, _)| code),
        Some(403),
        "{:?}: a scrape with a token not bound to metrics-reader",
        scenario.case
    );
    let missed = running.drive(&|| false).await;
    assert!(
        missed.is_empty(),
        "{:?}: {missed:?} did not happen\n{}",
        scenario.case,
        running.log()
    );

    let refused = running.refusals();
    assert!(
        refused.is_empty(),
        "{:?}: requests refused: {refused:#?}\n{}",
        scenario.case,
        running.log()
    );
    running.stop().await;
}

/// What a run without `grant` showed: `None` when nothing was refused (the permission is dead
/// weight), else whether a user sees the refusal.
async fn without_grant(
    scenario: &Scenario,
    grant: &Grant,
    run: usize,
) -> Option<Result<(), String>> {
    let docs = without(&scenario.docs, grant);
    let running = scenario.start(&docs, run).await;
    let refused = || {
        running
            .refusals()
            .into_iter()
            .find(|r| refused_by_absence_of(r, grant))
    };
    running.drive(&|| refused().is_some()).await;
    let outcome = match refused() {
        None => None,
        Some(refusal) => {
            let wanted = [refusal.message.clone(), grant.permission.to_string()];
            let health = scenario.health();
            let shown = until(WAIT, || async {
                let text = running.surfaces(health).await;
                wanted.iter().any(|w| text.contains(w.as_str()))
            })
            .await;
            Some(if shown {
                Ok(())
            } else {
                Err(format!(
                    "{grant}: refused ({}) but shown nowhere a user looks",
                    refusal.message
                ))
            })
        }
    };
    running.stop().await;
    outcome
}

/// Every permission of `case`'s chart removed in turn: the dead ones and the unseen ones.
async fn least(case: Case) {
    let scenario = Scenario::new(case, &[]);
    everything_works(&scenario).await;
    let all = grants(&scenario.docs);
    let mut dead = Vec::new();
    let mut unseen = Vec::new();
    for (run, grant) in all.iter().enumerate() {
        match without_grant(&scenario, grant, run + 1).await {
            None => dead.push(grant.to_string()),
            Some(Err(message)) => unseen.push(message),
            Some(Ok(())) => println!("{case:?}: needed and shown: {grant}"),
        }
    }
    assert!(
        dead.is_empty() && unseen.is_empty(),
        "{case:?}: dead weight (no request needed it): {dead:#?}\n\
         not shown where a user looks: {unseen:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs Python with helm-python-sdk (scripts/test installs it); run with --include-ignored"]
async fn the_charts_cluster_wide_rbac_is_enough_and_no_more_than_enough() {
    least(Case::ClusterWide).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs Python with helm-python-sdk (scripts/test installs it); run with --include-ignored"]
async fn the_charts_namespaced_rbac_is_enough_and_no_more_than_enough() {
    least(Case::Namespaced).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs Python with helm-python-sdk (scripts/test installs it); run with --include-ignored"]
async fn the_charts_sharded_rbac_is_enough_and_no_more_than_enough() {
    least(Case::Sharded).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs Python with helm-python-sdk (scripts/test installs it); run with --include-ignored"]
async fn the_charts_webhook_rbac_is_enough_and_no_more_than_enough() {
    least(Case::Webhook).await;
}

/// The check above can fail: a rule the manager never uses (`get pods` in `shop`, added through
/// `rbac.extraRules`) is found to be dead weight, while a needed one is not.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs Python with helm-python-sdk (scripts/test installs it); run with --include-ignored"]
async fn a_permission_no_request_needs_is_named_dead_weight() {
    let unused_rule = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
    let scenario = Scenario::new(Case::ClusterWide, &[unused_rule]);
    let all = grants(&scenario.docs);
    let unused = all
        .iter()
        .find(|g| g.permission.resource == "pods")
        .expect("the extra rule is rendered");
    assert_eq!(unused.permission.to_string(), "get pods in namespace shop");
    assert!(without_grant(&scenario, unused, 1).await.is_none());
    let needed = all
        .iter()
        .find(|g| g.permission.resource == "configmaps" && g.permission.verb == "patch")
        .unwrap();
    assert_eq!(without_grant(&scenario, needed, 2).await, Some(Ok(())));
}
