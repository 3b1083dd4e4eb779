//! `informant simulate` as a user runs it: flags, `--config`, `--summary` and exit codes.

use std::path::PathBuf;
use std::process::Command;

fn events() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/scenarios/in/a_cronjob_default.in.jsonl")
}

fn simulate(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_informant"))
        .arg("simulate")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn saw_completed_job_line(summary: &str) -> String {
    summary
        .lines()
        .find(|l| l.starts_with("SawCompletedJob"))
        .unwrap()
        .to_owned()
}

#[test]
fn prints_one_json_line_per_event() {
    let (code, out, _) = simulate(&["--events", events().to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 87);
    let line: serde_json::Value = serde_json::from_str(out.lines().nth(26).unwrap()).unwrap();
    assert_eq!(line["fate"], "spam_filtered");
}

#[test]
fn spam_key_from_a_config_file_is_overridden_by_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cacheconfig.yaml");
    std::fs::write(
        &config,
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: story}\n\
         spec:\n  recorder:\n    correlator:\n      spamKeyFields: [source, involvedObject, type, reason]\n",
    )
    .unwrap();
    let ev = events();
    let base = [
        "--events",
        ev.to_str().unwrap(),
        "--summary",
        "--config",
        config.to_str().unwrap(),
    ];
    let (code, out, err) = simulate(&base);
    assert_eq!(code, 0, "{err}");
    assert!(saw_completed_job_line(&out).ends_with(" -"), "{out}");
    let mut flagged = base.to_vec();
    flagged.extend(["--spam-key-fields", "source,involvedObject"]);
    let (code, out, _) = simulate(&flagged);
    assert_eq!(code, 0);
    assert!(saw_completed_job_line(&out).contains("t=547 s"), "{out}");
}

#[test]
fn the_summary_names_each_fate_by_its_metric_label() {
    let (code, out, err) = simulate(&["--events", events().to_str().unwrap(), "--summary"]);
    assert_eq!(code, 0, "{err}");
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        [
            "reason",
            "created",
            "patched",
            "spam_filtered",
            "invalid",
            "never",
            "delivered",
            "after"
        ],
        "{out}"
    );
    assert_eq!(
        saw_completed_job_line(&out),
        "SawCompletedJob        10        0             20        0  t=547 s (minute 9)"
    );
    // An invalid event (a type other than Normal or Warning) is counted as such.
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let line = std::fs::read_to_string(self::events()).unwrap();
    let first = line.lines().next().unwrap();
    std::fs::write(
        &events,
        format!("{first}\n{}\n", first.replace("\"Normal\"", "\"normal\"")),
    )
    .unwrap();
    let (code, out, err) = simulate(&["--events", events.to_str().unwrap(), "--summary"]);
    assert_eq!(code, 0, "{err}");
    let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[..5], ["SuccessfulCreate", "1", "0", "0", "1"], "{out}");
}

#[test]
fn bad_input_exits_64_and_unreadable_files_66() {
    let ev = events();
    let (code, _, err) = simulate(&["--events", ev.to_str().unwrap(), "--burst", "0"]);
    assert_eq!(code, 64, "{err}");
    let (code, _, err) = simulate(&["--events", "/nonexistent/events.jsonl"]);
    assert_eq!(code, 66, "{err}");
    let (code, _, err) = simulate(&[
        "--events",
        ev.to_str().unwrap(),
        "--config",
        "/nonexistent.yaml",
    ]);
    assert_eq!(code, 66, "{err}");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{not json}\n").unwrap();
    let (code, _, err) = simulate(&["--events", bad.to_str().unwrap()]);
    assert_eq!(code, 64);
    assert!(err.contains("line 1"), "{err}");
}
