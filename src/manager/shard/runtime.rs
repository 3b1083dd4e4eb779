//! [`ShardRuntime`]: a manager's membership of the ring its config names, turned into what it
//! caches and what it reconciles.
//!
//! At each view of the ring ([`Member`], every retry period and at each change):
//!
//! - the **share** is what the consistent hash ring of the live members (this one included)
//!   gives this member; the cache follows it like a namespace change
//!   ([`crate::cache::CacheReloader::with_shard`]): only the sharded kinds relist. A fenced
//!   member keeps the share it had (it cannot tell who is live; its cache stays as it was);
//! - it **desires** its share while its fence holds, nothing otherwise;
//! - it **acts** on what it desires minus what the other live members claim
//!   ([`may_act`]), and only on what its own last published claims held, so two members
//!   that each saw a part unclaimed cannot both act on it: each acts only after its own claim
//!   was written, and each reads the other's claims after writing its own;
//! - it **claims** (publishes on its Lease) what it may act on, what it acts on, and what it
//!   still finishes: a part it lost while reconciles in it run ([`ShardGate`]).
//!
//! So a part moves only once its previous owner published that it let go, or its Lease
//! expired (and a fenced member stopped first). A member that starts acting on a part triggers
//! its controllers again ([`ShardGate::gained`]): objects they refused while another member
//! still claimed them are reconciled now.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::claims::may_act;
use super::gate::ShardGate;
use super::membership::{Member, MemberView, Membership};
use super::options::ShardOptions;
use super::ring::Ring;
use crate::cache::ShardScope;
use crate::manager::leader::LeaderError;
use crate::manager::options::Error;
use crate::selector::Sharding;
use crate::selector::{HASH_SPACE_END, RangeSet, ShardKey, ShardRange, ShardSelector};

/// What the runtime last made of the ring, for status, `/debug/status` and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ShardView {
    /// The live members, sorted (this one while its fence holds).
    pub members: BTreeSet<String>,
    /// Whether this member's fence holds.
    pub active: bool,
    /// What the ring gives this member: what it caches.
    pub share: RangeSet,
    /// What it acts on now.
    pub acting: RangeSet,
    /// What it lost and still finishes.
    pub finishing: RangeSet,
    /// How many times it started acting on a part it did not act on.
    pub handovers: u64,
    /// Whether the API server selects a uid share (`shardSelector`); false by namespace.
    pub server_side: bool,
}

/// A manager's membership of its ring: the [`Member`] and the loop that turns its views into
/// the cache's share and the gate's part. Nothing runs until [`ShardRuntime::run`].
#[derive(Debug)]
pub(crate) struct ShardRuntime {
    member: Member,
    sharding: Sharding,
    identity: String,
    key: ShardKey,
    gate: ShardGate,
    share: watch::Sender<Option<ShardScope>>,
    view: watch::Sender<ShardView>,
    skip_handover: bool,
    lease_duration: Duration,
}

impl ShardRuntime {
    /// The runtime of a member of `sharding.ring`, as `options` say.
    ///
    /// # Errors
    /// [`Error::LeaderElection`] for timings or names a member cannot run with
    /// ([`LeaderError::InvalidOptions`]); [`Error::ReconcileLog`] when the reconcile log
    /// cannot be opened.
    pub fn new(
        client: kube::Client,
        sharding: &Sharding,
        options: &ShardOptions,
    ) -> Result<Self, Error> {
        let membership = Membership {
            lease_duration: options.lease_duration,
            renew_deadline: options.renew_deadline,
            retry_period: options.retry_period,
            ..Membership::new(&sharding.ring, &options.lease_namespace, &options.identity)
        };
        membership.validate()?;
        let member = Member::new(client, membership);
        let gate = ShardGate::sharded(
            &options.identity,
            sharding.key,
            member.fence(),
            options.reconcile_log.as_deref(),
        )
        .map_err(|source| Error::ReconcileLog {
            path: options.reconcile_log.clone().unwrap_or_default(),
            source,
        })?;
        Ok(Self {
            member,
            sharding: sharding.clone(),
            identity: options.identity.clone(),
            key: sharding.key,
            gate,
            share: watch::Sender::new(None),
            view: watch::Sender::new(ShardView::default()),
            skip_handover: options.skip_handover,
            lease_duration: options.lease_duration,
        })
    }

