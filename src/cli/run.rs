//! `informant run`: the manager, configured by flags or their `INFORMANT_*` environment
//! variables, as an operator in a Deployment is.

use std::path::PathBuf;
use std::time::Duration;

use informant::config::{self, parse_duration};
use informant::manager::{self, ConfigSource, LeaderElection, Manager};
use tokio_util::sync::CancellationToken;

use super::exit::{self, Failure};

/// Where the manager's `ServiceAccount` namespace is mounted in a pod.
const POD_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The Lease's name when `--lease-name` is not given.
pub const DEFAULT_LEASE_NAME: &str = "informant";

mod hook_flags;

pub use hook_flags::HookArgs;
use hook_flags::with_api_server;

// Reason: these doc comments are the `--help` text, where Markdown backticks would show as-is.
#[allow(clippy::doc_markdown)]
#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("source").required(true))]
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
    #[arg(long, value_name = "FILE", default_value = informant::serving::DEFAULT_CERT_NAME, env = "INFORMANT_METRICS_CERT_NAME", help_heading = "Listeners")]
    pub metrics_cert_name: String,

    /// The key's file name in --metrics-cert-dir.
    #[arg(long, value_name = "FILE", default_value = informant::serving::DEFAULT_KEY_NAME, env = "INFORMANT_METRICS_CERT_KEY", help_heading = "Listeners")]
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

    /// This replica's identity in its shard ring (spec.sharding) and in leader election,
    /// unique among the replicas (default: <hostname>_<uuid>, as leader election's).
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

    // The hook policy (docs/hooks.md, "Trust model"): set here, by whoever runs the manager,
    // never in a CacheConfig, which the people it restricts may be able to edit.
    #[command(flatten)]
    pub hooks: HookArgs,
}

fn duration(input: &str) -> Result<Duration, String> {
    parse_duration(input).map_err(|e| e.to_string())
}

impl Args {
    /// The manager's options from the flags.
    ///
    /// # Errors
    /// A usage failure (64) for a malformed address or `NAMESPACE/NAME`.
    pub fn options(&self) -> exit::Result<manager::Options> {
        let usage = |flag: &str, e: &dyn std::fmt::Display| {
            Failure::message(exit::USAGE, format!("invalid {flag}: {e}"))
        };
        let source = match (&self.config, &self.cache_config) {
            (Some(path), _) => ConfigSource::File(path.clone()),
            (None, Some(reference)) => {
                let Some((namespace, name)) = reference.split_once('/') else {
                    return Err(usage(
                        "--cache-config",
                        &format!("{reference:?} is not NAMESPACE/NAME"),
                    ));
                };
                if namespace.is_empty() || name.is_empty() || name.contains('/') {
                    return Err(usage(
                        "--cache-config",
                        &format!("{reference:?} is not NAMESPACE/NAME"),
                    ));
                }
                ConfigSource::Resource {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                }
            }
            (None, None) => {
                return Err(Failure::message(
                    exit::USAGE,
                    "one of --config FILE or --cache-config NAMESPACE/NAME is required",
                ));
            }
        };
        let metrics_addr = manager::parse_bind_address(&self.metrics_addr)
            .map_err(|e| usage("--metrics-addr", &e))?;
        let secure_metrics = self.secure_metrics()?;
        let health_addr = manager::parse_bind_address(&self.health_addr)
            .map_err(|e| usage("--health-addr", &e))?;
        let lease_namespace = self
            .lease_namespace
            .clone()
            .or_else(pod_namespace)
            .or_else(|| match &source {
                ConfigSource::Resource { namespace, .. } => Some(namespace.clone()),
                ConfigSource::File(_) => None,
            })
            .unwrap_or_else(|| "default".to_string());
        // One identity per process: its shard Lease and its leader election say the same.
        let identity = self
            .shard_identity
            .clone()
            .unwrap_or_else(manager::default_identity);
        if identity.is_empty() {
            return Err(usage("--shard-identity", &"must not be empty"));
        }
        let leader_election = self.leader_elect.then(|| LeaderElection {
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
            identity: identity.clone(),
            ..LeaderElection::new(&self.lease_name, lease_namespace.clone())
        });
        let shard = manager::ShardOptions {
            identity,
            lease_namespace,
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
            reconcile_log: self.reconcile_log.clone(),
            skip_handover: self.shard_skip_handover,
        };
        Ok(manager::Options {
            source,
            metrics_addr,
            secure_metrics,
            health_addr,
            leader_election,
            shutdown_grace: self.shutdown_grace,
            cache_sync_timeout: self.cache_sync_timeout,
            debounce: self.debounce,
            permissions_recheck: manager::PERMISSIONS_RECHECK_INTERVAL,
            shard,
        })
    }
}

