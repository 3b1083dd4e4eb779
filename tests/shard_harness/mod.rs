//! The multi-process harness of the sharding tests (`tests/manager/shard_processes.rs`) and of
//! `benches/shard.rs`: one embedded API server in this process, and the members of one ring
//! as processes of their own, each through its own TCP proxy (so that any one can be cut off
//! from the server), each writing a reconcile log (`log`).
//!
//! A member is `informant run --config FILE` whose file holds a sharded `CacheConfig`
//! (`spec.sharding`) and a hook `Controller` for `ConfigMap`s, whose webhook (`hook`, served
//! here) logs each call's start and end. The objects are `ConfigMap`s in `shard-0` …
//! `shard-<n>`; the *hot* ones (chosen by the seed) carry [`HOLD_ANNOTATION`]: their reconcile
//! holds for that long and asks to be called again at once, so a member is always in the
//! middle of reconciling them, the moment a hand-over would let two members overlap.
//!
//! Nothing here sleeps to synchronise: every wait polls a condition (the Leases, the logs) with
//! a timeout.

#![allow(
    dead_code,
    reason = "the test binary and the bench use different parts"
)]

pub mod hook;
pub mod log;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use informant::apiserver::{Config, FeatureGates, ListAnswer, TestServer};
use informant::manager::{CLAIMS_ANNOTATION, Membership, RING_LABEL, Ring};
use informant::selector::{RangeSet, ShardKey, ShardRange, ShardSelector};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use rand::{RngExt, SeedableRng};
use serde_json::json;

use crate::support::{Proxy, holds_within, holds_within_every, http_get};
pub use hook::HookServer;
#[allow(unused_imports, reason = "the bench does not count moves")]
pub use log::{Log, moved, shares};

/// The ring every member joins.
pub const RING: &str = "shop";
/// The namespace of the member Leases (and of the `Controller`).
pub const LEASE_NAMESPACE: &str = "default";
/// The annotation that makes an object hot: its reconcile holds for this many seconds and asks
/// to be called again at once.
pub const HOLD_ANNOTATION: &str = "shard.informant.dev/hold";

/// How long a wait of the harness may take before the test fails: generous, for a machine
/// shared with other builds (the waits poll, so a fast run does not pay it).
pub const PATIENCE: Duration = Duration::from_secs(90);

/// How often the harness looks at the Leases and the logs while it waits.
pub const POLL: Duration = Duration::from_millis(100);

/// Microseconds since the Unix epoch: the clock of the reconcile logs.
pub fn now_us() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
}

/// Membership timings, passed to every member.
#[derive(Clone, Copy, Debug)]
pub struct Timings {
    /// How long the others wait, after last seeing a member's Lease change, before counting it
    /// gone.
    pub lease: Duration,
    /// How long a member may fail to renew before it stops acting.
    pub renew: Duration,
    /// How often a member renews and reads the ring.
    pub retry: Duration,
}

impl Timings {
    /// Lease 4 s, renew deadline 2 s, retry 500 ms: leader election's rule (lease > renew
    /// deadline + 2 × retry) at a quarter of its defaults, so a hand-over takes seconds.
    pub const FAST: Self = Self {
        lease: Duration::from_secs(4),
        renew: Duration::from_secs(2),
        retry: Duration::from_millis(500),
    };

    fn go(d: Duration) -> String {
        format!("{}ms", d.as_millis())
    }
}

/// What a member process is.
#[derive(Clone, Debug)]
pub enum Launch {
    /// `informant run` with a hook `Controller`.
    Hooks,
    /// `program args…` with `INFORMANT_SHARD_*` in its environment (the member's identity,
    /// its log, its config file, its kubeconfig, the timings): a process that runs a Rust
    /// controller the same way.
    Program { program: PathBuf, args: Vec<String> },
}

