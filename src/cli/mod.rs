//! The `informant` command line: one file per subcommand (its flags, the call into the library,
//! its exit code), exit codes and error printing in one place ([`exit`]), signal handling in
//! another ([`signal`]). `main` runs every subcommand on one tokio runtime. Nothing in the
//! library depends on this module. Standard output is written through [`out`] only, so a
//! closed pipe ends every subcommand the same way.
#![deny(
    clippy::print_stdout,
    reason = "println! panics on a closed pipe: write with out! and outln!"
)]

#[cfg(feature = "apiserver")]
mod apiserver;
mod cache;
mod crd;
#[cfg(feature = "apiserver")]
mod demo;
pub mod exit;
mod explain;
mod out;
mod rbac;
mod run;
mod signal;
mod simulate;
mod validate;

use clap::{Parser, Subcommand};
use informant::cache::{BuiltinKinds, KindInfo};
use informant::telemetry::FateTally;
use kube::core::GroupVersionKind;
use tokio_util::sync::CancellationToken;
use tracing::level_filters::LevelFilter;

/// informant: a declaratively configured Kubernetes operator framework.
// Reason: this doc comment is the `--help` text, where Markdown backticks would show as-is.
#[allow(clippy::doc_markdown)]
#[derive(Parser, Debug)]
#[command(
    name = "informant",
    version,
    about,
    long_about = None,
    after_help = exit::EXIT_CODES_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// More log output on standard error: -v info, -vv debug, -vvv trace (RUST_LOG, when set,
    /// decides instead).
    #[arg(
        long,
        short = 'v',
        global = true,
        action = clap::ArgAction::Count,
        help_heading = "Logging"
    )]
    verbose: u8,
}

// Reason: these doc comments are the `--help` text, where Markdown backticks would show as-is;
// and the command is parsed once per process, so `run`'s many flags making it the largest variant
// cost one stack slot of a few hundred bytes, once.
#[allow(clippy::doc_markdown, clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Run the manager (config from a file with hot reload, or a CacheConfig in the cluster).
    Run(run::Args),
    /// Serve the embedded Kubernetes API server on loopback.
    #[cfg(feature = "apiserver")]
    Apiserver(apiserver::Args),
    /// Embedded API server + manager + the CronJob story, on one machine, no cluster needed.
    #[cfg(feature = "apiserver")]
    Demo(demo::Args),
    /// Print the CRDs (cacheconfigs and controllers.informant.dev) as YAML.
    Crd(crd::Args),
    /// Check a cache config file: every error at once, with its field path.
    Validate(validate::Args),
    /// Print the cache tree a config builds, and which cache serves a given object.
    Explain(explain::Args),
    /// Get or list objects through the cache tree, exactly as a controller would see them.
    Cache(cache::Args),
    /// Replay an event stream (JSON lines) through the recorder on a virtual clock.
    Simulate(simulate::Args),
    /// Print the least-privilege Roles/ClusterRole (and bindings) a CacheConfig needs.
    Rbac(rbac::Args),
}

impl Cli {
    /// The log level when `RUST_LOG` is not set. One-shot commands log warnings only, so
    /// their output is their answer, and so does `demo`, which tells its story on standard
    /// output; the servers (`apiserver`, `run`) log their lifecycle at info. Each `-v` raises
    /// the level by one.
    pub fn log_level(&self) -> LevelFilter {
        let base: u8 = match self.command {
            Command::Run(_) => 1,
            #[cfg(feature = "apiserver")]
            Command::Apiserver(_) => 1,
            _ => 0,
        };
        match base.saturating_add(self.verbose) {
            0 => LevelFilter::WARN,
            1 => LevelFilter::INFO,
            2 => LevelFilter::DEBUG,
            _ => LevelFilter::TRACE,
        }
    }

