//! The Helm chart's RBAC, run for real: the chart rendered by Helm's own engine (helm-python-sdk,
//! as `charts/informant/tests/test_chart.py` renders it), its CRDs, `ServiceAccount`, Roles,
//! bindings and `CacheConfig` created on the embedded API server with RBAC on, and `informant run`
//! started with exactly the arguments (and environment) of the chart's Deployment, holding the
//! `ServiceAccount`'s token from `TokenRequest`.
//!
//! **Enough**: the manager becomes ready, writes its status, holds its Lease, records Events
//! (created, then patched by deduplication), and a hook `Controller` (with `finalize: true`)
//! applies a child, holds its object and itself with finalizers and releases them when
//! deleted; the server refuses none of its requests.
//!
//! **No more than enough**: for every permission the chart renders (each verb of each resource
//! of each rule), a run without it must show the server refusing a request that permission
//! allowed, and the refusal where a user looks (the `CacheConfig`'s conditions,
//! `/readyz/permissions` or `/readyz/informers`, a Warning Event, the `Controller`'s status, or a
//! log line). A permission no request needed is named as dead weight.
//!
//! Ignored by a plain `cargo test` (it needs Python with helm-python-sdk, which `scripts/test`
//! installs into `target/tools` and names with `INFORMANT_PYTHON`); run with
//! `--include-ignored`, a missing Python or module is a failure, never a pass.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use informant::apiserver::{Refusal, TestServer};
use informant::config::access::Permission;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret};
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

const RELEASE: &str = "informant";
const NAMESPACE: &str = "informant-system";
const SHOP: &str = "shop";
const ACCOUNT: &str = "system:serviceaccount:informant-system:informant";

