//! Membership of a shard ring: each member holds a `coordination.k8s.io/v1` Lease of its own,
//! labelled `informant.dev/ring=<ring>`, renewed with leader election's timings; the members are
//! the Leases of the ring that have not expired.
//!
//! Expiry follows client-go's leader election (`tools/leaderelection/leaderelection.go`): a
//! member trusts only its own clock, and another member's Lease expires `leaseDurationSeconds`
//! after this member last *saw it change*, whatever its `renewTime` says. A member that has not
//! renewed its own Lease for its renew deadline (counted from the start of its last successful
//! renewal) is *fenced*: [`Fence::holds`] turns false at that instant, on the monotonic clock,
//! whatever the member is doing (a hung request, a paused process: `SIGSTOP` does not stop
//! `CLOCK_MONOTONIC`), and [`MemberView::active`] follows within two retry periods (a renewal
//! runs until the fence would fall, at least a retry period; the read of the ring, one).
//! Renewals begin a retry period apart, whatever the answers' delay, and a renewal that answers
//! late but before the fence falls still counts: a member of a starved machine stays active as
//! long as its renewals get through within its renew deadline. A reconcile asks the fence before it starts. Since
//! `renew deadline + 2 × retry period < lease duration` ([`Membership::validate`]), a member
//! stops before any other member can see its Lease expire and take its share over. A member
//! stopped by its shutdown token deletes its Lease, so the others see it leave within a retry
//! period.
//!
//! `kubectl get leases -l informant.dev/ring=<ring>` lists the members: each Lease's holder is
//! the member's identity.
//!
//! # RBAC
//!
//! `get`, `list`, `create`, `update` and `delete` on `leases` in group
//! `coordination.k8s.io`, in the Lease namespace (members list the ring every retry period;
//! none watches).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::claims::CLAIMS_ANNOTATION;
use crate::manager::leader::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, LeaderError,
};
use crate::selector::{RangeSet, fnv1a_64};

/// The label that puts a Lease in a ring.
pub const RING_LABEL: &str = "informant.dev/ring";

/// How a member joins a ring. [`Membership::new`] gives leader election's defaults
/// (controller-runtime's lease 15 s, renew deadline 10 s, retry 2 s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// The ring's name: the value of every member Lease's `informant.dev/ring` label.
    pub ring: String,
    /// The namespace of the member Leases (`--lease-namespace`).
    pub namespace: String,
    /// This member's identity, unique in the ring (`--shard-identity`; leader election's
    /// `<hostname>_<uuid>` by default).
    pub identity: String,
    /// How long others wait, after last seeing a member's Lease change, before they count it
    /// gone.
    pub lease_duration: Duration,
    /// How long a member may fail to renew before it fences itself.
    pub renew_deadline: Duration,
    /// How often a member renews its Lease and reads the others'.
    pub retry_period: Duration,
}

impl Membership {
    /// Leader election's timings for `identity` in `ring`, Leases in `namespace`.
    #[must_use]
    pub fn new(
        ring: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            ring: ring.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// The name of this member's Lease: `<ring>-<FNV-1a of the identity, 16 hex digits>` (an
    /// identity such as `host_uuid` is not a valid object name; its hash is).
    #[must_use]
    pub fn lease_name(&self) -> String {
        format!("{}-{:016x}", self.ring, fnv1a_64(self.identity.as_bytes()))
    }

    /// Checks the names, and that a fenced member stops before the others may count it gone:
    /// `lease duration > renew deadline + 2 × retry period` (leader election's defaults, 15 s >
    /// 10 s + 4 s, pass), the renew deadline greater than the retry period.
    ///
    /// # Errors
    ///
    /// [`LeaderError::InvalidOptions`] naming the first field at fault.
    pub fn validate(&self) -> Result<(), LeaderError> {
        let invalid = |field, reason: &str| {
            Err(LeaderError::InvalidOptions {
                field,
                reason: reason.to_owned(),
            })
        };
        for (field, value) in [
            ("ring", &self.ring),
            ("namespace", &self.namespace),
            ("identity", &self.identity),
        ] {
            if value.is_empty() {
                return invalid(field, "must not be empty");
            }
        }
        if self.retry_period.is_zero() || self.renew_deadline <= self.retry_period {
            return invalid(
                "renew_deadline",
                "must be greater than retry_period, itself greater than zero",
            );
        }
        if self.lease_duration <= self.renew_deadline + 2 * self.retry_period {
            return invalid(
                "lease_duration",
                "must be greater than renew_deadline + 2 × retry_period",
            );
        }
        if i32::try_from(self.lease_duration.as_secs()).is_err() {
            return invalid("lease_duration", "must fit in an i32 number of seconds");
        }
        Ok(())
    }
}

/// What a member knows of its ring.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberView {
    /// The members whose Leases are live, sorted; this member included while it is active.
    pub members: BTreeSet<String>,
    /// What each other live member claims (acts on, or still finishes). A claim that cannot
    /// be read counts as the whole space: nobody else acts until it is readable again.
    pub claims: BTreeMap<String, RangeSet>,
    /// Whether this member renewed its Lease within its renew deadline. While false it must
    /// not reconcile anything: the others may soon take its share over.
    pub active: bool,
    /// This member's claims as its last successful renewal wrote them, before the ring was
    /// read: what the others could see when `claims` was read. A member starts acting on a
    /// part only once it is in here, so two members never both act on a part each thought
    /// unclaimed.
    pub published: RangeSet,
    /// The fence's term when this view was made ([`Fence::term`]): what is decided from this
    /// view holds only while the fence holds in this term.
    pub term: u64,
}

