//! Leader election hand-over between two `Manager`s on one embedded API server, both reading
//! the `CacheConfig` resource `default/config`: exactly one leads at any time, only the leader
//! writes the status (each manager's client counts its own status patches), both caches read
//! whoever leads, and when the leader stops the standby takes over within the lease duration
//! and writes the status.
//!
//! Durations are short (lease 1s, renew deadline 600ms, retry 100ms); every wait is a watch or
//! broadcast channel, or a task, awaited under a timeout. Nothing sleeps.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use informant::apiserver::TestServer;
use informant::cache::{Cache, ListOptions, typed};
use informant::config::{CacheConfig, CacheConfigSpec};
use informant::manager::LeaderElection;
use informant::manager::{ConfigSource, Error, Manager, Options, Reload};
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::config::KubeConfigOptions;
use serde_json::json;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

const NS: &str = "default";
const NAME: &str = "config";
const WAIT: Duration = Duration::from_secs(20);
const LEASE_DURATION: Duration = Duration::from_secs(1);
/// Room for a loaded machine (2 cores shared by several builds) on top of the protocol's bounds.
const SLACK: Duration = Duration::from_secs(3);

/// A server with the `CacheConfig` CRD installed, `default/config` caching `ConfigMap`s
/// eagerly, and one `ConfigMap` to read.
async fn server() -> (support::Server, Client) {
    let (server, client) = support::server_with_cacheconfig_crd().await;
    let spec: CacheConfigSpec = serde_json::from_value(json!({
        "syncPeriod": "1h",
        "byObject": [{"apiVersion": "v1", "kind": "ConfigMap"}],
    }))
    .unwrap();
    cacheconfigs(&client)
        .create(&PostParams::default(), &CacheConfig::new(NAME, spec))
        .await
        .unwrap();
    // The namespace first: a real API server refuses objects in one that does not exist.
    server.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}));
    server.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": "team-a", "name": "a1"}}));
    (server, client)
}

fn cacheconfigs(client: &Client) -> Api<CacheConfig> {
    Api::namespaced(client.clone(), NS)
}

/// A client of `server` that counts the `CacheConfig` status patches it sends.
async fn counting_client(server: &TestServer) -> (Client, watch::Receiver<u64>) {
    let config =
        kube::Config::from_custom_kubeconfig(server.kubeconfig(), &KubeConfigOptions::default())
            .await
            .unwrap();
    let (patches, counted) = watch::channel(0_u64);
    let layer =
        tower::util::MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
            let path = request.uri().path();
            if request.method() == http::Method::PATCH
                && path.contains("/cacheconfigs/")
                && path.ends_with("/status")
            {
                patches.send_modify(|n| *n += 1);
            }
            request
        });
    let client = kube::client::ClientBuilder::try_from(config)
        .unwrap()
        .with_layer(&layer)
        .build();
    (client, counted)
}

/// A running manager and what the test watches of it.
struct Running {
    identity: &'static str,
    leader: watch::Receiver<bool>,
    status_patches: watch::Receiver<u64>,
    reloads: broadcast::Receiver<Reload>,
    cache: Arc<informant::cache::SharedCache>,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), Error>>,
}

async fn start(server: &TestServer, identity: &'static str) -> Running {
    let (client, status_patches) = counting_client(server).await;
    let options = Options {
        leader_election: Some(LeaderElection {
            identity: identity.to_owned(),
            lease_duration: LEASE_DURATION,
            renew_deadline: Duration::from_millis(600),
            retry_period: Duration::from_millis(100),
            ..LeaderElection::new("informant-leader-test", NS)
        }),
        shutdown_grace: Duration::from_secs(10),
        ..Options::new(ConfigSource::Resource {
            namespace: NS.to_owned(),
            name: NAME.to_owned(),
        })
    };
    let manager = Manager::new(client, options).await.unwrap();
    let shutdown = CancellationToken::new();
    let state = manager.state();
    let running = Running {
        identity,
        leader: manager.is_leader(),
        status_patches,
        reloads: manager.reloads(),
        cache: manager.cache(),
        task: tokio::spawn(manager.run(shutdown.clone())),
        shutdown,
    };
    timeout(WAIT, state.serving())
        .await
        .expect("the first tree serves");
    running
}

