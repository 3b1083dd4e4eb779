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
//! flips `is_leader` to false at once and [`LeaderElector::run`] returns [`Error::Lost`]: the
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
//! # async fn example(client: kube::Client) -> Result<(), informant::manager::leader::Error> {
//! use informant::manager::leader::{LeaderElector, Options};
//! use tokio_util::sync::CancellationToken;
//!
//! let elector = LeaderElector::new(client, Options::new("informant", "informant-system"));
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

use std::fmt;
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

/// How long a Lease stays valid after its holder last renewed it, as seen by the others.
// controller-runtime pkg/manager/manager.go defaultLeaseDuration
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// How long the leader keeps retrying a renewal before it gives leadership up.
// controller-runtime pkg/manager/manager.go defaultRenewDeadline
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);

/// How long candidates wait between attempts to acquire or renew.
// controller-runtime pkg/manager/manager.go defaultRetryPeriod
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// Candidates wait a retry period plus up to this factor of it, so they do not march in step.
// client-go tools/leaderelection/leaderelection.go JitterFactor
const JITTER_FACTOR: f64 = 1.2;

/// The lease duration a released Lease advertises (its holder is empty, so nobody waits for it).
// client-go tools/leaderelection/leaderelection.go release()
const RELEASED_LEASE_SECONDS: i32 = 1;

/// Errors of leader election. API errors while campaigning are not errors: they are logged and
/// retried every retry period.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An option breaks client-go's rules (`leaseDuration > renewDeadline > 1.2 × retryPeriod`,
    /// names not empty); the election did not start.
    #[error("invalid leader election options: {field}: {reason}")]
    InvalidOptions {
        /// The [`Options`] field at fault.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// This candidate was the leader and is not any more. Whatever it gated must stop now; the
    /// process should exit non-zero (controller-runtime's manager exits on it).
    #[error("leader election lost: lease {namespace}/{name}, identity {identity}: {cause}")]
    Lost {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// This candidate's identity.
        identity: String,
        /// Why leadership was lost.
        cause: LostCause,
    },
}

/// Why a leader lost its Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostCause {
    /// No renewal succeeded within the renew deadline (the API server was unreachable, slow, or
    /// refused the writes).
    RenewDeadline(Duration),
    /// Another candidate holds the Lease (it was taken over while this one was cut off).
    HeldBy(String),
}

impl fmt::Display for LostCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RenewDeadline(d) => write!(f, "not renewed within the renew deadline of {d:?}"),
            Self::HeldBy(holder) => write!(f, "now held by {holder}"),
        }
    }
}

/// Result of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How to campaign for a Lease. [`Options::new`] gives controller-runtime's defaults.
///
/// client-go requires `lease_duration > renew_deadline > 1.2 × retry_period`
/// ([`Options::validate`]). The ratio of lease duration to renew deadline is how much faster one
/// node's clock may run than another's before two candidates could both act as leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The Lease's name (controller-runtime's `LeaderElectionID`). Every replica of one manager
    /// must use the same name, and different managers different names.
    pub lease_name: String,
    /// The Lease's namespace (controller-runtime's `LeaderElectionNamespace`).
    pub lease_namespace: String,
    /// This candidate's identity, unique among the candidates; [`default_identity`] by default.
    pub identity: String,
    /// How long non-leaders wait, after last seeing the Lease change, before taking it over.
    /// Written to the Lease in whole seconds, rounded up. Default 15s.
    pub lease_duration: Duration,
    /// How long the leader retries renewing before giving leadership up. Default 10s.
    pub renew_deadline: Duration,
    /// How long to wait between attempts (non-leaders add up to 1.2 × this as jitter).
    /// Default 2s.
    pub retry_period: Duration,
    /// Whether a leader stopped by its shutdown token releases the Lease (empties its holder),
    /// so a standby takes over within a retry period instead of a lease duration. Only set it
    /// when everything the Lease gates has stopped before the token is cancelled, or two
    /// processes may act as leader at once. Default false, as controller-runtime's
    /// `LeaderElectionReleaseOnCancel`.
    pub release_on_cancel: bool,
}