/// Whether a member may act on its share now: true until its renew deadline has passed since
/// the start of its last successful renewal. Cheap to clone and to ask.
#[derive(Debug, Clone)]
pub struct Fence {
    state: Arc<Mutex<FenceState>>,
    renew_deadline: Duration,
}

#[derive(Debug, Default)]
struct FenceState {
    renewed_at: Option<Instant>,
    /// Counts the periods the fence held without falling: a renewal after it fell (or before
    /// it ever held) starts a new term.
    term: u64,
    /// The last term that ended and the instant it fell (its deadline, or when the member
    /// stopped if that came first).
    ended: Option<(u64, Instant)>,
}

impl Fence {
    /// Whether the member's Lease is certainly still live for the others.
    #[must_use]
    pub fn holds(&self) -> bool {
        let state = self.state();
        self.held(&state)
    }

    /// Whether the fence holds and has not fallen since the term `term` began
    /// ([`Fence::term`]): what a member decided while it held stays valid only as long.
    #[must_use]
    pub(crate) fn holds_in(&self, term: u64) -> bool {
        let state = self.state();
        state.term == term && self.held(&state)
    }

    /// The current term: it changes each time the fence is renewed after it fell, so a member
    /// paused past its deadline and renewed at once on waking (`SIGSTOP`, `SIGCONT`) does not
    /// act on what it decided before.
    #[must_use]
    pub fn term(&self) -> u64 {
        self.state().term
    }

    fn state(&self) -> std::sync::MutexGuard<'_, FenceState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn held(&self, state: &FenceState) -> bool {
        state
            .renewed_at
            .is_some_and(|t| t.elapsed() < self.renew_deadline)
    }

    /// The instant the fence falls unless the member renews first; `None` while it does not
    /// hold.
    #[must_use]
    pub fn deadline(&self) -> Option<Instant> {
        self.state().renewed_at.map(|t| t + self.renew_deadline)
    }

    /// When the fence fell in the term `term`: its deadline in that term, or `None` while it
    /// holds (or when `term` is older than the last term that ended). A paused member that is
    /// renewed on waking, before its dropped reconcile notices, is in a new term by then: the
    /// old term's deadline is still the instant its reconcile stopped making progress.
    #[must_use]
    pub(crate) fn fell_at(&self, term: u64) -> Option<Instant> {
        let state = self.state();
        if state.term == term {
            if self.held(&state) {
                return None;
            }
            if let Some(renewed_at) = state.renewed_at {
                return Some(renewed_at + self.renew_deadline);
            }
        }
        state
            .ended
            .and_then(|(ended, at)| (ended == term).then_some(at))
    }

    /// A fence renewed now, falling `renew_deadline` later (unit tests of what it gates).
    #[cfg(test)]
    pub(crate) fn holding_for_tests(renew_deadline: Duration) -> Self {
        let fence = Self::new(renew_deadline);
        fence.renewed(Instant::now());
        fence
    }

    /// Renews the fence now, as a successful renewal does (unit tests of what it gates).
    #[cfg(test)]
    pub(crate) fn renew_for_tests(&self) {
        self.renewed(Instant::now());
    }

    fn new(renew_deadline: Duration) -> Self {
        Self {
            state: Arc::new(Mutex::new(FenceState::default())),
            renew_deadline,
        }
    }

    fn renewed(&self, at: Instant) {
        let mut state = self.state();
        if !self.held(&state) {
            if let Some(renewed_at) = state.renewed_at {
                state.ended = Some((state.term, renewed_at + self.renew_deadline));
            }
            state.term += 1;
        }
        state.renewed_at = Some(at);
    }

    fn clear(&self) {
        let mut state = self.state();
        if let Some(renewed_at) = state.renewed_at.take() {
            let fell = (renewed_at + self.renew_deadline).min(Instant::now());
            state.ended = Some((state.term, fell));
        }
    }
}