/// How long a run waits for what it looks for.
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

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python that has helm-python-sdk: `INFORMANT_PYTHON`, else `target/tools`' (where
/// `scripts/test` installs it). Fails the test, saying how to get it, when there is none.
fn python() -> PathBuf {
    let python = std::env::var_os("INFORMANT_PYTHON").map_or_else(
        || root().join("target/tools/venv/bin/python"),
        PathBuf::from,
    );
    let found = std::process::Command::new(&python)
        .args(["-c", "import helm_python, yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{} cannot import helm_python: run scripts/test (it installs helm-python-sdk into \
         target/tools), or set INFORMANT_PYTHON to a Python that has it",
        python.display()
    );
    python
}

/// The chart rendered with `values` by Helm's engine: every manifest, `NOTES.txt` apart.
fn render(python: &Path, values: &Value) -> Vec<Value> {
    let script = "import json, sys, yaml, helm_python as helm\n\
        with helm.Chart.load(sys.argv[1]) as chart:\n\
        \x20   files = chart.render(json.loads(sys.argv[2]), name=sys.argv[3], namespace=sys.argv[4])\n\
        docs = [d for p, t in sorted(files.items()) if not p.endswith('NOTES.txt') for d in yaml.safe_load_all(t) if d]\n\
        json.dump(docs, sys.stdout)\n";
    let out = std::process::Command::new(python)
        .args([
            "-c",
            script,
            &root().join("charts/informant").display().to_string(),
            &values.to_string(),
            RELEASE,
            NAMESPACE,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rendering the chart failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One RBAC object's rules: its kind, namespace ("" for the `ClusterRole`) and name.
#[derive(Clone, Debug)]
struct Grant {
    kind: String,
    namespace: String,
    name: String,
    permission: Permission,
}

/// Every permission of the rendered `Role`s and `ClusterRole`s, one verb of one resource each.
fn grants(docs: &[Value]) -> Vec<Grant> {
    let mut out = Vec::new();
    for doc in docs
        .iter()
        .filter(|d| d["kind"] == "Role" || d["kind"] == "ClusterRole")
    {
        let namespace = doc["metadata"]["namespace"].as_str().unwrap_or_default();
        let rules: Vec<PolicyRule> = serde_json::from_value(doc["rules"].clone()).unwrap();
        let mut place = informant::config::rbac::Rules::default();
        if namespace.is_empty() {
            place.cluster = rules;
        } else {
            place.namespaces.insert(namespace.to_owned(), rules);
        }
        for permission in informant::config::access::permissions(&place) {
            out.push(Grant {
                kind: doc["kind"].as_str().unwrap().to_owned(),
                namespace: namespace.to_owned(),
                name: doc["metadata"]["name"].as_str().unwrap().to_owned(),
                permission,
            });
        }
    }
    out
}

/// The rendered documents with `removed` taken out of its `Role` or `ClusterRole` (whose
/// rules become one rule per remaining permission).
fn without(docs: &[Value], removed: &Grant) -> Vec<Value> {
    let all = grants(docs);
    docs.iter()
        .map(|doc| {
            let same = doc["kind"] == removed.kind.as_str()
                && doc["metadata"]["name"] == removed.name.as_str()
                && doc["metadata"]["namespace"].as_str().unwrap_or_default() == removed.namespace;
            if !same {
                return doc.clone();
            }
            let rules: Vec<Value> = all
                .iter()
                .filter(|g| {
                    g.kind == removed.kind
                        && g.namespace == removed.namespace
                        && g.permission != removed.permission
                })
                .map(|g| rule_of(&g.permission))
                .collect();
            let mut doc = doc.clone();
            doc["rules"] = Value::Array(rules);
            doc
        })
        .collect()
}

fn rule_of(p: &Permission) -> Value {
    let mut rule = match &p.url {
        Some(url) => json!({"nonResourceURLs": [url], "verbs": [p.verb]}),
        None => json!({"apiGroups": [p.group], "resources": [p.resource], "verbs": [p.verb]}),
    };
    if let Some(name) = &p.name {
        rule["resourceNames"] = json!([name]);
    }
    rule
}

/// Whether `refusal` is a request of the manager that `grant` would have allowed.
fn refused_by_absence_of(refusal: &Refusal, grant: &Grant) -> bool {
    let p = &grant.permission;
    let resource = if refusal.subresource.is_empty() {
        refusal.resource.clone()
    } else {
        format!("{}/{}", refusal.resource, refusal.subresource)
    };
    refusal.user == ACCOUNT
        && refusal.verb == p.verb
        && refusal.api_group == p.group
        && resource == p.resource
        && p.name.as_ref().is_none_or(|n| *n == refusal.name)
        && (grant.namespace.is_empty() || refusal.namespace == grant.namespace)
}

/// The hook: one child `ConfigMap` per parent, and the same Event twice (the second is a
/// deduplicated patch of the first).
const HOOK: &str = r#"import json, sys
request = json.load(sys.stdin)
name = request["object"]["metadata"]["name"]
if request.get("finalizing"):
    print(json.dumps({"finalized": True}))
    sys.exit(0)
event = {"type": "Normal", "reason": "ChildApplied", "message": "applied " + name + "-child"}
child = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name + "-child"},
         "data": {"parent": name}}
print(json.dumps({"children": [child], "events": [event, event]}))
"#;

/// What every run shares: the rendered chart, the Deployment's arguments and environment.
struct Scenario {
    python: PathBuf,
    dir: tempfile::TempDir,
    docs: Vec<Value>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    health_port: u16,
}

impl Scenario {
    /// The scenario's chart values, with `extra` rules added to its `rbac.extraRules`.
    fn new(extra: &[Value]) -> Self {
        let python = python();
        let health_port = free_port();
        let mut values = json!({
            "cacheConfig": {"spec": {
                "defaultNamespaces": {SHOP: {}},
                "byObject": [
                    {"apiVersion": "v1", "kind": "ConfigMap"},
                    {"apiVersion": "v1", "kind": "Secret", "namespaces": {}},
                ],
            }},
            "rbac": {"extraRules": [
                // The hook's children, applied with server-side apply.
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]},
                // The Controller's finalizer on its objects (finalize: true).
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["patch"]},
            ]},
            "metrics": {"port": free_port()},
            "health": {"port": health_port},
        });
        if let Some(rules) = values["rbac"]["extraRules"].as_array_mut() {
            rules.extend(extra.iter().cloned());
        }
        let docs = render(&python, &values);
        let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<String> = serde_json::from_value(container["args"].clone()).unwrap();
        let env: Vec<(String, String)> = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_owned(),
                    e["value"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("hook.py"), HOOK).unwrap();
        Self {
            python,
            dir,
            docs,
            args,
            env,
            health_port,
        }
    }

    fn health(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.health_port))
    }

    /// A fresh server holding `docs` (the chart's objects the API server serves), the CRDs, the
    /// hook's `Controller` and its parent; then `informant run` as the chart's Deployment runs
    /// it.
    async fn start(&self, docs: &[Value], run: usize) -> Running {
        let server = TestServer::start_with_rbac().await.unwrap();
        let handle = server.handle();
        for crd in std::fs::read_dir(root().join("charts/informant/crds")).unwrap() {
            let text = std::fs::read_to_string(crd.unwrap().path()).unwrap();
            for object in informant::apiserver::parse_yaml(&text).unwrap() {
                handle.create(object).unwrap();
            }
        }
        for namespace in [NAMESPACE, SHOP] {
            handle
                .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}))
                .unwrap();
        }
        let kinds = [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "CacheConfig",
        ];
        for doc in docs
            .iter()
            .filter(|d| kinds.iter().any(|k| d["kind"] == *k))
        {
            handle.create(doc.clone()).unwrap();
        }
        let hook = self.dir.path().join("hook.py");
        handle
            .create(json!({
                "apiVersion": "informant.dev/v1alpha1", "kind": "Controller",
                "metadata": {"name": "parents", "namespace": NAMESPACE},
                "spec": {
                    "for": {"apiVersion": "v1", "kind": "Secret", "labelSelector": "app=parent"},
                    "owns": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                    "hook": {"exec": {"command": [self.python.display().to_string(), hook.display().to_string()],
                                      "timeout": "10s"}},
                    "finalize": true,
                },
            }))
            .unwrap();
        handle
            .create(json!({"apiVersion": "v1", "kind": "Secret",
                           "metadata": {"name": "p", "namespace": SHOP, "labels": {"app": "parent"}}}))
            .unwrap();
        let token = server.token(NAMESPACE, RELEASE).await.unwrap();
        let kubeconfig = self.dir.path().join(format!("kubeconfig-{run}"));
        std::fs::write(
            &kubeconfig,
            informant::yaml::to_string(&handle.kubeconfig_with_token(Some(&token))).unwrap(),
        )
        .unwrap();
        let log = self.dir.path().join(format!("manager-{run}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_informant"))
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let admin = server.client().await.unwrap();
        Running {
            server,
            admin,
            child,
            log,
        }
    }
}