/// The ring, its objects and its members.
#[derive(Clone, Debug)]
pub struct Settings {
    /// What assigns an object to a member.
    pub key: ShardKey,
    /// Whether the server has `ShardedListAndWatch` (members list and watch their share), or
    /// not (members list everything and filter in the process).
    pub server_side: bool,
    /// The runtime's test switch that skips the hand-over wait: members act on what the ring
    /// gives them at once. Only to show the overlap checker fails.
    pub skip_handover: bool,
    /// Membership timings.
    pub timings: Timings,
    /// Namespaces `shard-0` … of the objects.
    pub namespaces: usize,
    /// `ConfigMap`s per namespace.
    pub per_namespace: usize,
    /// Hot objects, among all (fewer per member than `concurrency`, or the others starve).
    pub hot: usize,
    /// How long a hot object's reconcile holds.
    pub hold: Duration,
    /// Reconciles at once per member (the `Controller`'s `concurrency`).
    pub concurrency: u16,
    /// Picks the hot objects.
    pub seed: u64,
    /// What each member process is.
    pub launch: Launch,
    /// Whether members run a controller (the hook `Controller`, or a Rust member's); without,
    /// they only cache the objects (`byObject` makes the informer eager).
    pub controller: bool,
}

impl Default for Settings {
    /// The set-up: 3,000 objects in 30 namespaces, 12 of them hot (holding 1 s), 16
    /// reconciles at once per member, key `uid`, server-side sharding, [`Timings::FAST`], hook
    /// members.
    fn default() -> Self {
        Self {
            key: ShardKey::Uid,
            server_side: true,
            skip_handover: false,
            timings: Timings::FAST,
            namespaces: 30,
            per_namespace: 100,
            hot: 12,
            hold: Duration::from_secs(1),
            concurrency: 16,
            seed: 20,
            launch: Launch::Hooks,
            controller: true,
        }
    }
}

/// One object of the ring's workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Whether its reconciles hold and repeat.
    pub hot: bool,
}

/// Where a member process is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Running and connected.
    Running,
    /// Stopped by `SIGSTOP`.
    Paused,
    /// Running, its proxy taken away: cut off from the API server.
    Cut,
    /// Gone (`SIGKILL`).
    Killed,
}

/// One member process.
pub struct Member {
    /// Its identity in the ring.
    pub identity: String,
    /// What the harness last did to it.
    pub state: State,
    child: Child,
    proxy: Option<Proxy>,
    proxy_addr: SocketAddr,
    /// Where it serves `/metrics` and `/debug/*`.
    pub metrics: SocketAddr,
    /// Its standard error.
    pub stderr: PathBuf,
    /// Where it writes its reconciles when it writes them itself (a Rust controller).
    pub log: PathBuf,
    /// The runtime's log of its reconciles (`--reconcile-log`).
    pub runtime_log: PathBuf,
}

impl Member {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its standard error so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .expect("kill(1) runs");
        assert!(status.success(), "kill {signal} {}", self.pid());
    }
}

/// The server, the ring's members and the objects they share. Dropping it kills every member.
pub struct Fleet {
    /// The embedded API server.
    pub server: TestServer,
    /// A client of it (not through any member's proxy).
    pub client: Client,
    /// How the ring is set up.
    pub settings: Settings,
    /// Every member started, in order (the killed ones too).
    pub members: Vec<Member>,
    /// The objects, by uid.
    pub objects: BTreeMap<String, Object>,
    /// The server's resource version once every object was created: a LIST served at an
    /// older one may lack some (they reached its member by its watch).
    pub created_at: u64,
    /// The hook every member's `Controller` calls.
    pub hook: HookServer,
    dir: tempfile::TempDir,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for m in &mut self.members {
            let _ = m.child.kill();
            let _ = m.child.wait();
        }
    }
}

impl Fleet {
    /// The server (with or without `ShardedListAndWatch`), and nothing else yet.
    pub async fn new(settings: Settings) -> Self {
        let server = TestServer::start_with(Config {
            feature_gates: FeatureGates {
                sharded_list_and_watch: settings.server_side,
            },
            ..Config::default()
        })
        .await
        .unwrap();
        let client = server.client().await.unwrap();
        let mut dir = tempfile::tempdir().unwrap();
        if std::env::var_os(KEEP_ENV).is_some() {
            dir.disable_cleanup(true);
        }
        let hook = HookServer::start().await;
        Self {
            server,
            client,
            settings,
            members: Vec::new(),
            objects: BTreeMap::new(),
            created_at: 0,
            dir,
            hook,
        }
    }