/// How long a renewal begun at `attempt` may take: while the fence holds, until it would fall
/// (its `deadline`), and at least a retry period; while it does not, a renew deadline.
///
/// A renewal that answers late is still a renewal: the fence counts from the attempt's start,
/// which no other member can have seen the Lease change before, so letting it run until the
/// fence falls gives nothing away. Cutting it at one retry period (as this did) fenced members
/// of a starved machine whose renewals took a little longer, though well within their renew
/// deadline: they stopped, came back, and stopped again (issue #33 item 12).
fn renewal_bound(deadline: Option<Instant>, attempt: Instant, options: &Membership) -> Duration {
    match deadline {
        Some(deadline) if deadline > attempt => {
            deadline.duration_since(attempt).max(options.retry_period)
        }
        _ => options.renew_deadline,
    }
}

/// The instant another member's Lease age is measured at: now, or when the ring was last read
/// if it could not be read since (`None`: never, so nothing has expired yet). A member that
/// cannot list the Leases has not seen them stop changing: counting them gone by its own clock
/// alone would let it act on the share of members that are renewing (client-go acquires a
/// lease only after a read that shows it expired).
fn expiry_clock(read_at: Option<Instant>, now: Instant) -> Instant {
    read_at.unwrap_or(now)
}

/// A member of a ring. Nothing happens until [`run`](Self::run) is polled.
#[derive(Debug)]
pub struct Member {
    api: Api<Lease>,
    options: Membership,
    view: watch::Sender<MemberView>,
    fence: Fence,
    claims: watch::Sender<RangeSet>,
}

/// Another member's Lease as this member last saw it change.
struct Seen {
    holder: String,
    claims: RangeSet,
    version: String,
    duration: Duration,
    changed_at: Instant,
}

impl Member {
    /// A member of `options.ring`, its Lease in `options.namespace`.
    #[must_use]
    pub fn new(client: kube::Client, options: Membership) -> Self {
        let fence = Fence::new(options.renew_deadline);
        Self {
            api: Api::namespaced(client, &options.namespace),
            options,
            view: watch::Sender::new(MemberView::default()),
            fence,
            claims: watch::Sender::new(RangeSet::empty()),
        }
    }

    /// Where the member's claims are set: what it acts on or still finishes, written to its
    /// Lease at the next renewal (within a retry period).
    #[must_use]
    pub fn claims(&self) -> watch::Sender<RangeSet> {
        self.claims.clone()
    }

    /// The fence a reconcile asks before it acts on this member's share.
    #[must_use]
    pub fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// The view of the ring, updated every retry period.
    #[must_use]
    pub fn view(&self) -> watch::Receiver<MemberView> {
        self.view.subscribe()
    }

