//! The chaos harness shared by `tests/chaos/convergence.rs`, `tests/chaos/namespace_churn.rs`
//! and `tests/chaos/skip_relist.rs`: a seeded writer over 3 kinds in 4 namespaces (and, with
//! namespace churn, 4 more that are created, labelled, unlabelled and deleted while it writes,
//! chosen by a `namespaceSelector`), a seeded fault schedule against the embedded API server,
//! `CacheConfig` reloads through a file, and the invariant check (every informer's store equals
//! the server's state under its scope, object by object; reads through the cache tree answer
//! the same; a namespace the selector does not match is refused).
//!
//! The scope of each informer is computed here from the config this harness wrote, with its
//! own selector evaluation (not the crate's selector code, which the server and the cache
//! share), and compared with the server's unfiltered state.

#![allow(dead_code, reason = "each test binary uses part of the harness")]

pub use crate::support::{holds_within as eventually, http_get, replace};

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use informant::apiserver::{TestServer, Verb};
use informant::cache::{BuiltinKinds, InformerKey, ListOptions, namespace_informer_key};
use informant::manager::{ConfigSource, Manager, Options, Reload};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// The namespaces the writer writes to.
pub const NAMESPACES: [&str; 4] = ["chaos-a", "chaos-b", "chaos-c", "chaos-d"];
/// The annotation every config's transform drops.
pub const DROPPED: &str = "chaos.informant.dev/drop";
/// Names per kind and namespace: few, so creates, updates and deletes meet the same objects.
const NAMES: u64 = 10;

mod churn;
pub use churn::{CHURN_NAMESPACES, Churn, SELECTED};

/// A small deterministic PRNG (xorshift64*), so a seed replays the same run.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (0 is mapped to a fixed non-zero state).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1) ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `percent`%.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[usize::try_from(self.below(items.len() as u64)).unwrap()]
    }
}

/// The seed from `INFORMANT_CHAOS_SEED`, else `default`.
pub fn seed_from_env(default: u64) -> u64 {
    std::env::var("INFORMANT_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The rounds from `INFORMANT_CHAOS_ROUNDS`, else `default`.
pub fn rounds_from_env(default: u32) -> u32 {
    std::env::var("INFORMANT_CHAOS_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The three kinds written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `v1` `ConfigMap`.
    ConfigMap,
    /// `v1` `Secret`.
    Secret,
    /// `v1` `Pod` (its `spec.nodeName` is used by field selectors).
    Pod,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::ConfigMap, Kind::Secret, Kind::Pod];

    pub fn name(self) -> &'static str {
        match self {
            Kind::ConfigMap => "ConfigMap",
            Kind::Secret => "Secret",
            Kind::Pod => "Pod",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configmaps",
            Kind::Secret => "secrets",
            Kind::Pod => "pods",
        }
    }

    pub fn gvk(self) -> GroupVersionKind {
        GroupVersionKind::gvk("", "v1", self.name())
    }

    fn resource(self) -> ApiResource {
        ApiResource::from_gvk(&self.gvk())
    }

    fn of(gvk: &GroupVersionKind) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == gvk.kind)
    }
}

/// The label selectors a config may use, evaluated here independently of the crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelSel {
    All,
    TierA,
    TierAOrB,
    TierNotC,
    NoCanary,
}

impl LabelSel {
    const MENU: [LabelSel; 5] = [
        LabelSel::All,
        LabelSel::TierA,
        LabelSel::TierAOrB,
        LabelSel::TierNotC,
        LabelSel::NoCanary,
    ];

    fn text(self) -> Option<&'static str> {
        match self {
            LabelSel::All => None,
            LabelSel::TierA => Some("tier=a"),
            LabelSel::TierAOrB => Some("tier in (a,b)"),
            LabelSel::TierNotC => Some("tier!=c"),
            LabelSel::NoCanary => Some("!canary"),
        }
    }

    fn matches(self, labels: &BTreeMap<String, String>) -> bool {
        let tier = labels.get("tier").map(String::as_str);
        match self {
            LabelSel::All => true,
            LabelSel::TierA => tier == Some("a"),
            LabelSel::TierAOrB => matches!(tier, Some("a" | "b")),
            LabelSel::TierNotC => tier != Some("c"),
            LabelSel::NoCanary => !labels.contains_key("canary"),
        }
    }
}

/// How one kind is cached under a config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindScope {
    /// `None`: every namespace (one informer over all of them).
    pub namespaces: Option<BTreeSet<String>>,
    pub labels: LabelSel,
    /// `spec.nodeName=<node>` (Pods only).
    pub node: Option<&'static str>,
}