impl Running {
    /// The names of the `ConfigMap`s this manager's cache reads.
    async fn configmaps(&self) -> Vec<String> {
        let list = timeout(
            WAIT,
            self.cache
                .list(&typed::gvk_of::<ConfigMap>(), &ListOptions::default()),
        )
        .await
        .expect("cache read within the timeout")
        .unwrap();
        list.iter()
            .map(|o| o.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    /// Waits for the next `Reload::Applied`.
    async fn applied(&mut self) {
        loop {
            match timeout(WAIT, self.reloads.recv()).await {
                Ok(Ok(Reload::Applied { .. })) => return,
                Ok(Ok(_)) => {}
                other => panic!("{}: no applied reload: {other:?}", self.identity),
            }
        }
    }

    /// Waits until this manager has sent more than `n` status patches.
    async fn patched_more_than(&mut self, n: u64) -> u64 {
        *timeout(WAIT, self.status_patches.wait_for(|count| *count > n))
            .await
            .unwrap_or_else(|_| panic!("{} wrote no status", self.identity))
            .unwrap()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        timeout(WAIT, self.task)
            .await
            .expect("the manager stops within the timeout")
            .unwrap()
            .unwrap();
    }
}

/// Waits until one of `a` and `b` leads; true for `a`.
async fn first_leader(a: &mut watch::Receiver<bool>, b: &mut watch::Receiver<bool>) -> bool {
    timeout(WAIT, async {
        loop {
            if *a.borrow_and_update() {
                return true;
            }
            if *b.borrow_and_update() {
                return false;
            }
            tokio::select! {
                changed = a.changed() => changed.unwrap(),
                changed = b.changed() => changed.unwrap(),
            }
        }
    })
    .await
    .expect("a leader within the timeout")
}

/// Watches both receivers until `stop` and sets `both` if they ever both say leading.
fn never_both(
    mut a: watch::Receiver<bool>,
    mut b: watch::Receiver<bool>,
    both: Arc<AtomicBool>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        // A receiver whose manager stopped keeps its last value (false: the elector clears
        // it when it ends); only the other one can still change.
        let (mut a_open, mut b_open) = (true, true);
        loop {
            if *a.borrow_and_update() && *b.borrow_and_update() {
                both.store(true, Ordering::SeqCst);
            }
            let a_changed = async {
                if a_open {
                    a.changed().await.is_ok()
                } else {
                    std::future::pending().await
                }
            };
            let b_changed = async {
                if b_open {
                    b.changed().await.is_ok()
                } else {
                    std::future::pending().await
                }
            };
            tokio::select! {
                () = stop.cancelled() => return,
                open = a_changed => a_open = open,
                open = b_changed => b_open = open,
            }
        }
    })
}

/// Waits until the status says `generation` was observed.
async fn observed(client: &Client, patches: &mut watch::Receiver<u64>, generation: i64) {
    timeout(WAIT, async {
        loop {
            let config = cacheconfigs(client).get(NAME).await.unwrap();
            if config.status.and_then(|s| s.observed_generation) == Some(generation) {
                return;
            }
            patches.changed().await.unwrap();
        }
    })
    .await
    .unwrap_or_else(|_| panic!("status never observed generation {generation}"));
}

