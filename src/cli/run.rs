//! `informant run`: the manager, configured by flags or their `INFORMANT_*` environment
//! variables, as an operator in a Deployment is.

use informant::config;
use informant::manager::{self, ConfigSource, Manager};
use tokio_util::sync::CancellationToken;

use super::exit::{self, Failure};

mod hook_flags;

pub use hook_flags::HookArgs;
use hook_flags::with_api_server;

/// The flags of `informant run`: the manager's, which the library offers every operator's
/// binary ([`manager::Args`], one parse for both), and the hook policy of hook controllers.
#[derive(clap::Args, Debug)]
// `informant run` needs a source to run: clap's usage error (exit 2) without one. The library's
// `manager::Args` leaves that to `options()`, so an operator's own flags parse alone.
#[command(group = clap::ArgGroup::new("run-source").args(["config", "cache_config"]).required(true))]
pub struct Args {
    #[command(flatten)]
    pub manager: manager::Args,

    // The hook policy (docs/hooks.md, "Trust model"): set here, by whoever runs the manager,
    // never in a CacheConfig, which the people it restricts may be able to edit.
    #[command(flatten)]
    pub hooks: HookArgs,
}

impl Args {
    /// The manager's options from the flags.
    ///
    /// # Errors
    /// A usage failure (64) naming every malformed flag.
    pub fn options(&self) -> exit::Result<manager::Options> {
        self.manager
            .options()
            .map_err(|e| Failure::message(exit::USAGE, e.to_string()))
    }
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
    let config = super::cache::config(args.manager.kubeconfig.as_ref()).await?;
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
    informant::hooks::add_to_manager_limited(
        &mut manager,
        policy,
        args.hooks.max_concurrency,
        args.hooks.allow_secrets,
    );
    manager.run(shutdown).await.map_err(|e| failure(&e))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use clap::{CommandFactory, Parser};
    use informant::hooks::Policy;
    use informant::manager::LeaderElection;

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
    fn hook_max_concurrency_defaults_to_validations_most_and_cannot_raise_it() {
        assert_eq!(run_args(&[]).hooks.max_concurrency, 64);
        assert_eq!(
            run_args(&["--hook-max-concurrency=8"])
                .hooks
                .max_concurrency,
            8
        );
        for bad in ["--hook-max-concurrency=0", "--hook-max-concurrency=65"] {
            let parsed = Cli::try_parse_from(["informant", "run", "--cache-config", "ns/cc", bad]);
            assert!(parsed.is_err(), "{bad} accepted");
        }
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

    #[test]
    fn a_leader_that_stops_releases_its_lease_unless_told_not_to() {
        assert!(
            election(&["--leader-elect"]).unwrap().release_on_cancel,
            "released by default: the process ends when its manager stops"
        );
        assert!(
            election(&["--leader-elect", "--leader-elect-release-on-cancel"])
                .unwrap()
                .release_on_cancel
        );
        assert!(
            !election(&["--leader-elect", "--leader-elect-release-on-cancel=false"])
                .unwrap()
                .release_on_cancel,
            "=false keeps controller-runtime's library default"
        );
        assert!(
            !manager::LeaderElection::new("l", "ns").release_on_cancel,
            "the library's default stays controller-runtime's"
        );
    }

    /// A user's operator binary: the library's manager flags alone (as
    /// `examples/configmap_secret.rs` has them).
    #[derive(clap::Parser, Debug)]
    struct UserCli {
        #[command(flatten)]
        manager: manager::Args,
    }

    /// A user's operator binary with a flag of its own that needs no manager.
    #[derive(clap::Parser, Debug)]
    struct PrintCrdCli {
        #[arg(long)]
        print_crd: bool,
        #[command(flatten)]
        manager: manager::Args,
    }

    #[test]
    fn a_users_own_flag_parses_without_a_config_source_which_options_then_asks_for() {
        use clap::Parser;
        let cli = PrintCrdCli::try_parse_from(["operator", "--print-crd"])
            .expect("--print-crd alone parses");
        assert!(cli.print_crd);
        let error = cli.manager.options().expect_err("no source to run");
        assert!(
            error
                .to_string()
                .contains("one of --config FILE or --cache-config"),
            "{error}"
        );
        assert!(
            PrintCrdCli::try_parse_from(["operator", "--config", "f", "--cache-config", "a/b"])
                .is_err(),
            "both sources at once stay a usage error"
        );
    }

    /// Each flag of `command` (by its long name) with its environment variable and default.
    fn flags(command: &clap::Command) -> BTreeMap<String, (Option<String>, Vec<String>)> {
        command
            .get_arguments()
            .filter_map(|arg| {
                let long = arg.get_long()?.to_owned();
                let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
                let defaults = arg
                    .get_default_values()
                    .iter()
                    .map(|v| v.to_string_lossy().into_owned())
                    .collect();
                Some((long, (env, defaults)))
            })
            .collect()
    }

    /// The defaults the binary promises (and the library with it), each with its variable.
    type FlagRow = (&'static str, Option<&'static str>, &'static [&'static str]);