    /// The subcommand's name, as errors are prefixed with it.
    fn name(&self) -> &'static str {
        match self.command {
            Command::Run(_) => "run",
            #[cfg(feature = "apiserver")]
            Command::Apiserver(_) => "apiserver",
            #[cfg(feature = "apiserver")]
            Command::Demo(_) => "demo",
            Command::Crd(_) => "crd",
            Command::Validate(_) => "validate",
            Command::Explain(_) => "explain",
            Command::Cache(_) => "cache",
            Command::Simulate(_) => "simulate",
            Command::Rbac(_) => "rbac",
        }
    }

    /// The tally of event fates the telemetry should keep: only `demo` prints one.
    pub fn fate_tally(&self) -> Option<FateTally> {
        match self.command {
            #[cfg(feature = "apiserver")]
            Command::Demo(_) => Some(FateTally::default()),
            _ => None,
        }
    }

    /// Runs the subcommand and returns the process exit code. Long-running subcommands stop
    /// on SIGINT or SIGTERM.
    pub async fn run(
        self,
        // Reason: only `demo` reads it, which needs the `apiserver` feature.
        #[cfg_attr(not(feature = "apiserver"), expect(unused_variables))] tally: Option<FateTally>,
    ) -> u8 {
        let name = self.name();
        let shutdown = CancellationToken::new();
        let signals = tokio::spawn(signal::cancel_on_signal(shutdown.clone()));
        let result = match self.command {
            // On the heap: the manager's future is large (clippy::large_futures).
            Command::Run(args) => Box::pin(run::run(args, shutdown)).await,
            #[cfg(feature = "apiserver")]
            Command::Demo(args) => demo::run(args, shutdown, tally.unwrap_or_default()).await,
            #[cfg(feature = "apiserver")]
            Command::Apiserver(args) => apiserver::run(args, shutdown).await,
            Command::Crd(args) => crd::run(&args),
            Command::Validate(args) => validate::run(&args),
            Command::Explain(args) => explain::run(&args).await,
            Command::Cache(args) => cache::run(&args).await,
            Command::Simulate(args) => simulate::run(&args),
            Command::Rbac(args) => rbac::run(&args).await,
        };
        signals.abort();
        match result {
            Ok(()) => exit::OK,
            Err(failure) => failure.report(name),
        }
    }
}

/// Splits `apps/v1` into a GVK with `kind`.
fn parse_gvk(api_version: &str, kind: &str) -> GroupVersionKind {
    match api_version.split_once('/') {
        Some((group, version)) => GroupVersionKind::gvk(group, version, kind),
        None => GroupVersionKind::gvk("", api_version, kind),
    }
}

/// The one check of a kind (and the namespace given with it) named on the command line, for
/// every subcommand: `info` is what the resolver answered (discovery for `cache`, the
/// built-in table, [`BuiltinKinds::check`], offline). An unknown kind exits 10 with the kinds
/// its version serves and the closest one; a namespace on a cluster-scoped kind exits 64.
fn check_kind(
    gvk: &GroupVersionKind,
    namespace: Option<&str>,
    info: informant::cache::Result<KindInfo>,
) -> exit::Result<KindInfo> {
    let info = info?;
    if let (false, Some(namespace)) = (info.namespaced, namespace) {
        let api_version = if gvk.group.is_empty() {
            gvk.version.clone()
        } else {
            format!("{}/{}", gvk.group, gvk.version)
        };
        return Err(exit::Failure::message(
            exit::USAGE,
            format!(
                "{} ({api_version}) is cluster-scoped: its objects have no namespace, but \
                 {namespace:?} was given",
                gvk.kind
            ),
        ));
    }
    Ok(info)
}

/// [`check_kind`] without an API server: the built-in table.
fn check_kind_offline(gvk: &GroupVersionKind, namespace: Option<&str>) -> exit::Result<KindInfo> {
    check_kind(gvk, namespace, BuiltinKinds::check(gvk))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shot_commands_log_warnings_and_servers_their_lifecycle() {
        let level = |args: &[&str]| Cli::parse_from(args).log_level();
        assert_eq!(level(&["informant", "crd"]), LevelFilter::WARN);
        assert_eq!(level(&["informant", "crd", "-v"]), LevelFilter::INFO);
        assert_eq!(level(&["informant", "apiserver"]), LevelFilter::INFO);
        assert_eq!(
            level(&["informant", "-vv", "apiserver"]),
            LevelFilter::TRACE
        );
    }

    #[test]
    fn the_cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
