//! [`Args`]: the flags and `INFORMANT_*` environment variables of `informant run`, for a user's
//! own binary (behind the `cli` cargo feature, on by default: it brings clap).
//!
//! `informant run` parses exactly this type (flattened beside its hook policy), so a user's
//! operator gets the same flags, the same environment variables and the same defaults:
//! `/metrics` on `:8080`, `/healthz` and `/readyz` on `:8081` (kubebuilder's scaffold), leader
//! election off unless `--leader-elect`, with controller-runtime's 15 s / 10 s / 2 s, and the
//! Lease in the pod's namespace.
//!
//! ```no_run
//! use clap::Parser;
//! use informant::manager::{self, Manager};
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     manager: manager::Args,
//! }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let cli = Cli::parse();
//! let options = cli.manager.options()?;
//! let client = cli.manager.client().await?;
//! let manager = Manager::new(client, options).await?;
//! # Ok(())
//! # }
//! ```

use std::path::PathBuf;
use std::time::Duration;

use super::webhook::DEFAULT_WEBHOOK_SERVICE_PORT;
use super::{
    ConfigSource, DEFAULT_LEASE_NAME, LeaderElection, Options, ShardOptions, pod_namespace,
};
use crate::config::parse_duration;

mod webhook;

/// The flags of `informant run` that configure the manager (all but the hook policy), with
/// their `INFORMANT_*` variables and defaults; [`Args::options`] makes the manager's options.
//
// Reason: these doc comments are the `--help` text, where Markdown backticks would show as-is.
#[allow(clippy::doc_markdown)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "each bool is a switch of the command line, as clap reads it"
)]
#[derive(clap::Args, Debug)]
// A group id of its own: clap names a struct's group after the struct, and a user's flattening
// struct is often called `Args` too.
#[group(id = "informant-manager-args")]
// One source at most; none is an error of `Args::options`, not of parsing, so that a user's
// binary may add flags that need no manager (`--print-crd`) and parse them alone.
#[command(group = clap::ArgGroup::new("source").multiple(false))]
pub struct Args {
    /// CacheConfig YAML file, hot-reloaded on change (atomic renames and ConfigMap volume
    /// updates included).
    #[arg(
        long,
        value_name = "FILE",
        group = "source",
        env = "INFORMANT_CONFIG",
        help_heading = "Config"
    )]
    pub config: Option<PathBuf>,

    /// CacheConfig resource NAMESPACE/NAME in the cluster, watched; absent means
    /// controller-runtime's defaults until it is created.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME",
        group = "source",
        env = "INFORMANT_CACHE_CONFIG",
        help_heading = "Config"
    )]
    pub cache_config: Option<String>,

    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the pod's service account).
    #[arg(long, value_name = "PATH", help_heading = "Config")]
    pub kubeconfig: Option<PathBuf>,

    /// Address of /metrics and /debug/* ("0" disables; ":8080" is every interface).
    // controller-runtime pkg/metrics/server/server.go DefaultBindAddress.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = ":8080",
        env = "INFORMANT_METRICS_ADDR",
        help_heading = "Listeners"
    )]
    pub metrics_addr: String,

    /// Serve /metrics and /debug/* over HTTPS, each request's bearer token authenticated
    /// (TokenReview) and authorized for get on its path (SubjectAccessReview) by the API
    /// server, as kubebuilder's scaffold does (the chart's default; --metrics-addr still says
    /// where: the chart passes ":8443").
    #[arg(long, env = "INFORMANT_METRICS_SECURE", help_heading = "Listeners")]
    pub metrics_secure: bool,

    /// With --metrics-secure: the directory of the serving certificate (a mounted TLS Secret),
    /// re-read when its files change. Default: a self-signed certificate made at start.
    #[arg(
        long,
        value_name = "DIR",
        env = "INFORMANT_METRICS_CERT_DIR",
        help_heading = "Listeners"
    )]
    pub metrics_cert_dir: Option<PathBuf>,

    /// The certificate's file name in --metrics-cert-dir.
    #[arg(long, value_name = "FILE", default_value = crate::serving::DEFAULT_CERT_NAME, env = "INFORMANT_METRICS_CERT_NAME", help_heading = "Listeners")]
    pub metrics_cert_name: String,

    /// The key's file name in --metrics-cert-dir.
    #[arg(long, value_name = "FILE", default_value = crate::serving::DEFAULT_KEY_NAME, env = "INFORMANT_METRICS_CERT_KEY", help_heading = "Listeners")]
    pub metrics_cert_key: String,

    /// Address of /healthz and /readyz ("0" disables).
    // kubebuilder's scaffold, --health-probe-bind-address=:8081.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = ":8081",
        env = "INFORMANT_HEALTH_ADDR",
        help_heading = "Listeners"
    )]
    pub health_addr: String,

    /// Campaign for a Lease; only the leader runs controllers and writes status (caches warm
    /// on every replica).
    #[arg(long, env = "INFORMANT_LEADER_ELECT", help_heading = "Leader election")]
    pub leader_elect: bool,

    /// Name of the Lease every replica campaigns for.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_LEASE_NAME, env = "INFORMANT_LEASE_NAME", help_heading = "Leader election")]
    pub lease_name: String,

    /// Namespace of the Lease (default: the pod's namespace, else the CacheConfig's, else
    /// "default").
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "INFORMANT_LEASE_NAMESPACE",
        help_heading = "Leader election"
    )]
    pub lease_namespace: Option<String>,

    /// How long standbys wait, after last seeing the Lease renewed, before taking it over
    /// (Go duration).
    // component-base config/options/leaderelectionconfig.go flag name; controller-runtime
    // pkg/manager/manager.go defaultLeaseDuration.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = duration, env = "INFORMANT_LEADER_ELECT_LEASE_DURATION", help_heading = "Leader election")]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader retries renewing before it gives leadership up; less than the lease
    /// duration.
    // component-base config/options/leaderelectionconfig.go; controller-runtime defaultRenewDeadline.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration, env = "INFORMANT_LEADER_ELECT_RENEW_DEADLINE", help_heading = "Leader election")]
    pub leader_elect_renew_deadline: Duration,

    /// How long candidates wait between attempts to acquire or renew; 1.2 × it less than the
    /// renew deadline.
    // component-base config/options/leaderelectionconfig.go; controller-runtime defaultRetryPeriod.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = duration, env = "INFORMANT_LEADER_ELECT_RETRY_PERIOD", help_heading = "Leader election")]
    pub leader_elect_retry_period: Duration,

    /// Whether a leader that stops cleanly releases the Lease, so a standby (or the next pod of
    /// a rolling update) leads within a retry period instead of a lease duration. Safe because
    /// the process ends once the manager has stopped; `=false` keeps controller-runtime's
    /// library default (the Lease held until it expires).
    // kubebuilder's scaffolded cmd/main.go names LeaderElectionReleaseOnCancel as safe for a
    // binary that exits when its manager stops; controller-runtime's own default is false.
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set, env = "INFORMANT_LEADER_ELECT_RELEASE_ON_CANCEL", help_heading = "Leader election")]
    pub leader_elect_release_on_cancel: bool,

    /// How long a replica that finds no Lease waits for its installer to create it before
    /// creating it itself (the Helm chart renders its Lease so that `helm uninstall` removes
    /// it, and passes its lease duration here: a pod that starts before Helm has created the
    /// Lease would otherwise make Helm's create fail). `0s`: created at once, as client-go does.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = duration, env = "INFORMANT_LEADER_ELECT_LEASE_WAIT", help_heading = "Leader election")]
    pub leader_elect_lease_wait: Duration,

    /// This replica's identity in its shard ring (spec.sharding) and in leader election,
    /// unique among the replicas (default: `<hostname>_<uuid>`, as leader election's).
    #[arg(
        long,
        value_name = "IDENTITY",
        env = "INFORMANT_SHARD_IDENTITY",
        help_heading = "Sharding"
    )]
    pub shard_identity: Option<String>,

    /// Appends one JSON line per reconcile to FILE: member, controller, kind, namespace,
    /// name, uid, start_ns, end_ns (nanoseconds since the Unix epoch), fenced (debugging).
    #[arg(
        long,
        value_name = "FILE",
        env = "INFORMANT_RECONCILE_LOG",
        help_heading = "Sharding"
    )]
    pub reconcile_log: Option<PathBuf>,

    /// Test only: members act on their new share at once, without waiting for its previous
    /// owner to let go (the bug an overlap checker must catch).
    //
    // Only in debug builds: it turns off the at-most-one-owner guarantee, so no release build
    // (the image's, `cargo install`'s) may accept it; a release `informant run` rejects the
    // flag as unknown (exit 2) and ignores the variable. `debug_assertions` rather than a
    // cargo feature: the overlap checker's negative demonstration (tests/manager/
    // shard_processes.rs) runs the debug binary a plain `cargo test` builds, and would
    // otherwise need `--features` or be lost. Field kept (as `false`) in release builds, so
    // the options need no cfg of their own.
    #[cfg_attr(
        debug_assertions,
        arg(
            long,
            hide = true,
            env = "INFORMANT_SHARD_SKIP_HANDOVER",
            help_heading = "Sharding"
        )
    )]
    #[cfg_attr(not(debug_assertions), arg(skip))]
    pub shard_skip_handover: bool,

    /// How long stopping may take (Go duration: 30s, 1m30s).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration, env = "INFORMANT_SHUTDOWN_GRACE", help_heading = "Timing")]
    pub shutdown_grace: Duration,

    /// How long a reload waits for new byObject informers to sync before serving anyway.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = duration, env = "INFORMANT_CACHE_SYNC_TIMEOUT", help_heading = "Timing")]
    pub cache_sync_timeout: Duration,

    /// How long a burst of config file changes is folded into one reload.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration, env = "INFORMANT_DEBOUNCE", help_heading = "Timing")]
    pub debounce: Duration,

    /// Serve the admission hooks of Controllers (spec.admission) over HTTPS behind this
    /// Service, on every replica; the leader creates and keeps the webhook configurations
    /// that name it. Absent: no webhook endpoint, and a Controller with spec.admission is kept
    /// back (AdmissionNotServed).
    #[arg(
        long,
        value_name = "NAME",
        env = "INFORMANT_WEBHOOK_SERVICE",
        help_heading = "Webhooks"
    )]
    pub webhook_service: Option<String>,

    /// The Service's namespace (default: the pod's namespace, else the CacheConfig's, else
    /// "default").
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "INFORMANT_WEBHOOK_SERVICE_NAMESPACE",
        help_heading = "Webhooks"
    )]
    pub webhook_service_namespace: Option<String>,

    /// The Service port the webhook configurations name.
    #[arg(long, value_name = "PORT", default_value_t = DEFAULT_WEBHOOK_SERVICE_PORT, env = "INFORMANT_WEBHOOK_SERVICE_PORT", help_heading = "Webhooks")]
    pub webhook_service_port: i32,

    /// Address the webhook server listens on (":9443" is every interface).
    // controller-runtime pkg/webhook/server.go DefaultPort.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = ":9443",
        env = "INFORMANT_WEBHOOK_ADDR",
        help_heading = "Webhooks"
    )]
    pub webhook_addr: String,

    /// Serve the certificate mounted in this directory (cert-manager's Secret), re-read when
    /// it changes. Absent: the leader makes a CA and a serving certificate in
    /// --webhook-cert-secret, rotates them, and writes the CA bundle into the webhook
    /// configurations it owns.
    #[arg(
        long,
        value_name = "DIR",
        env = "INFORMANT_WEBHOOK_CERT_DIR",
        help_heading = "Webhooks"
    )]
    pub webhook_cert_dir: Option<PathBuf>,

    /// The certificate's file name in --webhook-cert-dir.
    #[arg(long, value_name = "FILE", default_value = crate::serving::DEFAULT_CERT_NAME, env = "INFORMANT_WEBHOOK_CERT_NAME", help_heading = "Webhooks")]
    pub webhook_cert_name: String,

    /// The key's file name in --webhook-cert-dir.
    #[arg(long, value_name = "FILE", default_value = crate::serving::DEFAULT_KEY_NAME, env = "INFORMANT_WEBHOOK_CERT_KEY", help_heading = "Webhooks")]
    pub webhook_cert_key: String,

    /// The Secret of the managed certificates, in the Service's namespace (default:
    /// the Service's name and "-cert").
    #[arg(
        long,
        value_name = "NAME",
        env = "INFORMANT_WEBHOOK_CERT_SECRET",
        help_heading = "Webhooks"
    )]
    pub webhook_cert_secret: Option<String>,

    /// The name of the ValidatingWebhookConfiguration and of the
    /// MutatingWebhookConfiguration the leader owns (default: the Service's name).
    #[arg(
        long,
        value_name = "NAME",
        env = "INFORMANT_WEBHOOK_CONFIGURATION",
        help_heading = "Webhooks"
    )]
    pub webhook_configuration: Option<String>,

    /// With --webhook-cert-dir: cert-manager's Certificate NAMESPACE/NAME, put in the
    /// cert-manager.io/inject-ca-from annotation of the configurations the manager owns.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME",
        env = "INFORMANT_WEBHOOK_INJECT_CA_FROM",
        help_heading = "Webhooks"
    )]
    pub webhook_inject_ca_from: Option<String>,

    /// With managed certificates: another object whose caBundle the leader writes, as
    /// KIND/NAME with KIND validatingwebhookconfiguration, mutatingwebhookconfiguration or
    /// customresourcedefinition (repeat the flag; comma-separated in the variable).
    #[arg(
        long,
        value_name = "KIND/NAME",
        env = "INFORMANT_WEBHOOK_INJECT",
        value_delimiter = ',',
        help_heading = "Webhooks"
    )]
    pub webhook_inject: Vec<String>,

    /// The largest AdmissionReview the endpoint reads, in bytes (controller-runtime's 7 MiB);
    /// a larger one is answered 413 and counted (fate too_large).
    #[arg(long, value_name = "BYTES", default_value_t = crate::serving::DEFAULT_MAX_ADMISSION_BYTES, env = "INFORMANT_WEBHOOK_MAX_ADMISSION_BYTES", help_heading = "Webhooks")]
    pub webhook_max_admission_bytes: usize,

    /// The largest ConversionReview the endpoint reads, in bytes (64 MiB: a review carries
    /// every object of a list); a larger one is answered 413 and counted (fate too_large).
    #[arg(long, value_name = "BYTES", default_value_t = crate::serving::DEFAULT_MAX_CONVERSION_BYTES, env = "INFORMANT_WEBHOOK_MAX_CONVERSION_BYTES", help_heading = "Webhooks")]
    pub webhook_max_conversion_bytes: usize,

    /// How many answers each admission or conversion hook makes at once; past them a review
    /// is answered 429 unread (the failure policy decides) and counted (fate busy).
    #[arg(long, value_name = "N", default_value_t = crate::serving::DEFAULT_MAX_IN_FLIGHT, env = "INFORMANT_WEBHOOK_MAX_IN_FLIGHT", help_heading = "Webhooks")]
    pub webhook_max_in_flight: usize,

    /// How many connections the webhook endpoint holds open at once (TLS handshakes
    /// included); past them it accepts none until one closes.
    #[arg(long, value_name = "N", default_value_t = crate::serving::connections::DEFAULT_MAX_CONNECTIONS, env = "INFORMANT_WEBHOOK_MAX_CONNECTIONS", help_heading = "Webhooks")]
    pub webhook_max_connections: usize,

    /// How long a client may take to send a request's headers to the webhook endpoint (and
    /// how long a kept-alive connection may stay idle), e.g. 10s.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration, env = "INFORMANT_WEBHOOK_HEADER_READ_TIMEOUT", help_heading = "Webhooks")]
    pub webhook_header_read_timeout: Duration,

    /// A PEM bundle of CAs: the webhook endpoint then requires a client certificate one of
    /// them signed (the API server's, from its AdmissionConfiguration kubeconfig) and refuses
    /// any other client at the TLS handshake. Read at start.
    #[arg(
        long,
        value_name = "FILE",
        env = "INFORMANT_WEBHOOK_CLIENT_CA",
        help_heading = "Webhooks"
    )]
    pub webhook_client_ca: Option<PathBuf>,
}