    // One row a flag: a table reads best one row to a line.
    #[rustfmt::skip]
    const EXPECTED_FLAGS: &[FlagRow] = &[
        ("config", Some("INFORMANT_CONFIG"), &[]),
        ("cache-config", Some("INFORMANT_CACHE_CONFIG"), &[]),
        ("kubeconfig", None, &[]),
        ("metrics-addr", Some("INFORMANT_METRICS_ADDR"), &[":8080"]),
        ("metrics-secure", Some("INFORMANT_METRICS_SECURE"), &[]),
        ("metrics-cert-dir", Some("INFORMANT_METRICS_CERT_DIR"), &[]),
        ("metrics-cert-name", Some("INFORMANT_METRICS_CERT_NAME"), &["tls.crt"]),
        ("metrics-cert-key", Some("INFORMANT_METRICS_CERT_KEY"), &["tls.key"]),
        ("health-addr", Some("INFORMANT_HEALTH_ADDR"), &[":8081"]),
        ("leader-elect", Some("INFORMANT_LEADER_ELECT"), &[]),
        ("lease-name", Some("INFORMANT_LEASE_NAME"), &["informant"]),
        ("lease-namespace", Some("INFORMANT_LEASE_NAMESPACE"), &[]),
        ("leader-elect-lease-duration", Some("INFORMANT_LEADER_ELECT_LEASE_DURATION"), &["15s"]),
        ("leader-elect-renew-deadline", Some("INFORMANT_LEADER_ELECT_RENEW_DEADLINE"), &["10s"]),
        ("leader-elect-retry-period", Some("INFORMANT_LEADER_ELECT_RETRY_PERIOD"), &["2s"]),
        ("leader-elect-release-on-cancel", Some("INFORMANT_LEADER_ELECT_RELEASE_ON_CANCEL"), &["true"]),
        ("leader-elect-lease-wait", Some("INFORMANT_LEADER_ELECT_LEASE_WAIT"), &["0s"]),
        ("shard-identity", Some("INFORMANT_SHARD_IDENTITY"), &[]),
        ("reconcile-log", Some("INFORMANT_RECONCILE_LOG"), &[]),
        ("shutdown-grace", Some("INFORMANT_SHUTDOWN_GRACE"), &["30s"]),
        ("cache-sync-timeout", Some("INFORMANT_CACHE_SYNC_TIMEOUT"), &["2m"]),
        ("debounce", Some("INFORMANT_DEBOUNCE"), &["1s"]),
        ("webhook-service", Some("INFORMANT_WEBHOOK_SERVICE"), &[]),
        ("webhook-service-namespace", Some("INFORMANT_WEBHOOK_SERVICE_NAMESPACE"), &[]),
        ("webhook-service-port", Some("INFORMANT_WEBHOOK_SERVICE_PORT"), &["443"]),
        ("webhook-addr", Some("INFORMANT_WEBHOOK_ADDR"), &[":9443"]),
        ("webhook-cert-dir", Some("INFORMANT_WEBHOOK_CERT_DIR"), &[]),
        ("webhook-cert-name", Some("INFORMANT_WEBHOOK_CERT_NAME"), &["tls.crt"]),
        ("webhook-cert-key", Some("INFORMANT_WEBHOOK_CERT_KEY"), &["tls.key"]),
        ("webhook-cert-secret", Some("INFORMANT_WEBHOOK_CERT_SECRET"), &[]),
        ("webhook-configuration", Some("INFORMANT_WEBHOOK_CONFIGURATION"), &[]),
        ("webhook-inject-ca-from", Some("INFORMANT_WEBHOOK_INJECT_CA_FROM"), &[]),
        ("webhook-inject", Some("INFORMANT_WEBHOOK_INJECT"), &[]),
        ("webhook-max-admission-bytes", Some("INFORMANT_WEBHOOK_MAX_ADMISSION_BYTES"), &["7340032"]),
        ("webhook-max-conversion-bytes", Some("INFORMANT_WEBHOOK_MAX_CONVERSION_BYTES"), &["67108864"]),
        ("webhook-max-in-flight", Some("INFORMANT_WEBHOOK_MAX_IN_FLIGHT"), &["16"]),
        ("webhook-max-connections", Some("INFORMANT_WEBHOOK_MAX_CONNECTIONS"), &["256"]),
        ("webhook-header-read-timeout", Some("INFORMANT_WEBHOOK_HEADER_READ_TIMEOUT"), &["10s"]),
        ("webhook-client-ca", Some("INFORMANT_WEBHOOK_CLIENT_CA"), &[]),
    ];

