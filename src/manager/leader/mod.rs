//! Leader election on a `coordination.k8s.io/v1` Lease, with controller-runtime's defaults and
//! client-go's algorithm (`tools/leaderelection/leaderelection.go`).
//!
//! Candidates run a [`LeaderElector`] on the same Lease. One of them holds it and renews it
//! every retry period; the others read it every retry period (with jitter) and take it over
//! once they have seen it unchanged for its lease duration, or at once when its holder
//! released it. Every write is a create or an update (PUT) carrying the resourceVersion the
//! writer last read, so when two candidates race for an expired Lease the API server answers
//! one of them 409 Conflict: two candidates never both win. Nothing is ever patched.
//!
//! Like client-go, candidates trust only their own clock: a Lease expires `leaseDurationSeconds`
//! after a candidate last *saw it change*, whatever its `renewTime` says, so clock skew between
//! nodes does not matter (the skew *rate* does; see the defaults).
//!
//! The manager gates controllers and status writes on [`LeaderElector::is_leader`], never the
//! caches. When a leader cannot renew within its renew deadline, or sees another holder, it
//! flips `is_leader` to false at once and [`LeaderElector::run`] returns [`LeaderError::Lost`]: the
//! process should exit non-zero, as controller-runtime's manager does ("leader election lost").
//!
//! # RBAC
//!
//! `get`, `create` and `update` on `leases` in group `coordination.k8s.io`, in the Lease's
//! namespace.
//!
//! # Example
//!
//! ```no_run
//! # async fn example(client: kube::Client) -> Result<(), informant::manager::LeaderError> {
//! use informant::manager::{LeaderElection, LeaderElector};
//! use tokio_util::sync::CancellationToken;
//!
//! let elector = LeaderElector::new(client, LeaderElection::new("informant", "informant-system"));
//! let mut is_leader = elector.is_leader();
//! let shutdown = CancellationToken::new();
//! let election = tokio::spawn(elector.run(shutdown.clone()));
//! is_leader.wait_for(|leading| *leading).await.ok();
//! // ... start the leader-elected runnables; stop them when `is_leader` turns false ...
//! shutdown.cancel();
//! election.await.ok();
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod election;

pub use election::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, LeaderElection,
    LeaderError, LostCause, default_identity,
};
use election::{JITTER_FACTOR, RELEASED_LEASE_SECONDS, Result, lease_seconds};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabel {
    name: String,
}

/// client-go's leader election metrics (`tools/leaderelection/metrics.go`, registered by
/// controller-runtime's `pkg/metrics/leaderelection.go`), labelled with the Lease's name.
#[derive(Debug, Clone)]
struct Metrics {
    status_family: Family<NameLabel, Gauge>,
    slowpath_family: Family<NameLabel, Counter>,
    status: Gauge,
    slowpath: Counter,
}

impl Metrics {
    fn new(name: &str) -> Self {
        let label = NameLabel {
            name: name.to_owned(),
        };
        let status_family = Family::<NameLabel, Gauge>::default();
        let slowpath_family = Family::<NameLabel, Counter>::default();
        let status = status_family.get_or_create(&label).clone();
        let slowpath = slowpath_family.get_or_create(&label).clone();
        Self {
            status_family,
            slowpath_family,
            status,
            slowpath,
        }
    }
}

/// A candidate for leadership on one Lease.
///
/// Nothing happens until [`run`](Self::run) is polled. Take the [`is_leader`](Self::is_leader)
/// receiver (and [`register`](Self::register) the metrics) before, since `run` consumes it.
#[doc(alias = "leaderelection")]
#[derive(Debug)]
pub struct LeaderElector {
    api: Api<Lease>,
    options: LeaderElection,
    leader: watch::Sender<bool>,
    metrics: Metrics,
}

impl LeaderElector {
    /// A candidate for the Lease `options.lease_namespace/options.lease_name`.
    #[must_use]
    pub fn new(client: kube::Client, options: LeaderElection) -> Self {
        let api = Api::namespaced(client, &options.lease_namespace);
        let metrics = Metrics::new(&options.lease_name);
        Self {
            api,
            options,
            leader: watch::Sender::new(false),
            metrics,
        }
    }

    /// The options this candidate campaigns with.
    #[must_use]
    pub fn options(&self) -> &LeaderElection {
        &self.options
    }

    /// Whether this candidate leads now: false until it acquires the Lease, true while it holds
    /// it, false again as soon as it loses it or `run` returns.
    #[must_use]
    pub fn is_leader(&self) -> watch::Receiver<bool> {
        self.leader.subscribe()
    }

