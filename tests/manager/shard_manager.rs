//! Managers of one shard ring in one test process, on one embedded API server: each caches
//! and reconciles only its share; together they reconcile every object, never one object on
//! two members at once (checked over their reconcile logs); a member cut off from the API
//! server stops before the others take its share over, after its Lease expired; and the
//! overlap checker is shown to catch the handover bug (the test-only switch that skips the
//! handover wait).

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use informant::apiserver::{Config, FeatureGates};
use informant::cache::{self, SharedCache};
use informant::controller::{Action, Context, Controller, default_error_policy};
use informant::manager::{ConfigSource, Manager, ShardOptions, State};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const NAMESPACES: usize = 12;
const PER_NAMESPACE: usize = 5;

/// One reconcile, as the reconcile log says it.
#[derive(Clone, Debug)]
struct Reconcile {
    member: String,
    controller: String,
    object: String,
    start: u64,
    end: u64,
}

/// Every reconcile logged in `dir`'s `*.jsonl` files.
fn reconciles(dir: &Path) -> Vec<Reconcile> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        // A line being appended may be read half written: only whole lines count.
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            out.push(Reconcile {
                member: v["member"].as_str().unwrap().to_owned(),
                controller: v["controller"].as_str().unwrap().to_owned(),
                object: format!(
                    "{}/{}",
                    v["namespace"].as_str().unwrap(),
                    v["name"].as_str().unwrap()
                ),
                start: v["start_ns"].as_u64().unwrap(),
                end: v["end_ns"].as_u64().unwrap(),
            });
        }
    }
    out
}

/// The overlap checker: every pair of reconciles of one object on two members whose times
/// intersect.
fn overlaps(log: &[Reconcile]) -> Vec<(Reconcile, Reconcile)> {
    let mut by_object: BTreeMap<&str, Vec<&Reconcile>> = BTreeMap::new();
    for r in log {
        by_object.entry(&r.object).or_default().push(r);
    }
    let mut found = Vec::new();
    for runs in by_object.values() {
        for (i, a) in runs.iter().enumerate() {
            for b in &runs[i + 1..] {
                if a.member != b.member && a.start < b.end && b.start < a.end {
                    found.push(((*a).clone(), (*b).clone()));
                }
            }
        }
    }
    found
}

/// A member running: its manager's task, cache, state and shard view.
struct Member {
    identity: String,
    shutdown: CancellationToken,
    run: JoinHandle<Result<(), informant::manager::Error>>,
    cache: Arc<SharedCache>,
    state: Arc<State>,
    metrics: SocketAddr,
}