#[tokio::test]
async fn the_standby_takes_over_the_status_when_the_leader_stops() {
    let (server, client) = server().await;
    let mut a = start(&server, "manager-a").await;
    let mut b = start(&server, "manager-b").await;
    let both = Arc::new(AtomicBool::new(false));
    let watching = CancellationToken::new();
    let monitor = never_both(
        a.leader.clone(),
        b.leader.clone(),
        Arc::clone(&both),
        watching.clone(),
    );

    let (mut leader, mut standby) = if first_leader(&mut a.leader, &mut b.leader).await {
        (a, b)
    } else {
        (b, a)
    };
    leader.patched_more_than(0).await;
    assert_eq!(
        leader.configmaps().await,
        vec!["a1"],
        "the leader's cache reads"
    );
    assert_eq!(
        standby.configmaps().await,
        vec!["a1"],
        "the standby's cache reads too"
    );

    // A spec change both managers apply: the leader writes its status, the standby does not.
    cacheconfigs(&client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"syncPeriod": "2h"}})),
        )
        .await
        .unwrap();
    leader.applied().await;
    standby.applied().await;
    observed(&client, &mut leader.status_patches.clone(), 2).await;
    assert_eq!(
        *standby.status_patches.borrow(),
        0,
        "{} wrote the status while {} led",
        standby.identity,
        leader.identity
    );
    assert!(!*standby.leader.borrow());

    // The leader stops without releasing the Lease: the standby takes over once it expires.
    let stopped_at = Instant::now();
    let old_leader = leader.identity;
    leader.stop().await;
    timeout(
        LEASE_DURATION + SLACK,
        standby.leader.wait_for(|leading| *leading),
    )
    .await
    .unwrap_or_else(|_| {
        panic!(
            "{} did not lead within {:?} of {old_leader} stopping",
            standby.identity,
            LEASE_DURATION + SLACK
        )
    })
    .unwrap();
    let took_over = stopped_at.elapsed();
    assert!(
        took_over >= Duration::from_millis(500),
        "{} led {took_over:?} after {old_leader} stopped, before the unreleased lease could expire",
        standby.identity
    );
    standby.patched_more_than(0).await;

    // The new leader keeps the status current.
    cacheconfigs(&client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"syncPeriod": "3h"}})),
        )
        .await
        .unwrap();
    standby.applied().await;
    observed(&client, &mut standby.status_patches.clone(), 3).await;
    assert_eq!(standby.configmaps().await, vec!["a1"]);

    watching.cancel();
    monitor.await.unwrap();
    assert!(
        !both.load(Ordering::SeqCst),
        "both managers led at the same time"
    );
    standby.stop().await;

    // Both replicas applied both changes, but only the leader of the moment recorded each
    // ConfigReloaded (stopping flushed every recorder, so the count is final).
    let recorded: i32 = Api::<Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("ConfigReloaded"))
        .map(|e| e.count.unwrap_or(1))
        .sum();
    assert_eq!(
        recorded, 2,
        "one ConfigReloaded per change, from its leader"
    );
}

/// With `release_on_cancel`, the stopping leader releases its Lease only once its controllers
/// have returned: a standby taking the Lease over never runs beside a reconcile that is still
/// finishing (controller-runtime cancels its leader election after its leader-elected
/// runnables stopped).
#[tokio::test]
async fn the_lease_is_released_only_after_the_controllers_returned() {
    use k8s_openapi::api::coordination::v1::Lease;
    let (server, client) = server().await;
    let options = Options {
        leader_election: Some(LeaderElection {
            identity: "manager-slow".to_owned(),
            lease_duration: LEASE_DURATION,
            renew_deadline: Duration::from_millis(600),
            retry_period: Duration::from_millis(100),
            release_on_cancel: true,
            ..LeaderElection::new("informant-leader-test", NS)
        }),
        shutdown_grace: Duration::from_secs(10),
        ..Options::new(ConfigSource::Resource {
            namespace: NS.to_owned(),
            name: NAME.to_owned(),
        })
    };
    let mut manager = Manager::new(client.clone(), options).await.unwrap();
    let (stopping, mut told) = watch::channel(false);
    let (finish, finishing) = tokio::sync::oneshot::channel::<()>();
    manager.add_controller("slow-to-stop", move |token| async move {
        token.cancelled().await;
        stopping.send_replace(true);
        let _ = finishing.await;
        Ok(())
    });
    let mut leader = manager.is_leader();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(manager.run(shutdown.clone()));
    timeout(WAIT, leader.wait_for(|leading| *leading))
        .await
        .expect("the manager leads")
        .unwrap();

    let leases = Api::<Lease>::namespaced(client, NS);
    let holder = |lease: Lease| {
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .unwrap_or_default()
    };
    shutdown.cancel();
    timeout(WAIT, told.wait_for(|t| *t))
        .await
        .expect("the controller is told to stop")
        .unwrap();
    // The controller is still finishing: the Lease stays held all along. A release would come
    // within milliseconds of the stop; one second of polling is plenty to see it.
    let released = async {
        loop {
            if holder(leases.get("informant-leader-test").await.unwrap()) != "manager-slow" {
                return;
            }
            tokio::task::yield_now().await;
        }
    };
    assert!(
        timeout(Duration::from_secs(1), released).await.is_err(),
        "the Lease was released while a controller of the leader was still running"
    );
    finish.send(()).unwrap();
    timeout(WAIT, task).await.unwrap().unwrap().unwrap();
    assert_ne!(
        holder(leases.get("informant-leader-test").await.unwrap()),
        "manager-slow",
        "the Lease is released once the controllers returned"
    );
    drop(server);
}
