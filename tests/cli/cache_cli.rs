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
    let mut command = Command::new(env!("CARGO_BIN_EXE_informant"));
    command.args(args).env("RUST_LOG", "warn");
    output(&mut command)
}

fn output(command: &mut Command) -> Run {
    let out = command.output().unwrap();
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

/// The server, a kubeconfig for it and a config file, in `dir`.
async fn served(dir: &tempfile::TempDir, spec: &str) -> (TestServer, String, String) {
    let server = TestServer::start().await.unwrap();
    let kubeconfig = write(
        dir,
        "kubeconfig",
        &serde_yaml::to_string(&server.kubeconfig()).unwrap(),
    );
    let cfg = config(dir, spec);
    (server, kubeconfig, cfg)
}

/// `informant cache list` of `api_version`/`kind` through `cfg`, against the server of
/// `kubeconfig`.
fn cache_list<'a>(
    cfg: &'a str,
    kubeconfig: &'a str,
    api_version: &'a str,
    kind: &'a str,
) -> Vec<&'a str> {
    vec![
        "cache",
        "list",
        "-c",
        cfg,
        "--kubeconfig",
        kubeconfig,
        "--api-version",
        api_version,
        "--kind",
        kind,
    ]
}

/// `informant` as a user runs it from a script: no `RUST_LOG`, output piped.
fn informant_plain(args: &[&str]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_informant"));
    command
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR");
    output(&mut command)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_kind_is_one_line_with_the_kinds_the_version_serves() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, kubeconfig, cfg) = served(&dir, "  {}\n").await;
    let run = |api_version: &str, kind: &str| {
        let args = cache_list(&cfg, &kubeconfig, api_version, kind);
        tokio::task::block_in_place(|| informant_plain(&args))
    };
    let typo = run("v1", "ConfigMaps");
    assert_eq!(typo.code, 10, "{}", typo.stderr);
    assert_eq!(typo.stderr.lines().count(), 1, "{}", typo.stderr);
    assert!(
        typo.stderr.starts_with(
            "informant cache: no kind \"ConfigMaps\" in v1 (did you mean \"ConfigMap\"?); known kinds in v1: "
        ),
        "{}",
        typo.stderr
    );
    assert!(typo.stderr.contains("Pod"), "{}", typo.stderr);
    assert!(!typo.stderr.contains("GroupVersionKind"), "no Debug text");
    let group = run("example.com/v1", "Widget");
    assert_eq!(group.code, 10, "{}", group.stderr);
    assert_eq!(
        group.stderr,
        "informant cache: no kind \"Widget\" in example.com/v1: the API server does not serve example.com/v1\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_one_shot_read_logs_nothing_and_no_colour_when_piped() {
    let dir = tempfile::tempdir().unwrap();
    let (server, kubeconfig, cfg) = served(&dir, "  {}\n").await;
    server
        .handle()
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "a"}}))
        .unwrap();
    let mut args = cache_list(&cfg, &kubeconfig, "v1", "ConfigMap");
    args.extend(["-o", "name"]);
    let quiet = tokio::task::block_in_place(|| informant_plain(&args));
    assert_eq!((quiet.code, quiet.stdout.as_str()), (0, "a/x\n"));
    assert_eq!(quiet.stderr, "", "warn level by default: no INFO lines");
    let mut verbose_args = args.clone();
    verbose_args.push("-v");
    let verbose = tokio::task::block_in_place(|| informant_plain(&verbose_args));
    assert!(
        verbose.stderr.contains("informer synced"),
        "-v shows info: {}",
        verbose.stderr
    );
    assert!(
        !verbose.stderr.contains('\u{1b}'),
        "no ANSI escapes in piped logs: {:?}",
        verbose.stderr
    );
}

