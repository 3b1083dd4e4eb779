//! `informant validate`: checks a `CacheConfig` file; every error at once, with its field path.

use std::path::PathBuf;

use super::exit;

/// Arguments of `informant validate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The cache config YAML file (the document you would `kubectl apply`).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: PathBuf,
}

/// The summary on standard output, or every error on standard error and exit 64 (invalid) or
/// 66 (unreadable).
pub fn run(args: &Args) -> exit::Result {
    let valid = informant::config::load(&args.config)?;
    print!("{}", valid.summary());
    Ok(())
}
