//! The layering the code promises (STYLE.md §1): dependencies flow cli → library, the cache,
//! recorder and embedded API server do not know the config module, and only the CLI knows clap.

use std::path::Path;

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path.display().to_string(), text));
        }
    }
    out
}

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn cache_recorder_and_apiserver_do_not_depend_on_config() {
    for module in ["cache", "recorder", "apiserver"] {
        for (path, text) in sources(&src().join(module)) {
            for (n, line) in text.lines().enumerate() {
                assert!(
                    !line.contains("crate::config"),
                    "{path}:{}: {module} must not use the config module: {line}",
                    n + 1
                );
            }
        }
    }
}

#[test]
fn only_the_cli_knows_clap() {
    for (path, text) in sources(&src()) {
        let cli = path.contains("/src/cli/") || path.ends_with("/src/main.rs");
        if !cli {
            assert!(!text.contains("clap"), "{path} mentions clap");
        }
    }
}
