//! `informant demo` as a user runs it: a short story (few, fast runs) whose fate table counts
//! exactly the runs it claims under the metric's fate labels, shows no spam filtering once each
//! reason has its own bucket (on events.k8s.io/v1: one series per reason before the edit, an
//! Event per note after it), ends with no error line, and leaves no temporary directory;
//! `--keep-running` prints the table before it waits for Ctrl-C, hints whose addresses answer
//! their paths, and keeps its directory (a fresh one, random name, mode 0700).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Stdio};
use std::time::Duration;

/// What a demo left in `tmp`, its `TMPDIR`: the directories it made there.
fn left_in(tmp: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(tmp)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect()
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
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(["demo", "--runs", &runs.to_string(), "--every", "50ms"])
        .env_remove("RUST_LOG")
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap());
    let status = child.wait().unwrap();
    let stdout = out.join().unwrap();
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    assert!(status.success(), "{stdout}\n{stderr}");
    assert_eq!(stderr, "", "no log line at all, let alone an ERROR");
    assert_eq!(
        left_in(tmp.path()),
        [] as [std::path::PathBuf; 0],
        "the demo removes its directory"
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
    // The closing sentence is the table's, not fixed text (issue #33 item 10).
    let seen = row(table, "SawCompletedJob");
    let closing = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    let said = match (seen[0] + seen[1], seen[2]) {
        (reached, 0) => format!("its {reached} events all reached the API server"),
        (0, filtered) => format!("None of SawCompletedJob's {filtered} events reached"),
        (reached, filtered) => format!(
            "stopped reaching the API server after its first {reached} events: the spam filter \
             dropped the other {filtered}."
        ),
    };
    assert!(closing.contains(&said), "{said:?} in\n{stdout}");
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
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(["demo", "--runs", "2", "--every", "50ms", "--keep-running"])
        .env_remove("RUST_LOG")
        .env("TMPDIR", tmp.path())
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
    let kept = left_in(tmp.path());
    assert_eq!(
        kept.len(),
        1,
        "--keep-running keeps its one directory: {kept:?}"
    );
    let dir = &kept[0];
    assert!(
        format!("{text}\n{rest}").contains(&dir.display().to_string()),
        "and says where it is\n{text}"
    );
    // Issue #33 item 7: a directory of its own, not one of a name another user can foresee.
    let name = dir.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("informant-demo-"), "{name}");
    assert_ne!(
        name,
        format!("informant-demo-{pid}"),
        "a random name, not the pid"
    );
    let mode = std::fs::metadata(dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "only its user may enter it: {mode:o}");
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
