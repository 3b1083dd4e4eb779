//! The `informant` binary: parses arguments, installs telemetry, and runs the subcommand on one
//! tokio runtime (see the `cli` module).

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    // Telemetry is best effort: a broken OTEL_* setting must not stop `validate` or `crd`.
    let tally = cli.fate_tally();
    let _telemetry = informant::telemetry::init_with(cli.log_level(), tally.clone())
        .inspect_err(|e| {
            eprintln!(
                "informant: telemetry disabled: {}",
                cli::exit::error_chain(e)
            );
        })
        .ok();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("informant: cannot start the async runtime: {e}");
            return ExitCode::from(cli::exit::FAILURE);
        }
    };
    ExitCode::from(runtime.block_on(cli.run(tally)))
}
