//! `benches/scope.rs`: the figures of a cache that follows the cluster's namespaces, against the
//! embedded API server (in this process). Usage: `cargo bench --bench scope` (a minute or two
//! once built; `-- --quick` runs the third figure at 10% only, and the fourth 10 times;
//! `-- flips`, `-- scale`, `-- kinds` run figures 1-2, 3 or 4 alone).
//!
//! 1. Label flip latency. A `Manager` (file source) caches `ConfigMap`s and `Secret`s of every
//!    namespace labelled `team=flip` (`namespaceSelector`); the namespace `flip` holds 50 of
//!    each. 100 times: label it (`kubectl label namespace` as a merge patch), and measure from
//!    the request to the `Reload::Rescoped` that says it entered (the new tree, with its
//!    objects, is published before that notification); then unlabel it and measure until it
//!    left. Goal: p99 < 1 s to serve.
//! 2. Requests per flip. From the server's request log around each flip: the `LIST` and
//!    `WATCH` requests per resource. Goal: exactly one LIST per cached kind in the namespace that
//!    entered, none anywhere else, none when it leaves.
//! 3. 1,000 namespaces, 10 `ConfigMap`s (~1 KiB) each, of which 10% (100), 50% and 100%
//!    match: one informer per matching namespace (the selector) side by side with one
//!    cluster-wide informer whose reads a user filters by namespace in the process (what users
//!    build today). Each through a byte-counting TCP proxy: the connections open once synced
//!    (one per watch), the bytes received to sync, then the bytes received while one new
//!    object is created in every namespace; objects held, and bytes per object served.
//! 4. Kinds that come and go. A `Manager` caches the custom kind `Widget` (`byObject`) and runs
//!    a Rust controller on the custom kind `Gadget` (not in `byObject`); neither CRD is
//!    installed. 50 times (10 with `--quick`): create both CRDs (the server answers with
//!    `Established=True`), and measure from the create request to the `Reload::Rescoped` that
//!    says `Widget` is served (its informer synced, in the published tree) and to the
//!    controller reporting `Running` (its informers synced, its runner started); then delete
//!    them and measure until the informer stopped and the controller waits again. Goal: p99
//!    < 2 s to serve and run.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::broadcast;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use informant::apiserver::{TestServer, Verb};
use informant::cache::{Cache as _, CacheReloader, Context, Discovery, ListOptions};
use informant::controller::{Action, Controller};
use informant::manager::{ConfigSource, ControllerReadiness, Manager, Options, Reload, State};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const WAIT: Duration = Duration::from_mins(1);

