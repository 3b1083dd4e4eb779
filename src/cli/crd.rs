//! `informant crd`: the `cacheconfigs.informant.dev` CRD as YAML, generated from the Rust types.

use super::exit::{self, Failure};

/// Prints the CRD on standard output.
pub fn run() -> exit::Result {
    let yaml = informant::config::crd_yaml().map_err(|e| Failure::new(exit::SOFTWARE, &e))?;
    print!("{yaml}");
    Ok(())
}
