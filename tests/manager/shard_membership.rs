//! Shard ring membership on the embedded API server: members hold one Lease each and see each
//! other and each other's claims; a member that stops leaves within a retry period; a member
//! cut off from the API server (the TCP proxy taken away) fences itself before the others
//! count it gone, and comes back when the connection does.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use informant::manager::{Fence, Member, MemberView, Membership, RING_LABEL};
use informant::selector::{RangeSet, ShardRange};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, ListParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::support::{Proxy, WAIT, eventually, server};

const NAMESPACE: &str = "default";

/// Fast timings with leader election's proportions (lease > renew deadline > retry period).
fn membership(identity: &str) -> Membership {
    Membership {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(200),
        ..Membership::new("shop", NAMESPACE, identity)
    }
}

struct Running {
    view: watch::Receiver<MemberView>,
    fence: Fence,
    claims: watch::Sender<RangeSet>,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), informant::manager::LeaderError>>,
}

fn start(client: Client, identity: &str) -> Running {
    let member = Member::new(client, membership(identity));
    let view = member.view();
    let fence = member.fence();
    let claims = member.claims();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(member.run(shutdown.clone()));
    Running {
        view,
        fence,
        claims,
        shutdown,
        task,
    }
}

impl Running {
    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }

    /// Waits until this member's view satisfies `check`; the instant it did.
    async fn until(&mut self, what: &str, check: impl Fn(&MemberView) -> bool) -> Instant {
        tokio::time::timeout(WAIT, self.view.wait_for(|v| check(v)))
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
            .unwrap();
        Instant::now()
    }
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_see_each_other_and_one_that_stops_leaves_within_a_retry_period() {
    let (_s, client) = server().await;
    let mut members: Vec<Running> = ["a", "b", "c"]
        .iter()
        .map(|id| start(client.clone(), id))
        .collect();
    for m in &mut members {
        m.until("three members", |v| {
            v.active && v.members == set(&["a", "b", "c"])
        })
        .await;
    }
    let leases = Api::<Lease>::namespaced(client.clone(), NAMESPACE);
    let listed = leases
        .list(&ListParams::default().labels(&format!("{RING_LABEL}=shop")))
        .await
        .unwrap();
    let holders: BTreeSet<String> = listed
        .items
        .iter()
        .filter_map(|l| l.spec.as_ref()?.holder_identity.clone())
        .collect();
    assert_eq!(holders, set(&["a", "b", "c"]), "one Lease each, labelled");

    // A member's claims reach the others through its Lease.
    let lower = RangeSet::from_ranges([ShardRange::new(0, 1 << 63).unwrap()]);
    members[1].claims.send_replace(lower.clone());
    members[0]
        .until("b's claims", |v| v.claims.get("b") == Some(&lower))
        .await;
    assert!(
        members[0].view.borrow().claims["c"].is_empty(),
        "c claims nothing"
    );

    let c = members.pop().unwrap();
    let stopped_at = Instant::now();
    c.stop().await;
    for m in &mut members {
        let seen_at = m
            .until("c to leave", |v| v.members == set(&["a", "b"]))
            .await;
        assert!(
            seen_at.duration_since(stopped_at) < Duration::from_secs(3),
            "a released Lease is gone before it could expire"
        );
    }
    for m in members {
        m.stop().await;
    }
    eventually("every Lease deleted", || async {
        leases
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_cut_off_fences_itself_before_the_others_count_it_gone() {
    let (s, client) = server().await;
    let proxy = Proxy::start(SocketAddr::from(([127, 0, 0, 1], 0)), s.addr()).await;
    let mut cut = start(proxy.client().await, "cut");
    let mut others = [start(client.clone(), "b"), start(client.clone(), "c")];
    let all = set(&["b", "c", "cut"]);
    cut.until("three members", |v| v.active && v.members == all)
        .await;
    for m in &mut others {
        m.until("three members", |v| v.members == all).await;
    }

    let (addr, upstream) = proxy.take_away().await;
    let fenced_at = cut
        .until("the cut-off member to fence itself", |v| {
            !v.active && !v.members.contains("cut")
        })
        .await;
    assert!(
        !cut.fence.holds(),
        "the fence is down before the view says so"
    );
    for m in &mut others {
        assert!(m.fence.holds(), "the others still hold theirs");
        let gone_at = m
            .until("the cut-off member to be counted gone", |v| {
                v.members == set(&["b", "c"])
            })
            .await;
        assert!(
            fenced_at < gone_at,
            "the cut-off member stopped ({fenced_at:?}) before another saw it gone ({gone_at:?})"
        );
    }

    let _back = Proxy::start(addr, upstream).await;
    cut.until("the member to be back", |v| v.active && v.members == all)
        .await;
    assert!(cut.fence.holds());
    for m in &mut others {
        m.until("the member to be back", |v| v.members == all).await;
    }
    cut.stop().await;
    for m in others {
        m.stop().await;
    }
}

/// Issue #33 item 12: on a starved machine a renewal takes longer than the retry period, well
/// within the renew deadline. Each attempt was cut at one retry period, so such a member fenced
/// itself, came back and fenced itself again. Here every request takes 150 ms: a renewal (GET
/// and PUT) 300 ms, above the 200 ms retry period; the member becomes active and stays so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_renewals_outlast_the_retry_period_but_not_the_deadline_stays_active() {
    let (s, client) = server().await;
    s.handle().set_latency(Duration::from_millis(150));
    let mut slow = start(client, "slow");
    slow.until("the slow member to be active", |v| {
        v.active && v.members == set(&["slow"])
    })
    .await;
    // Longer than the renew deadline and than the lease: it would have fallen by now.
    let lease = membership("slow").lease_duration;
    let fell = tokio::time::timeout(2 * lease, slow.view.wait_for(|v| !v.active))
        .await
        .map(|view| view.map(|v| v.clone()));
    assert!(fell.is_err(), "the member stopped acting: {fell:?}");
    assert!(slow.fence.holds());
    s.handle().set_latency(Duration::ZERO);
    slow.stop().await;
}