#[test]
fn explain_accepts_exactly_the_formats_it_prints() {
    let minimal = "config/samples/minimal.yaml";
    let json = informant(&["explain", "-c", minimal, "-o", "json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        doc["tree"],
        json!({
            "cache": "InformerCache",
            "role": "root",
            "namespace": "",
            "labelSelector": "",
            "fieldSelector": "",
            "transform": "none",
            "unsafeDisableDeepCopy": false,
            "metadataOnly": false,
            "readerFailOnMissingInformer": false,
        }),
        "every field present for an InformerCache over all namespaces"
    );
    let yaml = informant(&["explain", "-c", minimal, "-o", "yaml"]);
    assert_eq!(yaml.code, 0, "{}", yaml.stderr);
    let from_yaml: serde_json::Value = serde_yaml::from_str(&yaml.stdout).unwrap();
    assert_eq!(from_yaml, doc, "yaml is the json document");
    let name = informant(&["explain", "-c", minimal, "-o", "name"]);
    assert_eq!(name.code, 2, "clap rejects an unsupported format");
    assert!(
        name.stderr.contains("[possible values: text, json, yaml]"),
        "{}",
        name.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn cache_and_explain_resolve_a_namespace_selector_against_the_cluster() {
    let server = TestServer::start().await.unwrap();
    for (ns, team) in [("a", "shop"), ("b", "web")] {
        server
            .handle()
            .create(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"team": team}}}))
            .unwrap();
        server
            .handle()
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("{ns}-cm"), "namespace": ns}}))
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(
        &dir,
        "kubeconfig",
        &serde_yaml::to_string(&server.kubeconfig()).unwrap(),
    );
    let cfg = config(&dir, "  namespaceSelector: team=shop\n");
    let run = |args: &[&str]| tokio::task::block_in_place(|| informant(args));

    let offline = run(&["explain", "--config", &cfg]);
    assert_eq!(offline.code, 0, "{}", offline.stderr);
    assert!(
        offline
            .stdout
            .starts_with("MultiNamespaceCache (root) namespaceSelector=\"team=shop\" matching: known at run time\n"),
        "{}",
        offline.stdout
    );
    let online = run(&["explain", "--config", &cfg, "--kubeconfig", &kubeconfig]);
    assert_eq!(online.code, 0, "{}", online.stderr);
    assert!(
        online.stdout.starts_with(
            "MultiNamespaceCache (root) namespaceSelector=\"team=shop\" matching 1: [a]\n  InformerCache (namespace a (matches namespaceSelector \"team=shop\")) namespace=a "
        ),
        "{}",
        online.stdout
    );
    let object = run(&[
        "explain",
        "--config",
        &cfg,
        "--kubeconfig",
        &kubeconfig,
        "--object",
        "v1/ConfigMap/b/b-cm",
    ]);
    assert_eq!(object.code, 5, "unknown namespace: {}", object.stdout);
    assert!(
        object.stdout.contains(
            "namespace b is not listed and does not match the namespaceSelector \"team=shop\""
        ),
        "{}",
        object.stdout
    );

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
    let read = |extra: &[&str]| {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        run(&args)
    };
    let list = read(&["list", "-o", "name"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert_eq!(list.stdout, "a/a-cm\n");
    let outside = read(&["get", "b-cm", "-n", "b"]);
    assert_eq!(outside.code, 5, "{}", outside.stderr);
    assert!(
        outside.stderr.contains("namespaceSelector \"team=shop\""),
        "{}",
        outside.stderr
    );
}

/// A server with namespaces `a`, `b`, `c` and `informant-system`, where the Leases of ring
/// `shop` are one live (`replica-1`) and one expired an hour ago, next to a live one of ring
/// `cart`; in `dir`, its kubeconfig and a config sharding by namespace on ring `shop`.
async fn ring_server(dir: &tempfile::TempDir) -> (TestServer, String, String) {
    let server = TestServer::start().await.unwrap();
    let now = jiff::Timestamp::now();
    let an_hour_ago = now - jiff::SignedDuration::from_hours(1);
    for ns in ["informant-system", "a", "b", "c"] {
        server
            .handle()
            .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .unwrap();
    }
    for (lease, holder, renewed, ring) in [
        ("shop-1", "replica-1", now, "shop"),
        ("shop-2", "replica-2", an_hour_ago, "shop"),
        ("cart-1", "replica-9", now, "cart"),
    ] {
        server
            .handle()
            .create(
                json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": lease, "namespace": "informant-system",
                    "labels": {"informant.dev/ring": ring}},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                    "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}}),
            )
            .unwrap();
    }
    let kubeconfig = write(
        dir,
        "kubeconfig",
        &serde_yaml::to_string(&server.kubeconfig()).unwrap(),
    );
    let cfg = write(
        dir,
        "config.yaml",
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: t, namespace: informant-system}\nspec:\n  sharding: {ring: shop}\n  byObject:\n  - {apiVersion: v1, kind: ConfigMap}\n  - {apiVersion: v1, kind: Node}\n",
    );
    (server, kubeconfig, cfg)
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_shows_the_sharding_and_with_a_cluster_the_rings_live_members() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, kubeconfig, cfg) = ring_server(&dir).await;
    let run = |args: &[&str]| tokio::task::block_in_place(|| informant(args));

    let offline = run(&["explain", "--config", &cfg]);
    assert_eq!(offline.code, 0, "{}", offline.stderr);
    for line in [
        "\nsharding: ring shop, key namespace\n",
        "\n  members: the unexpired Leases labelled informant.dev/ring=shop in the lease namespace (kubectl get leases -l informant.dev/ring=shop)\n",
        "\n  sharded (each namespace whole on one member): v1/ConfigMap, every other namespaced kind read through the cache\n",
        "\n  cached whole on every member: v1/Node, every other cluster-scoped kind read through the cache; reconciled by the member that owns the hash of the object's uid, one object at a time\n",
        "\n  a member's share: each namespace is assigned whole to one member: ",
    ] {
        assert!(
            offline.stdout.contains(line),
            "{line:?} in:\n{}",
            offline.stdout
        );
    }
    assert!(
        !offline.stdout.contains("members now"),
        "{}",
        offline.stdout
    );

    let online = run(&["explain", "--config", &cfg, "--kubeconfig", &kubeconfig]);
    assert_eq!(online.code, 0, "{}", online.stderr);
    assert!(
        online
            .stdout
            .contains("\n  members now (Leases in namespace informant-system): 1\n    replica-1 (lease shop-1, renewed "),
        "the expired Lease and the other ring's are not members:\n{}",
        online.stdout
    );
    assert!(
        online.stdout.contains(
            "): 100.0% of the hash space, namespaces [a, b, c, default, informant-system"
        ),
        "{}",
        online.stdout
    );

    let json = run(&[
        "explain",
        "--config",
        &cfg,
        "--kubeconfig",
        &kubeconfig,
        "--lease-namespace",
        "informant-system",
        "-o",
        "json",
    ]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let sharding = &doc["sharding"];
    assert_eq!(sharding["ring"], "shop");
    assert_eq!(sharding["key"], "namespace");
    assert_eq!(sharding["cachedWhole"][0], "v1/Node");
    assert_eq!(sharding["now"]["leaseNamespace"], "informant-system");
    let members = sharding["now"]["members"].as_array().unwrap();
    assert_eq!(members.len(), 1, "{doc}");
    assert_eq!(members[0]["identity"], "replica-1");
    assert_eq!(members[0]["share"], 1.0);

    let elsewhere = run(&[
        "explain",
        "--config",
        &cfg,
        "--kubeconfig",
        &kubeconfig,
        "--lease-namespace",
        "a",
    ]);
    assert!(
        elsewhere
            .stdout
            .contains("members now (Leases in namespace a): none: no replica of this ring holds a live Lease\n"),
        "{}",
        elsewhere.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_with_a_cluster_shows_the_kinds_and_the_controllers_that_wait_for_their_crd() {
    let server = TestServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(
        &dir,
        "kubeconfig",
        &serde_yaml::to_string(&server.kubeconfig()).unwrap(),
    );
    let cfg = write(
        &dir,
        "config.yaml",
        "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: t, namespace: ops}
spec: {}
---
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: widgets, namespace: ops}
spec:
  for: {apiVersion: example.com/v1, kind: Widget}
  owns: [{apiVersion: v1, kind: ConfigMap}]
  hook: {exec: {command: [hook]}}
",
    );
    let run = |args: &[&str]| tokio::task::block_in_place(|| informant(args));
    let waiting = "controller ops/widgets: WaitingForKind: example.com/v1/Widget: no kind \
                   \"Widget\" in example.com/v1: the API server does not serve example.com/v1";

    // Offline nothing is asked: the kind is taken as served.
    let offline = run(&["explain", "--config", &cfg]);
    assert_eq!(offline.code, 0, "{}", offline.stderr);
    assert!(
        !offline.stdout.contains("WaitingForKind"),
        "{}",
        offline.stdout
    );

    let online = run(&["explain", "--config", &cfg, "--kubeconfig", &kubeconfig]);
    assert_eq!(online.code, 0, "{}", online.stderr);
    assert!(
        online.stdout.contains(
            "WaitingForKind (kind example.com/v1/Widget a controller reads (not in byObject)): \
             no kind \"Widget\" in example.com/v1"
        ),
        "{}",
        online.stdout
    );
    assert!(online.stdout.contains(waiting), "{}", online.stdout);
    let json = run(&[
        "explain",
        "--config",
        &cfg,
        "--kubeconfig",
        &kubeconfig,
        "-o",
        "json",
    ]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert!(
        doc["controllers"][0]["waitingForKind"]
            .as_str()
            .is_some_and(|w| w.starts_with("example.com/v1/Widget: no kind")),
        "{doc}"
    );

    // Once the CRD is installed, nothing waits.
    server
        .handle()
        .create(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}
        }))
        .unwrap();
    let installed = run(&["explain", "--config", &cfg, "--kubeconfig", &kubeconfig]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    assert!(
        !installed.stdout.contains("WaitingForKind"),
        "{}",
        installed.stdout
    );
    assert!(
        installed.stdout.contains("\ncontroller ops/widgets:\n"),
        "{}",
        installed.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_estimate_prints_each_informer_s_objects_and_bytes_beside_client_go() {
    let server = TestServer::start().await.unwrap();
    for i in 0..5 {
        server
            .handle()
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": "shop"},
                "data": {"k": "v".repeat(100)}}))
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(
        &dir,
        "kubeconfig",
        &serde_yaml::to_string(&server.kubeconfig()).unwrap(),
    );
    let cfg = config(
        &dir,
        "  byObject:\n  - {apiVersion: v1, kind: ConfigMap, namespaces: {shop: {}}}\n",
    );
    let run = |args: &[&str]| tokio::task::block_in_place(|| informant(args));

    let text = run(&[
        "explain",
        "--config",
        &cfg,
        "--kubeconfig",
        &kubeconfig,
        "--estimate",
    ]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    let line = text
        .stdout
        .lines()
        .find(|l| {
            l.trim_start()
                .starts_with("v1/ConfigMap shop: 5 objects × ")
        })
        .unwrap_or_else(|| panic!("{}", text.stdout));
    assert!(line.contains("(sampled 5; client-go: "), "{line}");
    assert!(text.stdout.contains("  total: "), "{}", text.stdout);

    let json = run(&[
        "explain",
        "--config",
        &cfg,
        "--kubeconfig",
        &kubeconfig,
        "--estimate",
        "--sample",
        "2",
        "-o",
        "json",
    ]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let row = &doc["estimate"]["informers"][0];
    assert_eq!(row["kind"], "ConfigMap");
    assert_eq!(row["objects"], 5, "counted past the sample: {row}");
    assert_eq!(row["sampled"], 2);
    assert!(row["bytes"].as_u64().unwrap() > 5 * 100, "{row}");

    let offline = run(&["explain", "--config", &cfg, "--estimate"]);
    assert_eq!(
        offline.code, 2,
        "--estimate needs --kubeconfig: {}",
        offline.stderr
    );
    assert!(
        offline.stderr.contains("--kubeconfig"),
        "{}",
        offline.stderr
    );
}
