//! Leader election against the embedded API server: one leader among racing candidates,
//! hand-over when the leader stops (with and without releasing the Lease), a stolen Lease and a
//! renew deadline reported as `Error::Lost`, and API errors retried while campaigning.
//!
//! Durations are short (lease 1s, renew deadline 600ms, retry 100ms); every wait is a watch
//! channel or a task awaited under a timeout.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use informant::apiserver::{TestServer, Verb};
use informant::manager::{
    LeaderElection as Options, LeaderElector, LeaderError as Error, LostCause,
};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::PostParams;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

const LEASE: &str = "informant-test";
const NAMESPACE: &str = "default";
const LEASE_DURATION: Duration = Duration::from_secs(1);
const RETRY: Duration = Duration::from_millis(100);
/// Room for a loaded machine (2 cores shared by several builds) on top of the protocol's bounds.
const SLACK: Duration = Duration::from_secs(2);

fn options(identity: &str) -> Options {
    Options {
        identity: identity.to_owned(),
        lease_duration: LEASE_DURATION,
        renew_deadline: Duration::from_millis(600),
        retry_period: RETRY,
        ..Options::new(LEASE, NAMESPACE)
    }
}

struct Candidate {
    identity: String,
    leader: watch::Receiver<bool>,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), Error>>,
}

impl Candidate {
    fn start(elector: LeaderElector) -> Self {
        let identity = elector.options().identity.clone();
        let leader = elector.is_leader();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(elector.run(shutdown.clone()));
        Self {
            identity,
            leader,
            shutdown,
            task,
        }
    }

    async fn stop(self) -> Result<(), Error> {
        self.shutdown.cancel();
        timeout(SLACK, self.task)
            .await
            .expect("run returns soon after shutdown")
            .unwrap()
    }
}

async fn start(server: &TestServer, options: Options) -> Candidate {
    Candidate::start(LeaderElector::new(server.client().await.unwrap(), options))
}

/// Follows every candidate's `is_leader` into one channel of all of them, and remembers
/// whether two were ever true at once.
struct Monitor {
    all: watch::Receiver<Vec<bool>>,
    overlap: Arc<Mutex<Option<Vec<bool>>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Monitor {
    fn new(candidates: &[&Candidate]) -> Self {
        let (tx, all) = watch::channel(vec![false; candidates.len()]);
        let tx = Arc::new(tx);
        let overlap = Arc::new(Mutex::new(None));
        let tasks = candidates
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (tx, overlap, mut rx) = (tx.clone(), overlap.clone(), c.leader.clone());
                tokio::spawn(async move {
                    loop {
                        let leading = *rx.borrow_and_update();
                        tx.send_modify(|all| {
                            all[i] = leading;
                            if all.iter().filter(|l| **l).count() > 1 {
                                overlap.lock().unwrap().get_or_insert_with(|| all.clone());
                            }
                        });
                        if rx.changed().await.is_err() {
                            return;
                        }
                    }
                })
            })
            .collect();
        Self {
            all,
            overlap,
            tasks,
        }
    }

    /// Waits until one candidate leads and returns its index.
    async fn leader(&mut self, within: Duration) -> usize {
        let all = timeout(within, self.all.wait_for(|all| all.contains(&true)))
            .await
            .expect("a candidate becomes leader")
            .unwrap()
            .clone();
        all.iter().position(|l| *l).unwrap()
    }

    fn assert_never_two_leaders(&self) {
        let overlap = self.overlap.lock().unwrap().clone();
        assert_eq!(overlap, None, "two candidates led at once");
    }

    fn stop(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

async fn lease(server: &TestServer) -> Lease {
    Api::<Lease>::namespaced(server.client().await.unwrap(), NAMESPACE)
        .get(LEASE)
        .await
        .unwrap()
}

fn holder(lease: &Lease) -> &str {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .unwrap_or_default()
}

fn transitions(lease: &Lease) -> i32 {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_transitions)
        .unwrap_or_default()
}

async fn wait_for(rx: &mut watch::Receiver<bool>, want: bool, within: Duration) {
    timeout(within, rx.wait_for(|l| *l == want))
        .await
        .unwrap_or_else(|_| panic!("is_leader did not become {want} within {within:?}"))
        .unwrap();
}

