//! `informant demo` as a user runs it: a short story (few, fast runs) whose fate table counts
//! exactly the runs it claims under the metric's fate labels, shows no spam filtering once each
//! reason has its own bucket (on events.k8s.io/v1: one series per reason before the edit, an
//! Event per note after it), ends with no error line, and leaves no temporary directory;
//! `--keep-running` prints the table before it waits for Ctrl-C, hints whose addresses answer
//! their paths, and keeps its directory.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The directory a demo with process id `pid` writes its files to.
fn demo_dir(pid: u32) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("informant-demo-{pid}"))
}

/// The numbers of `reason`'s row: before the edit then after, in the header's fate order.
fn row(table: &str, reason: &str) -> Vec<u64> {
    let line = table
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{reason} ")))
        .unwrap_or_else(|| panic!("no row for {reason} in\n{table}"));
    line.split_whitespace()
        .skip(1)
        .map(|n| n.parse().unwrap())
        .collect()
}

#[test]
fn the_fate_table_counts_every_run_once_under_the_metric_labels_and_no_error_follows() {
    let runs = 12;
    let mut child = Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(["demo", "--runs", &runs.to_string(), "--every", "50ms"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let stdout = child.stdout.take().unwrap();
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap());
    let status = child.wait().unwrap();
    let stdout = out.join().unwrap();
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    assert!(status.success(), "{stdout}\n{stderr}");
    assert_eq!(stderr, "", "no log line at all, let alone an ERROR");
    assert!(!demo_dir(pid).exists(), "the demo removes its directory");

    let table = stdout
        .split("6. Fates")
        .nth(1)
        .unwrap_or_else(|| panic!("no table in\n{stdout}"));
    let header = table
        .lines()
        .find(|l| l.trim_start().starts_with("reason"))
        .unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        [
            "reason",
            "created",
            "patched",
            "spam_filtered",
            "created",
            "patched",
            "spam_filtered"
        ],
        "the metric's labels, nothing else ({table})"
    );
    // One SuccessfulCreate per run: one CronJob before the edit, two after.
    let create = row(table, "SuccessfulCreate");
    assert_eq!(create[0] + create[1] + create[2], runs, "{table}");
    assert_eq!(create[3] + create[4] + create[5], 2 * runs, "{table}");
    // Before the edit the reasons drain one bucket of 25: some events are filtered.
    let before_filtered: u64 = ["SuccessfulCreate", "SawCompletedJob", "SuccessfulDelete"]
        .iter()
        .map(|r| row(table, r)[2])
        .sum();
    assert!(before_filtered > 0, "{table}");
    // After it each reason of each CronJob has a bucket of its own: nothing is filtered.
    for reason in ["SuccessfulCreate", "SawCompletedJob", "SuccessfulDelete"] {
        assert_eq!(row(table, reason)[5], 0, "{reason} after the edit\n{table}");
    }
}

#[test]
fn on_events_k8s_io_v1_the_table_counts_series_fates_and_the_edit_makes_every_note_an_event() {
    let runs = 12;
    let out = Command::new(env!("CARGO_BIN_EXE_informant"))
        .args([
            "demo",
            "--api",
            "events.k8s.io/v1",
            "--runs",
            &runs.to_string(),
            "--every",
            "50ms",
        ])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stderr, "", "no log line at all, let alone an ERROR");
    assert!(
        stdout.contains("note added to the series key"),
        "the edit widens the series key\n{stdout}"
    );

    let table = stdout
        .split("6. Fates")
        .nth(1)
        .unwrap_or_else(|| panic!("no table in\n{stdout}"));
    let header = table
        .lines()
        .find(|l| l.trim_start().starts_with("reason"))
        .unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        [
            "reason",
            "created",
            "series_patched",
            "series_counted",
            "created",
            "series_patched",
            "series_counted"
        ],
        "this API's fates, nothing else ({table})"
    );
    // Before the edit every SuccessfulCreate of the CronJob is one series whatever its note:
    // the first created, the second patched, the rest folded into the count, each delivered
    // (by the series' finish) before the edit.
    assert_eq!(
        row(table, "SuccessfulCreate")[..3],
        [1, 1, runs - 2],
        "{table}"
    );
    // With note in the key every run's event is an Event of its own, in both CronJobs.
    assert_eq!(
        row(table, "SuccessfulCreate")[3..],
        [2 * runs, 0, 0],
        "{table}"
    );
    for reason in ["SawCompletedJob", "SuccessfulDelete"] {
        let numbers = row(table, reason);
        assert_eq!(numbers[..2], [1, 1], "{reason} before the edit\n{table}");
        assert_eq!(numbers[4..], [0, 0], "{reason} after the edit\n{table}");
    }
}

#[test]
fn keep_running_prints_the_table_first_and_keeps_its_directory() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(["demo", "--runs", "2", "--every", "50ms", "--keep-running"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut waiting = false;
    for line in lines.by_ref() {
        let line = line.unwrap();
        waiting |= line.starts_with("Still running");
        // The hints end the block: `export`, `kubectl`, then the `curl` lines.
        let last_hint = waiting && line.trim_start().starts_with("curl") && line.contains("readyz");
        seen.push(line);
        if last_hint {
            break;
        }
    }
    let text = seen.join("\n");
    let table = text.find("6. Fates").unwrap_or_else(|| panic!("{text}"));
    let waiting = text
        .find("Still running")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(table < waiting, "the table comes before the wait\n{text}");
    // Every address a hint gives answers its path.
    let hints: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("curl http://"))
        .collect();
    assert_eq!(hints.len(), 4, "{text}");
    for hint in hints {
        let (addr, path) = hint.split_once('/').unwrap();
        assert_eq!(get(addr, &format!("/{path}")), 200, "curl http://{hint}");
    }

    let interrupted = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let (done, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let status = child.wait().unwrap();
        let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
        let _ = done.send((rest.join("\n"), status, stderr));
    });
    let (rest, status, stderr) = ended
        .recv_timeout(Duration::from_mins(1))
        .expect("the demo stops on SIGINT");
    assert!(status.success(), "{rest}\n{stderr}");
    assert_eq!(stderr, "", "no error line on the way out");
    let dir = demo_dir(pid);
    let kept = dir.exists();
    let printed = format!("{text}\n{rest}").contains(&dir.display().to_string());
    let _ = std::fs::remove_dir_all(&dir);
    assert!(kept, "--keep-running keeps {}", dir.display());
    assert!(printed, "and says where it is\n{text}");
}

/// The status code of `GET path` on `addr` (HTTP/1.1, one connection).
fn get(addr: &str, path: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response[9..12].parse().unwrap()
}

#[test]
fn a_zero_time_between_runs_is_refused_before_anything_starts() {
    let out = Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(["demo", "--every", "0s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("invalid value '0s' for '--every <DURATION>': must be longer than 0"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