impl Member {
    /// The `ConfigMap`s this member caches, as `namespace/name`.
    async fn cached(&self) -> BTreeSet<String> {
        let all: Vec<ConfigMap> =
            cache::typed::list(self.cache.as_ref(), &cache::ListOptions::default())
                .await
                .unwrap_or_default();
        all.iter()
            .map(|cm| {
                format!(
                    "{}/{}",
                    cm.metadata.namespace.as_deref().unwrap_or_default(),
                    cm.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect()
    }

    fn sharding(&self) -> informant::config::ShardingStatus {
        self.state.snapshot().sharding.unwrap()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        support::stopped(self.run).await;
    }
}

/// The server, `NAMESPACES` × `PER_NAMESPACE` `ConfigMap`s, a config file and a directory of
/// reconcile logs.
struct Ring {
    server: support::Server,
    client: Client,
    dir: tempfile::TempDir,
    config: PathBuf,
    objects: BTreeSet<String>,
}

/// How the members' reconciles behave.
#[derive(Clone, Copy)]
struct Work {
    /// How long each reconcile takes.
    takes: Duration,
    /// Whether each object is reconciled again right after (a busy controller).
    again: bool,
    concurrency: u16,
}

const QUICK: Work = Work {
    takes: Duration::ZERO,
    again: false,
    concurrency: 4,
};

impl Ring {
    async fn new(key: &str, gates: FeatureGates) -> Self {
        let (server, client) = support::server_with(Config {
            feature_gates: gates,
            ..Config::default()
        })
        .await;
        Self::on(server, client, key)
    }

    /// As [`Ring::new`], with a hook `Controller` of `ConfigMap`s in the config file whose
    /// hook answers that there is nothing to do.
    async fn with_hook(key: &str) -> Self {
        let (server, client) = support::server().await;
        let ring = Self::on(server, client, key);
        let hook = ring.dir.path().join("hook.py");
        std::fs::write(
            &hook,
            "import json, sys\njson.load(sys.stdin)\njson.dump({}, sys.stdout)\n",
        )
        .unwrap();
        let cacheconfig = std::fs::read_to_string(&ring.config).unwrap();
        let text = format!(
            "{cacheconfig}---\napiVersion: informant.dev/v1alpha1\nkind: Controller\nmetadata: {{name: hooked, namespace: default}}\nspec:\n  for: {{apiVersion: v1, kind: ConfigMap}}\n  hook: {{exec: {{command: [python3, {}]}}}}\n",
            hook.display()
        );
        std::fs::write(&ring.config, text).unwrap();
        ring
    }

    /// The ring on `server`: its objects, its config file, its reconcile logs' directory.
    fn on(server: support::Server, client: Client, key: &str) -> Self {
        let mut objects = BTreeSet::new();
        for n in 0..NAMESPACES {
            let ns = format!("ns-{n}");
            server
                .handle()
                .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
                .unwrap();
            for i in 0..PER_NAMESPACE {
                server
                    .handle()
                    .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"namespace": ns, "name": format!("cm-{i}")}}))
                    .unwrap();
                objects.insert(format!("{ns}/cm-{i}"));
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.yaml");
        std::fs::write(
            &config,
            support::cache_config(&format!(
                "  sharding: {{ring: shop, key: {key}}}\n  byObject:\n  - {{apiVersion: v1, kind: ConfigMap}}\n"
            )),
        )
        .unwrap();
        Self {
            server,
            client,
            dir,
            config,
            objects,
        }
    }

    /// Starts the member `identity` (through `client`), with fast timings and a reconcile
    /// log, its `ConfigMap` controller working as `work` says, and the hook controllers of the
    /// config file.
    async fn start(
        &self,
        identity: &str,
        client: Client,
        work: Work,
        skip_handover: bool,
    ) -> Member {
        let options = informant::manager::Options {
            shard: ShardOptions {
                identity: identity.to_owned(),
                lease_namespace: "default".to_owned(),
                lease_duration: Duration::from_secs(3),
                renew_deadline: Duration::from_secs(2),
                retry_period: Duration::from_millis(200),
                reconcile_log: Some(self.dir.path().join(format!("{identity}.jsonl"))),
                skip_handover,
            },
            ..support::manager_options(ConfigSource::File(self.config.clone()))
        };
        let mut manager = Manager::new(client, options).await.unwrap();
        assert!(manager.is_sharded());
        let reconcile = move |_: Arc<ConfigMap>, _: Arc<Context>| async move {
            if !work.takes.is_zero() {
                // Simulated work, so that reconciles are in flight when the ring changes.
                tokio::time::sleep(work.takes).await;
            }
            Ok::<_, kube::Error>(if work.again {
                Action::requeue(Duration::from_millis(10))
            } else {
                Action::await_change()
            })
        };
        Controller::<ConfigMap>::new("configmaps")
            .concurrency(work.concurrency)
            .add_to(&mut manager, reconcile, default_error_policy);
        informant::hooks::add_to_manager(&mut manager);
        let metrics = manager.metrics_addr().unwrap();
        let cache = manager.cache();
        let state = manager.state();
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run(shutdown.clone()));
        Member {
            identity: identity.to_owned(),
            shutdown,
            run,
            cache,
            state,
            metrics,
        }
    }