/// A count as a float, for ratios (every count here is far below `u32::MAX`).
fn float(n: impl TryInto<u32>) -> f64 {
    f64::from(n.try_into().unwrap_or(u32::MAX))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Median and p99 of `samples` in ms (nearest rank).
fn median_p99(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let at =
        |percent: usize| ms(samples[(samples.len() * percent).div_ceil(100).saturating_sub(1)]);
    (at(50), at(99))
}

/// Requests per (verb, resource) now.
fn requests(server: &TestServer) -> BTreeMap<(Verb, String), u64> {
    server
        .handle()
        .requests()
        .into_iter()
        .map(|r| ((r.verb, r.resource), r.count))
        .collect()
}

/// The requests of `verb` made since `before`, as `configmaps 1, secrets 1` (`none`).
fn delta(server: &TestServer, before: &BTreeMap<(Verb, String), u64>, verb: Verb) -> String {
    let mut parts = Vec::new();
    for ((v, resource), n) in requests(server) {
        if v != verb {
            continue;
        }
        let grew = n - before.get(&(verb, resource.clone())).copied().unwrap_or(0);
        if grew > 0 {
            parts.push(format!("{resource} {grew}"));
        }
    }
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}

fn replace_file(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Waits for the `Reload::Rescoped` in which `namespace` entered (or left, `entered` false).
async fn rescoped(
    reloads: &mut broadcast::Receiver<Reload>,
    namespace: &str,
    entered: bool,
) -> Result<(), BoxError> {
    loop {
        if let Reload::Rescoped { cache, .. } = tokio::time::timeout(WAIT, reloads.recv()).await?? {
            let moved = if entered {
                &cache.namespaces_entered
            } else {
                &cache.namespaces_left
            };
            if moved.contains(namespace) {
                return Ok(());
            }
        }
    }
}

/// Figures 1 and 2: 100 label flips through a `Manager`.
async fn flips(dir: &Path) -> Result<(), BoxError> {
    let server = TestServer::start().await?;
    let h = server.handle();
    for i in 0..20 {
        h.create(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": format!("other-{i:02}"), "labels": {"team": "other"}}}))?;
    }
    h.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flip"}}))?;
    for i in 0..50 {
        for kind in ["ConfigMap", "Secret"] {
            h.create(json!({"apiVersion": "v1", "kind": kind,
                "metadata": {"namespace": "flip", "name": format!("o-{i:02}")}}))?;
        }
    }
    let path = dir.join("flip.yaml");
    replace_file(
        &path,
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: bench, namespace: default}\n\
         spec:\n  namespaceSelector: team=flip\n  byObject: [{apiVersion: v1, kind: ConfigMap}, {apiVersion: v1, kind: Secret}]\n",
    )?;
    let client = server.client().await?;
    let options = Options {
        debounce: Duration::ZERO,
        ..Options::new(ConfigSource::File(path))
    };
    let manager = Manager::new(client.clone(), options).await?;
    let mut reloads = manager.reloads();
    let cache = manager.cache();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    cache.wait_for_cache_sync(&shutdown).await?;
    let namespaces: Api<Namespace> = Api::all(client);
    let label = |team: Option<&str>| json!({"metadata": {"labels": {"team": team}}});
    let params = PatchParams::default();
    let (mut enter, mut leave) = (Vec::new(), Vec::new());
    let mut entered_requests: BTreeMap<String, usize> = BTreeMap::new();
    let mut left_requests: BTreeMap<String, usize> = BTreeMap::new();
    let gvk = |kind: &str| kube::core::GroupVersionKind::gvk("", "v1", kind);
    let in_flip = ListOptions {
        namespace: Some("flip".into()),
        ..ListOptions::default()
    };
    let start = requests(&server);
    for _ in 0..100 {
        let before = requests(&server);
        let began = Instant::now();
        namespaces
            .patch("flip", &params, &Patch::Merge(label(Some("flip"))))
            .await?;
        rescoped(&mut reloads, "flip", true).await?;
        enter.push(began.elapsed());
        // The tree published before the notification serves the namespace's objects.
        let flip_objects = cache.list(&gvk("ConfigMap"), &in_flip).await?.len()
            + cache.list(&gvk("Secret"), &in_flip).await?.len();
        if flip_objects != 100 {
            return Err(format!("flip entered but {flip_objects} of 100 objects served").into());
        }
        *entered_requests
            .entry(delta(&server, &before, Verb::List))
            .or_default() += 1;

        let before = requests(&server);
        let began = Instant::now();
        namespaces
            .patch("flip", &params, &Patch::Merge(label(None)))
            .await?;
        rescoped(&mut reloads, "flip", false).await?;
        leave.push(began.elapsed());
        *left_requests
            .entry(delta(&server, &before, Verb::List))
            .or_default() += 1;
    }
    // A watch starts once its list is stored, so it may land after the flip's window: count
    // the watches over the whole run.
    let watches = delta(&server, &start, Verb::Watch);
    let (p50, p99) = median_p99(&mut enter);
    println!(
        "1. label flip to served (namespace with 50 ConfigMaps + 50 Secrets, 20 other namespaces), \
         100 flips: median {p50:.1} ms, p99 {p99:.1} ms (goal p99 < 1000 ms)"
    );
    let (p50, p99) = median_p99(&mut leave);
    println!("   unlabel to stopped: median {p50:.1} ms, p99 {p99:.1} ms");
    println!("2. LIST requests per flip (per resource: number of flips)");
    for (requests, n) in &entered_requests {
        println!("   labelled:   {requests}: {n} of 100");
    }
    for (requests, n) in &left_requests {
        println!("   unlabelled: {requests}: {n} of 100");
    }
    println!("   WATCH requests over the 100 flips: {watches}");
    shutdown.cancel();
    tokio::time::timeout(WAIT, run).await???;
    Ok(())
}

/// A TCP proxy that counts the bytes the API server sends and the connections open.
struct CountingProxy {
    addr: SocketAddr,
    received: Arc<AtomicU64>,
    open: Arc<AtomicU64>,
    stop: CancellationToken,
}

impl CountingProxy {
    async fn start(upstream: SocketAddr) -> Result<Self, BoxError> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        let (received, open) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let stop = CancellationToken::new();
        let (r, o, token) = (Arc::clone(&received), Arc::clone(&open), stop.clone());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = token.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((inbound, _)) = accepted else { continue };
                let (r, o, token) = (Arc::clone(&r), Arc::clone(&o), token.clone());
                tokio::spawn(async move {
                    let Ok(outbound) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    o.fetch_add(1, Ordering::Relaxed);
                    let (mut in_read, mut in_write) = inbound.into_split();
                    let (mut out_read, mut out_write) = outbound.into_split();
                    let up = async {
                        let _ = tokio::io::copy(&mut in_read, &mut out_write).await;
                        let _ = out_write.shutdown().await;
                    };
                    let down = async {
                        let mut buf = vec![0_u8; 64 * 1024];
                        while let Ok(n) = out_read.read(&mut buf).await {
                            if n == 0 || in_write.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                            r.fetch_add(n as u64, Ordering::Relaxed);
                        }
                        let _ = in_write.shutdown().await;
                    };
                    tokio::select! {
                        () = token.cancelled() => {}
                        _ = futures::future::join(up, down) => {}
                    }
                    o.fetch_sub(1, Ordering::Relaxed);
                });
            }
        });
        Ok(Self {
            addr,
            received,
            open,
            stop,
        })
    }

    async fn client(&self) -> Result<kube::Client, BoxError> {
        let config = kube::Config::from_custom_kubeconfig(
            informant::apiserver::kubeconfig(self.addr),
            &kube::config::KubeConfigOptions::default(),
        )
        .await?;
        Ok(kube::Client::try_from(config)?)
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// What one cache layout costs.
struct Cost {
    connections: u64,
    sync_bytes: u64,
    sync: Duration,
    held: usize,
    served: usize,
    churn_bytes: u64,
    churn_served: usize,
}

const NAMESPACES: usize = 1_000;
const PER_NAMESPACE: usize = 10;

/// Figure 3, one layout: `spec` over the 1,000 namespaces, of which `matching` are labelled.
/// A server with the 1,000 namespaces, the first `matching` labelled `team=in`, and their
/// `ConfigMap`s.
async fn populated(matching: usize) -> Result<TestServer, BoxError> {
    let server = TestServer::start().await?;
    let h = server.handle();
    let payload = "x".repeat(900);
    for i in 0..NAMESPACES {
        let team = if i < matching { "in" } else { "out" };
        h.create(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": format!("ns-{i:04}"), "labels": {"team": team}}}))?;
        for j in 0..PER_NAMESPACE {
            h.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": format!("ns-{i:04}"), "name": format!("cm-{j}")},
                "data": {"payload": payload}}))?;
        }
    }
    Ok(server)
}

