//! The `informant` binary: parses arguments, installs telemetry, dispatches to a subcommand and
//! turns its outcome into an exit code (see [`informant::exit_code`]).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use informant::exit_code;

/// informant: a declaratively configured Kubernetes operator framework.
#[derive(Parser, Debug)]
#[command(name = "informant", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the manager (config from a file with hot reload, or a CacheConfig in the cluster).
    Run(NotYet),
    /// Serve the embedded Kubernetes API server on loopback.
    Apiserver(informant::apiserver::cli::Args),
    /// Embedded API server + manager + the CronJob story of seed 001, on one machine.
    Demo(NotYet),
    /// Print the CacheConfig CustomResourceDefinition as YAML.
    Crd(NotYet),
    /// Check a CacheConfig file: every error at once, with its field path.
    Validate(NotYet),
    /// Print the cache tree a config builds, and which cache serves a given object.
    Explain(NotYet),
    /// Get or list objects through the cache tree, exactly as a controller would see them.
    Cache(NotYet),
    /// Replay an event stream (JSON lines) through the recorder on a virtual clock.
    Simulate(NotYet),
}

/// Arguments of a subcommand that is not implemented yet.
#[derive(clap::Args, Debug)]
struct NotYet {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
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
                let mut msg = format!("informant apiserver: {e}");
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    msg.push_str(&format!(": {s}"));
                    source = s.source();
                }
                eprintln!("{msg}");
                ExitCode::from(e.exit_code())
            }
        }
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(_) => not_yet("run"),
        Command::Apiserver(args) => apiserver(args),
        Command::Demo(_) => not_yet("demo"),
        Command::Crd(_) => not_yet("crd"),
        Command::Validate(_) => not_yet("validate"),
        Command::Explain(_) => not_yet("explain"),
        Command::Cache(_) => not_yet("cache"),
        Command::Simulate(_) => not_yet("simulate"),
    }
}