    /// The runtime of `sharding`'s ring (none without) and the gate of the manager's
    /// reconciles: this runtime's, or one that admits everything, logging to
    /// `options.reconcile_log` either way.
    ///
    /// # Errors
    /// As [`ShardRuntime::new`].
    pub(crate) fn for_config(
        client: &kube::Client,
        sharding: Option<&Sharding>,
        options: &ShardOptions,
    ) -> Result<(Option<Self>, ShardGate), Error> {
        if let Some(sharding) = sharding {
            let runtime = Self::new(client.clone(), sharding, options)?;
            let gate = runtime.gate();
            return Ok((Some(runtime), gate));
        }
        let gate = ShardGate::unsharded(&options.identity, options.reconcile_log.as_deref())
            .map_err(|source| Error::ReconcileLog {
                path: options.reconcile_log.clone().unwrap_or_default(),
                source,
            })?;
        Ok((None, gate))
    }

    /// The ring and the key.
    #[must_use]
    pub fn sharding(&self) -> &Sharding {
        &self.sharding
    }

    /// This member's identity.
    #[must_use]
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The gate every reconcile of this member asks first.
    #[must_use]
    pub fn gate(&self) -> ShardGate {
        self.gate.clone()
    }

    /// The share the cache holds (`None` until the first view of the ring).
    #[must_use]
    pub fn share(&self) -> watch::Receiver<Option<ShardScope>> {
        self.share.subscribe()
    }

    /// What the runtime makes of the ring, as it changes.
    #[must_use]
    pub fn view(&self) -> watch::Receiver<ShardView> {
        self.view.subscribe()
    }

    /// With `key: uid`, asks the API server whether it filters by `shardSelector` (a list of
    /// this member's Leases with one) and says which way the share is selected; by
    /// namespace, nothing to ask.
    pub async fn probe(&self, client: &kube::Client, lease_namespace: &str) {
        if self.key != ShardKey::Uid {
            return;
        }
        let collection =
            format!("/apis/coordination.k8s.io/v1/namespaces/{lease_namespace}/leases");
        let any = ShardSelector::new(ShardKey::Uid, vec![ShardRange::all()]);
        let answer = match any {
            Ok(selector) => crate::cache::server_shards(client, &collection, &selector).await,
            Err(_) => Ok(false),
        };
        let server_side = match answer {
            Ok(true) => {
                tracing::info!(
                    member = %self.identity,
                    "shard selection: server-side, the API server filters lists and watches by shardSelector (KEP-5866)"
                );
                true
            }
            Ok(false) => {
                tracing::info!(
                    member = %self.identity,
                    "shard selection: in-process, the API server does not filter by shardSelector (KEP-5866, ShardedListAndWatch): each sharded informer lists every object and keeps this member's"
                );
                false
            }
            Err(error) => {
                tracing::warn!(
                    member = %self.identity,
                    error = %crate::telemetry::error_chain(&error),
                    "cannot ask the API server whether it filters by shardSelector; selecting the share in-process"
                );
                false
            }
        };
        self.view.send_modify(|v| v.server_side = server_side);
    }

    /// Runs the member (its Lease renewed, the ring read) and follows its views until
    /// `shutdown`; then nothing more is admitted and the member deletes its Lease.
    ///
    /// # Errors
    /// As [`Member::run`].
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), LeaderError> {
        let Self {
            member,
            sharding: _,
            identity,
            key,
            gate,
            share,
            view,
            skip_handover,
            lease_duration,
        } = self;
        let views = member.view();
        let claims = member.claims();
        let mut follow = Follow {
            identity,
            key,
            gate,
            share,
            view,
            claims,
            views,
            skip_handover,
        };
        let following = async {
            // The first view (after the first renewal and read), or, if the API server does not
            // answer, the member alone after a lease duration.
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = follow.views.changed() => {}
                () = tokio::time::sleep(lease_duration) => {}
            }
            follow.run(&shutdown).await;
        };
        let (ran, ()) = tokio::join!(member.run(shutdown.clone()), following);
        ran
    }
}