    fn log(&self) -> Vec<Reconcile> {
        reconciles(self.dir.path())
    }

    /// Waits until every member sees exactly `members` and acts on what it desires, nothing
    /// finishing: the ring settled.
    async fn settled(&self, running: &[&Member]) {
        let names: Vec<String> = running.iter().map(|m| m.identity.clone()).collect();
        support::eventually("the ring to settle", || async {
            running.iter().all(|m| {
                let s = m.sharding();
                s.active && s.members == names
            })
        })
        .await;
    }

    /// Touches every `ConfigMap` (a label), so each is reconciled again by its owner.
    async fn touch_all(&self, round: usize) {
        for object in &self.objects {
            let (ns, name) = object.split_once('/').unwrap();
            let patch = json!({"metadata": {"labels": {"round": round.to_string()}}});
            Api::<ConfigMap>::namespaced(self.client.clone(), ns)
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    }
}

/// The objects reconciled since `since` (ns since the epoch) by the Rust controller, with the
/// members that did.
fn reconciled_since(log: &[Reconcile], since: u64) -> BTreeMap<String, BTreeSet<String>> {
    reconciled_by(log, since, "configmaps")
}

/// The objects `controller` reconciled since `since`, with the members that did.
fn reconciled_by(
    log: &[Reconcile],
    since: u64,
    controller: &str,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in log
        .iter()
        .filter(|r| r.start >= since && r.controller == controller)
    {
        out.entry(r.object.clone())
            .or_default()
            .insert(r.member.clone());
    }
    out
}

fn now_ns() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    )
    .unwrap()
}