    /// `n` members, the ring settled (each claims what the ring gives it), then the objects
    /// created: each is reconciled by one member from the start.
    pub async fn start(settings: Settings, n: usize) -> Self {
        let mut fleet = Self::new(settings).await;
        for _ in 0..n {
            fleet.spawn().await;
        }
        fleet.until_settled("the first members to settle").await;
        fleet.create_objects();
        fleet
    }

    /// The working directory (configs, logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Creates the objects (straight in the server's store), hot ones chosen by the seed.
    pub fn create_objects(&mut self) {
        let s = &self.settings;
        let total = s.namespaces * s.per_namespace;
        let mut rng = rand::rngs::StdRng::seed_from_u64(s.seed);
        let mut hot = BTreeSet::new();
        while hot.len() < s.hot.min(total) {
            hot.insert(rng.random_range(0..total));
        }
        let hold = format!("{}", s.hold.as_secs_f64());
        for i in 0..total {
            let namespace = format!("shard-{}", i / s.per_namespace);
            let name = format!("cm-{}", i % s.per_namespace);
            let is_hot = hot.contains(&i);
            let annotations = if is_hot {
                json!({ HOLD_ANNOTATION: hold })
            } else {
                json!({})
            };
            let stored = self
                .server
                .handle()
                .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"namespace": namespace, "name": name,
                        "annotations": annotations},
                    "data": {"k": "v"}}))
                .unwrap();
            let uid = stored["metadata"]["uid"].as_str().unwrap().to_owned();
            self.created_at = stored["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|v| v.parse().ok())
                .unwrap();
            self.objects.insert(
                uid,
                Object {
                    namespace,
                    name,
                    hot: is_hot,
                },
            );
        }
    }

    /// Starts one more member, `member-<i>`; returns once it serves `/metrics`.
    pub async fn spawn(&mut self) -> usize {
        let index = self.members.len();
        let identity = format!("member-{index}");
        let dir = self.dir.path().to_owned();
        let proxy = Proxy::start(SocketAddr::from(([127, 0, 0, 1], 0)), self.server.addr()).await;
        let kubeconfig = dir.join(format!("{identity}.kubeconfig"));
        std::fs::write(
            &kubeconfig,
            serde_json::to_string(&informant::apiserver::kubeconfig(proxy.addr)).unwrap(),
        )
        .unwrap();
        let log = dir.join(format!("{identity}.reconciles"));
        let runtime_log = dir.join(format!("{identity}.runtime.jsonl"));
        let config = dir.join(format!("{identity}.yaml"));
        std::fs::write(&config, self.config(&identity)).unwrap();
        let stderr = dir.join(format!("{identity}.log"));
        let t = self.settings.timings;
        let mut command = match &self.settings.launch {
            Launch::Hooks => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_informant"));
                c.arg("run")
                    .arg("--config")
                    .arg(&config)
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(["--metrics-addr", "127.0.0.1:0", "--health-addr", "0"])
                    // The hook listens on loopback, refused unless named (issue 45).
                    .args(["--hook-policy", "open", "--hook-allow-url", "127.0.0.1"])
                    .args(["--shard-identity", &identity])
                    .args(["--lease-namespace", LEASE_NAMESPACE])
                    .args(["--leader-elect-lease-duration", &Timings::go(t.lease)])
                    .args(["--leader-elect-renew-deadline", &Timings::go(t.renew)])
                    .args(["--leader-elect-retry-period", &Timings::go(t.retry)]);
                c
            }
            Launch::Program { program, args } => {
                let mut c = Command::new(program);
                c.args(args)
                    .env("INFORMANT_SHARD_LEASE", Timings::go(t.lease))
                    .env("INFORMANT_SHARD_RENEW", Timings::go(t.renew))
                    .env("INFORMANT_SHARD_RETRY", Timings::go(t.retry));
                c
            }
        };
        command
            .env("INFORMANT_SHARD_IDENTITY", &identity)
            .env("INFORMANT_SHARD_LOG", &log)
            .env("INFORMANT_RECONCILE_LOG", &runtime_log)
            .env("INFORMANT_SHARD_CONFIG", &config)
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap());
        if self.settings.skip_handover {
            command.env(SKIP_HANDOVER_ENV, "true");
        }
        let child = command.spawn().unwrap();
        let mut member = Member {
            identity,
            state: State::Running,
            child,
            proxy_addr: proxy.addr,
            proxy: Some(proxy),
            metrics: SocketAddr::from(([127, 0, 0, 1], 0)),
            stderr,
            log,
            runtime_log,
        };
        let listening = holds_within(PATIENCE, || {
            let text = member.stderr();
            async move { metrics_addr(&text).is_some() }
        })
        .await;
        assert!(
            listening,
            "{} never served /metrics:\n{}",
            member.identity,
            member.stderr()
        );
        member.metrics = metrics_addr(&member.stderr()).unwrap();
        self.members.push(member);
        index
    }

    /// The member's config file: the sharded `CacheConfig` and the logging hook `Controller`.
    fn config(&self, identity: &str) -> String {
        let key = match self.settings.key {
            ShardKey::Uid => "uid",
            ShardKey::Namespace => "namespace",
        };
        let cache = format!(
            "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {{name: shard, namespace: {LEASE_NAMESPACE}}}
spec:
  sharding: {{ring: {RING}, key: {key}}}
  byObject: [{{apiVersion: v1, kind: ConfigMap}}]
"
        );
        if !self.settings.controller || matches!(self.settings.launch, Launch::Program { .. }) {
            // A Rust member runs its own controller: the config is the cache's alone.
            return cache;
        }
        format!(
            "{cache}---
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: log, namespace: {LEASE_NAMESPACE}}}
spec:
  for: {{apiVersion: v1, kind: ConfigMap}}
  concurrency: {concurrency}
  hook: {{webhook: {{url: \"{url}\", timeout: 60s}}}}
",
            concurrency = self.settings.concurrency,
            url = self.hook.url(identity),
        )
    }

    /// `SIGKILL`s member `i`.
    pub fn kill(&mut self, i: usize) {
        let m = &mut self.members[i];
        m.child.kill().unwrap();
        m.child.wait().unwrap();
        m.state = State::Killed;
    }

    /// `SIGSTOP`s member `i`.
    pub fn pause(&mut self, i: usize) {
        self.members[i].signal("-STOP");
        self.members[i].state = State::Paused;
    }

    /// `SIGCONT`s member `i`.
    pub fn resume(&mut self, i: usize) {
        self.members[i].signal("-CONT");
        self.members[i].state = State::Running;
    }

    /// Cuts member `i` off from the API server: its proxy closes every connection and stops
    /// listening.
    pub async fn cut(&mut self, i: usize) {
        let m = &mut self.members[i];
        if let Some(proxy) = m.proxy.take() {
            proxy.take_away().await;
        }
        m.state = State::Cut;
    }

    /// Connects member `i` again (its proxy back on the same port).
    pub async fn reconnect(&mut self, i: usize) {
        let upstream = self.server.addr();
        let m = &mut self.members[i];
        m.proxy = Some(Proxy::start(m.proxy_addr, upstream).await);
        m.state = State::Running;
    }

    /// Creates the Leases of members `member-0` … `member-<n-1>` (renewed now, no claims), as
    /// if they had joined: a member started next finds the ring whole at its first look and
    /// caches its share from its first list, not everything first.
    pub async fn prepare_leases(&self, n: usize) {
        let api = Api::<Lease>::namespaced(self.client.clone(), LEASE_NAMESPACE);
        let seconds = i32::try_from(self.settings.timings.lease.as_secs()).unwrap();
        for i in 0..n {
            let identity = format!("member-{i}");
            let name = Membership::new(RING, LEASE_NAMESPACE, &identity).lease_name();
            let lease: Lease = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": LEASE_NAMESPACE,
                    "labels": {RING_LABEL: RING}, "annotations": {CLAIMS_ANNOTATION: ""}},
                "spec": {"holderIdentity": identity, "leaseDurationSeconds": seconds,
                    "renewTime": jiff::Timestamp::now().to_string()}
            }))
            .unwrap();
            api.create(&PostParams::default(), &lease).await.unwrap();
        }
    }

    /// Member `i`'s resident memory (`VmRSS`), in bytes.
    pub fn rss(&self, i: usize) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.members[i].pid())).unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        kib * 1024
    }

    /// The `ConfigMap`s member `i` caches (`informant_cache_objects`, summed over namespaces);
    /// `None` while it serves no such series.
    pub async fn cached(&self, i: usize) -> Option<u64> {
        let (code, body) = http_get(self.members[i].metrics, "/metrics").await;
        if code != 200 {
            return None;
        }
        let mut found = None;
        for line in body.lines() {
            if line.starts_with("informant_cache_objects{") && line.contains("kind=\"ConfigMap\"") {
                let value: f64 = line.rsplit(' ').next()?.parse().ok()?;
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "a count"
                )]
                let value = value as u64;
                *found.get_or_insert(0) += value;
            }
        }
        found
    }

    /// The last complete LIST of `ConfigMap`s whose answers applied a shard selector of exactly
    /// `ranges` (all when `None`: no selector): its objects and bytes, over its pages.
    /// The `ConfigMap` LIST answers that applied exactly `ranges`, one a line with its place
    /// among all the LIST answers (what a failed [`Fleet::last_list`] check shows).
    pub fn lists_with(&self, ranges: &[ShardRange]) -> String {
        let lists = self.server.handle().lists();
        let total = lists.len();
        lists
            .into_iter()
            .enumerate()
            .filter(|(_, a)| a.resource == "configmaps")
            .filter(|(_, a)| {
                a.shard_selector
                    .as_deref()
                    .and_then(|s| s.parse::<ShardSelector>().ok())
                    .is_some_and(|s| s.ranges() == ranges)
            })
            .map(|(i, a)| {
                format!(
                    "answer {i} of {total}: items {}, at resource version {}, continued {:?}, \
                     next {:?}, labels {:?}, fields {:?}, namespace {:?}",
                    a.items,
                    a.resource_version,
                    a.continued,
                    a.next,
                    a.label_selector,
                    a.field_selector,
                    a.namespace
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The last complete `ConfigMap` LIST that applied exactly `ranges` (none: no selector):
    /// its objects, its bytes and the resource version it was served at.
    pub fn last_list(&self, ranges: Option<&[ShardRange]>) -> Option<(usize, usize, u64)> {
        let answers: Vec<ListAnswer> = self
            .server
            .handle()
            .lists()
            .into_iter()
            .filter(|a| a.resource == "configmaps")
            .filter(|a| {
                let applied = a
                    .shard_selector
                    .as_deref()
                    .and_then(|s| s.parse::<ShardSelector>().ok());
                match (ranges, applied) {
                    (None, None) => true,
                    (Some(want), Some(s)) => s.ranges() == want,
                    _ => false,
                }
            })
            .collect();
        // The last page of a list, then each page before it by its token: other lists' pages
        // (another informer with the same selector) may come between.
        let mut at = answers.iter().rposition(ListAnswer::last_page)?;
        let (mut items, mut bytes) = (0, 0);
        loop {
            let page = &answers[at];
            items += page.items;
            bytes += page.bytes;
            let Some(token) = &page.continued else {
                return Some((items, bytes, page.resource_version));
            };
            at = answers[..at]
                .iter()
                .rposition(|a| a.next.as_ref() == Some(token))?;
        }
    }

    /// The identities of the members running and connected.
    pub fn live(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|m| m.state == State::Running)
            .map(|m| m.identity.clone())
            .collect()
    }

    /// The ring of the live members.
    pub fn ring(&self) -> Ring {
        let live = self.live();
        Ring::new(live.iter().map(String::as_str))
    }

    /// Each object with the member `ring` gives it.
    pub fn assignment(&self, ring: &Ring) -> BTreeMap<String, String> {
        self.objects
            .iter()
            .map(|(uid, o)| {
                let owner = match self.settings.key {
                    ShardKey::Uid => ring.owner_of(uid),
                    ShardKey::Namespace => ring.namespace_owner(&o.namespace),
                };
                (uid.clone(), owner.unwrap_or_default().to_owned())
            })
            .collect()
    }

    /// Each member Lease's holder with its published claims (a Lease without a holder or
    /// with unreadable claims is left out).
    pub async fn claims(&self) -> BTreeMap<String, RangeSet> {
        let leases = Api::<Lease>::namespaced(self.client.clone(), LEASE_NAMESPACE)
            .list(&ListParams::default().labels(&format!("{RING_LABEL}={RING}")))
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        leases
            .into_iter()
            .filter_map(|lease| {
                let holder = lease.spec?.holder_identity?;
                let text = lease.metadata.annotations?.remove(CLAIMS_ANNOTATION)?;
                Some((holder, RangeSet::decode(&text).ok()?))
            })
            .collect()
    }

    /// Whether every live member claims exactly what the ring of the live members gives it:
    /// the hand-overs are over, each acts on its whole share and on nothing else.
    pub async fn settled(&self) -> bool {
        let ring = self.ring();
        let claims = self.claims().await;
        self.live().iter().all(|m| {
            claims
                .get(m)
                .is_some_and(|c| *c == RangeSet::from_ranges(ring.ranges(m)))
        })
    }

    /// Waits (at most [`PATIENCE`]) until [`Fleet::settled`].
    pub async fn until_settled(&self, what: &str) {
        let settled = holds_within_every(PATIENCE, POLL, || self.settled()).await;
        assert!(settled, "timed out waiting for {what}\n{}", self.report());
    }

    /// Every reconcile logged: the hook's, the Rust controllers', the runtime's.
    pub fn log(&self) -> Log {
        let (mut text, mut runtime) = (String::new(), String::new());
        // Whole lines only: a line being appended may be read half written.
        let whole = |path: &Path| {
            let mut t = std::fs::read_to_string(path).unwrap_or_default();
            t.truncate(t.rfind('\n').map_or(0, |i| i + 1));
            t
        };
        for m in &self.members {
            text.push_str(&whole(&m.log));
            runtime.push_str(&whole(&m.runtime_log));
        }
        Log::parse(&text, "rust")
            .with(Log::parse_runtime(&runtime).reconciles().to_vec())
            .with(self.hook.reconciles())
    }

    /// Waits (at most `timeout`) until every object was reconciled, since `since`, by the
    /// member `owners` names; whether it was.
    pub async fn reconciled_by(
        &self,
        owners: &BTreeMap<String, String>,
        since: u64,
        timeout: Duration,
    ) -> bool {
        holds_within_every(timeout, POLL, || {
            let log = self.log().since(since);
            async move {
                let mut done: BTreeSet<(&str, &str)> = BTreeSet::new();
                for r in log.reconciles() {
                    if r.end.is_some() {
                        done.insert((r.object.as_str(), r.member.as_str()));
                    }
                }
                owners
                    .iter()
                    .all(|(o, m)| done.contains(&(o.as_str(), m.as_str())))
            }
        })
        .await
    }

    /// What a failure shows: the members, their claims, the end of each one's standard error.
    pub fn report(&self) -> String {
        let mut out = String::new();
        let kept = if std::env::var_os(KEEP_ENV).is_some() {
            "kept".to_owned()
        } else {
            format!("removed at the end; set {KEEP_ENV}=1 to keep them")
        };
        let _ = writeln!(
            out,
            "the members' configs and logs are in {} ({kept})",
            self.dir.path().display()
        );
        for m in &self.members {
            let stderr = m.stderr();
            let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
            let _ = writeln!(
                out,
                "== {} ({:?}, pid {}), last lines of its log:",
                m.identity,
                m.state,
                m.pid()
            );
            for line in tail.iter().rev() {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

/// The objects whose member differs from `before` to `after`, with their member in `after`.
pub fn changed(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    after
        .iter()
        .filter(|(o, m)| before.get(*o) != Some(*m))
        .map(|(o, m)| (o.clone(), m.clone()))
        .collect()
}

/// Set (to anything), the harness keeps its working directory (the members' configs, standard
/// errors and reconcile logs) after the test, for reading after a failure.
pub const KEEP_ENV: &str = "INFORMANT_SHARD_KEEP";

/// The environment variable of the runtime's test switch that skips the hand-over wait.
pub const SKIP_HANDOVER_ENV: &str = "INFORMANT_SHARD_SKIP_HANDOVER";

/// The address of the `/metrics` listener a member logged.
fn metrics_addr(stderr: &str) -> Option<SocketAddr> {
    stderr
        .lines()
        .filter(|l| l.contains("serving metrics"))
        .find_map(|l| {
            let (_, rest) = l.split_once(" listen.addr=")?;
            rest.split_whitespace().next()?.parse().ok()
        })
}
