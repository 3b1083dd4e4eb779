//! The binary with a multi-document config file of one `CacheConfig` and `Controller`s:
//! `explain` shows which cache serves each controller's kinds, `validate` accepts the file.

use std::process::{Command, Output};

fn informant(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

#[test]
fn explain_shows_which_cache_serves_each_controllers_kinds() {
    let out = informant(&[
        "explain",
        "-c",
        "examples/hooks/controllers.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let controllers = doc["controllers"].as_array().unwrap();
    let names: Vec<&str> = controllers
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "default/cronjob-watch",
            "default/configmap-to-secret",
            "default/count-keys"
        ]
    );
    assert_eq!(controllers[0]["kinds"][1]["kind"], "batch/v1/Job");
    assert!(controllers[0]["kinds"][1]["servedBy"].is_array());
}

#[test]
fn validate_accepts_a_multi_document_file() {
    let out = informant(&["validate", "-c", "examples/hooks/controllers.yaml"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