/// `member`'s `/debug/status` and metrics show its ring of `members` and its share.
async fn seen_from_outside(member: &Member, members: &[&str]) {
    let (code, body) = support::http_get(member.metrics, "/debug/status").await;
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        status["sharding"]["identity"],
        member.identity.as_str(),
        "{body}"
    );
    assert_eq!(status["sharding"]["members"], json!(members));
    let (_, metrics) = support::http_get(member.metrics, "/metrics").await;
    assert!(
        metrics.contains(&format!("informant_shard_members {}", members.len())),
        "{metrics}"
    );
    let objects = member.cached().await.len();
    assert!(
        metrics.contains(&format!(
            "informant_shard_objects{{group=\"\",version=\"v1\",kind=\"ConfigMap\"}} {objects}"
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains("informant_shard_handovers_total "),
        "{metrics}"
    );
}

/// Three members share the objects: disjoint caches that cover everything, each object
/// reconciled by exactly one member, never two at once; a member cut off from the API server
/// fences itself, its Lease expires, and the others reconcile its objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_share_the_objects_and_a_cut_off_members_share_moves_after_its_lease_expires() {
    let ring = Ring::new("namespace", FeatureGates::default()).await;
    let proxy =
        support::Proxy::start(SocketAddr::from(([127, 0, 0, 1], 0)), ring.server.addr()).await;
    let a = ring.start("a", ring.client.clone(), QUICK, false).await;
    let b = ring.start("b", ring.client.clone(), QUICK, false).await;
    let c = ring.start("c", proxy.client().await, QUICK, false).await;
    ring.settled(&[&a, &b, &c]).await;

    // Disjoint caches covering every object; each member caches its own namespaces.
    support::eventually("the caches to hold the shares", || async {
        let (ca, cb, cc) = (a.cached().await, b.cached().await, c.cached().await);
        ca.len() + cb.len() + cc.len() == ring.objects.len()
            && ca.union(&cb).chain(cc.iter()).count() == ring.objects.len()
            && [&ca, &cb, &cc].iter().all(|s| !s.is_empty())
    })
    .await;
    for m in [&a, &b, &c] {
        let s = m.sharding();
        assert_eq!(s.selection, "namespaces");
        let cached = m.cached().await;
        let namespaces: BTreeSet<String> = cached
            .iter()
            .map(|o| o.split('/').next().unwrap().to_owned())
            .collect();
        assert!(
            namespaces.iter().all(|ns| s.namespaces.contains(ns)),
            "{} caches {namespaces:?}, owns {:?}",
            m.identity,
            s.namespaces
        );
        let counted: i64 = s.objects.iter().map(|o| o.objects).sum();
        assert_eq!(
            counted,
            i64::try_from(cached.len()).unwrap(),
            "status counts the share"
        );
    }

    seen_from_outside(&a, &["a", "b", "c"]).await;

    // Steady state: every object reconciled again by exactly one member, its owner.
    let since = now_ns();
    ring.touch_all(1).await;
    support::eventually("every object reconciled after the touch", || async {
        reconciled_since(&ring.log(), since).len() == ring.objects.len()
    })
    .await;
    let owners: BTreeMap<String, String> = [&a, &b, &c]
        .iter()
        .flat_map(|m| {
            let s = m.sharding();
            s.namespaces
                .into_iter()
                .map(move |ns| (ns, m.identity.clone()))
        })
        .collect();
    for (object, members) in reconciled_since(&ring.log(), since) {
        let ns = object.split('/').next().unwrap();
        assert_eq!(
            members,
            BTreeSet::from([owners[ns].clone()]),
            "{object} reconciled by its owner alone"
        );
    }

    // c is cut off: it fences itself, its Lease expires for a and b, who reconcile its
    // objects; nothing overlaps.
    let c_objects: BTreeSet<String> = c.cached().await;
    assert!(!c_objects.is_empty());
    let cut_at = now_ns();
    let (_addr, _upstream) = proxy.take_away().await;
    support::eventually("a and b to count c gone", || async {
        [&a, &b]
            .iter()
            .all(|m| m.sharding().members == ["a".to_owned(), "b".to_owned()])
    })
    .await;
    let cut = tokio::time::Instant::now();
    support::eventually("c's objects reconciled by the others", || async {
        let since = reconciled_since(&ring.log(), cut_at);
        c_objects.iter().all(|o| {
            since
                .get(o)
                .is_some_and(|members| members.iter().any(|m| m != "c"))
        })
    })
    .await;
    // Within the lease duration (3 s) and a few retry periods, with room for a loaded machine.
    let took = cut.elapsed();
    assert!(
        took < Duration::from_secs(3 + 5),
        "c's objects were reconciled again {took:?} after the cut"
    );
    assert!(!c.sharding().active, "the cut-off member is fenced");
    let found = overlaps(&ring.log());
    assert!(found.is_empty(), "overlapping reconciles: {found:?}");
    let handovers: i64 = [&a, &b].iter().map(|m| m.sharding().handovers).sum();
    assert!(handovers >= 3, "start-up and c's share: {handovers}");

    a.stop().await;
    b.stop().await;
    // c cannot reach the server: its stop cannot delete its Lease, and must not hang.
    c.stop().await;
}

/// Members joining a busy member (every object in flight all the time) take their share
/// only once it let go: no overlap. With the test-only switch that skips the handover wait,
/// the checker reports overlaps: it can fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overlap_checker_passes_with_the_handover_and_catches_its_absence() {
    let busy = Work {
        takes: Duration::from_millis(300),
        again: true,
        concurrency: 64,
    };
    for skip_handover in [false, true] {
        let ring = Ring::new("namespace", FeatureGates::default()).await;
        let a = ring
            .start("a", ring.client.clone(), busy, skip_handover)
            .await;
        ring.settled(&[&a]).await;
        support::eventually("a to reconcile every object", || async {
            reconciled_since(&ring.log(), 0).len() == ring.objects.len()
        })
        .await;
        let joined_at = now_ns();
        let b = ring
            .start("b", ring.client.clone(), busy, skip_handover)
            .await;
        ring.settled(&[&a, &b]).await;
        support::eventually("b to reconcile its share", || async {
            reconciled_since(&ring.log(), joined_at)
                .values()
                .any(|members| members.contains("b"))
        })
        .await;
        // Let every reconcile that began before the ring settled end, then look.
        support::eventually("the busy members to cycle once more", || async {
            let log = ring.log();
            let settled = now_ns() - 1_000_000_000;
            log.iter().any(|r| r.member == "a" && r.start > settled)
                && log.iter().any(|r| r.member == "b" && r.start > settled)
        })
        .await;
        a.stop().await;
        b.stop().await;
        let found = overlaps(&ring.log());
        if skip_handover {
            assert!(
                !found.is_empty(),
                "without the handover wait, the checker must see overlaps"
            );
        } else {
            assert!(
                found.is_empty(),
                "overlapping reconciles: {:?}",
                &found[..found.len().min(3)]
            );
        }
    }
}