    /// Registers `leader_election_master_status{name}` (1 while leading, else 0) and
    /// `leader_election_slowpath_total{name}` (renewals that had to read the Lease first because
    /// the leader's cached copy was stale), client-go's names.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates \
             backup, 1 indicates master. 'name' is the string used to identify the lease",
            self.metrics.status_family.clone(),
        );
        registry.register(
            "leader_election_slowpath",
            "Total number of slow path exercised in renewing leader leases. 'name' is the \
             string used to identify the lease",
            self.metrics.slowpath_family.clone(),
        );
    }

    /// Campaigns until `shutdown`: acquires the Lease, then renews it every retry period.
    ///
    /// Returns `Ok` when `shutdown` is cancelled (after releasing the Lease if
    /// [`LeaderElection::release_on_cancel`] and this candidate leads). API errors are logged and
    /// retried.
    ///
    /// # Errors
    ///
    /// [`LeaderError::InvalidOptions`] before campaigning; [`LeaderError::Lost`] when this candidate led and
    /// could not renew within the renew deadline, or found another holder (`is_leader` is then
    /// already false).
    #[tracing::instrument(
        name = "leader_election",
        skip_all,
        fields(
            k8s.namespace = %self.options.lease_namespace,
            object.ref = %format!("{}/{}", self.options.lease_namespace, self.options.lease_name),
            identity = %self.options.identity,
        )
    )]
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        self.options.validate()?;
        let mut campaign = Campaign {
            api: &self.api,
            options: &self.options,
            slowpath: &self.metrics.slowpath,
            observed: None,
            missing_since: None,
        };
        if !self.acquire(&mut campaign, &shutdown).await {
            return Ok(());
        }
        self.metrics.status.set(1);
        self.leader.send_replace(true);
        tracing::info!("became leader");
        let outcome = self.renew(&mut campaign, &shutdown).await;
        self.metrics.status.set(0);
        self.leader.send_replace(false);
        match outcome {
            Ok(()) => {
                // Before the release: nothing of this replica leads once a standby can take
                // the Lease over, and its log says so in that order.
                tracing::info!("stopped leading: shut down");
                if self.options.release_on_cancel {
                    campaign.release().await;
                }
                Ok(())
            }
            Err(cause) => {
                tracing::info!(error = %cause, "stopped leading: leader election lost");
                Err(LeaderError::Lost {
                    namespace: self.options.lease_namespace.clone(),
                    name: self.options.lease_name.clone(),
                    identity: self.options.identity.clone(),
                    cause,
                })
            }
        }
    }

    /// Tries every retry period (with jitter) until this candidate holds the Lease (true) or
    /// `shutdown` (false). client-go's `acquire`.
    async fn acquire(&self, campaign: &mut Campaign<'_>, shutdown: &CancellationToken) -> bool {
        tracing::info!("attempting to acquire leader lease");
        loop {
            // A hung request must not stall the campaign: bound each attempt.
            let attempt = tokio::select! {
                biased;
                () = shutdown.cancelled() => return false,
                attempt = tokio::time::timeout(
                    self.options.renew_deadline,
                    campaign.try_acquire_or_renew(),
                ) => attempt.unwrap_or(Attempt::Failed),
            };
            if let Attempt::Holding = attempt {
                return true;
            }
            let jitter = self
                .options
                .retry_period
                .mul_f64(rand::random::<f64>() * JITTER_FACTOR);
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return false,
                () = tokio::time::sleep(self.options.retry_period + jitter) => {}
            }
        }
    }

    /// Renews every retry period until `shutdown` (`Ok`) or leadership is lost. client-go's
    /// `renew`: each round retries every retry period until it succeeds or its renew deadline
    /// passes; a holder other than us ends it at once.
    async fn renew(
        &self,
        campaign: &mut Campaign<'_>,
        shutdown: &CancellationToken,
    ) -> std::result::Result<(), LostCause> {
        let LeaderElection {
            renew_deadline,
            retry_period,
            ..
        } = self.options;
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(retry_period) => {}
            }
            let deadline = Instant::now() + renew_deadline;
            loop {
                let attempt = tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return Ok(()),
                    attempt = tokio::time::timeout_at(deadline, campaign.try_acquire_or_renew()) => attempt,
                };
                match attempt {
                    Ok(Attempt::Holding) => break,
                    Ok(Attempt::HeldBy(holder)) => return Err(LostCause::HeldBy(holder)),
                    Ok(Attempt::Failed) => {}
                    Err(_elapsed) => return Err(LostCause::RenewDeadline(renew_deadline)),
                }
                let next = (Instant::now() + retry_period).min(deadline);
                tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep_until(next) => {}
                }
                if Instant::now() >= deadline {
                    return Err(LostCause::RenewDeadline(renew_deadline));
                }
            }
        }
    }
}

/// The outcome of one attempt to acquire or renew.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    /// We hold the Lease (just created, acquired or renewed).
    Holding,
    /// Another candidate holds an unexpired Lease.
    HeldBy(String),
    /// The API call failed or lost a race; try again later.
    Failed,
}

