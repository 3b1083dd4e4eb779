//! [`ShardGate`]: what every reconcile of a sharded manager asks first, whether this member
//! may act on the object now, and what holds a part of the ring's space while a reconcile in
//! it runs ([`Admission`]).
//!
//! An object's point in the hash space is [`crate::selector::point_of`], the one the cache's
//! share and the ring use: the mixed hash of its namespace with `key: namespace` (every object
//! of a namespace on one member, so a controller sees its object's children there), and the
//! FNV-1a hash of its uid with `key: uid` and for cluster-scoped objects (cached whole on every
//! member, reconciled by one). A reconcile is
//! admitted while the member's [`Fence`] holds and the point is in the part it acts on (the
//! runtime sets it: what the ring gives the member, less what other live members still claim,
//! and only once the member's own claim of it was published). An admitted reconcile holds its
//! point until it ends; a part the member loses is claimed until the reconciles in it ended
//! ([`ShardGate::finishing`]), so the next owner starts only after the last one.
//!
//! A reconcile also stops where it is when the fence falls during it (a paused or cut-off
//! member): [`Admission::run`] drops it at the next await, before the others may count the
//! member gone.
//!
//! With a reconcile log (`informant run --reconcile-log FILE`), each reconcile ends with one
//! JSON line: `member`, `controller`, `kind`, `namespace`, `name`, `uid`, `start_ns` and
//! `end_ns` (nanoseconds since the Unix epoch, this machine's clock), and `fenced` (the
//! fence fell and the reconcile was dropped there) with `fenced_at_ns`, the instant the fence
//! fell (the reconcile made no progress after it, though a paused process drops it later).

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::sync::watch;
use tokio::time::Instant;

use super::membership::Fence;
use crate::selector::{RangeSet, ShardKey, namespace_point, point_of, uid_point};

/// Whether a reconcile may start, and the reconcile log. Cheap to clone: every controller of
/// a manager shares one.
#[derive(Clone, Debug)]
pub struct ShardGate {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    identity: String,
    sharded: Option<Sharded>,
    log: Option<Mutex<std::fs::File>>,
}

#[derive(Debug)]
struct Sharded {
    key: ShardKey,
    fence: Fence,
    state: Mutex<State>,
    /// Bumped when a reconcile in a part being let go ends.
    released: watch::Sender<u64>,
    /// Each time the member may act on more than before: the how-manieth time, and the part
    /// it gained.
    gained: watch::Sender<Gain>,
}

#[derive(Debug, Default)]
struct State {
    acting: RangeSet,
    /// The fence's term `acting` was decided in: void once the fence fell since.
    term: u64,
    finishing: RangeSet,
    /// The points of the admitted reconciles running now, with how many at each.
    running: BTreeMap<u64, usize>,
}

impl ShardGate {
    /// A gate that admits every reconcile and logs none (a controller run outside a manager).
    #[must_use]
    pub fn open() -> Self {
        Self {
            inner: Arc::new(Inner {
                identity: String::new(),
                sharded: None,
                log: None,
            }),
        }
    }

    /// The gate of a manager that is not sharded: every reconcile is admitted, and logged to
    /// `log` when given.
    ///
    /// # Errors
    /// The reconcile log cannot be opened for appending.
    pub fn unsharded(identity: &str, log: Option<&Path>) -> std::io::Result<Self> {
        Ok(Self {
            inner: Arc::new(Inner {
                identity: identity.to_owned(),
                sharded: None,
                log: open(log)?,
            }),
        })
    }

    /// The gate of a member `identity` sharding by `key`, fenced by `fence`; it admits nothing
    /// until the runtime sets what it acts on.
    pub(crate) fn sharded(
        identity: &str,
        key: ShardKey,
        fence: Fence,
        log: Option<&Path>,
    ) -> std::io::Result<Self> {
        Ok(Self {
            inner: Arc::new(Inner {
                identity: identity.to_owned(),
                sharded: Some(Sharded {
                    key,
                    fence,
                    state: Mutex::new(State::default()),
                    released: watch::Sender::new(0),
                    gained: watch::Sender::new(Gain::default()),
                }),
                log: open(log)?,
            }),
        })
    }

    /// This member's identity.
    #[must_use]
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// The key objects are sharded by; `None` unsharded.
    #[must_use]
    pub fn key(&self) -> Option<ShardKey> {
        self.inner.sharded.as_ref().map(|s| s.key)
    }