/// By uid, with and without the server's `shardSelector`: two members hold disjoint halves
/// covering every object and reconcile each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_uid_members_share_the_objects_with_and_without_the_servers_shard_selector() {
    for sharded_list_and_watch in [true, false] {
        let ring = Ring::new(
            "uid",
            FeatureGates {
                sharded_list_and_watch,
            },
        )
        .await;
        let a = ring.start("a", ring.client.clone(), QUICK, false).await;
        let b = ring.start("b", ring.client.clone(), QUICK, false).await;
        ring.settled(&[&a, &b]).await;
        let expected = if sharded_list_and_watch {
            "server-side"
        } else {
            "in-process"
        };
        assert_eq!(a.sharding().selection, expected);
        support::eventually("the caches to hold the halves", || async {
            let (ca, cb) = (a.cached().await, b.cached().await);
            ca.len() + cb.len() == ring.objects.len()
                && ca.union(&cb).count() == ring.objects.len()
                && !ca.is_empty()
                && !cb.is_empty()
        })
        .await;
        let since = now_ns();
        ring.touch_all(1).await;
        support::eventually("every object reconciled after the touch", || async {
            reconciled_since(&ring.log(), since).len() == ring.objects.len()
        })
        .await;
        let (ca, cb) = (a.cached().await, b.cached().await);
        for (object, members) in reconciled_since(&ring.log(), since) {
            let owner = match (ca.contains(&object), cb.contains(&object)) {
                (true, false) => "a",
                (false, true) => "b",
                other => panic!("{object} cached by a and b: {other:?}"),
            };
            assert_eq!(members, BTreeSet::from([owner.to_owned()]), "{object}");
        }
        assert!(overlaps(&ring.log()).is_empty());
        a.stop().await;
        b.stop().await;
    }
}

/// Hook controllers run on every member, each calling its hook for its share only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_controllers_run_on_every_member_each_for_its_share() {
    support::require("python3");
    let ring = Ring::with_hook("namespace").await;
    let a = ring.start("a", ring.client.clone(), QUICK, false).await;
    let b = ring.start("b", ring.client.clone(), QUICK, false).await;
    ring.settled(&[&a, &b]).await;
    support::eventually("both caches to hold their share", || async {
        a.cached().await.len() + b.cached().await.len() == ring.objects.len()
    })
    .await;
    let since = now_ns();
    ring.touch_all(1).await;
    support::eventually(
        "the hook called for every object after the touch",
        || async {
            reconciled_by(&ring.log(), since, "default/hooked").len() == ring.objects.len()
        },
    )
    .await;
    let (ca, cb) = (a.cached().await, b.cached().await);
    for (object, members) in reconciled_by(&ring.log(), since, "default/hooked") {
        assert!(ca.contains(&object) != cb.contains(&object), "{object}");
        let owner = if ca.contains(&object) { "a" } else { "b" };
        assert_eq!(members, BTreeSet::from([owner.to_owned()]), "{object}");
    }
    assert!(overlaps(&ring.log()).is_empty());
    a.stop().await;
    b.stop().await;
}