fn metrics(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

#[tokio::test]
async fn three_racing_candidates_elect_exactly_one_leader_that_stays_leader() {
    let server = TestServer::start().await.unwrap();
    let mut candidates = Vec::new();
    for id in ["a", "b", "c"] {
        candidates.push(start(&server, options(id)).await);
    }
    let mut monitor = Monitor::new(&candidates.iter().collect::<Vec<_>>());
    let leader = monitor.leader(LEASE_DURATION + SLACK).await;
    let elected = monitor.all.borrow().clone();
    let updates_before = server.handle().request_count(Verb::Update, "leases");

    // Three lease durations: the leader renews about 30 times and nobody else takes over.
    let changed = timeout(
        LEASE_DURATION * 3,
        monitor.all.wait_for(|all| *all != elected),
    )
    .await
    .map(|all| all.map(|all| all.clone()));
    assert!(changed.is_err(), "leadership changed: {changed:?}");
    monitor.assert_never_two_leaders();

    let lease = lease(&server).await;
    assert_eq!(holder(&lease), candidates[leader].identity);
    assert_eq!(transitions(&lease), 0, "the creator holds the lease");
    let renewals = server.handle().request_count(Verb::Update, "leases") - updates_before;
    assert!(renewals >= 5, "the leader renewed only {renewals} times");
    assert_eq!(
        server.handle().request_count(Verb::Patch, "leases"),
        0,
        "every write is a create or a conditional update"
    );
    monitor.stop();
    for c in candidates {
        c.stop().await.unwrap();
    }
}

#[tokio::test]
async fn candidates_racing_for_an_expired_lease_elect_one() {
    let server = TestServer::start().await.unwrap();
    // A lease left by a dead holder: every candidate waits out its duration, then all update it
    // at about the same time from the same resourceVersion; only one update may succeed.
    let api = Api::<Lease>::namespaced(server.client().await.unwrap(), NAMESPACE);
    let now = MicroTime(jiff::Timestamp::now());
    let ghost = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some(LEASE.into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("ghost".into()),
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(4),
            ..Default::default()
        }),
    };
    api.create(&PostParams::default(), &ghost).await.unwrap();
    // Each read-then-update takes two latencies, longer than the candidates' retry period, so
    // their attempts overlap.
    server.handle().set_latency(Duration::from_millis(150));
    let mut candidates = Vec::new();
    for id in ["a", "b", "c"] {
        candidates.push(start(&server, options(id)).await);
    }
    let mut monitor = Monitor::new(&candidates.iter().collect::<Vec<_>>());
    let leader = monitor.leader(LEASE_DURATION + SLACK).await;
    let elected = monitor.all.borrow().clone();
    // A second winner would lead until its next renewal conflicts, then report Lost.
    let changed = timeout(LEASE_DURATION, monitor.all.wait_for(|all| *all != elected))
        .await
        .map(|all| all.map(|all| all.clone()));
    assert!(changed.is_err(), "leadership changed: {changed:?}");
    monitor.assert_never_two_leaders();
    for c in &candidates {
        assert!(!c.task.is_finished(), "{} stopped campaigning", c.identity);
    }
    let lease = lease(&server).await;
    assert_eq!(holder(&lease), candidates[leader].identity);
    assert_eq!(transitions(&lease), 5, "one takeover");
    monitor.stop();
    for c in candidates {
        c.stop().await.unwrap();
    }
}

#[tokio::test]
async fn standby_takes_over_within_the_lease_duration_when_the_leader_stops() {
    let server = TestServer::start().await.unwrap();
    let a = start(&server, options("a")).await;
    let b = start(&server, options("b")).await;
    let mut monitor = Monitor::new(&[&a, &b]);
    let (leader, mut standby) = if monitor.leader(LEASE_DURATION + SLACK).await == 0 {
        (a, b)
    } else {
        (b, a)
    };
    let (mut old, leader_id) = (leader.leader.clone(), leader.identity.clone());
    leader.stop().await.unwrap();
    assert!(
        !*old.borrow_and_update(),
        "a stopped candidate does not lead"
    );
    let last = lease(&server).await;
    assert_eq!(
        holder(&last),
        leader_id,
        "without release_on_cancel the stopped leader keeps the lease"
    );

    // The standby must see the lease unchanged for a lease duration; it tries every retry
    // period plus up to 20% jitter.
    wait_for(
        &mut standby.leader,
        true,
        LEASE_DURATION + RETRY.mul_f64(2.2) + SLACK,
    )
    .await;
    monitor.assert_never_two_leaders();
    let lease = lease(&server).await;
    assert_eq!(holder(&lease), standby.identity);
    assert_eq!(transitions(&lease), 1);
    // Same machine, same wall clock: the takeover came a full lease after the last renewal.
    let gap =
        millis(&lease, |s| s.acquire_time.as_ref()) - millis(&last, |s| s.renew_time.as_ref());
    assert!(
        gap >= i64::try_from(LEASE_DURATION.as_millis()).unwrap(),
        "took over {gap}ms after the last renewal"
    );
    monitor.stop();
    standby.stop().await.unwrap();
}