/// The loop of [`ShardRuntime::run`].
struct Follow {
    identity: String,
    key: ShardKey,
    gate: ShardGate,
    share: watch::Sender<Option<ShardScope>>,
    view: watch::Sender<ShardView>,
    claims: watch::Sender<RangeSet>,
    views: watch::Receiver<MemberView>,
    skip_handover: bool,
}

impl Follow {
    async fn run(&mut self, shutdown: &CancellationToken) {
        let mut released = self.gate.released();
        loop {
            self.step();
            let released_one = async {
                match released.as_mut() {
                    Some(r) => {
                        if r.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => break,
                changed = self.views.changed() => if changed.is_err() { break },
                () = released_one => {}
            }
        }
        self.gate.set_acting(RangeSet::empty(), 0, false);
    }

    /// One view of the ring: the share, what to act on, what to claim.
    fn step(&mut self) {
        let ring_view = self.views.borrow_and_update().clone();
        let mut members = ring_view.members.clone();
        members.insert(self.identity.clone());
        let ring = Ring::new(members.iter().map(String::as_str));
        let kept = self
            .share
            .borrow()
            .as_ref()
            .map(|s| RangeSet::from_ranges(s.ranges.clone()));
        let share = match kept {
            // A fenced member cannot tell who is live: its cache keeps what it held.
            Some(kept) if !ring_view.active => kept,
            _ => RangeSet::from_ranges(ring.ranges(&self.identity)),
        };
        let desired = if ring_view.active {
            share.clone()
        } else {
            RangeSet::empty()
        };
        let free = may_act(&desired, ring_view.claims.values());
        let acting = if self.skip_handover {
            desired
        } else {
            free.intersect(&ring_view.published)
        };
        let (gained, finishing) =
            self.gate
                .set_acting(acting.clone(), ring_view.term, !self.skip_handover);
        self.claims
            .send_if_modified(|current| replace(current, free.union(&acting).union(&finishing)));
        let scope = ShardScope {
            key: self.key,
            ranges: share.ranges(),
            server_side: self.view.borrow().server_side,
        };
        self.share
            .send_if_modified(|current| replace(current, Some(scope)));
        self.view.send_if_modified(|v| {
            let next = ShardView {
                members: ring_view.members.clone(),
                active: ring_view.active,
                share: share.clone(),
                acting: acting.clone(),
                finishing: finishing.clone(),
                handovers: v.handovers + u64::from(gained),
                server_side: v.server_side,
            };
            if gained {
                tracing::info!(
                    member = %self.identity,
                    members = next.members.len(),
                    share = fraction(&next.share),
                    acting = fraction(&next.acting),
                    "shard member took over a part of the ring"
                );
            } else if v.share != next.share || v.members != next.members {
                tracing::info!(
                    member = %self.identity,
                    members = next.members.len(),
                    share = fraction(&next.share),
                    acting = fraction(&next.acting),
                    finishing = fraction(&next.finishing),
                    "shard ring changed"
                );
            }
            replace(v, next)
        });
    }
}

/// Replaces `current` by `next`; whether it changed.
fn replace<T: PartialEq>(current: &mut T, next: T) -> bool {
    if *current == next {
        return false;
    }
    *current = next;
    true
}

/// The share of the hash space `set` holds, from 0 to 1, for logs.
fn fraction(set: &RangeSet) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "a fraction for humans")]
    let held = set.ranges().iter().fold(0.0, |sum, r| sum + r.len() as f64);
    #[expect(clippy::cast_precision_loss, reason = "a fraction for humans")]
    let space = HASH_SPACE_END as f64;
    held / space
}
