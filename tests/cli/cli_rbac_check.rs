//! `informant rbac --check`: a `SelfSubjectAccessReview` per permission the config needs, asked
//! of the embedded API server with RBAC on, for a `ServiceAccount` without grants (exit 11, the
//! missing objects on standard output, which granted make it pass) and for a granted one (exit
//! 0), by impersonation (`--as`) and by the account's own token.

use crate::support;

use informant::apiserver::TestServer;
use serde_json::{Value, json};
use support::informant;

const CONFIG: &str = "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\n\
     metadata: {name: informant, namespace: informant-system}\n\
     spec: {defaultNamespaces: {shop: {}}, byObject: [{apiVersion: v1, kind: Pod}]}\n";

/// A server with RBAC on, the namespaces, the `ServiceAccount` `informant-system/informant`,
/// and the config and admin kubeconfig in `dir`.
async fn setup(dir: &std::path::Path) -> TestServer {
    let server = TestServer::start_with_rbac().await.unwrap();
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "informant", "namespace": "informant-system"}}),
    ] {
        server.handle().create(object).unwrap();
    }
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    let admin = informant::yaml::to_string(&server.kubeconfig()).unwrap();
    std::fs::write(dir.join("admin.yaml"), admin).unwrap();
    server
}

fn path(dir: &std::path::Path, file: &str) -> String {
    dir.join(file).display().to_string()
}

/// `informant rbac --check` with `extra` arguments: its exit code, standard output and error.
fn check(dir: &std::path::Path, kubeconfig: &str, extra: &[&str]) -> (i32, String, String) {
    let config = path(dir, "config.yaml");
    let kubeconfig = path(dir, kubeconfig);
    let mut args = vec![
        "rbac",
        "--check",
        "-c",
        &config,
        "--leader-elect",
        "--kubeconfig",
        &kubeconfig,
    ];
    args.extend_from_slice(extra);
    let out = informant(&args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Creates every object of a YAML stream as the administrator.
fn grant(server: &TestServer, yaml: &str) -> usize {
    let objects = informant::apiserver::parse_yaml(yaml).unwrap();
    for object in &objects {
        server.handle().create(object.clone()).unwrap();
    }
    objects.len()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ungranted_account_is_told_what_is_missing_and_the_output_grants_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = setup(dir.path()).await;
    let (code, stdout, stderr) = check(dir.path(), "admin.yaml", &["--as", "informant"]);
    assert_eq!(code, 11, "{stderr}");
    assert!(
        stdout.starts_with(
            "# 18 of 18 permissions the config needs are not granted to system:serviceaccount:informant-system:informant:\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("#   list pods in namespace shop\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "#   patch cacheconfigs.informant.dev/status \"informant\" in namespace informant-system\n"
        ),
        "{stdout}"
    );
    assert!(stderr.contains("18 of 18 permissions missing"), "{stderr}");
    // The printed objects are ready to apply: bound to the account, named `<name>-missing`.
    let objects: Vec<Value> = informant::apiserver::parse_yaml(&stdout).unwrap();
    let kinds: Vec<&str> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["Role", "RoleBinding", "Role", "RoleBinding"]);
    assert_eq!(objects[0]["metadata"]["name"], "informant-missing");
    assert_eq!(objects[1]["subjects"][0]["name"], "informant");
    assert_eq!(grant(&server, &stdout), 4);
    let (code, stdout, stderr) = check(dir.path(), "admin.yaml", &["--as", "informant"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        stdout,
        "# all 18 permissions the config needs are granted to system:serviceaccount:informant-system:informant\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_granted_account_passes_with_its_own_token_and_a_partial_grant_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let server = setup(dir.path()).await;
    let token = server.token("informant-system", "informant").await.unwrap();
    let kubeconfig = server.handle().kubeconfig_with_token(Some(&token));
    std::fs::write(
        dir.path().join("sa.yaml"),
        informant::yaml::to_string(&kubeconfig).unwrap(),
    )
    .unwrap();
    // What `informant rbac` derives for the same config, minus the Lease's rules.
    let config = path(dir.path(), "config.yaml");
    let derived = informant(&["rbac", "-c", &config, "--leader-elect"]);
    let yaml = String::from_utf8(derived.stdout).unwrap();
    let mut objects = informant::apiserver::parse_yaml(&yaml).unwrap();
    for object in &mut objects {
        if let Some(rules) = object["rules"].as_array_mut() {
            rules.retain(|r| r["resources"][0] != "leases");
        }
        server.handle().create(object.clone()).unwrap();
    }
    let (code, stdout, _) = check(dir.path(), "sa.yaml", &[]);
    assert_eq!(code, 11, "{stdout}");
    assert!(
        stdout.starts_with("# 3 of 18 permissions the config needs are not granted to system:serviceaccount:informant-system:informant:\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "#   update leases.coordination.k8s.io \"informant\" in namespace informant-system\n"
        ),
        "{stdout}"
    );
    grant(&server, &stdout);
    let (code, stdout, stderr) = check(dir.path(), "sa.yaml", &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
}

#[test]
fn as_names_a_service_account_and_needs_check() {
    let out = informant(&[
        "rbac",
        "-c",
        "config/samples/minimal.yaml",
        "--check",
        "--as",
        "a:b:c",
    ]);
    assert_eq!(out.status.code(), Some(64));
    let out = informant(&["rbac", "-c", "config/samples/minimal.yaml", "--as", "x"]);
    assert_eq!(out.status.code(), Some(2), "--as without --check");
}