async fn cost(server: &TestServer, spec: &str, matching: usize) -> Result<Cost, BoxError> {
    let proxy = CountingProxy::start(server.addr()).await?;
    let client = proxy.client().await?;
    let (tracker, shutdown) = (TaskTracker::new(), CancellationToken::new());
    let context = Context::new(client.clone(), Arc::new(Discovery::new(client)));
    let mut reloader =
        CacheReloader::new(context, tracker.clone(), shutdown.clone()).with_sync_timeout(WAIT);
    let options = informant::config::load_str(&format!(
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: bench}}\nspec:\n{spec}"
    ))?
    .cache;
    let began = Instant::now();
    reloader.apply(&options).await?;
    let sync = began.elapsed();
    // The watches open once the lists are done; wait for them (one connection each).
    let informers = reloader.pool().len() as u64;
    let deadline = Instant::now() + WAIT;
    while proxy.open.load(Ordering::Relaxed) < informers && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let connections = proxy.open.load(Ordering::Relaxed);
    let sync_bytes = proxy.received.load(Ordering::Relaxed);
    let held_now = |reloader: &CacheReloader| -> usize {
        reloader
            .pool()
            .keys()
            .iter()
            .filter(|k| k.gvk.kind == "ConfigMap")
            .map(|k| {
                let kind = informant::cache::BuiltinKinds::resolve_now(&k.gvk);
                reloader
                    .pool()
                    .obtain(k, &kind)
                    .list(None, None, &[], None)
                    .map_or(0, |l| l.len())
            })
            .sum()
    };
    let held = held_now(&reloader);
    let readable = matching * PER_NAMESPACE;
    // Churn: one new object in every namespace; the layout receives the events it watches.
    let before = proxy.received.load(Ordering::Relaxed);
    let name = "churn";
    for i in 0..NAMESPACES {
        server
            .handle()
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": format!("ns-{i:04}"), "name": name},
            "data": {"payload": "y".repeat(900)}}))?;
    }
    // Every informer holds the new object of each namespace it watches.
    let expected = held + held / PER_NAMESPACE;
    let deadline = Instant::now() + WAIT;
    while held_now(&reloader) < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let churn_bytes = proxy.received.load(Ordering::Relaxed) - before;
    drop(reloader);
    shutdown.cancel();
    tracker.close();
    tokio::time::timeout(WAIT, tracker.wait()).await?;
    Ok(Cost {
        connections,
        sync_bytes,
        sync,
        held,
        served: readable,
        churn_bytes,
        churn_served: matching,
    })
}