    #[test]
    fn the_library_args_are_every_manager_flag_of_informant_run_with_its_variable_and_default() {
        let binary = Cli::command();
        let run = binary.find_subcommand("run").unwrap();
        let hooks = flags(&<HookArgs as clap::Args>::augment_args(clap::Command::new(
            "h",
        )));
        let mut of_run = flags(run);
        of_run.retain(|long, _| !hooks.contains_key(long));
        let of_user = flags(&UserCli::command());
        assert_eq!(
            of_run, of_user,
            "informant run's manager flags, and the library's"
        );
        let expected = EXPECTED_FLAGS;
        for (long, env, defaults) in expected {
            let Some((got_env, got_defaults)) = of_user.get(*long) else {
                panic!("--{long} is not a library flag");
            };
            assert_eq!(
                (got_env.as_deref(), got_defaults.clone()),
                (
                    *env,
                    defaults.iter().map(|d| (*d).to_owned()).collect::<Vec<_>>()
                ),
                "--{long}"
            );
        }
        let listed: Vec<&str> = expected.iter().map(|(long, _, _)| *long).collect();
        for long in of_user.keys() {
            // The debug-only test flag is hidden, and has no place in the table.
            assert!(
                listed.contains(&long.as_str()) || long == "shard-skip-handover",
                "--{long} has no row in the table"
            );
        }
    }

    #[test]
    fn the_library_args_make_the_options_informant_run_makes() {
        let rows: &[&[&str]] = &[
            &[],
            &["--metrics-addr=127.0.0.1:9090", "--health-addr=0"],
            &[
                "--metrics-secure",
                "--metrics-cert-dir=/certs",
                "--metrics-cert-name=a",
                "--metrics-cert-key=b",
            ],
            &["--leader-elect"],
            &["--leader-elect", "--lease-name=op", "--lease-namespace=ops"],
            &[
                "--leader-elect",
                "--leader-elect-lease-duration=4s",
                "--leader-elect-renew-deadline=3s",
                "--leader-elect-retry-period=500ms",
            ],
            &["--reconcile-log=/tmp/r.jsonl"],
            &[
                "--shutdown-grace=5s",
                "--cache-sync-timeout=10s",
                "--debounce=0s",
            ],
            &["--kubeconfig=/k"],
            &["--webhook-service=hooks", "--webhook-service-namespace=ops"],
            &[
                "--webhook-service=hooks",
                "--webhook-cert-dir=/certs",
                "--webhook-inject-ca-from=ops/hooks-cert",
            ],
        ];
        for source in [["--cache-config", "ns/cc"], ["--config", "cc.yaml"]] {
            for row in rows {
                let argv: Vec<&str> = source
                    .iter()
                    .chain(["--shard-identity=replica-1"].iter())
                    .chain(row.iter())
                    .copied()
                    .collect();
                let binary = Cli::parse_from(["informant", "run"].iter().chain(&argv));
                let Command::Run(run) = binary.command else {
                    panic!("not the run command");
                };
                let user = UserCli::parse_from(["operator"].iter().chain(&argv));
                assert_eq!(
                    format!("{:?}", user.manager.options().unwrap()),
                    format!("{:?}", run.options().unwrap()),
                    "{argv:?}"
                );
            }
        }
        // The defaults: kubebuilder's listeners, controller-runtime's leader election timings.
        let user = UserCli::parse_from(["operator", "--config=cc.yaml", "--leader-elect"]);
        let options = user.manager.options().unwrap();
        assert_eq!(options.metrics_addr, Some("0.0.0.0:8080".parse().unwrap()));
        assert_eq!(options.health_addr, Some("0.0.0.0:8081".parse().unwrap()));
        let election = options.leader_election.unwrap();
        assert_eq!(
            (
                election.lease_duration,
                election.renew_deadline,
                election.retry_period
            ),
            (
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_secs(2)
            )
        );
        assert_eq!(
            election.lease_namespace,
            manager::pod_namespace().unwrap_or_else(|| "default".into())
        );
    }

