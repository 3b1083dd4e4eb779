//! `informant apiserver`'s credentials as a user meets them (issue #33, item 5): the kubeconfig
//! it writes is readable by its owner only, and an address beyond loopback is served without
//! RBAC only when the user insists.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::support::informant;

/// `informant apiserver ARGS`, started, and the address line it prints once it serves.
fn serve(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_informant"))
        .arg("apiserver")
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (line, read) = mpsc::channel();
    std::thread::spawn(move || {
        let mut first = String::new();
        let _ = BufReader::new(stdout).read_line(&mut first);
        let _ = line.send(first);
    });
    let address = read
        .recv_timeout(Duration::from_mins(1))
        .expect("the server prints its address");
    (child, address)
}

/// Stops the server as a user would (SIGINT) and returns how it ended and its standard error.
fn stop(mut child: Child) -> (ExitStatus, String) {
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let (done, ended) = mpsc::channel();
    std::thread::spawn(move || {
        let status = child.wait().unwrap();
        let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
        let _ = done.send((status, stderr));
    });
    ended
        .recv_timeout(Duration::from_mins(1))
        .expect("the server stops on SIGINT")
}

/// The kubeconfig holds the administrator's token: mode 0600 whatever the umask (the test
/// process's is usually 022, which would leave a plain write world-readable).
#[cfg(unix)]
#[test]
fn the_kubeconfig_is_written_for_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    let (child, address) = serve(&[
        "--authorization",
        "rbac",
        "--kubeconfig-out",
        path.to_str().unwrap(),
    ]);
    let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o777);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let (status, stderr) = stop(child);
    assert!(
        address.starts_with("https://127.0.0.1:"),
        "{address}\n{stderr}"
    );
    assert_eq!(mode.unwrap(), 0o600, "{stderr}");
    assert!(
        text.contains("token: "),
        "the administrator's token is in it: {text}"
    );
    assert!(status.success(), "{stderr}");
}

#[test]
fn an_address_beyond_loopback_without_rbac_exits_64_and_says_why() {
    let out = informant(&["apiserver", "--listen", "0.0.0.0:0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert_eq!(
        stderr,
        "informant apiserver: refusing to listen on 0.0.0.0:0 without --authorization rbac: \
         every request would be allowed, with no credentials, to anyone who can reach that \
         address; listen on loopback (127.0.0.1), add --authorization rbac, or pass \
         --insecure-allow-any to serve it anyway\n"
    );
    assert!(out.stdout.is_empty(), "nothing is served");
}

#[test]
fn insecure_allow_any_serves_beyond_loopback_with_a_warning() {
    let (child, address) = serve(&["--listen", "0.0.0.0:0", "--insecure-allow-any"]);
    let (status, stderr) = stop(child);
    assert!(
        address.starts_with("http://0.0.0.0:"),
        "{address}\n{stderr}"
    );
    let warning = stderr
        .lines()
        .find(|l| l.contains("WARN"))
        .unwrap_or_else(|| panic!("no warning in\n{stderr}"));
    assert!(
        warning.contains("serving every request without credentials beyond loopback"),
        "{warning}"
    );
    assert!(status.success(), "{stderr}");
}

#[test]
fn rbac_serves_beyond_loopback_without_a_warning() {
    let (child, address) = serve(&["--listen", "0.0.0.0:0", "--authorization", "rbac"]);
    let (status, stderr) = stop(child);
    assert!(
        address.starts_with("https://0.0.0.0:"),
        "{address}\n{stderr}"
    );
    assert!(!stderr.contains("WARN"), "{stderr}");
    assert!(status.success(), "{stderr}");
}
