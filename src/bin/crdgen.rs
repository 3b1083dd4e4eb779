//! Writes the `CacheConfig` CRD, generated from the Rust types, to
//! `crds/cacheconfigs.informant.dev.yaml` (run `cargo run --bin crdgen` after changing them;
//! the `config_crd` test fails while the committed file is stale).

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("crds/cacheconfigs.informant.dev.yaml");
    let yaml = match informant::config::crd_yaml() {
        Ok(yaml) => yaml,
        Err(e) => {
            eprintln!("crdgen: {e}");
            // EX_SOFTWARE: the types themselves do not produce a CRD.
            return ExitCode::from(70);
        }
    };
    if let Err(e) = std::fs::create_dir_all(path.parent().unwrap_or(Path::new("."))) {
        eprintln!(
            "crdgen: cannot create the directory of {}: {e}",
            path.display()
        );
        return ExitCode::FAILURE;
    }
    match std::fs::write(&path, yaml) {
        Ok(()) => {
            println!("wrote {}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("crdgen: cannot write {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}