    /// Whether reconciles are sharded (otherwise every one is admitted).
    #[must_use]
    pub fn is_sharded(&self) -> bool {
        self.inner.sharded.is_some()
    }

    /// The point of the object `meta` describes (see the module docs); `None` unsharded.
    #[must_use]
    pub fn point_of(&self, meta: &ObjectMeta) -> Option<u64> {
        let sharded = self.inner.sharded.as_ref()?;
        Some(point_of(sharded.key, meta))
    }

    /// Asks whether this member may start a reconcile of `meta` (of `kind`, for `controller`)
    /// now: `None` when another member does it (or will, once this one let go); else the
    /// admission, held until the reconcile ends ([`Admission::run`]).
    #[must_use]
    pub fn admit(&self, controller: &str, kind: &str, meta: &ObjectMeta) -> Option<Admission> {
        let point = match &self.inner.sharded {
            None => None,
            Some(sharded) => {
                let point = point_of(sharded.key, meta);
                let mut state = sharded.state.lock().unwrap_or_else(PoisonError::into_inner);
                if !sharded.fence.holds_in(state.term) || !state.acting.contains(point) {
                    return None;
                }
                *state.running.entry(point).or_insert(0) += 1;
                Some((point, state.term))
            }
        };
        let log = self.inner.log.as_ref().map(|_| Logged {
            controller: controller.to_owned(),
            kind: kind.to_owned(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            start: SystemTime::now(),
        });
        Some(Admission {
            gate: Arc::clone(&self.inner),
            point: point.map(|(p, _)| p),
            term: point.map_or(0, |(_, t)| t),
            log,
            fenced: false,
            fenced_at: None,
        })
    }

    /// A receiver that changes each time this member may act on more than before, with the
    /// part it gained: the objects there are to be reconciled again (they were refused while
    /// another member still claimed them).
    #[must_use]
    pub fn gained(&self) -> Option<watch::Receiver<Gain>> {
        self.inner.sharded.as_ref().map(|s| s.gained.subscribe())
    }

    /// Whether the object `meta` describes may lie in `part`: by its namespace with
    /// `key: namespace`; with `key: uid` (or no namespace) only a uid would say, and `meta`
    /// may have none (a controller's stub), so it may.
    #[must_use]
    pub fn may_lie_in(&self, meta: &ObjectMeta, part: &RangeSet) -> bool {
        match (&self.inner.sharded, meta.namespace.as_deref()) {
            (Some(s), Some(ns)) if s.key == ShardKey::Namespace && !ns.is_empty() => {
                part.contains(namespace_point(ns))
            }
            (Some(_), _) if meta.uid.is_some() => {
                part.contains(uid_point(meta.uid.as_deref().unwrap_or_default()))
            }
            _ => true,
        }
    }

    /// Sets what this member acts on, decided while its fence held in `term`. A part it no
    /// longer acts on is *finishing* while reconciles admitted in it still run (unless `wait`
    /// is false, the test-only switch that skips the handover wait). Returns whether it gained
    /// something, and what is finishing.
    pub(crate) fn set_acting(&self, acting: RangeSet, term: u64, wait: bool) -> (bool, RangeSet) {
        let Some(sharded) = &self.inner.sharded else {
            return (false, RangeSet::empty());
        };
        let mut state = sharded.state.lock().unwrap_or_else(PoisonError::into_inner);
        // In a new term the fence fell since the last call: every reconcile asked for in
        // between was refused (or dropped), even in the part it acts on again, so all of it
        // is gained again, as if it came from another member (issue #33 item 12: a member
        // whose fence fell and was renewed between two views never reconciled those objects).
        let new = if term == state.term {
            acting.subtract(&state.acting)
        } else {
            acting.clone()
        };
        let gained = !new.is_empty();
        let lost = state.acting.subtract(&acting);
        state.finishing = if wait {
            state.finishing.union(&lost).subtract(&acting)
        } else {
            RangeSet::empty()
        };
        state.acting = acting;
        state.term = term;
        let busy = state.running.keys().any(|p| state.finishing.contains(*p));
        if !busy {
            state.finishing = RangeSet::empty();
        }
        let finishing = state.finishing.clone();
        drop(state);
        if gained {
            sharded.gained.send_modify(|g| {
                g.count += 1;
                g.part = new;
            });
        }
        (gained, finishing)
    }

    /// What this member acts on now.
    #[must_use]
    pub fn acting(&self) -> RangeSet {
        self.inner.sharded.as_ref().map_or_else(RangeSet::all, |s| {
            s.state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .acting
                .clone()
        })
    }

    /// A receiver that changes when a reconcile in a finishing part ends.
    pub(crate) fn released(&self) -> Option<watch::Receiver<u64>> {
        self.inner.sharded.as_ref().map(|s| s.released.subscribe())
    }
}

/// A part of the ring a member started acting on: the how-manieth since it started, and the
/// part. A reader that sees the count jump by more than one missed a part: it takes the whole
/// ring instead.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gain {
    /// How many times the member gained a part so far.
    pub count: u64,
    /// The part gained the last time.
    pub part: RangeSet,
}

