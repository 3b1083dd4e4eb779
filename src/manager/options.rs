//! What a [`Manager`](super::Manager) is built from: where its config comes from, where it
//! serves, how it elects a leader, how long it may take to stop; and why it fails.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::leader::{LeaderElection, LeaderError};
use super::shard::ShardOptions;
use crate::cache::DEFAULT_CACHE_SYNC_TIMEOUT;
use crate::config;

/// How long stopping may take before the manager gives up waiting.
///
/// controller-runtime's `defaultGracefulShutdownPeriod` (pkg/manager/manager.go).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// The field manager of the status the manager applies, and the component of its Events.
pub const FIELD_MANAGER: &str = "informant";

/// Where a pod's `ServiceAccount` namespace is mounted.
const POD_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The Lease's name when `--lease-name` is not given.
pub const DEFAULT_LEASE_NAME: &str = "informant";

/// The namespace of the pod this process runs in (`/var/run/secrets/kubernetes.io/serviceaccount/namespace`), when it runs in
/// one: where `informant run` puts its Lease unless told.
#[must_use]
pub fn pod_namespace() -> Option<String> {
    std::fs::read_to_string(POD_NAMESPACE_FILE)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// An error a runnable ends with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Where the manager's `CacheConfig` comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// A YAML file, watched for changes (atomic renames and `ConfigMap` symlink swaps too).
    File(PathBuf),
    /// A `CacheConfig` resource in the cluster, watched; absent means controller-runtime's
    /// defaults.
    Resource {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// How the manager runs: where its config comes from, where it serves, how it elects a leader
/// and how long it may take to stop.
#[derive(Clone, Debug)]
pub struct Options {
    /// Where the config comes from.
    pub source: ConfigSource,
    /// Where `/metrics` and `/debug/*` are served; `None` disables them.
    pub metrics_addr: Option<SocketAddr>,
    /// Serve `/metrics` and `/debug/*` over HTTPS with this certificate, each request
    /// authenticated and authorized by the API server (`TokenReview`, `SubjectAccessReview`
    /// for `get` on its path; [`crate::serving::auth`]); `None`: plain HTTP to anyone who can
    /// connect. kubebuilder's scaffold and the chart turn it on; a laptop leaves it off.
    pub secure_metrics: Option<crate::serving::CertSource>,
    /// Where `/healthz` and `/readyz` are served; `None` disables them.
    pub health_addr: Option<SocketAddr>,
    /// Campaign for a Lease before running leader-elected runnables; `None` runs them at once.
    pub leader_election: Option<LeaderElection>,
    /// How long stopping may take.
    pub shutdown_grace: Duration,
    /// How long a reload waits for new eager informers to sync before publishing anyway.
    pub cache_sync_timeout: Duration,
    /// How long a burst of file changes is folded into one reload (file source only).
    pub debounce: Duration,
    /// How often the permission check runs again while it finds a permission missing (it
    /// runs anyway at start and at every applied reload).
    pub permissions_recheck: Duration,
    /// How this manager joins the shard ring its config names (`spec.sharding`); unused
    /// without one, but for the reconcile log.
    pub shard: ShardOptions,
    /// The manager's webhook endpoint, which serves the `Controller`s' admission hooks on
    /// every replica; `None`: no endpoint (a `Controller` with `spec.admission` is kept back).
    pub webhook: Option<super::WebhookOptions>,
}

impl Options {
    /// The defaults for a manager reading its config from `source` that a program builds
    /// by hand (a test, or a manager embedded in a larger process): no listener, no leader
    /// election, 30 s grace.
    ///
    /// The listeners are off here, where `informant run` serves `/metrics` on `:8080` and the
    /// probes on `:8081`, because a fixed port is not a safe default for code that may start
    /// several managers in one process (tests do) or already serves on those ports. An
    /// operator's binary gets `informant run`'s defaults, flags and `INFORMANT_*` variables
    /// from `manager::Args` (the `cli` feature), as kubebuilder's scaffold gives its
    /// `main.go` the manager's flags; or it sets the fields:
    ///
    /// ```
    /// use informant::manager::{
    ///     ConfigSource, LeaderElection, Options, PERMISSIONS_RECHECK_INTERVAL, default_identity,
    ///     parse_bind_address,
    /// };
    ///
    /// let options = Options {
    ///     metrics_addr: parse_bind_address(":8080")?,
    ///     health_addr: parse_bind_address(":8081")?,
    ///     leader_election: Some(LeaderElection {
    ///         identity: default_identity(),
    ///         ..LeaderElection::new("my-operator", "ops".to_owned())
    ///     }),
    ///     ..Options::new(ConfigSource::File("cacheconfig.yaml".into()))
    /// };
    /// assert_eq!(options.permissions_recheck, PERMISSIONS_RECHECK_INTERVAL);
    /// # Ok::<(), informant::manager::BindAddressError>(())
    /// ```
    #[must_use]
    pub fn new(source: ConfigSource) -> Self {
        Self {
            source,
            metrics_addr: None,
            secure_metrics: None,
            health_addr: None,
            leader_election: None,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            cache_sync_timeout: DEFAULT_CACHE_SYNC_TIMEOUT,
            debounce: config::watch::DEFAULT_DEBOUNCE,
            permissions_recheck: super::access::PERMISSIONS_RECHECK_INTERVAL,
            shard: ShardOptions::default(),
            webhook: None,
        }
    }
}

/// Why the manager could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The config file could not be loaded or watched.
    #[error(transparent)]
    ConfigFile(#[from] config::watch::Error),
    /// The `CacheConfig` resource could not be read or watched.
    #[error(transparent)]
    ConfigResource(#[from] config::source::Error),
    /// The first config could not be planned.
    #[error("cannot plan the cache tree of the config")]
    Plan(#[from] crate::cache::OptionsError),
    /// A listener could not be bound or failed.
    #[error(transparent)]
    Http(#[from] std::io::Error),
    /// The certificate of secure metrics cannot be read, loaded, generated or watched.
    #[error("cannot serve metrics securely")]
    MetricsCertificate(#[from] crate::serving::Error),
    /// The webhook endpoint's settings are invalid, or its certificate cannot be read.
    #[error("cannot serve webhooks")]
    Webhook(#[source] crate::serving::Error),
    /// Leader election could not start, or this leader lost its Lease.
    #[error(transparent)]
    LeaderElection(#[from] LeaderError),
    /// A runnable ended with an error.
    #[error("runnable {name} failed")]
    Runnable {
        /// The runnable.
        name: String,
        /// Its error.
        #[source]
        source: BoxError,
    },
    /// The reconcile log (`--reconcile-log`) cannot be opened for appending.
    #[error("cannot open the reconcile log {}", .path.display())]
    ReconcileLog {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Stopping took longer than the grace period; some tasks were abandoned.
    #[error("stopping took longer than the shutdown grace period of {}s", .0.as_secs_f64())]
    GracePeriodExceeded(Duration),
}