impl Args {
    /// The certificate of secure metrics, `None` when they are plain: the directory's files,
    /// else self-signed for this host's name too.
    fn secure_metrics(&self) -> exit::Result<Option<informant::serving::CertSource>> {
        use informant::serving::CertSource;
        match (&self.metrics_cert_dir, self.metrics_secure) {
            (Some(_), false) => Err(Failure::message(
                exit::USAGE,
                "--metrics-cert-dir needs --metrics-secure (plain HTTP has no certificate)",
            )),
            (_, false) => Ok(None),
            (Some(dir), true) => Ok(Some(CertSource::Files {
                dir: dir.clone(),
                cert_name: self.metrics_cert_name.clone(),
                key_name: self.metrics_cert_key.clone(),
            })),
            (None, true) => {
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .ok()
                    .or_else(|| std::env::var("HOSTNAME").ok())
                    .map(|h| h.trim().to_owned())
                    .filter(|h| !h.is_empty());
                Ok(Some(CertSource::self_signed(host)))
            }
        }
    }
}

/// The namespace of the pod this runs in, when it runs in one.
fn pod_namespace() -> Option<String> {
    std::fs::read_to_string(POD_NAMESPACE_FILE)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The exit code and message of a manager error.
pub fn failure(error: &manager::Error) -> Failure {
    let code = match error {
        manager::Error::ConfigFile(config::watch::Error::Load { source, .. }) => match source {
            config::Error::Read { .. } => exit::NO_INPUT,
            _ => exit::USAGE,
        },
        manager::Error::Http(_) => exit::UNAVAILABLE,
        _ => exit::FAILURE,
    };
    Failure::new(code, error)
}

pub async fn run(args: Args, shutdown: CancellationToken) -> exit::Result<()> {
    let options = args.options()?;
    let (policy, implicitly_open) = args.hooks.policy()?;
    // A bad file is the user's first mistake to hear about, before any cluster problem; the
    // watcher reads it once, and the manager starts from what it read.
    let watcher = match &options.source {
        ConfigSource::File(path) => {
            Some(manager::file_watcher(path, &options).map_err(|e| failure(&e))?)
        }
        ConfigSource::Resource { .. } => None,
    };
    let config = super::cache::config(args.kubeconfig.as_ref()).await?;
    let policy = with_api_server(policy, &config.cluster_url);
    let client = kube::Client::try_from(config).map_err(|e| Failure::new(exit::FAILURE, &e))?;
    let mut manager = Manager::with_file_watcher(client, options, watcher)
        .await
        .map_err(|e| failure(&e))?;
    if implicitly_open {
        // As kubebuilder warns of metrics served without authentication: a person must act.
        tracing::warn!(
            "the hook policy is open: whoever may write Controllers the manager runs makes it run \
             any command and call any URL (but link-local addresses and the API server) with \
             what it reads; list what hooks may use with --hook-allow-exec, --hook-allow-url \
             (docs/hooks.md, Trust model), or say --hook-policy=open"
        );
    }
    // The Controllers of the same file, or of the CacheConfig's namespace, on the leader.
    informant::hooks::add_to_manager_with(&mut manager, policy);
    manager.run(shutdown).await.map_err(|e| failure(&e))
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use informant::hooks::Policy;

    use super::super::{Cli, Command};
    use super::*;

    fn options(args: &[&str]) -> manager::Options {
        let cli = Cli::parse_from(
            ["informant", "run", "--cache-config", "ns/cc"]
                .iter()
                .chain(args),
        );
        let Command::Run(run) = cli.command else {
            panic!("not the run command");
        };
        run.options().unwrap()
    }

    fn run_args(args: &[&str]) -> Args {
        let cli = Cli::try_parse_from(
            ["informant", "run", "--cache-config", "ns/cc"]
                .iter()
                .chain(args),
        )
        .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not the run command");
        };
        run
    }

    fn hook_policy(args: &[&str]) -> exit::Result<(Policy, bool)> {
        let api: http::Uri = "https://10.96.0.1".parse().unwrap();
        run_args(args)
            .hooks
            .policy()
            .map(|(policy, open)| (with_api_server(policy, &api), open))
    }

    #[test]
    fn without_hook_flags_the_policy_is_open_and_said_to_be() {
        let (policy, warn) = hook_policy(&[]).unwrap();
        assert!(policy.is_open() && warn);
        assert!(policy.check_url("http://hooks.example/").is_ok());
        assert!(
            policy.check_url("https://10.96.0.1/").is_err(),
            "the API server"
        );
        assert!(policy.check_url("http://169.254.169.254/").is_err());
        let (explicit, warn) = hook_policy(&["--hook-policy=open"]).unwrap();
        assert!(explicit.is_open() && !warn);
    }

    #[test]
    fn any_allow_flag_makes_the_policy_restricted_to_what_is_listed() {
        let (policy, warn) = hook_policy(&[
            "--hook-allow-exec=/hooks/",
            "--hook-allow-url=hooks.ops.svc:8443",
            "--hook-allow-url=10.0.0.0/8",
            "--hook-max-response-bytes=1000",
        ])
        .unwrap();
        assert!(!policy.is_open() && !warn);
        assert!(policy.check_exec(&["/hooks/a".into()]).is_ok());
        assert!(policy.check_exec(&["/bin/sh".into()]).is_err());
        assert!(policy.check_url("https://hooks.ops.svc:8443/").is_ok());
        assert!(policy.check_url("http://hooks.ops.svc:8443/").is_err());
        assert_eq!(policy.response_limit(), 1000);
        let (http, _) = hook_policy(&["--hook-allow-http"]).unwrap();
        assert!(
            !http.is_open(),
            "--hook-allow-http alone restricts to no host"
        );
        let (none, _) = hook_policy(&["--hook-policy=restricted"]).unwrap();
        assert!(none.check_exec(&["/hooks/a".into()]).is_err());
    }

    #[test]
    fn every_bad_hook_flag_is_one_usage_error() {
        let e = hook_policy(&[
            "--hook-allow-exec=python3",
            "--hook-allow-url=10.0.0.0/99",
            "--hook-max-response-bytes=0",
        ])
        .unwrap_err();
        assert_eq!(e.code, exit::USAGE);
        let text = e.message.unwrap_or_default();
        for part in ["python3", "10.0.0.0/99", "--hook-max-response-bytes"] {
            assert!(text.contains(part), "{part} in {text}");
        }
        let e = hook_policy(&["--hook-policy=open", "--hook-allow-exec=/hooks/"]).unwrap_err();
        assert!(e.message.unwrap_or_default().contains("no effect"));
    }

    fn election(args: &[&str]) -> Option<LeaderElection> {
        options(args).leader_election
    }

    #[test]
    fn a_shard_member_takes_the_identity_lease_namespace_and_timings_it_is_given() {
        let defaults = options(&["--leader-elect"]);
        let election = defaults.leader_election.unwrap();
        assert_eq!(
            defaults.shard.identity, election.identity,
            "one identity per process"
        );
        assert!(defaults.shard.identity.contains('_'), "<hostname>_<uuid>");
        assert_eq!(defaults.shard.lease_namespace, "ns");
        assert!(!defaults.shard.skip_handover);
        let given = options(&[
            "--shard-identity=replica-2",
            "--lease-namespace=shop",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=500ms",
            "--reconcile-log=/tmp/reconciles.jsonl",
        ]);
        assert_eq!(
            (
                given.shard.identity.as_str(),
                given.shard.lease_namespace.as_str(),
                given.shard.lease_duration,
                given.shard.renew_deadline,
                given.shard.retry_period,
            ),
            (
                "replica-2",
                "shop",
                Duration::from_secs(4),
                Duration::from_secs(3),
                Duration::from_millis(500)
            )
        );
        assert_eq!(
            given.shard.reconcile_log.as_deref(),
            Some(std::path::Path::new("/tmp/reconciles.jsonl"))
        );
    }

    #[test]
    fn metrics_are_plain_by_default_and_secure_with_a_self_signed_or_mounted_certificate() {
        use informant::serving::CertSource;
        assert_eq!(options(&[]).secure_metrics, None);
        let Some(CertSource::SelfSigned { names }) = options(&["--metrics-secure"]).secure_metrics
        else {
            panic!("not self-signed");
        };
        assert_eq!(names[..3], ["localhost", "127.0.0.1", "::1"]);
        assert_eq!(
            options(&["--metrics-secure", "--metrics-cert-dir=/certs"]).secure_metrics,
            Some(CertSource::files("/certs"))
        );
        let cli = Cli::parse_from([
            "informant",
            "run",
            "--cache-config",
            "ns/cc",
            "--metrics-cert-dir=/certs",
        ]);
        let Command::Run(run) = cli.command else {
            panic!("not the run command");
        };
        assert!(
            run.options().is_err(),
            "a certificate without --metrics-secure"
        );
    }

    #[test]
    fn leader_election_periods_default_to_controller_runtime_and_follow_the_flags() {
        assert_eq!(election(&[]), None);
        let defaults = election(&["--leader-elect"]).unwrap();
        assert_eq!(
            (
                defaults.lease_duration,
                defaults.renew_deadline,
                defaults.retry_period
            ),
            (
                manager::DEFAULT_LEASE_DURATION,
                manager::DEFAULT_RENEW_DEADLINE,
                manager::DEFAULT_RETRY_PERIOD
            )
        );
        assert_eq!(defaults.lease_namespace, "ns");
        let fast = election(&[
            "--leader-elect",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=500ms",
        ])
        .unwrap();
        assert_eq!(
            (fast.lease_duration, fast.renew_deadline, fast.retry_period),
            (
                Duration::from_secs(4),
                Duration::from_secs(3),
                Duration::from_millis(500)
            )
        );
    }
}