/// What a candidate last saw of the Lease, and when (by its own clock).
#[derive(Debug)]
struct Observed {
    lease: Lease,
    at: Instant,
}

/// The state of one campaign: client-go's `observedRecord` and `observedTime`.
struct Campaign<'a> {
    api: &'a Api<Lease>,
    options: &'a LeaderElection,
    slowpath: &'a Counter,
    observed: Option<Observed>,
    /// When this campaign first found no Lease ([`LeaderElection::lease_wait`]).
    missing_since: Option<Instant>,
}

fn holder(lease: &Lease) -> &str {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .unwrap_or_default()
}

impl Campaign<'_> {
    /// Whether the Lease we last saw names us as holder.
    fn is_holder(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|o| holder(&o.lease) == self.options.identity)
    }

    /// Whether the Lease we last saw is unexpired: it has not been seen unchanged for its own
    /// `leaseDurationSeconds` (client-go's `isLeaseValid`).
    fn is_valid(&self, now: Instant) -> bool {
        self.observed.as_ref().is_some_and(|o| {
            let secs = o
                .lease
                .spec
                .as_ref()
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .unwrap_or(0);
            o.at + Duration::from_secs(secs) > now
        })
    }

    fn observe(&mut self, lease: Lease) {
        self.observed = Some(Observed {
            lease,
            at: Instant::now(),
        });
    }

    /// The record we write as holder.
    fn spec(&self, acquire_time: Option<MicroTime>, transitions: i32) -> LeaseSpec {
        let now = MicroTime(jiff::Timestamp::now());
        LeaseSpec {
            holder_identity: Some(self.options.identity.clone()),
            lease_duration_seconds: lease_seconds(self.options.lease_duration),
            acquire_time: Some(acquire_time.unwrap_or_else(|| now.clone())),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// client-go's `tryAcquireOrRenew`: the leader first updates its cached copy (one request);
    /// otherwise read the Lease, create it if absent, and take it over if it is ours, released
    /// or expired, always with the resourceVersion just read.
    async fn try_acquire_or_renew(&mut self) -> Attempt {
        let name = self.options.lease_name.as_str();
        if self.is_holder()
            && self.is_valid(Instant::now())
            && let Some(observed) = &self.observed
        {
            let mut lease = observed.lease.clone();
            let old = lease.spec.take().unwrap_or_default();
            lease.spec = Some(self.spec(old.acquire_time, old.lease_transitions.unwrap_or(0)));
            match self.api.replace(name, &PostParams::default(), &lease).await {
                Ok(written) => {
                    self.observe(written);
                    return Attempt::Holding;
                }
                Err(error) => log_api_error(&error, "renew from cache failed, reading the lease"),
            }
        }

        let current = match self.api.get_opt(name).await {
            Ok(Some(current)) => {
                self.missing_since = None;
                current
            }
            Ok(None) => {
                let since = *self.missing_since.get_or_insert_with(Instant::now);
                if since.elapsed() < self.options.lease_wait {
                    tracing::debug!(lease = name, wait = ?self.options.lease_wait,
                        "no lease yet; waiting for its installer to create it");
                    return Attempt::Failed;
                }
                return self.create().await;
            }
            Err(error) => {
                log_api_error(&error, "cannot read the lease");
                return Attempt::Failed;
            }
        };
        match &mut self.observed {
            // Same record: keep the time we first saw it, take the newer resourceVersion.
            Some(observed) if observed.lease.spec == current.spec => {
                observed.lease = current.clone();
            }
            _ => self.observe(current.clone()),
        }
        let current_holder = holder(&current);
        let ours = current_holder == self.options.identity;
        if !current_holder.is_empty() && !ours && self.is_valid(Instant::now()) {
            tracing::debug!(holder = current_holder, "lease is held and has not expired");
            return Attempt::HeldBy(current_holder.to_owned());
        }
        let old = current.spec.clone().unwrap_or_default();
        let transitions = old.lease_transitions.unwrap_or(0);
        let spec = if ours {
            self.slowpath.inc();
            self.spec(old.acquire_time, transitions)
        } else {
            self.spec(None, transitions.saturating_add(1))
        };
        let mut lease = current;
        lease.spec = Some(spec);
        match self.api.replace(name, &PostParams::default(), &lease).await {
            Ok(written) => {
                self.observe(written);
                Attempt::Holding
            }
            Err(error) => {
                log_api_error(&error, "cannot update the lease");
                Attempt::Failed
            }
        }
    }

    /// Creates the Lease with us as holder; 409 means another candidate was first.
    async fn create(&mut self) -> Attempt {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.options.lease_name.clone()),
                namespace: Some(self.options.lease_namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(self.spec(None, 0)),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(written) => {
                self.observe(written);
                Attempt::Holding
            }
            Err(error) => {
                log_api_error(&error, "cannot create the lease");
                Attempt::Failed
            }
        }
    }

    /// Empties the holder so a standby takes over at its next attempt (client-go's `release`).
    /// Reads the Lease first, so an update we could not see complete does not make the release
    /// fail; the write is still conditional on the resourceVersion read.
    async fn release(&mut self) {
        let name = self.options.lease_name.as_str();
        let attempt = async {
            let Some(mut lease) = self.api.get_opt(name).await? else {
                return Ok(false);
            };
            if holder(&lease) != self.options.identity {
                return Ok(false);
            }
            let now = MicroTime(jiff::Timestamp::now());
            let transitions = lease.spec.as_ref().and_then(|s| s.lease_transitions);
            lease.spec = Some(LeaseSpec {
                holder_identity: Some(String::new()),
                lease_duration_seconds: Some(RELEASED_LEASE_SECONDS),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: transitions,
                ..LeaseSpec::default()
            });
            self.api
                .replace(name, &PostParams::default(), &lease)
                .await?;
            Ok::<_, kube::Error>(true)
        };
        match tokio::time::timeout(self.options.renew_deadline, attempt).await {
            Ok(Ok(true)) => tracing::info!("released the lease"),
            Ok(Ok(false)) => tracing::debug!("lease not ours any more, nothing to release"),
            Ok(Err(error)) => {
                tracing::warn!(error = %crate::telemetry::error_chain(&error), "cannot release the lease, standbys wait for it to expire");
            }
            Err(_elapsed) => {
                tracing::warn!("releasing the lease timed out, standbys wait for it to expire");
            }
        }
    }
}