/// Figure 3: the selector's per-namespace informers against one cluster-wide informer.
async fn scale(quick: bool) -> Result<(), BoxError> {
    println!(
        "3. {NAMESPACES} namespaces x {PER_NAMESPACE} ConfigMaps (~1 KiB); per matching \
         namespace (selector) vs one cluster-wide informer filtered in the process"
    );
    println!(
        "   {:>8} {:>6} {:<14} {:>5} {:>9} {:>8} {:>7} {:>7} {:>10} {:>11}",
        "matching",
        "share",
        "layout",
        "conns",
        "sync KiB",
        "sync ms",
        "held",
        "served",
        "B/served",
        "churn B/obj"
    );
    let fractions: &[usize] = if quick {
        &[100]
    } else {
        &[100, 500, 900, 950, 1000]
    };
    for &matching in fractions {
        for (layout, spec) in [
            (
                "selector",
                "  namespaceSelector: team=in\n  byObject: [{apiVersion: v1, kind: ConfigMap}]\n",
            ),
            (
                "cluster-wide",
                "  byObject: [{apiVersion: v1, kind: ConfigMap}]\n",
            ),
        ] {
            let server = populated(matching).await?;
            // The server's own namespaces (default, kube-system, ...) count too.
            let total = Api::<Namespace>::all(server.client().await?)
                .list(&kube::api::ListParams::default())
                .await?
                .items
                .len();
            let share = format!("{:.1}%", float(matching) * 100.0 / float(total));
            let c = cost(&server, spec, matching).await?;
            server.shutdown().await?;
            let per_served = float(c.sync_bytes) / float(c.served);
            let churn_per = float(c.churn_bytes) / float(c.churn_served);
            println!(
                "   {matching:>8} {share:>6} {layout:<14} {:>5} {:>9.0} {:>8.0} {:>7} {:>7} {:>10.0} {:>11.0}",
                c.connections,
                float(c.sync_bytes) / 1024.0,
                ms(c.sync),
                c.held,
                c.served,
                per_served,
                churn_per
            );
        }
    }
    println!(
        "   share: matching namespaces of all the server's; conns: TCP connections open once \
         synced (one per watch, and an idle one at times); B/served: bytes received to sync per \
         object a read may return; churn B/obj: bytes received while one object is created in \
         each of the 1,000 namespaces, per object a read may return. At 950 and 1000 the \
         selector is served by one cluster-wide informer (chosen at >= 90% of the namespaces)"
    );
    Ok(())
}

/// The custom kind of figure 4's controller.
#[derive(
    kube::CustomResource, Clone, Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[kube(group = "example.com", version = "v1", kind = "Gadget", namespaced)]
struct GadgetSpec {}

