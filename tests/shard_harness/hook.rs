//! The hook of every member's `Controller`: a webhook served by this process at
//! `/<member identity>`, which notes each call in the reconcile log (when it starts, then when
//! it ends) and answers `{}`, or, for a hot object ([`HOLD_ANNOTATION`]), holds for that long
//! and answers "call me again in 50 ms".
//!
//! A webhook rather than an exec hook: a process per call (about 4 ms of CPU) would make the
//! thousands of reconciles of a ring's hand-overs cost minutes on a shared machine. The
//! member's side is the same hook `Controller` (contract, reconcile, sharding gate); only the
//! transport differs. A call the member abandons (it dropped the connection) still ends when
//! its work does, and is logged so: a member cannot stop a webhook's work by hanging up.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::post;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::log::Reconcile;
use super::{HOLD_ANNOTATION, now_us};

/// What the handlers share: the calls so far, whether calls may start (a bench holds them
/// back while work piles up), whether a hot call lingers until another member calls for its
/// object, and a counter bumped at each call's start (what a lingering call waits on).
#[derive(Clone)]
struct Shared {
    calls: Arc<Mutex<Vec<Reconcile>>>,
    open: tokio::sync::watch::Sender<bool>,
    linger: tokio::sync::watch::Sender<bool>,
    started: tokio::sync::watch::Sender<u64>,
}

/// How long a lingering call waits at most for another member's call of its object.
const LINGER_AT_MOST: Duration = Duration::from_mins(2);

/// The running hook server.
pub struct HookServer {
    /// Where it listens.
    pub addr: SocketAddr,
    shared: Shared,
    stop: CancellationToken,
}

impl Drop for HookServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl HookServer {
    /// Serves the hook on a free loopback port until dropped.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Shared {
            calls: Arc::default(),
            open: tokio::sync::watch::Sender::new(true),
            linger: tokio::sync::watch::Sender::new(false),
            started: tokio::sync::watch::Sender::new(0),
        };
        let stop = CancellationToken::new();
        let router = Router::new()
            .route("/{member}", post(call))
            .with_state(shared.clone());
        let until = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(until.cancelled_owned())
                .await;
        });
        Self { addr, shared, stop }
    }

    /// The URL member `identity` calls.
    pub fn url(&self, identity: &str) -> String {
        format!("http://{}/{identity}", self.addr)
    }

    /// The calls so far, in the order they started.
    pub fn reconciles(&self) -> Vec<Reconcile> {
        self.shared
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Holds every call back (it starts, and is logged, once released), or lets them all go.
    pub fn hold(&self, held: bool) {
        self.shared.open.send_replace(!held);
    }

    /// While on, a hot call does not end after its hold until a call of its object by another
    /// member has started (or [`LINGER_AT_MOST`] passed, or lingering is turned off): an old
    /// owner is then still in the middle of every hot object a joining member takes, however
    /// slowly the joiner comes up on a loaded machine. What a member that does not wait for
    /// the old owner (`--shard-skip-handover`) is shown doing against it.
    pub fn linger(&self, on: bool) {
        self.shared.linger.send_replace(on);
    }
}

/// Waits while lingering is on until a call of `object` by a member other than `member` has
/// started (after `since`).
async fn linger(shared: &Shared, object: &str, member: &str, since: u64) {
    let mut started = shared.started.subscribe();
    let mut linger = shared.linger.subscribe();
    let taken = || {
        shared
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|c| c.object == object && c.member != member && c.start >= since)
    };
    let wait = async {
        while *linger.borrow_and_update() && !taken() {
            tokio::select! {
                changed = started.changed() => if changed.is_err() { return },
                changed = linger.changed() => if changed.is_err() { return },
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_AT_MOST, wait).await;
}

async fn call(
    State(shared): State<Shared>,
    Path(member): Path<String>,
    Json(request): Json<Value>,
) -> Json<Value> {
    let _ = shared.open.subscribe().wait_for(|open| *open).await;
    let log = shared.calls.clone();
    let start = now_us();
    let metadata = &request["object"]["metadata"];
    let uid = metadata["uid"].as_str().unwrap_or("unknown").to_owned();
    let index = {
        let mut calls = log.lock().unwrap_or_else(PoisonError::into_inner);
        calls.push(Reconcile {
            start,
            end: None,
            member: member.clone(),
            object: uid.clone(),
            source: "hook".to_owned(),
        });
        calls.len() - 1
    };
    shared.started.send_modify(|n| *n += 1);
    let hold = metadata["annotations"][HOLD_ANNOTATION]
        .as_str()
        .and_then(|s| s.parse::<f64>().ok());
    // The work goes on when the member stops waiting for it (a webhook's work is the hook
    // server's): its end is logged whatever the member does.
    let object = uid;
    let work = tokio::spawn(async move {
        let answer = match hold {
            Some(seconds) => {
                tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
                linger(&shared, &object, &member, start).await;
                json!({"requeueAfterSeconds": 0.05})
            }
            None => json!({}),
        };
        let end = now_us();
        log.lock().unwrap_or_else(PoisonError::into_inner)[index].end = Some(end);
        answer
    });
    Json(work.await.unwrap_or_default())
}
