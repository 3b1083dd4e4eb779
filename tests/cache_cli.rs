//! `informant cache` and `informant explain` end to end: the binary against the embedded API
//! server, one exit code per error class, output as a controller would see it.

use std::process::Command;

use informant::apiserver::TestServer;
use serde_json::json;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn informant(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn config(dir: &tempfile::TempDir, spec: &str) -> String {
    write(
        dir,
        "config.yaml",
        &format!(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: t}}\nspec:\n{spec}"
        ),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn cache_reads_print_objects_and_exit_with_the_class_of_each_error() {
    let server = TestServer::start().await.unwrap();
    for (ns, name) in [("a", "x"), ("a", "y"), ("b", "z")] {
        server
            .handle()
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}}))
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(
        &dir,
        "kubeconfig",
        &serde_yaml::to_string(&server.kubeconfig()).unwrap(),
    );
    let cfg = config(&dir, "  defaultNamespaces: {a: {}}\n");
    let base = [
        "cache",
        "--config",
        &cfg,
        "--kubeconfig",
        &kubeconfig,
        "--api-version",
        "v1",
        "--kind",
        "ConfigMap",
    ];
    // The server runs on this runtime's other worker while the binary blocks this one.
    let run = |extra: &[&str]| {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        tokio::task::block_in_place(|| informant(&args))
    };

    let list = run(&["list", "-o", "name"]);
    assert_eq!(
        (list.code, list.stdout.as_str()),
        (0, "a/x\na/y\n"),
        "{}",
        list.stderr
    );
    let get = run(&["get", "-n", "a", "x", "-o", "json"]);
    assert_eq!(get.code, 0, "{}", get.stderr);
    let object: serde_json::Value = serde_json::from_str(&get.stdout).unwrap();
    assert_eq!(object["metadata"]["name"], "x");
    let missing = run(&["get", "-n", "a", "nope"]);
    assert_eq!(missing.code, 3);
    assert!(
        missing.stderr.contains("ConfigMap \"nope\" not found"),
        "{}",
        missing.stderr
    );
    let unknown = run(&["get", "-n", "b", "z"]);
    assert_eq!(unknown.code, 5);
    assert!(
        unknown
            .stderr
            .contains("unable to get: b/z because of unknown namespace for the cache")
    );
    let cont = run(&["list", "--continue", "t"]);
    assert_eq!(cont.code, 9);

    let strict = config(&dir, "  readerFailOnMissingInformer: true\n");
    let args = [
        "cache",
        "list",
        "--config",
        &strict,
        "--kubeconfig",
        &kubeconfig,
        "--api-version",
        "v1",
        "--kind",
        "ConfigMap",
    ];
    let not_cached = tokio::task::block_in_place(|| informant(&args));
    assert_eq!(not_cached.code, 4);
    assert!(
        not_cached
            .stderr
            .contains("/v1, Kind=ConfigMap is not cached")
    );
    let mut ensured = args.to_vec();
    ensured.extend(["--ensure-informer", "-o", "name"]);
    let ensured = tokio::task::block_in_place(|| informant(&ensured));
    assert_eq!(
        (ensured.code, ensured.stdout.as_str()),
        (0, "a/x\na/y\nb/z\n"),
        "{}",
        ensured.stderr
    );
}

#[test]
fn explain_prints_the_tree_and_the_route_or_error_of_an_object() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        "  defaultNamespaces: {a: {}, \"\": {labelSelector: app=shop}}\n  byObject:\n  - {apiVersion: v1, kind: Secret, namespaces: {a: {}}}\n",
    );
    let tree = informant(&["explain", "--config", &cfg]);
    assert_eq!(tree.code, 0, "{}", tree.stderr);
    assert!(
        tree.stdout.starts_with("ByKindCache (root)\n"),
        "{}",
        tree.stdout
    );
    assert!(
        tree.stdout
            .contains("fieldSelector=\"metadata.namespace!=a\""),
        "{}",
        tree.stdout
    );
    let served = informant(&[
        "explain",
        "--config",
        &cfg,
        "--object",
        "v1/Pod/other/p",
        "-o",
        "json",
    ]);
    let doc: serde_json::Value = serde_json::from_str(&served.stdout).unwrap();
    assert_eq!(served.code, 0);
    assert!(
        doc["servedBy"][1]
            .as_str()
            .unwrap()
            .contains("served by the \"\" entry"),
        "{doc}"
    );
    let refused = informant(&["explain", "--config", &cfg, "--object", "v1/Secret/other/s"]);
    assert_eq!(refused.code, 5);
    assert!(
        refused
            .stdout
            .contains("error: unable to get: other/s because of unknown namespace for the cache"),
        "{}",
        refused.stdout
    );
}