/// The CRD of `kind` (`plural.example.com`), namespaced, serving `v1`.
fn crd(kind: &str, plural: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

/// Waits for the `Reload::Rescoped` in which `kind` became served (or started waiting,
/// `served` false).
async fn kind_moved(
    reloads: &mut broadcast::Receiver<Reload>,
    kind: &str,
    served: bool,
) -> Result<(), BoxError> {
    loop {
        if let Reload::Rescoped { cache, .. } = tokio::time::timeout(WAIT, reloads.recv()).await?? {
            let moved = if served {
                &cache.kinds_served
            } else {
                &cache.kinds_waiting
            };
            if moved.iter().any(|g| g.kind == kind) {
                return Ok(());
            }
        }
    }
}

/// Waits until the controller `name` reports running (`running`) or waiting for its kind.
async fn controller_is(state: &State, name: &str, running: bool) -> Result<(), BoxError> {
    let mut changes = state.subscribe();
    tokio::time::timeout(WAIT, async {
        loop {
            let now = state.snapshot().controllers.get(name).cloned();
            let done = match now {
                Some(ControllerReadiness::Running) => running,
                Some(ControllerReadiness::WaitingForKind { .. }) => !running,
                Some(ControllerReadiness::KeptBack { .. }) | None => false,
            };
            if done || changes.changed().await.is_err() {
                return;
            }
        }
    })
    .await?;
    Ok(())
}

/// Figure 4: CRDs installed and deleted under a `byObject` kind and a Rust controller.
async fn kinds(dir: &Path, cycles: usize) -> Result<(), BoxError> {
    let server = TestServer::start().await?;
    let path = dir.join("kinds.yaml");
    replace_file(
        &path,
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: bench, namespace: default}\n\
         spec:\n  byObject: [{apiVersion: example.com/v1, kind: Widget}, {apiVersion: v1, kind: ConfigMap}]\n",
    )?;
    let client = server.client().await?;
    let options = Options {
        debounce: Duration::ZERO,
        ..Options::new(ConfigSource::File(path))
    };
    let mut manager = Manager::new(client.clone(), options).await?;
    let mut reloads = manager.reloads();
    let state = manager.state();
    Controller::<Gadget>::new("gadgets").add_to(
        &mut manager,
        |_, _| async { Ok::<_, kube::Error>(Action::await_change()) },
        informant::controller::default_error_policy,
    );
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    controller_is(&state, "gadgets", false).await?;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client);
    let post = kube::api::PostParams::default();
    let (mut serving, mut running, mut stopped, mut waiting) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let start = requests(&server);
    let discovery = server.handle().discovery_requests();
    for _ in 0..cycles {
        let began = Instant::now();
        for (kind, plural) in [("Widget", "widgets"), ("Gadget", "gadgets")] {
            let created = crds
                .create(&post, &serde_json::from_value(crd(kind, plural))?)
                .await?;
            let established = created.status.and_then(|s| s.conditions).is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            if !established {
                return Err(format!("the {kind} CRD was not established at create").into());
            }
        }
        kind_moved(&mut reloads, "Widget", true).await?;
        serving.push(began.elapsed());
        controller_is(&state, "gadgets", true).await?;
        running.push(began.elapsed());

        let began = Instant::now();
        for plural in ["widgets", "gadgets"] {
            crds.delete(
                &format!("{plural}.example.com"),
                &kube::api::DeleteParams::default(),
            )
            .await?;
        }
        kind_moved(&mut reloads, "Widget", false).await?;
        stopped.push(began.elapsed());
        controller_is(&state, "gadgets", false).await?;
        waiting.push(began.elapsed());
    }
    let lists = delta(&server, &start, Verb::List);
    let watches = delta(&server, &start, Verb::Watch);
    let discovered = server.handle().discovery_requests() - discovery;
    println!(
        "4. kinds that come and go: {cycles} cycles of two CRDs created (Established at create) \
         and deleted; Widget in byObject, a Rust controller on Gadget (not in byObject)"
    );
    let (p50, p99) = median_p99(&mut serving);
    println!(
        "   created to Widget informer serving:    median {p50:.1} ms, p99 {p99:.1} ms (goal p99 < 2000 ms)"
    );
    let (p50, p99) = median_p99(&mut running);
    println!(
        "   created to Gadget controller running:  median {p50:.1} ms, p99 {p99:.1} ms (goal p99 < 2000 ms)"
    );
    let (p50, p99) = median_p99(&mut stopped);
    println!("   deleted to Widget informer stopped:    median {p50:.1} ms, p99 {p99:.1} ms");
    let (p50, p99) = median_p99(&mut waiting);
    println!("   deleted to Gadget controller waiting:  median {p50:.1} ms, p99 {p99:.1} ms");
    println!(
        "   requests over the {cycles} cycles: LIST {lists}; WATCH {watches}; discovery {discovered}"
    );
    shutdown.cancel();
    tokio::time::timeout(WAIT, run).await???;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let quick = std::env::args().any(|a| a == "--quick");
    let dir = std::env::temp_dir().join(format!("bench_scope-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // `cargo bench --bench scope -- kinds` runs only figure 4 (`flips`: 1 and 2, `scale`: 3).
    let named: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| ["flips", "scale", "kinds"].contains(&a.as_str()))
        .collect();
    let runs = |figure: &str| named.is_empty() || named.iter().any(|n| n == figure);
    let result = async {
        if runs("flips") {
            flips(&dir).await?;
        }
        if runs("scale") {
            scale(quick).await?;
        }
        if runs("kinds") {
            kinds(&dir, if quick { 10 } else { 50 }).await?;
        }
        Ok::<_, BoxError>(())
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}
