//! The `informant` binary: parses arguments, installs telemetry, dispatches to a subcommand and
//! turns its outcome into an exit code (see [`informant::exit_code`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use informant::exit_code;
use informant::report::error_chain;

/// informant: a declaratively configured Kubernetes operator framework.
// Reason: this doc comment is the `--help` text, where Markdown backticks would show as-is.
#[allow(clippy::doc_markdown)]
#[derive(Parser, Debug)]
#[command(name = "informant", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Reason: these doc comments are the `--help` text, where Markdown backticks would show as-is.
#[allow(clippy::doc_markdown)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Run the manager (config from a file with hot reload, or a CacheConfig in the cluster).
    Run(NotYet),
    /// Serve the embedded Kubernetes API server on loopback.
    Apiserver(informant::apiserver::cli::Args),
    /// Embedded API server + manager + the CronJob story of seed 001, on one machine.
    Demo(NotYet),
    /// Print the cacheconfigs.informant.dev CRD as YAML.
    Crd,
    /// Check a cache config file: every error at once, with its field path.
    Validate(ValidateArgs),
    /// Print the cache tree a config builds, and which cache serves a given object.
    Explain(informant::cache::cli::ExplainArgs),
    /// Get or list objects through the cache tree, exactly as a controller would see them.
    Cache(informant::cache::cli::CacheArgs),
    /// Replay an event stream (JSON lines) through the recorder on a virtual clock.
    Simulate(informant::recorder::simulate::Args),
}

/// Arguments of a subcommand that is not implemented yet.
#[derive(clap::Args, Debug)]
struct NotYet {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
}

/// Arguments of `informant validate`.
#[derive(clap::Args, Debug)]
struct ValidateArgs {
    /// The cache config YAML file (the document you would `kubectl apply`).
    #[arg(long, short = 'c', value_name = "FILE")]
    config: PathBuf,
}

/// `informant crd`: the CRD as YAML on stdout.
fn crd() -> ExitCode {
    match informant::config::crd_yaml() {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::from(exit_code::OK)
        }
        Err(e) => {
            eprintln!("informant crd: {}", error_chain(&e));
            ExitCode::from(exit_code::SOFTWARE)
        }
    }
}

/// `informant validate`: the summary on stdout and exit 0, or every error on stderr and exit
/// 64 (invalid) or 66 (unreadable).
fn validate(args: &ValidateArgs) -> ExitCode {
    match informant::config::load(&args.config) {
        Ok(valid) => {
            print!("{}", valid.summary());
            ExitCode::from(exit_code::OK)
        }
        Err(e @ informant::config::Error::Read { .. }) => {
            eprintln!("informant validate: {}", error_chain(&e));
            ExitCode::from(exit_code::NO_INPUT)
        }
        Err(e) => {
            eprintln!("informant validate: {}", error_chain(&e));
            ExitCode::from(exit_code::USAGE)
        }
    }
}

/// `informant simulate`: the correlator options come from `--config` (if given), then the
/// flags; a config that cannot be read exits 66, an invalid one 64.
fn simulate(args: &informant::recorder::simulate::Args) -> ExitCode {
    let base = match &args.config {
        None => informant::recorder::CorrelatorOptions::default(),
        Some(path) => match informant::config::load(path) {
            Ok(valid) => valid.recorder.correlator,
            Err(e) => {
                eprintln!("informant simulate: {}", error_chain(&e));
                return ExitCode::from(match e {
                    informant::config::Error::Read { .. } => exit_code::NO_INPUT,
                    _ => exit_code::USAGE,
                });
            }
        },
    };
    ExitCode::from(informant::recorder::simulate::cli(args, base))
}

fn not_yet(name: &str) -> ExitCode {
    eprintln!("informant {name}: not yet implemented");
    ExitCode::from(exit_code::SOFTWARE)
}

/// Cancel `token` on SIGINT or SIGTERM.
async fn cancel_on_signal(token: tokio_util::sync::CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("informant: cannot install the SIGTERM handler: {e}");
                    let _ = ctrl_c.await;
                    token.cancel();
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    token.cancel();
}

fn apiserver(args: informant::apiserver::cli::Args) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("informant apiserver: cannot start the async runtime: {e}");
            return ExitCode::from(exit_code::FAILURE);
        }
    };
    runtime.block_on(async {
        let token = tokio_util::sync::CancellationToken::new();
        let signals = tokio::spawn(cancel_on_signal(token.clone()));
        let result = informant::apiserver::cli::run(args, token).await;
        signals.abort();
        match result {
            Ok(()) => ExitCode::from(exit_code::OK),
            Err(e) => {
                eprintln!("informant apiserver: {}", error_chain(&e));
                ExitCode::from(e.exit_code())
            }
        }
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Telemetry is best effort: a broken OTEL_* setting must not stop `validate` or `crd`.
    let _telemetry = informant::telemetry::init()
        .inspect_err(|e| eprintln!("informant: telemetry disabled: {}", error_chain(e)))
        .ok();
    match cli.command {
        Command::Run(_) => not_yet("run"),
        Command::Apiserver(args) => apiserver(args),
        Command::Demo(_) => not_yet("demo"),
        Command::Crd => crd(),
        Command::Validate(args) => validate(&args),
        Command::Explain(args) => ExitCode::from(informant::cache::cli::explain(&args)),
        Command::Cache(args) => ExitCode::from(informant::cache::cli::cache(&args)),
        Command::Simulate(args) => simulate(&args),
    }
}