impl KindScope {
    fn selects(&self, object: &Object) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|set| set.contains(&object.namespace))
            && self.labels.matches(&object.labels)
            && self.node.is_none_or(|n| object.node.as_deref() == Some(n))
    }
}

/// One `byObject` entry of a [`ChaosConfig`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindConfig {
    pub kind: Kind,
    /// A namespaces override; `None` inherits `defaultNamespaces`.
    pub namespaces: Option<BTreeSet<String>>,
    pub labels: LabelSel,
    /// `spec.nodeName=<node>` (Pods only).
    pub node: Option<&'static str>,
}

/// A `CacheConfig` the harness writes, and the scope of each kind under it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChaosConfig {
    pub default_namespaces: Option<BTreeSet<String>>,
    /// `spec.namespaceSelector: <SELECTED>=yes`: every namespace so labelled is cached too,
    /// for each kind without namespaces of its own.
    pub selector: bool,
    pub kinds: Vec<KindConfig>,
    /// The test-only fault: the manager's informers skip the relist after 410 Gone
    /// (`InformerPool::skip_relist_after_gone`), so the invariant check must fail.
    pub skip_relist_after_gone: bool,
}

fn subset(rng: &mut Rng) -> BTreeSet<String> {
    let mut set: BTreeSet<String> = NAMESPACES
        .iter()
        .filter(|_| rng.chance(50))
        .map(|s| (*s).to_string())
        .collect();
    if set.is_empty() {
        set.insert((*rng.pick(&NAMESPACES)).to_string());
    }
    set
}

impl ChaosConfig {
    /// Every kind in every namespace, no selector.
    pub fn everything() -> Self {
        Self {
            default_namespaces: None,
            selector: false,
            skip_relist_after_gone: false,
            kinds: Kind::ALL
                .iter()
                .map(|k| KindConfig {
                    kind: *k,
                    namespaces: None,
                    labels: LabelSel::All,
                    node: None,
                })
                .collect(),
        }
    }

    /// A config drawn from `rng`.
    pub fn random(rng: &mut Rng) -> Self {
        let default_namespaces = rng.chance(50).then(|| subset(rng));
        let kinds = Kind::ALL
            .iter()
            .map(|k| {
                let namespaces = rng.chance(25).then(|| subset(rng));
                let labels = *rng.pick(&LabelSel::MENU);
                let node = (*k == Kind::Pod && rng.chance(50)).then_some("node-1");
                KindConfig {
                    kind: *k,
                    namespaces,
                    labels,
                    node,
                }
            })
            .collect();
        Self {
            default_namespaces,
            selector: false,
            skip_relist_after_gone: false,
            kinds,
        }
    }

    /// The scope of `kind`, with `selected` the namespaces labelled `<SELECTED>=yes` now. A
    /// kind with namespaces of its own takes neither the default namespaces nor the selector;
    /// otherwise the selector adds the labelled namespaces to the default ones.
    pub fn scope(&self, kind: Kind, selected: &BTreeSet<String>) -> KindScope {
        let entry = self
            .kinds
            .iter()
            .find(|k| k.kind == kind)
            .expect("every kind is configured");
        let namespaces = match (&entry.namespaces, self.selector) {
            (Some(own), _) => Some(own.clone()),
            (None, false) => self.default_namespaces.clone(),
            (None, true) => Some(
                self.default_namespaces
                    .iter()
                    .flatten()
                    .chain(selected)
                    .cloned()
                    .collect(),
            ),
        };
        KindScope {
            namespaces,
            labels: entry.labels,
            node: entry.node,
        }
    }

    /// The YAML document.
    pub fn yaml(&self) -> String {
        let map = |set: &BTreeSet<String>| {
            let entries: Vec<String> = set.iter().map(|n| format!("{n}: {{}}")).collect();
            format!("{{{}}}", entries.join(", "))
        };
        let mut out = String::from(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\n\
             metadata: {name: chaos, namespace: default}\nspec:\n",
        );
        if let Some(ns) = &self.default_namespaces {
            writeln!(out, "  defaultNamespaces: {}", map(ns)).unwrap();
        }
        if self.selector {
            writeln!(out, "  namespaceSelector: '{SELECTED}=yes'").unwrap();
        }
        writeln!(out, "  defaultTransform: {{dropAnnotations: [{DROPPED}]}}").unwrap();
        out.push_str("  byObject:\n");
        for entry in &self.kinds {
            write!(out, "    - {{apiVersion: v1, kind: {}", entry.kind.name()).unwrap();
            if let Some(ns) = &entry.namespaces {
                write!(out, ", namespaces: {}", map(ns)).unwrap();
            }
            if let Some(l) = entry.labels.text() {
                write!(out, ", labelSelector: '{l}'").unwrap();
            }
            if let Some(n) = entry.node {
                write!(out, ", fieldSelector: 'spec.nodeName={n}'").unwrap();
            }
            out.push_str("}\n");
        }
        out
    }
}

