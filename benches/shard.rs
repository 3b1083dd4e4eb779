//! `benches/shard.rs`: the figures of a shard ring of `informant run` processes on the embedded
//! API server (in this process), with the harness of the sharding tests
//! (`tests/shard_harness`): membership timings lease 4 s, renew deadline 2 s, retry 500 ms.
//!
//! 1. Memory and LIST bytes per member, with 1, 2, 3 and 4 members, for 100,000 `ConfigMap`s
//!    (about 240 B of JSON each) in 100 namespaces, key `uid`: each member only caches (`byObject`,
//!    no controller). The members' Leases exist before they start, so each lists its share
//!    from its first LIST. Memory is the member process's resident set (`VmRSS` of
//!    `/proc/<pid>/status`) once its cache holds its share (`informant_cache_objects`), beside
//!    that of a member of the same ring holding nothing; LIST bytes are the bodies of the
//!    `ConfigMap` LIST answers the server gave the member (its log of LIST answers); and the
//!    resident memory of a member caching nothing, for comparison. With the
//!    server's `ShardedListAndWatch`, and without (the member lists everything, keeps its
//!    share).
//! 2. Hand-over time, 3 members and 3,000 objects with a hook `Controller` (a webhook served
//!    here), key `uid`: a fourth member joins, then one member is killed (`SIGKILL`), twice.
//!    For each object that changed member: the time from the join (the process start) or the
//!    kill to the first reconcile by its new member, from the reconcile log. p50, p99, max.
//! 3. Reconciles/s of the hook `Controller` (a webhook served here that answers at once) with
//!    1 and with 3 members: 10,000 objects created in a settled ring while the webhook holds
//!    every call back; once each member caches its share, the webhook lets the calls go; the
//!    reconciles over the time from then to the end of the last; three rings each, the median.
//!
//! Usage: `cargo bench --bench shard` (a few minutes once built); `-- --quick`: 10,000
//! objects for the first figure, one join and one kill, 3,000 objects for the third.

#[path = "../tests/shard_harness/mod.rs"]
mod shard_harness;
#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use shard_harness::{Fleet, PATIENCE, POLL, Settings, changed, now_us};
use support::holds_within_every;

fn mib(bytes: u64) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "a figure for humans")]
    let b = bytes as f64;
    b / (1024.0 * 1024.0)
}

/// p50, p99 and max of `samples` in seconds (nearest rank).
fn percentiles(samples: &mut [u64]) -> (f64, f64, f64) {
    samples.sort_unstable();
    let at = |percent: usize| {
        let i = (samples.len() * percent).div_ceil(100).saturating_sub(1);
        Duration::from_micros(samples[i]).as_secs_f64()
    };
    (at(50), at(99), at(100))
}

/// The resident memory of a member caching nothing (its ring has no object yet).
/// Waits until every member caches the objects `owners` gives it (panics, with the fleet's
/// report, when one does not within the harness's patience).
async fn caching_their_shares(fleet: &Fleet, owners: &BTreeMap<String, String>) {
    let shares = shard_harness::shares(owners);
    for (i, member) in fleet.members.iter().enumerate() {
        let want = shares.get(&member.identity).copied().unwrap_or_default() as u64;
        let synced = holds_within_every(PATIENCE, POLL, || async {
            fleet.cached(i).await == Some(want)
        })
        .await;
        assert!(
            synced,
            "member {i} never cached its {want} objects\n{}",
            fleet.report()
        );
    }
}

async fn baseline() {
    let settings = Settings {
        hot: 0,
        controller: false,
        ..Settings::default()
    };
    let mut fleet = Fleet::new(settings).await;
    fleet.spawn().await;
    fleet.until_settled("the ring to settle").await;
    let synced = holds_within_every(PATIENCE, POLL, || async {
        fleet.cached(0).await == Some(0)
    })
    .await;
    assert!(synced, "the member never synced\n{}", fleet.report());
    println!(
        "  a member caching nothing: RSS {:.1} MiB",
        mib(fleet.rss(0))
    );
}

/// Figure 1 for `members` members: each one's resident memory, objects cached and LIST bytes.
async fn memory(objects: usize, members: usize, server_side: bool) {
    let settings = Settings {
        namespaces: 100,
        per_namespace: objects / 100,
        hot: 0,
        controller: false,
        server_side,
        ..Settings::default()
    };
    let mut fleet = Fleet::new(settings).await;
    fleet.create_objects();
    fleet.prepare_leases(members).await;
    for _ in 0..members {
        fleet.spawn().await;
    }
    fleet.until_settled("the ring to settle").await;
    caching_their_shares(&fleet, &fleet.assignment(&fleet.ring())).await;
    let ring = fleet.ring();
    // Without the gate every member's LIST is the same, and their pages interleave: the bytes
    // of all LIST pages over the number of complete LISTs.
    let unfiltered = {
        let pages: Vec<_> = fleet
            .server
            .handle()
            .lists()
            .into_iter()
            .filter(|a| a.resource == "configmaps" && a.items > 0)
            .collect();
        let lists = pages.iter().filter(|a| a.last_page()).count().max(1);
        pages.iter().map(|a| a.bytes).sum::<usize>() / lists
    };
    for (i, member) in fleet.members.iter().enumerate() {
        let ranges = ring.ranges(&member.identity);
        let bytes = if server_side {
            fleet
                .last_list(Some(ranges.as_slice()))
                .map_or(0, |(_, bytes, _)| bytes)
        } else {
            unfiltered
        };
        println!(
            "  {members} member(s), {}: member {i}: {} objects cached, RSS {:.1} MiB, LIST {:.1} MiB",
            if server_side {
                "server-side"
            } else {
                "filtered here"
            },
            fleet.cached(i).await.unwrap_or_default(),
            mib(fleet.rss(i)),
            mib(bytes as u64),
        );
    }
}

