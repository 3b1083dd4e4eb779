//! [`LeaderElection`]: how a candidate campaigns for a Lease, with controller-runtime's
//! defaults; its errors; the identity a candidate holds the Lease as.

use std::fmt;
use std::time::Duration;

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
pub(super) const JITTER_FACTOR: f64 = 1.2;

/// The lease duration a released Lease advertises (its holder is empty, so nobody waits for it).
// client-go tools/leaderelection/leaderelection.go release()
pub(super) const RELEASED_LEASE_SECONDS: i32 = 1;

/// Errors of leader election. API errors while campaigning are not errors: they are logged and
/// retried every retry period.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaderError {
    /// An option breaks client-go's rules (`leaseDuration > renewDeadline > 1.2 × retryPeriod`,
    /// names not empty); the election did not start.
    #[error("invalid leader election options: {field}: {reason}")]
    InvalidOptions {
        /// The [`LeaderElection`] field at fault.
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
pub(crate) type Result<T, E = LeaderError> = std::result::Result<T, E>;

/// How to campaign for a Lease. [`LeaderElection::new`] gives controller-runtime's defaults.
///
/// client-go requires `lease_duration > renew_deadline > 1.2 × retry_period`
/// ([`LeaderElection::validate`]). The ratio of lease duration to renew deadline is how much faster one
/// node's clock may run than another's before two candidates could both act as leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
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
    /// How long a candidate that finds no Lease waits for an installer to create it before
    /// creating it itself. An installer that renders the Lease (the Helm chart does, so that
    /// `helm uninstall` removes it) fails its install when a fast pod created the Lease first;
    /// waiting a lease duration lets the installer win, and a Lease deleted later is still
    /// created again. Default zero: created at once, as client-go does.
    pub lease_wait: Duration,
}

impl LeaderElection {
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
            lease_wait: Duration::ZERO,
        }
    }

    /// Checks what client-go's `NewLeaderElector` checks, and that names are not empty.
    ///
    /// # Errors
    ///
    /// [`LeaderError::InvalidOptions`] naming the first field at fault.
    pub fn validate(&self) -> Result<()> {
        let invalid = |field, reason: &str| {
            Err(LeaderError::InvalidOptions {
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
pub(super) fn lease_seconds(duration: Duration) -> Option<i32> {
    let secs = duration
        .as_secs()
        .saturating_add(u64::from(duration.subsec_nanos() > 0));
    i32::try_from(secs).ok()
}