/// What the invariant compares of one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    pub namespace: String,
    pub name: String,
    pub resource_version: String,
    pub labels: BTreeMap<String, String>,
    pub node: Option<String>,
    pub has_dropped_annotation: bool,
}

impl Object {
    fn of(o: &DynamicObject) -> Self {
        Self {
            namespace: o.metadata.namespace.clone().unwrap_or_default(),
            name: o.metadata.name.clone().unwrap_or_default(),
            resource_version: o.metadata.resource_version.clone().unwrap_or_default(),
            labels: o.metadata.labels.clone().unwrap_or_default(),
            node: o.data["spec"]["nodeName"].as_str().map(str::to_string),
            has_dropped_annotation: o
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(DROPPED)),
        }
    }

    fn key(&self) -> (String, String) {
        (self.namespace.clone(), self.name.clone())
    }
}

/// Counts of what a run did, printed as the README's figures.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    pub rounds: u32,
    pub writes_ok: u64,
    pub writes_failed: u64,
    pub faults: BTreeMap<&'static str, u64>,
    pub reloads: u64,
    pub answered_with_fault: u64,
    /// Invariant checks made (one after each quiescence).
    pub checks: usize,
    pub informers_checked: usize,
    pub objects_compared: usize,
    pub cache_reads_compared: usize,
    /// Objects compared with `informant cache list`'s answers (the final check).
    pub cli_reads_compared: usize,
    pub mismatches: Vec<String>,
}

impl Figures {
    fn fault(&mut self, name: &'static str) {
        *self.faults.entry(name).or_default() += 1;
    }

    /// Every fault injected.
    pub fn faults_total(&self) -> u64 {
        self.faults.values().sum()
    }

    /// The figures, one line each.
    pub fn report(&self, seed: u64, took: Duration) -> String {
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!(
            "chaos seed={seed} rounds={} took={:.1}s\n  writes accepted={} refused (404, 409 or an injected fault)={}\n  \
             faults injected={} ({}) reloads={} requests answered with a fault={}\n  \
             checks={} informers checked={} objects compared={} cache reads compared={} \
             informant cache list reads compared={} mismatches={}",
            self.rounds,
            took.as_secs_f64(),
            self.writes_ok,
            self.writes_failed,
            self.faults_total(),
            faults.join(" "),
            self.reloads,
            self.answered_with_fault,
            self.checks,
            self.informers_checked,
            self.objects_compared,
            self.cache_reads_compared,
            self.cli_reads_compared,
            self.mismatches.len(),
        )
    }
}

/// A manager on the embedded API server, driven by a config file.
pub struct World {
    pub server: TestServer,
    pub client: kube::Client,
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
    pub config: ChaosConfig,
    pub manager_cache: Arc<informant::cache::SharedCache>,
    pub pool: Arc<informant::cache::InformerPool>,
    pub state: Arc<informant::manager::State>,
    pub health: SocketAddr,
    reloads: broadcast::Receiver<Reload>,
    shutdown: CancellationToken,
    run: tokio::task::JoinHandle<Result<(), informant::manager::Error>>,
    sentinel: u64,
    /// Namespace churn, when the run has it.
    pub churn: Option<Churn>,
}

impl World {
    /// A server with the 4 namespaces and a manager running `config`, ready.
    pub async fn start(config: ChaosConfig) -> Self {
        Self::start_with(config, None).await
    }

