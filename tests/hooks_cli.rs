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

#[test]
fn the_hooks_demo_runs_the_cronjob_story_with_the_python_hook() {
    // A second apart: the hook compares completion times, which have a resolution of a second.
    let out = informant(&["demo", "--hooks", "--runs", "3", "--every", "1s"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("the Python exec hook") && stdout.contains("cronjob.py"),
        "{stdout}"
    );
    // SawCompletedJob was written, and only the hook records it: the Rust sample controller
    // (which also records SuccessfulDelete) did not run.
    let written: u64 = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("SawCompletedJob "))
        .map(|l| {
            let columns: Vec<&str> = l.split_whitespace().collect();
            columns[1].parse::<u64>().unwrap() + columns[4].parse::<u64>().unwrap()
        })
        .sum();
    assert!(written > 0, "no SawCompletedJob written:\n{stdout}");
    assert!(!stdout.contains("SuccessfulDelete"), "{stdout}");
    let calls: u64 = stdout
        .split("The Python hook answered ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no hook call count in:\n{stdout}"))
        .parse()
        .unwrap();
    assert!(calls > 0, "{stdout}");
    assert!(stdout.contains(" calls (0 failed)"), "{stdout}");
}