fn millis(lease: &Lease, field: impl Fn(&LeaseSpec) -> Option<&MicroTime>) -> i64 {
    field(lease.spec.as_ref().unwrap())
        .unwrap()
        .0
        .as_millisecond()
}

#[tokio::test]
async fn release_on_cancel_hands_over_before_the_lease_would_expire() {
    let server = TestServer::start().await.unwrap();
    let long = |id| Options {
        lease_duration: Duration::from_secs(5),
        release_on_cancel: true,
        ..options(id)
    };
    let a = start(&server, long("a")).await;
    let b = start(&server, long("b")).await;
    let mut monitor = Monitor::new(&[&a, &b]);
    let (leader, mut standby) = if monitor.leader(SLACK).await == 0 {
        (a, b)
    } else {
        (b, a)
    };
    let leader_id = leader.identity.clone();
    let stopped = Instant::now();
    leader.stop().await.unwrap();
    let released = lease(&server).await;
    assert_ne!(
        holder(&released),
        leader_id,
        "the stopped leader released the lease"
    );
    // Unreleased, the lease would stay valid for at least 5s minus a retry period.
    wait_for(&mut standby.leader, true, Duration::from_secs(4)).await;
    let waited = stopped.elapsed();
    monitor.assert_never_two_leaders();
    let lease = lease(&server).await;
    assert_eq!(holder(&lease), standby.identity);
    assert_eq!(transitions(&lease), 1);
    eprintln!("release_on_cancel hand-over took {waited:?} (lease duration 5s)");
    monitor.stop();
    standby.stop().await.unwrap();
}

/// Writes the Lease as `thief`, as a candidate on the other side of a partition would.
async fn steal(server: &TestServer) {
    let api = Api::<Lease>::namespaced(server.client().await.unwrap(), NAMESPACE);
    // The leader renews every retry period: retry on 409 like any candidate.
    for _ in 0..50 {
        let mut lease = api.get(LEASE).await.unwrap();
        let spec = lease.spec.get_or_insert_default();
        let now = MicroTime(jiff::Timestamp::now());
        spec.holder_identity = Some("thief".into());
        spec.acquire_time = Some(now.clone());
        spec.renew_time = Some(now);
        spec.lease_duration_seconds = Some(1);
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        match api.replace(LEASE, &PostParams::default(), &lease).await {
            Ok(_) => return,
            Err(kube::Error::Api(status)) if status.is_conflict() => {}
            Err(e) => panic!("stealing the lease: {e}"),
        }
    }
    panic!("could not steal the lease in 50 tries");
}

#[tokio::test]
async fn leader_whose_lease_is_stolen_reports_lost_and_stops_leading() {
    let server = TestServer::start().await.unwrap();
    let elector = LeaderElector::new(server.client().await.unwrap(), options("a"));
    let mut registry = Registry::default();
    elector.register(&mut registry);
    let status = format!("leader_election_master_status{{name=\"{LEASE}\"}}");
    assert!(metrics(&registry).contains(&format!("{status} 0")));
    assert!(metrics(&registry).contains(&format!(
        "leader_election_slowpath_total{{name=\"{LEASE}\"}} 0"
    )));
    let mut c = Candidate::start(elector);
    wait_for(&mut c.leader, true, SLACK).await;
    assert!(metrics(&registry).contains(&format!("{status} 1")));

    steal(&server).await;
    // The next renewal (a retry period later) conflicts, reads the lease and finds the thief.
    let result = timeout(RETRY + SLACK, c.task)
        .await
        .expect("the leader notices within a retry period")
        .unwrap();
    match result {
        Err(Error::Lost {
            cause: LostCause::HeldBy(holder),
            identity,
            name,
            ..
        }) => {
            assert_eq!(holder, "thief");
            assert_eq!(identity, "a");
            assert_eq!(name, LEASE);
        }
        other => panic!("expected a lost election, got {other:?}"),
    }
    assert!(!*c.leader.borrow(), "a lost leader does not lead");
    assert!(metrics(&registry).contains(&format!("{status} 0")));
    assert_eq!(
        holder(&lease(&server).await),
        "thief",
        "the loser wrote nothing"
    );
}