fn duration(input: &str) -> Result<Duration, String> {
    parse_duration(input).map_err(|e| e.to_string())
}

/// Flags that parse but do not make options; every problem, each naming its flag.
#[derive(Debug, thiserror::Error)]
#[error("{}", .problems.join("; "))]
pub struct ArgsError {
    /// One line per bad flag: `invalid --metrics-addr: ...`.
    pub problems: Vec<String>,
}

/// Why [`Args::client`] has no client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// `--kubeconfig` cannot be read or used.
    #[error("invalid kubeconfig {}", .path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No `--kubeconfig`, and neither `$KUBECONFIG`, `~/.kube/config` nor the pod's service
    /// account gives a config.
    #[error("no kubeconfig and no in-cluster config")]
    Infer(#[source] kube::config::InferConfigError),
    /// The config makes no client (its TLS settings).
    #[error("cannot build a client from the kubeconfig")]
    Client(#[source] kube::Error),
}

impl Args {
    /// The manager's options these flags say, as `informant run` builds them.
    ///
    /// # Errors
    /// Every malformed address, `NAMESPACE/NAME`, identity or certificate flag, at once.
    pub fn options(&self) -> Result<Options, ArgsError> {
        let mut problems = Vec::new();
        let source = self.source(&mut problems);
        let mut usage = |flag: &str, e: &dyn std::fmt::Display| {
            problems.push(format!("invalid {flag}: {e}"));
        };
        let metrics_addr = super::parse_bind_address(&self.metrics_addr)
            .map_err(|e| usage("--metrics-addr", &e))
            .ok()
            .flatten();
        let health_addr = super::parse_bind_address(&self.health_addr)
            .map_err(|e| usage("--health-addr", &e))
            .ok()
            .flatten();
        let secure_metrics = self.secure_metrics(&mut problems);
        let config_namespace = match &self.cache_config {
            Some(reference) => reference.split_once('/').map(|(namespace, _)| namespace),
            None => None,
        };
        let webhook = self.webhook_options(config_namespace, &mut problems);
        // One identity per process: its shard Lease and its leader election say the same.
        let identity = self
            .shard_identity
            .clone()
            .unwrap_or_else(super::default_identity);
        if identity.is_empty() {
            problems.push("invalid --shard-identity: must not be empty".into());
        }
        let Some(source) = source.filter(|_| problems.is_empty()) else {
            return Err(ArgsError { problems });
        };
        let lease_namespace = self
            .lease_namespace
            .clone()
            .or_else(pod_namespace)
            .or_else(|| match &source {
                ConfigSource::Resource { namespace, .. } => Some(namespace.clone()),
                ConfigSource::File(_) => None,
            })
            .unwrap_or_else(|| "default".to_string());
        let leader_election = self.leader_elect.then(|| LeaderElection {
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
            release_on_cancel: self.leader_elect_release_on_cancel,
            lease_wait: self.leader_elect_lease_wait,
            identity: identity.clone(),
            ..LeaderElection::new(&self.lease_name, lease_namespace.clone())
        });
        let shard = ShardOptions {
            identity,
            lease_namespace,
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
            reconcile_log: self.reconcile_log.clone(),
            skip_handover: self.shard_skip_handover,
        };
        Ok(Options {
            source,
            metrics_addr,
            secure_metrics,
            health_addr,
            leader_election,
            shutdown_grace: self.shutdown_grace,
            cache_sync_timeout: self.cache_sync_timeout,
            debounce: self.debounce,
            permissions_recheck: super::PERMISSIONS_RECHECK_INTERVAL,
            shard,
            webhook,
        })
    }

    /// Where the config comes from; a problem when `--cache-config` is not `NAMESPACE/NAME`.
    fn source(&self, problems: &mut Vec<String>) -> Option<ConfigSource> {
        match (&self.config, &self.cache_config) {
            (Some(path), _) => Some(ConfigSource::File(path.clone())),
            (None, Some(reference)) => match reference.split_once('/') {
                Some((namespace, name))
                    if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
                {
                    Some(ConfigSource::Resource {
                        namespace: namespace.to_string(),
                        name: name.to_string(),
                    })
                }
                _ => {
                    problems.push(format!(
                        "invalid --cache-config: {reference:?} is not NAMESPACE/NAME"
                    ));
                    None
                }
            },
            (None, None) => {
                problems.push(
                    "one of --config FILE or --cache-config NAMESPACE/NAME is required".into(),
                );
                None
            }
        }
    }

    /// The certificate of secure metrics, `None` when they are plain: the directory's files,
    /// else self-signed for this host's name too.
    fn secure_metrics(&self, problems: &mut Vec<String>) -> Option<crate::serving::CertSource> {
        match (&self.metrics_cert_dir, self.metrics_secure) {
            (Some(_), false) => {
                problems.push(
                    "--metrics-cert-dir needs --metrics-secure (plain HTTP has no certificate)"
                        .into(),
                );
                None
            }
            (_, false) => None,
            (Some(dir), true) => Some(crate::serving::CertSource::Files {
                dir: dir.clone(),
                cert_name: self.metrics_cert_name.clone(),
                key_name: self.metrics_cert_key.clone(),
            }),
            (None, true) => {
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .ok()
                    .or_else(|| std::env::var("HOSTNAME").ok())
                    .map(|h| h.trim().to_owned())
                    .filter(|h| !h.is_empty());
                Some(crate::serving::CertSource::self_signed(host))
            }
        }
    }

    /// A client of the cluster `--kubeconfig` names; without it `$KUBECONFIG`,
    /// `~/.kube/config`, or the pod's service account (kube's `Config::infer`).
    ///
    /// # Errors
    /// [`ClientError`]: the kubeconfig cannot be read or used, or none is found.
    pub async fn client(&self) -> Result<kube::Client, ClientError> {
        let config = match &self.kubeconfig {
            Some(path) => {
                let failed = |source| ClientError::Kubeconfig {
                    path: path.clone(),
                    source,
                };
                let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(failed)?;
                kube::Config::from_custom_kubeconfig(
                    kubeconfig,
                    &kube::config::KubeConfigOptions::default(),
                )
                .await
                .map_err(failed)?
            }
            None => kube::Config::infer().await.map_err(ClientError::Infer)?,
        };
        kube::Client::try_from(config).map_err(ClientError::Client)
    }
}