    #[test]
    fn the_library_args_report_every_bad_flag_at_once() {
        let user = UserCli::parse_from([
            "operator",
            "--cache-config=nope",
            "--metrics-addr=localhost:1",
            "--health-addr=x",
            "--metrics-cert-dir=/certs",
            "--shard-identity=",
        ]);
        let problems = user.manager.options().unwrap_err().problems;
        for flag in [
            "--cache-config",
            "--metrics-addr",
            "--health-addr",
            "--metrics-cert-dir",
            "--shard-identity",
        ] {
            assert!(
                problems.iter().any(|p| p.contains(flag)),
                "{flag} in {problems:?}"
            );
        }
        assert_eq!(problems.len(), 5, "{problems:?}");
    }

    #[test]
    fn the_webhook_flags_make_the_endpoint_managed_by_default_or_mounted() {
        use informant::serving::WebhookCertificates;
        let options = |args: &[&str]| {
            UserCli::parse_from(["operator", "--cache-config=ns/cc"].iter().chain(args))
                .manager
                .options()
        };
        assert_eq!(
            options(&[]).unwrap().webhook,
            None,
            "off without --webhook-service"
        );
        let managed = options(&["--webhook-service=hooks", "--webhook-service-namespace=ops"])
            .unwrap()
            .webhook
            .unwrap();
        assert_eq!(managed.addr, "0.0.0.0:9443".parse().unwrap());
        assert_eq!(
            (
                managed.service.namespace.as_str(),
                managed.service.name.as_str(),
                managed.service.port
            ),
            ("ops", "hooks", Some(443))
        );
        assert_eq!(managed.configuration, "hooks");
        let WebhookCertificates::Managed(settings) = &managed.certificates else {
            panic!("managed by default: {managed:?}");
        };
        assert_eq!(
            (settings.secret.as_str(), settings.namespace.as_str()),
            ("hooks-cert", "ops")
        );
        // The configurations it owns get the managed bundle.
        let targets = managed.inject_targets();
        assert_eq!(
            (targets.validating, targets.mutating),
            (vec!["hooks".to_owned()], vec!["hooks".to_owned()])
        );
        let extra = options(&[
            "--webhook-service=hooks",
            "--webhook-configuration=guards",
            "--webhook-inject=customresourcedefinition/widgets.example.com",
            "--webhook-inject=validatingwebhookconfiguration/other",
        ])
        .unwrap()
        .webhook
        .unwrap();
        let targets = extra.inject_targets();
        assert_eq!(targets.crds, vec!["widgets.example.com".to_owned()]);
        assert_eq!(
            targets.validating,
            vec!["other".to_owned(), "guards".to_owned()]
        );
        let mounted = options(&[
            "--webhook-service=hooks",
            "--webhook-cert-dir=/certs",
            "--webhook-inject-ca-from=ops/hooks-cert",
        ])
        .unwrap()
        .webhook
        .unwrap();
        assert_eq!(mounted.certificates, WebhookCertificates::mounted("/certs"));
        assert_eq!(mounted.inject_ca_from.as_deref(), Some("ops/hooks-cert"));
        assert_eq!(
            mounted.inject_targets(),
            informant::serving::InjectTargets::default()
        );
    }

    #[test]
    fn every_bad_webhook_flag_is_reported_at_once() {
        let problems = |args: &[&str]| {
            UserCli::parse_from(["operator", "--cache-config=ns/cc"].iter().chain(args))
                .manager
                .options()
                .unwrap_err()
                .problems
        };
        let without_service = problems(&[
            "--webhook-cert-dir=/c",
            "--webhook-inject=crd/x",
            "--webhook-client-ca=/ca.crt",
        ]);
        assert_eq!(without_service.len(), 3, "{without_service:?}");
        assert!(
            without_service
                .iter()
                .all(|p| p.contains("needs --webhook-service"))
        );
        let bad = problems(&[
            "--webhook-service=Hooks",
            "--webhook-service-port=0",
            "--webhook-addr=0",
            "--webhook-inject=pods/x",
            "--webhook-inject-ca-from=nope",
        ]);
        for part in [
            "--webhook-service: \"Hooks\"",
            "--webhook-service-port",
            "--webhook-addr",
            "\"pods/x\" is not KIND/NAME",
            "--webhook-inject-ca-from is for a mounted",
            "--webhook-inject-ca-from: \"nope\"",
        ] {
            assert!(bad.iter().any(|p| p.contains(part)), "{part} in {bad:?}");
        }
        assert_eq!(bad.len(), 6, "{bad:?}");
        let mixed = problems(&[
            "--webhook-service=hooks",
            "--webhook-cert-dir=/c",
            "--webhook-cert-secret=s",
            "--webhook-inject=customresourcedefinition/x",
        ]);
        assert_eq!(mixed.len(), 2, "{mixed:?}");
    }
}