impl Options {
    /// Controller-runtime's defaults for the Lease `lease_namespace/lease_name`, with
    /// [`default_identity`].
    #[must_use]
    pub fn new(lease_name: impl Into<String>, lease_namespace: impl Into<String>) -> Self {
        Self {
            lease_name: lease_name.into(),
            lease_namespace: lease_namespace.into(),
            identity: default_identity(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            release_on_cancel: false,
        }
    }

    /// Checks what client-go's `NewLeaderElector` checks, and that names are not empty.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`] naming the first field at fault.
    pub fn validate(&self) -> Result<()> {
        let invalid = |field, reason: &str| {
            Err(Error::InvalidOptions {
                field,
                reason: reason.to_owned(),
            })
        };
        if self.lease_name.is_empty() {
            return invalid("lease_name", "must not be empty");
        }
        if self.lease_namespace.is_empty() {
            return invalid("lease_namespace", "must not be empty");
        }
        if self.identity.is_empty() {
            return invalid("identity", "must not be empty");
        }
        if self.retry_period.is_zero() {
            return invalid("retry_period", "must be greater than zero");
        }
        // In f64 seconds: `Duration::mul_f64` panics on overflow, and these come from users.
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * JITTER_FACTOR {
            return invalid(
                "renew_deadline",
                &format!("must be greater than retry_period × {JITTER_FACTOR}"),
            );
        }
        if self.lease_duration <= self.renew_deadline {
            return invalid(
                "lease_duration",
                &format!(
                    "must be greater than renew_deadline ({:?})",
                    self.renew_deadline
                ),
            );
        }
        if lease_seconds(self.lease_duration).is_none() {
            return invalid("lease_duration", "must fit in an i32 number of seconds");
        }
        Ok(())
    }
}

/// `<hostname>_<random uuid>`, the identity controller-runtime's `leaderelection.NewResourceLock`
/// gives a candidate: the host (a pod's name) says who leads, the uuid keeps a restarted pod of
/// the same name from being taken for its predecessor.
///
/// The hostname is read as Go's `os.Hostname` reads it on Linux (`/proc/sys/kernel/hostname`),
/// then from `$HOSTNAME`, else it is `informant`.
#[must_use]
pub fn default_identity() -> String {
    format!("{}_{}", hostname(), random_uuid())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "informant".to_owned())
}

/// A random (version 4, RFC 4122 variant) uuid in its usual text form.
fn random_uuid() -> String {
    let mut n: u128 = rand::random();
    n = (n & !(0xf << 76)) | (0x4 << 76);
    n = (n & !(0x3 << 62)) | (0x2 << 62);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        n >> 96,
        (n >> 80) & 0xffff,
        (n >> 64) & 0xffff,
        (n >> 48) & 0xffff,
        n & 0xffff_ffff_ffff
    )
}

/// `duration` in whole seconds, rounded up so the Lease never advertises less than we honour.
fn lease_seconds(duration: Duration) -> Option<i32> {
    let secs = duration
        .as_secs()
        .saturating_add(u64::from(duration.subsec_nanos() > 0));
    i32::try_from(secs).ok()
}

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
    options: Options,
    leader: watch::Sender<bool>,
    metrics: Metrics,
}

impl LeaderElector {
    /// A candidate for the Lease `options.lease_namespace/options.lease_name`.
    #[must_use]
    pub fn new(client: kube::Client, options: Options) -> Self {
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
    pub fn options(&self) -> &Options {
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
    /// [`Options::release_on_cancel`] and this candidate leads). API errors are logged and
    /// retried.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`] before campaigning; [`Error::Lost`] when this candidate led and
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
                if self.options.release_on_cancel {
                    campaign.release().await;
                }
                tracing::info!("stopped leading: shut down");
                Ok(())
            }
            Err(cause) => {
                tracing::info!(error = %cause, "stopped leading: leader election lost");
                Err(Error::Lost {
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
        let Options {
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
    options: &'a Options,
    slowpath: &'a Counter,
    observed: Option<Observed>,
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
            Ok(Some(current)) => current,
            Ok(None) => return self.create().await,
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
                tracing::warn!(error = %error, "cannot release the lease, standbys wait for it to expire");
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
            tracing::warn!(error = %error, "{message}");
        }
        _ => tracing::debug!(error = %error, "{message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_controller_runtime_s() {
        let o = Options::new("informant", "informant-system");
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
        let base = Options::new("l", "ns");
        let field = |o: &Options| match o.validate() {
            Err(Error::InvalidOptions { field, .. }) => field,
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
        let e = Error::Lost {
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