fn open(log: Option<&Path>) -> std::io::Result<Option<Mutex<std::fs::File>>> {
    log.map(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(Mutex::new)
    })
    .transpose()
}

/// What the reconcile log says of one reconcile.
#[derive(Debug)]
struct Logged {
    controller: String,
    kind: String,
    namespace: String,
    name: String,
    uid: String,
    start: SystemTime,
}

/// A reconcile this member may run: it holds its point of the space until it is dropped.
#[derive(Debug)]
#[must_use = "the reconcile holds its part of the ring only while the admission lives"]
pub struct Admission {
    gate: Arc<Inner>,
    point: Option<u64>,
    /// The fence's term the reconcile was admitted in.
    term: u64,
    log: Option<Logged>,
    fenced: bool,
    /// When the fence fell under a dropped reconcile, on the wall clock.
    fenced_at: Option<SystemTime>,
}

impl Admission {
    /// Runs `reconcile` under this admission, then lets its point go. With sharding, a
    /// reconcile still running when the member's fence falls is dropped at its next await
    /// (`None`): the member stops everything before the others may take its share over.
    pub async fn run<F: Future>(mut self, reconcile: F) -> Option<F::Output> {
        let fence = self.gate.sharded.as_ref().map(|s| s.fence.clone());
        let Some(fence) = fence else {
            return Some(reconcile.await);
        };
        let mut reconcile = std::pin::pin!(reconcile);
        let mut wake = std::pin::pin!(tokio::time::sleep_until(
            fence.deadline().unwrap_or_else(Instant::now)
        ));
        let term = self.term;
        let outcome = std::future::poll_fn(|cx| {
            // Fallen, or fallen and renewed again (a paused member waking up).
            if !fence.holds_in(term) {
                return Poll::Ready(None);
            }
            if let Poll::Ready(out) = reconcile.as_mut().poll(cx) {
                return Poll::Ready(Some(out));
            }
            // Be woken when the fence would fall (a renewal moves the deadline).
            if let Some(deadline) = fence.deadline() {
                wake.as_mut().reset(deadline);
            }
            if wake.as_mut().poll(cx).is_ready() {
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        })
        .await;
        if outcome.is_none() {
            self.fenced = true;
            // The deadline of the term it was admitted in: the fence may have been renewed
            // in a new term (a paused member waking) before this poll noticed.
            self.fenced_at = fence.fell_at(term).and_then(|fell| {
                SystemTime::now().checked_sub(Instant::now().saturating_duration_since(fell))
            });
            tracing::warn!(
                member = %self.gate.identity,
                "shard member fenced during a reconcile: dropped before the others may take over"
            );
        }
        outcome
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let (Some(sharded), Some(point)) = (&self.gate.sharded, self.point) {
            let mut state = sharded.state.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(n) = state.running.get_mut(&point) {
                *n -= 1;
                if *n == 0 {
                    state.running.remove(&point);
                }
            }
            let finishing = state.finishing.contains(point);
            drop(state);
            if finishing {
                sharded.released.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
        if let (Some(file), Some(logged)) = (&self.gate.log, self.log.take()) {
            let nanos = |t: SystemTime| {
                t.duration_since(UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            };
            let line = serde_json::json!({
                "member": self.gate.identity,
                "controller": logged.controller,
                "kind": logged.kind,
                "namespace": logged.namespace,
                "name": logged.name,
                "uid": logged.uid,
                "start_ns": nanos(logged.start),
                "end_ns": nanos(SystemTime::now()),
                "fenced": self.fenced,
                "fenced_at_ns": self.fenced_at.map(nanos),
            });
            let mut text = line.to_string();
            text.push('\n');
            let mut file = file.lock().unwrap_or_else(PoisonError::into_inner);
            // One write of the whole line: appends from several processes do not interleave.
            if let Err(error) = file.write_all(text.as_bytes()) {
                tracing::warn!(%error, "cannot write the reconcile log");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::ShardRange;

    fn meta(namespace: &str, uid: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(namespace.to_owned()),
            name: Some("x".to_owned()),
            uid: Some(uid.to_owned()),
            ..ObjectMeta::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_part_is_finishing_until_its_reconciles_end_and_the_fence_stops_everything() {
        let fence = Fence::holding_for_tests(std::time::Duration::from_secs(10));
        let gate = ShardGate::sharded("m", ShardKey::Namespace, fence.clone(), None).unwrap();
        let ns = "team-a";
        let here = namespace_point(ns);
        assert!(
            gate.admit("c", "ConfigMap", &meta(ns, "u")).is_none(),
            "nothing before set"
        );
        let all = RangeSet::all();
        let (gained, _) = gate.set_acting(all.clone(), fence.term(), true);
        assert!(gained);
        let running = gate.admit("c", "ConfigMap", &meta(ns, "u")).unwrap();
        let mut released = gate.released().unwrap();
        // Lose the point's half: it is finishing until the running reconcile ends.
        let other_half = if here < 1 << 63 {
            RangeSet::from_ranges([ShardRange::new(1 << 63, 1 << 64).unwrap()])
        } else {
            RangeSet::from_ranges([ShardRange::new(0, 1 << 63).unwrap()])
        };
        let (gained, finishing) = gate.set_acting(other_half.clone(), fence.term(), true);
        assert!(!gained);
        assert!(finishing.contains(here), "{finishing}");
        assert!(
            gate.admit("c", "ConfigMap", &meta(ns, "v")).is_none(),
            "no new reconcile"
        );
        drop(running);
        released.changed().await.unwrap();
        let (_, finishing) = gate.set_acting(other_half.clone(), fence.term(), true);
        assert!(finishing.is_empty());
        // Without the wait (test-only switch), nothing is finishing.
        gate.set_acting(all.clone(), fence.term(), true);
        let running = gate.admit("c", "ConfigMap", &meta(ns, "u")).unwrap();
        assert!(
            gate.set_acting(other_half, fence.term(), false)
                .1
                .is_empty()
        );
        drop(running);

        // A reconcile running when the fence falls is dropped there.
        gate.set_acting(all, fence.term(), true);
        let admitted = gate.admit("c", "ConfigMap", &meta(ns, "u")).unwrap();
        let outcome = admitted.run(std::future::pending::<()>()).await;
        assert_eq!(outcome, None, "dropped at the fence");
        assert!(!fence.holds());
        assert!(gate.admit("c", "ConfigMap", &meta(ns, "u")).is_none());
    }

    /// A member paused past its renew deadline and renewed at once on waking acts on nothing
    /// it decided before, until it decides again from a fresh view of the ring.
    #[tokio::test(start_paused = true)]
    async fn what_was_decided_before_the_fence_fell_is_void_after_it_is_renewed() {
        let fence = Fence::holding_for_tests(std::time::Duration::from_secs(10));
        let gate = ShardGate::sharded("m", ShardKey::Namespace, fence.clone(), None).unwrap();
        let object = meta("team-a", "u");
        gate.set_acting(RangeSet::all(), fence.term(), true);
        assert!(gate.admit("c", "ConfigMap", &object).is_some());
        tokio::time::advance(std::time::Duration::from_secs(11)).await;
        fence.renew_for_tests();
        assert!(fence.holds());
        assert!(
            gate.admit("c", "ConfigMap", &object).is_none(),
            "the part was decided in the previous term"
        );
        gate.set_acting(RangeSet::all(), fence.term(), true);
        assert!(gate.admit("c", "ConfigMap", &object).is_some());
    }

    /// Issue #33 item 12: a fence that fell and was renewed between two views of the ring left
    /// the part acted on unchanged, so nothing was gained and the reconciles refused in
    /// between were never asked for again. A new term gains the whole part again.
    #[tokio::test(start_paused = true)]
    async fn a_part_acted_on_again_in_a_new_term_is_gained_again() {
        let fence = Fence::holding_for_tests(std::time::Duration::from_secs(10));
        let gate = ShardGate::sharded("m", ShardKey::Namespace, fence.clone(), None).unwrap();
        let mut gains = gate.gained().unwrap();
        let (gained, _) = gate.set_acting(RangeSet::all(), fence.term(), true);
        assert!(gained);
        assert_eq!(gains.borrow_and_update().count, 1);
        let (gained, _) = gate.set_acting(RangeSet::all(), fence.term(), true);
        assert!(!gained, "the same part in the same term: nothing new");
        tokio::time::advance(std::time::Duration::from_secs(11)).await;
        assert!(
            gate.admit("c", "ConfigMap", &meta("team-a", "u")).is_none(),
            "refused while the fence is down"
        );
        fence.renew_for_tests();
        let (gained, _) = gate.set_acting(RangeSet::all(), fence.term(), true);
        assert!(gained, "the same part in a new term: asked for again");
        assert!(gains.has_changed().unwrap());
        let gain = gains.borrow_and_update().clone();
        assert_eq!((gain.count, gain.part), (2, RangeSet::all()));
        assert!(gate.admit("c", "ConfigMap", &meta("team-a", "u")).is_some());
    }

    /// A member paused in a reconcile past its deadline and renewed on waking, before the
    /// reconcile is polled again (`SIGSTOP`, `SIGCONT`): the reconcile is dropped, and its log
    /// line says the fence fell at the old term's deadline, not when the drop happened.
    #[tokio::test(start_paused = true)]
    async fn a_reconcile_dropped_after_a_renewal_is_logged_as_fenced_at_the_old_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reconciles.jsonl");
        let fence = Fence::holding_for_tests(std::time::Duration::from_secs(10));
        let gate =
            ShardGate::sharded("m", ShardKey::Namespace, fence.clone(), Some(&path)).unwrap();
        gate.set_acting(RangeSet::all(), fence.term(), true);
        let admitted = gate.admit("c", "ConfigMap", &meta("team-a", "u")).unwrap();
        tokio::time::advance(std::time::Duration::from_secs(15)).await;
        fence.renew_for_tests();
        let outcome = admitted.run(std::future::pending::<()>()).await;
        assert_eq!(outcome, None, "dropped: admitted in the previous term");
        let text = std::fs::read_to_string(&path).unwrap();
        let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(line["fenced"], true, "{line}");
        let (end, fenced_at) = (
            line["end_ns"].as_u64().unwrap(),
            line["fenced_at_ns"].as_u64().unwrap(),
        );
        // The deadline was 5 s before the drop (on the paused clock; the wall clock is real).
        assert!(
            end.saturating_sub(fenced_at) >= 4_900_000_000,
            "fenced at the old deadline: {line}"
        );
    }

    #[test]
    fn objects_are_placed_by_namespace_or_uid_and_cluster_scoped_ones_by_uid() {
        let fence = Fence::holding_for_tests(std::time::Duration::from_secs(10));
        let by_ns = ShardGate::sharded("m", ShardKey::Namespace, fence.clone(), None).unwrap();
        let by_uid = ShardGate::sharded("m", ShardKey::Uid, fence, None).unwrap();
        let namespaced = meta("shop", "u-1");
        let cluster = ObjectMeta {
            namespace: None,
            ..meta("", "u-1")
        };
        assert_eq!(by_ns.point_of(&namespaced), Some(namespace_point("shop")));
        assert_eq!(by_uid.point_of(&namespaced), Some(uid_point("u-1")));
        assert_eq!(by_ns.point_of(&cluster), Some(uid_point("u-1")));
        let free = ShardGate::unsharded("m", None).unwrap();
        assert_eq!(free.point_of(&namespaced), None);
        assert!(free.admit("c", "ConfigMap", &namespaced).is_some());
    }

    #[tokio::test]
    async fn the_reconcile_log_has_one_line_per_reconcile() {
        let dir = std::env::temp_dir().join(format!("informant-gate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("reconciles.jsonl");
        let _ = std::fs::remove_file(&path);
        let gate = ShardGate::unsharded("member-1", Some(&path)).unwrap();
        let admitted = gate
            .admit("web", "ConfigMap", &meta("shop", "u-1"))
            .unwrap();
        assert_eq!(admitted.run(async { 7 }).await, Some(7));
        let text = std::fs::read_to_string(&path).unwrap();
        let line: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(line["member"], "member-1");
        assert_eq!(line["controller"], "web");
        assert_eq!(
            (line["namespace"].as_str(), line["name"].as_str()),
            (Some("shop"), Some("x"))
        );
        assert!(line["start_ns"].as_u64().unwrap() <= line["end_ns"].as_u64().unwrap());
        assert_eq!(line["fenced"], false);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