    /// Renews this member's Lease and reads the ring every retry period until `shutdown`, then
    /// deletes the Lease.
    ///
    /// # Errors
    ///
    /// [`LeaderError::InvalidOptions`] before anything starts. API errors are not errors:
    /// they are logged and retried, and fence the member once they last a renew deadline.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), LeaderError> {
        self.options.validate()?;
        let lease_name = self.options.lease_name();
        let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
        let retry = self.options.retry_period;
        let mut published = RangeSet::empty();
        // When the ring was last read: another member's Lease expires by this member's clock
        // only while this member can see it (see `expiry_clock`).
        let mut read_at: Option<Instant> = None;
        loop {
            let attempt = Instant::now();
            let claims = self.claims.borrow().clone();
            let bound = renewal_bound(self.fence.deadline(), attempt, &self.options);
            match tokio::time::timeout(bound, self.renew(&lease_name, &claims)).await {
                Ok(Ok(())) => {
                    self.fence.renewed(attempt);
                    published = claims;
                }
                Ok(Err(e)) => tracing::warn!(
                    ring = %self.options.ring,
                    lease = %lease_name,
                    error = %crate::telemetry::error_chain(&e),
                    "shard member could not renew its lease"
                ),
                Err(_) => tracing::warn!(
                    ring = %self.options.ring,
                    lease = %lease_name,
                    "shard member lease renewal timed out"
                ),
            }
            let now = Instant::now();
            match tokio::time::timeout(retry, self.read(&mut seen, now)).await {
                Ok(Ok(())) => read_at = Some(now),
                Ok(Err(e)) => tracing::warn!(
                    ring = %self.options.ring,
                    error = %crate::telemetry::error_chain(&e),
                    "shard member could not list the ring's leases"
                ),
                Err(_) => tracing::warn!(
                    ring = %self.options.ring,
                    "shard member listing the ring's leases timed out"
                ),
            }
            let now = expiry_clock(read_at, Instant::now());
            let active = self.fence.holds();
            let live: Vec<&Seen> = seen
                .iter()
                .filter(|(name, s)| {
                    **name != lease_name
                        && !s.holder.is_empty()
                        && now.duration_since(s.changed_at) < s.duration
                })
                .map(|(_, s)| s)
                .collect();
            let mut members: BTreeSet<String> = live.iter().map(|s| s.holder.clone()).collect();
            let claims = live
                .iter()
                .map(|s| (s.holder.clone(), s.claims.clone()))
                .collect();
            if active {
                members.insert(self.options.identity.clone());
            }
            self.publish(MemberView {
                members,
                claims,
                active,
                published: published.clone(),
                term: self.fence.term(),
            });
            // The next renewal a retry period after this one began, not after this one's
            // read: slow answers (a starved machine) do not space renewals out past the
            // renew deadline.
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep_until(attempt + retry) => {}
            }
        }
        self.fence.clear();
        self.publish(MemberView::default());
        if let Err(e) = self.api.delete(&lease_name, &DeleteParams::default()).await {
            tracing::debug!(lease = %lease_name, error = %crate::telemetry::error_chain(&e), "shard member lease not deleted");
        }
        Ok(())
    }

    fn publish(&self, view: MemberView) {
        self.view.send_if_modified(|current| {
            if *current == view {
                return false;
            }
            if current.members != view.members || current.active != view.active {
                tracing::info!(
                    ring = %self.options.ring,
                    members = view.members.len(),
                    active = view.active,
                    "shard ring members changed"
                );
            } else {
                tracing::debug!(ring = %self.options.ring, "shard ring claims changed");
            }
            *current = view;
            true
        });
    }

    /// Creates or updates (PUT, with the resourceVersion read) this member's Lease.
    async fn renew(&self, lease_name: &str, claims: &RangeSet) -> Result<(), kube::Error> {
        let now = MicroTime(jiff::Timestamp::now());
        let seconds = i32::try_from(self.options.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let claims = claims.to_string();
        if let Some(mut lease) = self.api.get_opt(lease_name).await? {
            lease
                .metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(CLAIMS_ANNOTATION.to_owned(), claims);
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            spec.holder_identity = Some(self.options.identity.clone());
            spec.lease_duration_seconds = Some(seconds);
            spec.renew_time = Some(now);
            self.api
                .replace(lease_name, &PostParams::default(), &lease)
                .await?;
            return Ok(());
        }
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(lease_name.to_owned()),
                namespace: Some(self.options.namespace.clone()),
                labels: Some(
                    [(RING_LABEL.to_owned(), self.options.ring.clone())]
                        .into_iter()
                        .collect(),
                ),
                annotations: Some(
                    [(CLAIMS_ANNOTATION.to_owned(), claims)]
                        .into_iter()
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.options.identity.clone()),
                lease_duration_seconds: Some(seconds),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                ..LeaseSpec::default()
            }),
        };
        self.api.create(&PostParams::default(), &lease).await?;
        Ok(())
    }

    /// Lists the ring's Leases and notes, for each, when it was last seen to change.
    async fn read(
        &self,
        seen: &mut BTreeMap<String, Seen>,
        now: Instant,
    ) -> Result<(), kube::Error> {
        let selector = format!("{RING_LABEL}={}", self.options.ring);
        let leases = self
            .api
            .list(&ListParams::default().labels(&selector))
            .await?;
        let mut listed = BTreeSet::new();
        for lease in leases.items {
            let (Some(name), Some(version)) =
                (lease.metadata.name, lease.metadata.resource_version)
            else {
                continue;
            };
            let spec = lease.spec.unwrap_or_default();
            let holder = spec.holder_identity.unwrap_or_default();
            let claimed = lease
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(CLAIMS_ANNOTATION))
                .map_or(Ok(RangeSet::empty()), |text| RangeSet::decode(text));
            let claims = claimed.unwrap_or_else(|e| {
                tracing::warn!(
                    lease = %name,
                    error = %e,
                    "a shard member's claims are unreadable; counting them as the whole space"
                );
                RangeSet::all()
            });
            let duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(self.options.lease_duration, Duration::from_secs);
            listed.insert(name.clone());
            let changed = seen
                .get(&name)
                .is_none_or(|s| s.version != version || s.holder != holder);
            if changed {
                seen.insert(
                    name,
                    Seen {
                        holder,
                        claims,
                        version,
                        duration,
                        changed_at: now,
                    },
                );
            }
        }
        // A deleted Lease is a member that left: gone at once.
        seen.retain(|name, _| listed.contains(name));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_are_valid_object_names_whatever_the_identity() {
        let m = Membership::new("shop", "informant-system", "node-1.example_0f3a-uuid");
        let name = m.lease_name();
        assert!(name.starts_with("shop-") && name.len() == "shop-".len() + 16);
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
        assert_ne!(
            name,
            Membership::new("shop", "x", "node-2.example_0f3a-uuid").lease_name()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_fence_falls_a_renew_deadline_after_the_last_renewal_started() {
        let fence = Fence::new(Duration::from_secs(10));
        assert!(!fence.holds(), "never renewed");
        fence.renewed(Instant::now());
        let first = fence.term();
        assert!(fence.holds_in(first));
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert!(fence.holds());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(
            !fence.holds(),
            "a paused or cut-off member stops at its deadline"
        );
        fence.renewed(Instant::now());
        assert!(fence.holds());
        assert!(
            !fence.holds_in(first),
            "renewed after it fell: what was decided before does not hold"
        );
        let second = fence.term();
        tokio::time::advance(Duration::from_secs(5)).await;
        fence.renewed(Instant::now());
        assert!(fence.holds_in(second), "renewed in time: the same term");
        assert_eq!(fence.fell_at(second), None, "it holds");
        let second_deadline = fence.deadline();
        tokio::time::advance(Duration::from_secs(20)).await;
        assert_eq!(
            fence.fell_at(second),
            second_deadline,
            "fallen, not renewed yet"
        );
        fence.renewed(Instant::now());
        assert_eq!(
            fence.fell_at(second),
            second_deadline,
            "renewed in a new term: the old term fell at its deadline, not now"
        );
        let third = fence.term();
        tokio::time::advance(Duration::from_secs(1)).await;
        let stopped = Instant::now();
        fence.clear();
        assert!(!fence.holds(), "a stopped member holds nothing");
        assert_eq!(
            fence.fell_at(third),
            Some(stopped),
            "it fell when it stopped"
        );
    }

    #[test]
    fn timings_follow_leader_elections_rule() {
        let mut m = Membership::new("shop", "ns", "a");
        assert!(m.validate().is_ok(), "leader election's defaults");
        m.renew_deadline = Duration::from_secs(12);
        assert!(matches!(
            m.validate(),
            Err(LeaderError::InvalidOptions {
                field: "lease_duration",
                ..
            })
        ));
        let empty = Membership::new("", "ns", "a");
        assert!(matches!(
            empty.validate(),
            Err(LeaderError::InvalidOptions { field: "ring", .. })
        ));
    }
}