    /// [`World::start`], with namespace churn: its namespaces exist before the manager starts.
    pub async fn start_with(config: ChaosConfig, churn: Option<Churn>) -> Self {
        let server = TestServer::start().await.unwrap();
        for ns in NAMESPACES {
            server
                .handle()
                .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
                .unwrap();
        }
        if churn.is_some() {
            Churn::seed_namespaces(&server);
        }
        let client = server.client().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, config.yaml()).unwrap();
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let options = Options {
            health_addr: Some(loopback),
            debounce: Duration::ZERO,
            shutdown_grace: Duration::from_secs(5),
            cache_sync_timeout: Duration::from_secs(3),
            ..Options::new(ConfigSource::File(path.clone()))
        };
        let mut manager = Manager::new(client.clone(), options).await.unwrap();
        // As `informant run` does: the file's `Controller` documents run too.
        informant::hooks::add_to_manager(&mut manager);
        let manager_cache = manager.cache();
        let pool = manager.pool();
        // Before `run`, so every informer the manager's pool creates has the fault.
        pool.skip_relist_after_gone(config.skip_relist_after_gone);
        let state = manager.state();
        let health = manager.health_addr().unwrap();
        let reloads = manager.reloads();
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run(shutdown.clone()));
        tokio::time::timeout(Duration::from_secs(30), state.serving())
            .await
            .expect("the first config serves");
        Self {
            server,
            client,
            dir,
            path,
            config,
            manager_cache,
            pool,
            state,
            health,
            reloads,
            shutdown,
            run,
            sentinel: 0,
            churn,
        }
    }

    /// The namespaces the writer writes to (some may not exist, with churn).
    pub fn namespaces(&self) -> Vec<&'static str> {
        let mut all = NAMESPACES.to_vec();
        if self.churn.is_some() {
            all.extend(CHURN_NAMESPACES);
        }
        all
    }

    /// Each namespace of [`World::namespaces`] that exists on the server now, with whether it
    /// is labelled `<SELECTED>=yes` (read here, one GET each, without the crate's selector
    /// code; a GET, so a run blind to namespace lists and watches still sees the truth).
    async fn namespace_states(&self) -> BTreeMap<String, bool> {
        let api = Api::<k8s_openapi::api::core::v1::Namespace>::all(self.client.clone());
        let mut out = BTreeMap::new();
        for name in self.namespaces() {
            if let Some(ns) = api.get_opt(name).await.unwrap() {
                let labelled = ns
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(SELECTED))
                    .is_some_and(|v| v == "yes");
                out.insert(name.to_owned(), labelled);
            }
        }
        out
    }

    /// The namespaces labelled `<SELECTED>=yes` on the server now: what the selector should
    /// match (none without churn).
    pub async fn selected(&self) -> BTreeSet<String> {
        if self.churn.is_none() {
            return BTreeSet::new();
        }
        self.namespace_states()
            .await
            .into_iter()
            .filter(|(_, labelled)| *labelled)
            .map(|(name, _)| name)
            .collect()
    }

    /// The namespaces of [`World::namespaces`] that exist on the server now.
    async fn existing(&self) -> BTreeSet<String> {
        if self.churn.is_none() {
            return NAMESPACES.iter().map(|ns| (*ns).to_owned()).collect();
        }
        self.namespace_states().await.into_keys().collect()
    }

    /// Why a read of `kind` in `ns`, outside the kind's scope, was not refused as a read of an
    /// unknown namespace (`None` when it was).
    async fn refused(
        &self,
        cache: &dyn informant::cache::Cache,
        kind: Kind,
        ns: &str,
    ) -> Option<String> {
        let options = ListOptions {
            namespace: Some(ns.to_string()),
            ..ListOptions::default()
        };
        match cache.list(&kind.gvk(), &options).await {
            Err(e) if e.is_unknown_namespace() => None,
            Err(e) => Some(format!(
                "cache list {kind:?} in {ns}, outside its scope: {e}, not an unknown namespace"
            )),
            Ok(items) => Some(format!(
                "cache list {kind:?} in {ns}, outside its scope: answered {} objects",
                items.len()
            )),
        }
    }

    fn api(&self, kind: Kind, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), ns, &kind.resource())
    }

    fn manifest(kind: Kind, ns: &str, name: &str, rng: &mut Rng) -> DynamicObject {
        let mut labels = serde_json::Map::new();
        labels.insert("tier".into(), (*rng.pick(&["a", "b", "c"])).into());
        if rng.chance(30) {
            labels.insert("canary".into(), "true".into());
        }
        let mut object = json!({
            "apiVersion": "v1",
            "kind": kind.name(),
            "metadata": {"namespace": ns, "name": name, "labels": labels,
                "annotations": {DROPPED: "x", "chaos.informant.dev/keep": "y"}},
        });
        match kind {
            Kind::ConfigMap => object["data"] = json!({"v": rng.next().to_string()}),
            Kind::Secret => object["stringData"] = json!({"v": rng.next().to_string()}),
            Kind::Pod => {
                object["spec"] = json!({
                    "nodeName": rng.pick(&["node-1", "node-2"]),
                    "containers": [{"name": "c", "image": "busybox"}],
                });
            }
        }
        serde_json::from_value(object).unwrap()
    }

    /// One random write: create, relabel, update or delete. Whether the server took it.
    pub async fn write(&self, rng: &mut Rng) -> bool {
        let kind = *rng.pick(&Kind::ALL);
        let ns = *rng.pick(&self.namespaces());
        let name = format!("{}-{}", kind.plural(), rng.below(NAMES));
        let api = self.api(kind, ns);
        let result = match rng.below(10) {
            0..=3 => api
                .create(
                    &PostParams::default(),
                    &Self::manifest(kind, ns, &name, rng),
                )
                .await
                .map(drop),
            4..=6 => {
                let tier = *rng.pick(&["a", "b", "c"]);
                let canary = rng.chance(30).then_some("true");
                let patch = json!({"metadata": {"labels": {"tier": tier, "canary": canary}}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map(drop)
            }
            7 => {
                let patch = json!({"metadata": {"annotations": {"chaos.informant.dev/keep":
                    rng.next().to_string()}}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map(drop)
            }
            _ => api.delete(&name, &DeleteParams::default()).await.map(drop),
        };
        result.is_ok()
    }

    /// Writes `config` and waits for the manager's answer to it.
    pub async fn reload(&mut self, config: ChaosConfig) -> Reload {
        self.drain_reloads();
        replace(&self.path, &config.yaml());
        self.config = config;
        self.answer().await
    }

    /// The manager's answer to a config change; changes the namespaces made meanwhile
    /// (`Reload::Rescoped`) are not one.
    async fn answer(&mut self) -> Reload {
        loop {
            let reload = tokio::time::timeout(Duration::from_mins(1), self.reloads.recv())
                .await
                .expect("the manager answers a config change");
            match reload {
                Ok(Reload::Rescoped { .. }) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Ok(reload) => return reload,
                Err(e) => panic!("the manager stopped answering: {e}"),
            }
        }
    }

    /// Forgets the answers to earlier changes.
    fn drain_reloads(&mut self) {
        loop {
            match self.reloads.try_recv() {
                Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(_) => return,
            }
        }
    }

    /// Writes a config document as is and waits for the manager's answer to it.
    pub async fn reload_text(&mut self, text: &str) -> Reload {
        self.drain_reloads();
        replace(&self.path, text);
        self.answer().await
    }

    /// A round of faults drawn from `rng`, around `writes` writes.
    pub async fn round(&mut self, rng: &mut Rng, writes: u32, figures: &mut Figures) {
        let h = self.server.handle().clone();
        let kind = *rng.pick(&Kind::ALL);
        let gone = rng.chance(30);
        if gone {
            // Keep watches from resuming while the writer writes, so the resume after the
            // history is gone gets 410 and the informer must relist to see these writes.
            h.fail_next(Some(Verb::Watch), None, u32::MAX, 503);
            h.drop_watches();
            figures.fault("watch-blocked-then-410");
        }
        match rng.below(7) {
            0 => {
                h.drop_watches();
                figures.fault("watch-dropped");
            }
            1 => {
                let code = *rng.pick(&[500, 503, 429]);
                h.fail_next(Some(Verb::List), Some(kind.plural()), 2, code);
                h.drop_watches();
                h.expire_history();
                figures.fault("list-failed-5xx-429");
            }
            2 => {
                let code = *rng.pick(&[500, 503]);
                h.fail_next(Some(Verb::Watch), Some(kind.plural()), 2, code);
                h.drop_watches();
                figures.fault("watch-failed-5xx");
            }
            3 => {
                h.throttle_next(3, 1);
                h.drop_watches();
                figures.fault("throttled-429-retry-after");
            }
            4 => {
                h.set_latency(Duration::from_millis(rng.below(30) + 5));
                figures.fault("latency");
            }
            _ => {}
        }
        for _ in 0..writes {
            if self.write(rng).await {
                figures.writes_ok += 1;
            } else {
                figures.writes_failed += 1;
            }
        }
        if gone {
            h.expire_history();
            h.clear_faults();
            if let Some(churn) = &self.churn {
                churn.blind(&h);
            }
        }
        if let Some(churn) = self.churn {
            churn.round(self, rng, figures).await;
        }
        if rng.chance(25) {
            let mut config = ChaosConfig::random(rng);
            config.selector = self.churn.is_some();
            self.reload(config).await;
            figures.reloads += 1;
            figures.fault("config-reload");
        }
        h.set_latency(Duration::ZERO);
        if let Some(churn) = &self.churn {
            churn.blind(&h);
        }
    }

    /// A round that blocks watches, writes, expires the history and unblocks them: the
    /// informers resume into 410 Gone and see these writes only by relisting.
    pub async fn gone_round(&mut self, rng: &mut Rng, writes: u32, figures: &mut Figures) {
        let h = self.server.handle().clone();
        h.fail_next(Some(Verb::Watch), None, u32::MAX, 503);
        h.drop_watches();
        figures.fault("watch-blocked-then-410");
        for _ in 0..writes {
            if self.write(rng).await {
                figures.writes_ok += 1;
            } else {
                figures.writes_failed += 1;
            }
        }
        h.expire_history();
        h.clear_faults();
    }

    /// Clears every fault, writes one sentinel object per kind and namespace that every scope
    /// selects, and waits until each informer whose scope holds a sentinel has it: every
    /// earlier change was then delivered (a watch delivers in resourceVersion order).
    pub async fn quiesce(&mut self, timeout: Duration) -> bool {
        self.server.handle().clear_faults();
        if let Some(churn) = &self.churn {
            churn.blind(self.server.handle());
        }
        self.sentinel += 1;
        let name = format!("sentinel-{}", self.sentinel);
        let mut rng = Rng::new(self.sentinel);
        let existing = self.existing().await;
        let selected = self.selected().await;
        let namespaces: Vec<&str> = self
            .namespaces()
            .into_iter()
            .filter(|ns| existing.contains(*ns))
            .collect();
        for kind in Kind::ALL {
            for ns in namespaces.iter().copied() {
                let mut object = Self::manifest(kind, ns, &name, &mut rng);
                object.metadata.labels = Some(BTreeMap::from([("tier".into(), "a".into())]));
                if kind == Kind::Pod {
                    object.data["spec"]["nodeName"] = "node-1".into();
                }
                self.api(kind, ns)
                    .create(&PostParams::default(), &object)
                    .await
                    .unwrap();
            }
        }
        eventually(timeout, || async {
            let keys = self.pool.keys();
            // With a selector, the informers must first follow the namespaces (the layout the
            // check expects), then have every sentinel.
            let laid_out = self.churn.is_none()
                || Kind::ALL.iter().all(|kind| {
                    layout(&keys, *kind) == wanted_layout(&self.config.scope(*kind, &selected))
                });
            laid_out
                && keys.iter().all(|key| {
                    let Some(kind) = Kind::of(&key.gvk) else {
                        return true;
                    };
                    let scope = self.config.scope(kind, &selected);
                    let informer = self.pool.obtain(key, &BuiltinKinds::resolve_now(&key.gvk));
                    let wanted: Vec<&str> = namespaces
                        .iter()
                        .copied()
                        .filter(|ns| key.namespace.as_deref().is_none_or(|k| k == *ns))
                        .filter(|ns| scope.namespaces.as_ref().is_none_or(|s| s.contains(*ns)))
                        .collect();
                    informer.has_synced()
                        && wanted
                            .iter()
                            .all(|ns| informer.get(Some(ns), &name).is_ok())
                })
        })
        .await
    }

    /// The server's objects of `kind`, unfiltered.
    async fn server_objects(&self, kind: Kind) -> Vec<Object> {
        Api::<DynamicObject>::all_with(self.client.clone(), &kind.resource())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(Object::of)
            .collect()
    }

    /// The invariant: the informers are exactly those of the config's scopes; each store
    /// equals the server's objects under its scope (name, resourceVersion, labels; the
    /// transform's dropped annotation absent); reads through the cache tree answer the same.
    pub async fn check(&self, figures: &mut Figures) {
        let mut mismatches = Vec::new();
        let mut server = BTreeMap::new();
        for kind in Kind::ALL {
            server.insert(kind, self.server_objects(kind).await);
        }
        let selected = self.selected().await;
        let keys: Vec<InformerKey> = self.pool.keys();
        // The informer layout: one over all namespaces, or one per scoped namespace.
        for kind in Kind::ALL {
            let have = layout(&keys, kind);
            let want = wanted_layout(&self.config.scope(kind, &selected));
            if have != want {
                mismatches.push(format!("{kind:?}: informers over {have:?}, scope {want:?}"));
            }
        }
        for key in &keys {
            if *key == namespace_informer_key() && self.config.selector {
                continue;
            }
            let Some(kind) = Kind::of(&key.gvk) else {
                mismatches.push(format!("unexpected informer {key:?}"));
                continue;
            };
            let scope = self.config.scope(kind, &selected);
            let informer = self.pool.obtain(key, &BuiltinKinds::resolve_now(&key.gvk));
            let stored: BTreeMap<_, Object> = informer
                .list(None, None, &[], None)
                .unwrap()
                .iter()
                .map(|o| {
                    let o = Object::of(o);
                    (o.key(), o)
                })
                .collect();
            let expected: BTreeMap<_, Object> = server[&kind]
                .iter()
                .filter(|o| key.namespace.as_deref().is_none_or(|ns| ns == o.namespace))
                .filter(|o| scope.selects(o))
                .map(|o| (o.key(), o.clone()))
                .collect();
            figures.informers_checked += 1;
            figures.objects_compared += expected.len().max(stored.len());
            diff(
                &format!("informer {kind:?} {:?}", key.namespace),
                &stored,
                &expected,
                &mut mismatches,
            );
        }
        // The same through the cache tree: what `informant cache list` answers.
        let cache = self.manager_cache.load();
        for kind in Kind::ALL {
            let scope = self.config.scope(kind, &selected);
            for ns in self.namespaces() {
                if scope.namespaces.as_ref().is_some_and(|s| !s.contains(ns)) {
                    if let Some(problem) = self.refused(cache.as_ref(), kind, ns).await {
                        mismatches.push(problem);
                    }
                    continue;
                }
                let options = ListOptions {
                    namespace: Some(ns.to_string()),
                    ..ListOptions::default()
                };
                let listed: BTreeMap<_, Object> = match cache.list(&kind.gvk(), &options).await {
                    Ok(items) => items
                        .iter()
                        .map(|o| {
                            let o = Object::of(o);
                            (o.key(), o)
                        })
                        .collect(),
                    Err(e) => {
                        mismatches.push(format!("cache list {kind:?} in {ns}: {e}"));
                        continue;
                    }
                };
                let expected: BTreeMap<_, Object> = server[&kind]
                    .iter()
                    .filter(|o| o.namespace == ns && scope.selects(o))
                    .map(|o| (o.key(), o.clone()))
                    .collect();
                figures.cache_reads_compared += expected.len().max(listed.len());
                diff(
                    &format!("cache list {kind:?} in {ns}"),
                    &listed,
                    &expected,
                    &mut mismatches,
                );
            }
        }
        figures.checks += 1;
        let checkpoint = figures.checks;
        figures.mismatches.extend(
            mismatches
                .into_iter()
                .map(|m| format!("check {checkpoint}: {m}")),
        );
    }

    /// The invariant once more through the `informant` binary: `informant cache list` with the
    /// running config and a kubeconfig of the server, one call per kind, compared with the
    /// server's objects under the kind's scope. The CLI builds its own tree (its own LISTs), so
    /// this also checks that a fresh tree agrees with the long-running, reloaded one.
    pub async fn cli_check(&self, figures: &mut Figures) {
        let kubeconfig = self.dir.path().join("kubeconfig.yaml");
        std::fs::write(
            &kubeconfig,
            serde_yaml::to_string(&self.server.kubeconfig()).unwrap(),
        )
        .unwrap();
        let mut mismatches = Vec::new();
        let selected = self.selected().await;
        for kind in Kind::ALL {
            let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_informant"))
                .args(["cache", "list", "-c"])
                .arg(&self.path)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["--api-version", "v1", "--kind", kind.name(), "-o", "json"])
                .output()
                .await
                .unwrap();
            if !out.status.success() {
                mismatches.push(format!(
                    "informant cache list {kind:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
                continue;
            }
            let listed: Vec<DynamicObject> = serde_json::from_slice(&out.stdout).unwrap();
            let listed: BTreeMap<_, Object> = listed
                .iter()
                .map(|o| {
                    let o = Object::of(o);
                    (o.key(), o)
                })
                .collect();
            let scope = self.config.scope(kind, &selected);
            let expected: BTreeMap<_, Object> = self
                .server_objects(kind)
                .await
                .into_iter()
                .filter(|o| {
                    scope
                        .namespaces
                        .as_ref()
                        .is_none_or(|set| set.contains(&o.namespace))
                        && scope.selects(o)
                })
                .map(|o| (o.key(), o))
                .collect();
            figures.cli_reads_compared += expected.len().max(listed.len());
            diff(
                &format!("informant cache list {kind:?}"),
                &listed,
                &expected,
                &mut mismatches,
            );
        }
        figures
            .mismatches
            .extend(mismatches.into_iter().map(|m| format!("cli check: {m}")));
    }

    /// The manager's `/readyz?verbose` answer: status code and body.
    pub async fn readyz(&self) -> (u16, String) {
        http_get(self.health, "/readyz?verbose").await
    }

    /// Stops the manager and the server.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.run)
            .await
            .expect("the manager stops")
            .unwrap()
            .unwrap();
        self.server.shutdown().await.unwrap();
    }
}

/// The namespaces of `kind`'s informers in `keys`, sorted (`None`: over every namespace).
fn layout(keys: &[InformerKey], kind: Kind) -> Vec<Option<String>> {
    let mut have: Vec<Option<String>> = keys
        .iter()
        .filter(|k| Kind::of(&k.gvk) == Some(kind))
        .map(|k| k.namespace.clone())
        .collect();
    have.sort();
    have
}

/// The informer layout `scope` needs: one over every namespace, or one per namespace.
fn wanted_layout(scope: &KindScope) -> Vec<Option<String>> {
    match &scope.namespaces {
        None => vec![None],
        Some(set) => set.iter().cloned().map(Some).collect(),
    }
}

fn diff(
    what: &str,
    got: &BTreeMap<(String, String), Object>,
    want: &BTreeMap<(String, String), Object>,
    mismatches: &mut Vec<String>,
) {
    for (key, o) in want {
        match got.get(key) {
            None => mismatches.push(format!("{what}: missing {key:?}")),
            Some(g) if g.resource_version != o.resource_version || g.labels != o.labels => {
                mismatches.push(format!(
                    "{what}: {key:?} has rv {} labels {:?}, server rv {} labels {:?}",
                    g.resource_version, g.labels, o.resource_version, o.labels
                ));
            }
            Some(g) if g.has_dropped_annotation => {
                mismatches.push(format!("{what}: {key:?} kept the dropped annotation"));
            }
            Some(_) => {}
        }
    }
    for key in got.keys() {
        if !want.contains_key(key) {
            mismatches.push(format!("{what}: extra {key:?}"));
        }
    }
}

/// Rounds between two invariant checks in a run (each after quiescence).
pub const CHECK_EVERY: u32 = 20;

/// Stops the faults, waits for quiescence and checks the invariant, once.
async fn checkpoint(world: &mut World, figures: &mut Figures, quiesce: Duration) {
    let quiet = world.quiesce(quiesce).await;
    world.check(figures).await;
    if !quiet {
        figures.mismatches.push(format!(
            "check {}: informers did not see the sentinels within {quiesce:?}",
            figures.checks
        ));
    }
}

/// A seeded chaos run: `rounds` rounds of faults and writes (config reloads among them), the
/// invariant checked after quiescence every [`CHECK_EVERY`] rounds and at the end (after a
/// [`World::gone_round`] with `final_gone`). The figures and the time taken.
pub async fn run(
    seed: u64,
    rounds: u32,
    final_gone: bool,
    quiesce: Duration,
) -> (Figures, Duration) {
    run_with(seed, rounds, final_gone, quiesce, None).await
}

/// [`run`] with namespace churn: the configs choose namespaces by label too, and each round
/// creates, labels, unlabels or deletes namespaces of [`CHURN_NAMESPACES`] while the writer
/// writes in them.
pub async fn run_with(
    seed: u64,
    rounds: u32,
    final_gone: bool,
    quiesce: Duration,
    churn: Option<Churn>,
) -> (Figures, Duration) {
    run_faulty(seed, rounds, final_gone, quiesce, churn, false).await
}

/// [`run_with`], the manager's informers skipping the relist after 410 Gone when
/// `skip_relist_after_gone` (the test-only fault the invariant check must catch).
pub async fn run_faulty(
    seed: u64,
    rounds: u32,
    final_gone: bool,
    quiesce: Duration,
    churn: Option<Churn>,
    skip_relist_after_gone: bool,
) -> (Figures, Duration) {
    let began = Instant::now();
    let mut rng = Rng::new(seed);
    let mut config = ChaosConfig::random(&mut rng);
    config.selector = churn.is_some();
    config.skip_relist_after_gone = skip_relist_after_gone;
    let mut world = World::start_with(config, churn).await;
    if let Some(churn) = &world.churn {
        let h = world.server.handle();
        churn.blind(h);
        // The namespace watch made before the switch ends; the next one is refused.
        h.drop_watches();
    }
    let mut figures = Figures {
        rounds,
        ..Figures::default()
    };
    for round in 1..=rounds {
        world.round(&mut rng, 20, &mut figures).await;
        if round % CHECK_EVERY == 0 && round < rounds {
            checkpoint(&mut world, &mut figures, quiesce).await;
        }
    }
    if final_gone {
        world.gone_round(&mut rng, 40, &mut figures).await;
    }
    checkpoint(&mut world, &mut figures, quiesce).await;
    // A blind run refuses namespace lists to every client, the CLI's too (whose client would
    // retry them for minutes): it checks the manager only.
    if !world.churn.is_some_and(|c| c.blind) {
        world.cli_check(&mut figures).await;
    }
    figures.answered_with_fault = world.server.handle().injected_faults();
    world.stop().await;
    (figures, began.elapsed())
}