/// One run: the server, the administrator's client, the manager process and its log.
struct Running {
    server: TestServer,
    admin: Client,
    child: Child,
    log: PathBuf,
}

impl Running {
    fn refusals(&self) -> Vec<Refusal> {
        self.server
            .handle()
            .refusals()
            .into_iter()
            .filter(|r| r.user == ACCOUNT)
            .collect()
    }

    /// Whether the hook's child exists and the parent carries the Controller's finalizer.
    async fn reconciled(&self) -> bool {
        let child = Api::<ConfigMap>::namespaced(self.admin.clone(), SHOP)
            .get_opt("p-child")
            .await
            .unwrap();
        let parent = Api::<Secret>::namespaced(self.admin.clone(), SHOP)
            .get("p")
            .await
            .unwrap();
        child.is_some()
            && parent
                .metadata
                .finalizers
                .unwrap_or_default()
                .iter()
                .any(|f| f.starts_with("hooks.informant.dev/"))
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

    /// Whether the deleted `Controller` is gone and its object released.
    async fn released(&self) -> bool {
        let parent = Api::<Secret>::namespaced(self.admin.clone(), SHOP)
            .get("p")
            .await
            .unwrap();
        let gone = Api::<informant::hooks::Controller>::namespaced(self.admin.clone(), NAMESPACE)
            .get_opt("parents")
            .await
            .unwrap()
            .is_none();
        gone && parent.metadata.finalizers.unwrap_or_default().is_empty()
    }

    async fn delete_controller(&self) {
        let controllers: Api<kube::api::DynamicObject> = Api::namespaced_with(
            self.admin.clone(),
            NAMESPACE,
            &kube::api::ApiResource::erase::<informant::hooks::Controller>(&()),
        );
        controllers
            .delete("parents", &DeleteParams::default())
            .await
            .unwrap();
    }

    /// Everything a user reads: the manager's log, the `CacheConfig`'s and `Controller`s'
    /// status, every Event, `/readyz/permissions` and `/readyz/informers`.
    async fn surfaces(&self, health: std::net::SocketAddr) -> String {
        let mut text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let configs: Api<informant::config::CacheConfig> =
            Api::namespaced(self.admin.clone(), NAMESPACE);
        for config in configs.list(&ListParams::default()).await.unwrap() {
            text.push_str(&serde_json::to_string(&config.status).unwrap());
        }
        let controllers: Api<informant::hooks::Controller> =
            Api::namespaced(self.admin.clone(), NAMESPACE);
        for controller in controllers.list(&ListParams::default()).await.unwrap() {
            text.push_str(&serde_json::to_string(&controller.status).unwrap());
        }
        for event in Api::<Event>::all(self.admin.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
        {
            text.push_str(event.message.as_deref().unwrap_or_default());
            text.push('\n');
        }
        for path in ["/readyz/permissions", "/readyz/informers"] {
            if let Ok(Ok(stream)) = tokio::time::timeout(
                Duration::from_secs(2),
                tokio::net::TcpStream::connect(health),
            )
            .await
            {
                drop(stream);
                text.push_str(&crate::support::http_get(health, path).await.1);
            }
        }
        text
    }

    async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// The manager with every permission the chart renders: ready, status written, Lease held,
/// Events created and patched, the hook's child applied and the finalizers released, nothing
/// refused.
async fn everything_works(scenario: &Scenario) {
    let running = scenario.start(&scenario.docs, 0).await;
    let health = scenario.health();
    let ready = until(WAIT, || async {
        tokio::net::TcpStream::connect(health).await.is_ok()
            && crate::support::http_get(health, "/readyz").await.0 == 200
    })
    .await;
    let log = || std::fs::read_to_string(&running.log).unwrap_or_default();
    assert!(ready, "the manager did not become ready\n{}", log());
    let configs: Api<informant::config::CacheConfig> =
        Api::namespaced(running.admin.clone(), NAMESPACE);
    let status_written = until(WAIT, || async {
        configs.get(RELEASE).await.unwrap().status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
    })
    .await;
    assert!(status_written, "no Ready=True status\n{}", log());
    assert!(
        until(WAIT, || running.reconciled()).await,
        "the hook's child or the finalizer is missing\n{}",
        log()
    );
    let events: Api<Event> = Api::namespaced(running.admin.clone(), SHOP);
    let patched = until(WAIT, || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("ChildApplied") && e.count.unwrap_or(0) >= 2)
    })
    .await;
    assert!(
        patched,
        "no Event created then patched (count 2)\n{}",
        log()
    );
    running.delete_controller().await;
    let released = until(WAIT, || running.released()).await;
    assert!(
        released,
        "the deleted Controller did not release\n{}",
        log()
    );
    assert!(
        until(WAIT, || running.renewed()).await,
        "the Lease was not held (renewed)\n{}",
        log()
    );
    let refused = running.refusals();
    assert!(
        refused.is_empty(),
        "requests refused: {refused:#?}\n{}",
        log()
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
    // Drive the scenario until the permission is asked for: the first reconcile, then the
    // Controller's deletion (the release).
    let mut seen = until(WAIT, || async {
        refused().is_some() || running.reconciled().await
    })
    .await
        && refused().is_some();
    if !seen {
        running.delete_controller().await;
        until(WAIT, || async {
            refused().is_some() || running.released().await
        })
        .await;
        seen = refused().is_some();
    }
    // Then the Lease's renewal (every retry period: 2 s by default).
    if !seen {
        until(WAIT, || async {
            refused().is_some() || running.renewed().await
        })
        .await;
        seen = refused().is_some();
    }
    let outcome = if let Some(refusal) = refused().filter(|_| seen) {
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
                "{} ({} {}/{}): refused ({}) but shown nowhere a user looks",
                grant.permission, grant.kind, grant.namespace, grant.name, refusal.message
            ))
        })
    } else {
        None
    };
    running.stop().await;
    outcome
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs Python with helm-python-sdk (scripts/test installs it); run with --include-ignored"]
async fn the_charts_rbac_is_enough_and_no_more_than_enough() {
    let scenario = Scenario::new(&[]);
    everything_works(&scenario).await;
    let all = grants(&scenario.docs);
    assert!(all.len() >= 15, "{all:#?}");
    let mut dead = Vec::new();
    let mut unseen = Vec::new();
    for (run, grant) in all.iter().enumerate() {
        match without_grant(&scenario, grant, run + 1).await {
            None => dead.push(format!(
                "{} ({} {}/{})",
                grant.permission, grant.kind, grant.namespace, grant.name
            )),
            Some(Err(message)) => unseen.push(message),
            Some(Ok(())) => println!("needed and shown: {}", grant.permission),
        }
    }
    assert!(
        dead.is_empty() && unseen.is_empty(),
        "dead weight (no request needed it): {dead:#?}\nnot shown where a user looks: {unseen:#?}"
    );
}

/// The check above can fail: a rule the manager never uses (`get pods` in `shop`, added through
/// `rbac.extraRules`) is found to be dead weight, while a needed one is not.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs Python with helm-python-sdk (scripts/test installs it); run with --include-ignored"]
async fn a_permission_no_request_needs_is_named_dead_weight() {
    let scenario =
        Scenario::new(&[json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]})]);
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