#[tokio::test]
async fn leader_that_cannot_renew_within_the_deadline_reports_lost() {
    let server = TestServer::start().await.unwrap();
    let mut c = start(&server, options("a")).await;
    wait_for(&mut c.leader, true, SLACK).await;
    server
        .handle()
        .fail_next(None, Some("leases"), u32::MAX, 503);
    let result = timeout(RETRY + Duration::from_millis(600) + SLACK, c.task)
        .await
        .expect("the leader gives up after its renew deadline")
        .unwrap();
    let error = result.unwrap_err();
    assert!(
        matches!(
            &error,
            Error::Lost { cause: LostCause::RenewDeadline(d), .. } if *d == Duration::from_millis(600)
        ),
        "{error:?}"
    );
    assert!(!*c.leader.borrow());
    assert!(
        error
            .to_string()
            .starts_with("leader election lost: lease default/informant-test")
    );
}

#[tokio::test]
async fn api_errors_while_campaigning_are_retried() {
    let server = TestServer::start().await.unwrap();
    server.handle().fail_next(None, Some("leases"), 5, 500);
    let mut c = start(&server, options("a")).await;
    wait_for(&mut c.leader, true, RETRY.mul_f64(2.2) * 6 + SLACK).await;
    assert_eq!(holder(&lease(&server).await), "a");
    c.stop().await.unwrap();
}

#[tokio::test]
async fn invalid_options_are_rejected_before_campaigning() {
    let server = TestServer::start().await.unwrap();
    let bad = Options {
        renew_deadline: LEASE_DURATION,
        ..options("a")
    };
    let c = start(&server, bad).await;
    let result = timeout(SLACK, c.task).await.unwrap().unwrap();
    assert!(
        matches!(
            result,
            Err(Error::InvalidOptions {
                field: "lease_duration",
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(server.handle().request_count(Verb::Get, "leases"), 0);
}

/// With `lease_wait`, a candidate that finds no Lease leaves its creation to the installer
/// (the Helm chart renders it, created after the Deployment) and takes the one the installer
/// creates; without an installer, it creates the Lease itself once the wait is over.
#[tokio::test]
async fn a_candidate_waits_for_its_installer_to_create_the_lease_then_creates_it_itself() {
    let server = TestServer::start().await.unwrap();
    let waiting = start(
        &server,
        Options {
            lease_wait: Duration::from_hours(1),
            ..options("a")
        },
    )
    .await;
    let deadline = Instant::now() + SLACK * 5;
    while server.handle().request_count(Verb::Get, "leases") < 5 {
        assert!(
            Instant::now() < deadline,
            "the candidate never read the lease"
        );
        tokio::time::sleep(RETRY / 4).await; // polling the request count, not a synchronisation
    }
    assert_eq!(
        server.handle().request_count(Verb::Create, "leases"),
        0,
        "the candidate created the lease the installer was to create"
    );
    // The installer's Lease, as the chart renders it: no spec.
    Api::<Lease>::namespaced(server.client().await.unwrap(), NAMESPACE)
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": LEASE}})).unwrap(),
        )
        .await
        .unwrap();
    let mut leader = waiting.leader.clone();
    wait_for(&mut leader, true, SLACK).await;
    assert_eq!(holder(&lease(&server).await), "a");
    waiting.stop().await.unwrap();

    // No installer: created after the wait.
    let server = TestServer::start().await.unwrap();
    let alone = start(
        &server,
        Options {
            lease_wait: Duration::from_millis(300),
            ..options("b")
        },
    )
    .await;
    let mut leader = alone.leader.clone();
    wait_for(&mut leader, true, Duration::from_millis(300) + SLACK).await;
    assert_eq!(holder(&lease(&server).await), "b");
    assert_eq!(server.handle().request_count(Verb::Create, "leases"), 1);
    alone.stop().await.unwrap();
}