/// Retried API errors are debug, except 401/403, which need a person to fix RBAC.
fn log_api_error(error: &kube::Error, message: &str) {
    match error {
        kube::Error::Api(status) if matches!(status.code, 401 | 403) => {
            tracing::warn!(error = %crate::telemetry::error_chain(error), "{message}");
        }
        _ => tracing::debug!(error = %crate::telemetry::error_chain(error), "{message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_controller_runtime_s() {
        let o = LeaderElection::new("informant", "informant-system");
        assert_eq!(o.lease_duration, Duration::from_secs(15));
        assert_eq!(o.renew_deadline, Duration::from_secs(10));
        assert_eq!(o.retry_period, Duration::from_secs(2));
        assert!(!o.release_on_cancel);
        assert_eq!(o.validate(), Ok(()));
    }

    #[test]
    fn default_identity_is_hostname_underscore_v4_uuid() {
        let id = default_identity();
        let (host, uuid) = id.rsplit_once('_').unwrap();
        assert!(!host.is_empty());
        let groups: Vec<&str> = uuid.split('-').collect();
        assert_eq!(
            groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(uuid.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
        assert!(groups[2].starts_with('4'), "version 4: {uuid}");
        assert!(
            matches!(groups[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'),
            "rfc 4122 variant: {uuid}"
        );
        assert_ne!(default_identity(), id, "identities are random");
    }

    #[test]
    fn validation_enforces_client_go_ordering() {
        let base = LeaderElection::new("l", "ns");
        let field = |o: &LeaderElection| match o.validate() {
            Err(LeaderError::InvalidOptions { field, .. }) => field,
            other => panic!("expected invalid options, got {other:?}"),
        };
        let mut o = base.clone();
        o.lease_duration = o.renew_deadline;
        assert_eq!(field(&o), "lease_duration");
        let mut o = base.clone();
        o.renew_deadline = o.retry_period.mul_f64(1.2);
        assert_eq!(field(&o), "renew_deadline");
        let mut o = base.clone();
        o.retry_period = Duration::ZERO;
        assert_eq!(field(&o), "retry_period");
        let mut o = base.clone();
        o.lease_name.clear();
        assert_eq!(field(&o), "lease_name");
        let mut o = base;
        o.identity.clear();
        assert_eq!(field(&o), "identity");
    }

    #[test]
    fn lease_seconds_round_up() {
        assert_eq!(lease_seconds(Duration::from_millis(1)), Some(1));
        assert_eq!(lease_seconds(Duration::from_secs(15)), Some(15));
        assert_eq!(lease_seconds(Duration::from_millis(1500)), Some(2));
        assert_eq!(lease_seconds(Duration::from_secs(u64::MAX)), None);
    }

    #[test]
    fn lost_error_names_the_lease_and_the_cause() {
        let e = LeaderError::Lost {
            namespace: "ns".into(),
            name: "l".into(),
            identity: "me".into(),
            cause: LostCause::HeldBy("thief".into()),
        };
        assert_eq!(
            e.to_string(),
            "leader election lost: lease ns/l, identity me: now held by thief"
        );
    }
}