/// Figure 2: the hand-over times of `trials` joins and kills.
async fn handovers(trials: usize) {
    let settings = Settings {
        hot: 0,
        ..Settings::default()
    };
    let mut fleet = Fleet::start(settings, 3).await;
    let owners = fleet.assignment(&fleet.ring());
    assert!(fleet.reconciled_by(&owners, 0, PATIENCE).await);
    let (mut joins, mut kills) = (Vec::new(), Vec::new());
    for trial in 0..trials {
        let before = fleet.assignment(&fleet.ring());
        let t = now_us();
        fleet.spawn().await;
        fleet.until_settled("the ring after a join").await;
        let moving = changed(&before, &fleet.assignment(&fleet.ring()));
        assert!(fleet.reconciled_by(&moving, t, PATIENCE).await);
        let taken = fleet.log().since(t).first_taken(&before);
        joins.extend(moving.keys().filter_map(|o| taken.get(o).map(|s| s - t)));
        let victim = trial % fleet.members.len();
        let live = fleet.live();
        let victim = (victim..fleet.members.len())
            .chain(0..victim)
            .find(|i| live.contains(&fleet.members[*i].identity))
            .unwrap();
        let before = fleet.assignment(&fleet.ring());
        let t = now_us();
        fleet.kill(victim);
        let moving = changed(&before, &fleet.assignment(&fleet.ring()));
        assert!(fleet.reconciled_by(&moving, t, PATIENCE).await);
        let taken = fleet.log().since(t).first_taken(&before);
        kills.extend(moving.keys().filter_map(|o| taken.get(o).map(|s| s - t)));
        fleet.until_settled("the ring after a kill").await;
    }
    for (what, samples) in [("join", &mut joins), ("kill -9", &mut kills)] {
        let n = samples.len();
        let (p50, p99, max) = percentiles(samples);
        println!(
            "  hand-over after a {what}: {n} objects, p50 {p50:.2} s, p99 {p99:.2} s, max {max:.2} s"
        );
    }
}

/// Figure 3: reconciles/s of the hook `Controller` with `members` members: `objects` objects
/// created in a settled ring while the hook holds every call back; once every member caches its
/// share (its controller has queued it), the hook lets the calls go: the reconciles over the
/// time from then to the end of the last; the rate of each of `trials` rings.
async fn throughput(members: usize, objects: usize, trials: usize) {
    let mut rates = Vec::new();
    for _ in 0..trials {
        let settings = Settings {
            namespaces: 10,
            per_namespace: objects / 10,
            hot: 0,
            ..Settings::default()
        };
        let mut fleet = Fleet::new(settings).await;
        for _ in 0..members {
            fleet.spawn().await;
        }
        fleet.until_settled("the ring to settle").await;
        fleet.hook.hold(true);
        fleet.create_objects();
        let owners = fleet.assignment(&fleet.ring());
        caching_their_shares(&fleet, &owners).await;
        let from = now_us();
        fleet.hook.hold(false);
        assert!(fleet.reconciled_by(&owners, from, PATIENCE).await);
        let log = fleet.log().since(from);
        let hook: Vec<_> = log
            .reconciles()
            .iter()
            .filter(|r| r.source == "hook")
            .collect();
        let last = hook.iter().filter_map(|r| r.end).max().unwrap_or(from);
        #[expect(clippy::cast_precision_loss, reason = "a rate for humans")]
        let rate = hook.len() as f64 / Duration::from_micros(last - from).as_secs_f64();
        rates.push(rate);
    }
    rates.sort_by(f64::total_cmp);
    let shown: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
    println!(
        "  {members} member(s): median {:.0} reconciles/s (each ring: {})",
        rates[rates.len() / 2],
        shown.join(", ")
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let objects = if quick { 10_000 } else { 100_000 };
        println!("1. memory and LIST bytes per member, {objects} ConfigMaps, key uid");
        baseline().await;
        for server_side in [true, false] {
            for members in 1..=4 {
                memory(objects, members, server_side).await;
            }
        }
        println!("2. hand-over times, 3,000 objects, lease 4 s");
        handovers(if quick { 1 } else { 2 }).await;
        let burst = if quick { 3_000 } else { 10_000 };
        println!("3. reconciles/s of a hook Controller, {burst} objects queued at once");
        for members in [1, 3] {
            throughput(members, burst, if quick { 1 } else { 3 }).await;
        }
    });
}
