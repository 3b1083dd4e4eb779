//! `informant rbac`: the `Role`s / `ClusterRole` a `CacheConfig` needs, as `kubectl apply` reads
//! them, and the exit code of a bad config. Also checks that the Helm chart's table of kinds
//! (`charts/informant/files/kinds.yaml`, from which its RBAC template resolves plurals and
//! scopes) is the one `informant rbac` resolves with.

use crate::support;

use std::fmt::Write as _;
use std::path::Path;

use support::informant;

use serde_json::Value;

/// The objects printed for `args` with `-o json`.
fn objects(args: &[&str]) -> Vec<Value> {
    let mut all = vec!["rbac", "-o", "json"];
    all.extend_from_slice(args);
    let out = informant(&all);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["kind"], "List");
    list["items"].as_array().unwrap().clone()
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// Every `(apiGroup, resource, verbs)` granted by `rules`.
fn grants(rules: &Value) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    for rule in rules.as_array().unwrap() {
        let verbs: Vec<String> = rule["verbs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                out.push((
                    group.as_str().unwrap().to_owned(),
                    resource.as_str().unwrap().to_owned(),
                    verbs.clone(),
                ));
            }
        }
    }
    out
}

fn grants_list_watch(rules: &Value, group: &str, resource: &str) -> bool {
    grants(rules)
        .iter()
        .any(|(g, r, v)| g == group && r == resource && v == &["list", "watch"])
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn a_namespace_scoped_config_gets_a_role_per_namespace_and_no_cluster_role() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "c.yaml",
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: shop}\n\
         spec:\n  defaultNamespaces: {team-a: {}, team-b: {}}\n  byObject:\n\
         \x20   - {apiVersion: v1, kind: Pod}\n\
         \x20   - {apiVersion: apps/v1, kind: Deployment, namespaces: {team-b: {}}}\n",
    );
    let objects = objects(&["--config", &config, "--namespace", "informant-system"]);
    assert!(of_kind(&objects, "ClusterRole").is_empty());
    let roles = of_kind(&objects, "Role");
    let namespaces: Vec<&str> = roles
        .iter()
        .map(|r| r["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, ["informant-system", "team-a", "team-b"]);
    assert!(grants_list_watch(&roles[1]["rules"], "", "pods"));
    assert!(!grants_list_watch(
        &roles[1]["rules"],
        "apps",
        "deployments"
    ));
    assert!(grants_list_watch(&roles[2]["rules"], "apps", "deployments"));
    // The manager's own namespace: its CacheConfig by name, its status, events.
    let system = grants(&roles[0]["rules"]);
    assert!(system.contains(&(
        "informant.dev".into(),
        "cacheconfigs/status".into(),
        vec!["patch".into()]
    )));
    assert_eq!(roles[0]["rules"][1]["resourceNames"][0], "shop");
    for binding in of_kind(&objects, "RoleBinding") {
        assert_eq!(binding["subjects"][0]["namespace"], "informant-system");
        assert_eq!(binding["roleRef"]["kind"], "Role");
    }
}

#[test]
fn a_cluster_wide_config_gets_a_cluster_role_with_every_by_object_kind() {
    let objects = objects(&[
        "--config",
        "config/samples/by-object.yaml",
        "--namespace",
        "informant-system",
        "--leader-elect",
        "--kind",
        "v1/ConfigMap",
    ]);
    let cluster_roles = of_kind(&objects, "ClusterRole");
    assert_eq!(cluster_roles.len(), 1);
    let rules = &cluster_roles[0]["rules"];
    for resource in ["pods", "nodes", "configmaps"] {
        assert!(
            grants_list_watch(rules, "", resource),
            "{resource}: {rules}"
        );
    }
    assert!(grants(rules).contains(&(
        String::new(),
        "events".into(),
        vec!["create".into(), "patch".into()]
    )));
    // Deployments are only cached in two namespaces: Roles there, not cluster-wide.
    assert!(!grants_list_watch(rules, "apps", "deployments"));
    let shop = of_kind(&objects, "Role")
        .into_iter()
        .find(|r| r["metadata"]["namespace"] == "shop")
        .unwrap();
    assert!(grants_list_watch(&shop["rules"], "apps", "deployments"));
    let binding = of_kind(&objects, "ClusterRoleBinding")[0];
    assert_eq!(binding["subjects"][0]["name"], "informant");
    let system = of_kind(&objects, "Role")
        .into_iter()
        .find(|r| r["metadata"]["namespace"] == "informant-system")
        .unwrap();
    assert!(
        grants(&system["rules"])
            .iter()
            .any(|(g, r, _)| g == "coordination.k8s.io" && r == "leases")
    );
}

#[test]
fn the_namespace_defaults_to_the_configs_own() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "c.yaml",
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\n\
         metadata: {name: c, namespace: ops}\nspec: {}\n",
    );
    let objects = objects(&["--config", &config]);
    let roles = of_kind(&objects, "Role");
    assert_eq!(roles.len(), 1);
    assert_eq!(roles[0]["metadata"]["namespace"], "ops");
    let bare = objects_of_minimal();
    assert_eq!(
        of_kind(&bare, "Role")[0]["metadata"]["namespace"],
        "default"
    );
}

fn objects_of_minimal() -> Vec<Value> {
    objects(&["--config", "config/samples/minimal.yaml"])
}

#[test]
fn yaml_output_is_one_document_per_object() {
    let out = informant(&["rbac", "--config", "config/samples/minimal.yaml"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.matches("---\n").count(), 4, "{text}");
    assert!(text.contains("kind: ClusterRoleBinding\n"), "{text}");
}

#[test]
fn extra_rules_are_added_and_bad_ones_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let rules = write(
        dir.path(),
        "rules.yaml",
        "- {apiGroups: [example.com], resources: [widgets], verbs: [get]}\n",
    );
    let objects = objects(&[
        "--config",
        "config/samples/minimal.yaml",
        "--extra-rules",
        &rules,
    ]);
    let cluster_rules = &of_kind(&objects, "ClusterRole")[0]["rules"];
    assert!(grants(cluster_rules).contains(&(
        "example.com".into(),
        "widgets".into(),
        vec!["get".into()]
    )));
    let bad = write(dir.path(), "bad.yaml", "verbs: nope\n");
    let out = informant(&[
        "rbac",
        "--config",
        "config/samples/minimal.yaml",
        "--extra-rules",
        &bad,
    ]);
    assert_eq!(out.status.code(), Some(64));
    let out = informant(&[
        "rbac",
        "--config",
        "config/samples/minimal.yaml",
        "--kind",
        "Pod",
    ]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--kind \"Pod\""));
}

#[test]
fn an_invalid_config_exits_64_with_every_error_and_its_path() {
    let out = informant(&[
        "rbac",
        "--config",
        "config/samples/invalid/typos-and-bad-values.yaml",
    ]);
    assert_eq!(out.status.code(), Some(64));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("informant rbac: "), "{stderr}");
    assert!(
        stderr.contains("spec.byObject[1].fieldSelectr: unknown field"),
        "{stderr}"
    );
    assert!(stderr.contains("spec.syncPeriod: "), "{stderr}");
    let missing = informant(&["rbac", "--config", "/nonexistent/c.yaml"]);
    assert_eq!(missing.status.code(), Some(66));
}

/// The chart's kinds table as it must be: one line per built-in kind, keyed by
/// `APIVERSION/KIND`.
fn chart_kinds_table() -> String {
    let mut text = String::from(
        "# The built-in kinds the chart's RBAC template resolves plurals and scopes from: a copy\n\
         # of informant::kinds::BUILTIN_KINDS (src/kinds.rs), which `informant rbac` resolves with.\n\
         # tests/cli/cli_rbac.rs checks it; INFORMANT_BLESS=1 cargo test --test cli cli_rbac:: rewrites it.\n\
         # Kinds not listed are taken as namespaced custom resources with kube's guessed plural.\n",
    );
    for kind in informant::kinds::BUILTIN_KINDS {
        let api_version = if kind.group.is_empty() {
            kind.version.to_owned()
        } else {
            format!("{}/{}", kind.group, kind.version)
        };
        writeln!(
            text,
            "{api_version}/{}: {{plural: {}, namespaced: {}}}",
            kind.kind, kind.plural, kind.namespaced
        )
        .unwrap();
    }
    text
}

#[test]
fn the_charts_kind_table_is_the_built_in_one() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/informant/files/kinds.yaml");
    let expected = chart_kinds_table();
    if std::env::var_os("INFORMANT_BLESS").is_some() {
        std::fs::write(&path, &expected).unwrap();
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "{} is stale; rewrite it with INFORMANT_BLESS=1 cargo test --test cli cli_rbac::",
        path.display()
    );
}

#[test]
fn a_namespace_selector_reads_its_kinds_cluster_wide_and_watches_namespaces_and_says_why() {
    let objects = objects(&[
        "--config",
        "config/samples/namespace-selector.yaml",
        "--namespace",
        "informant-system",
    ]);
    let cluster_roles = of_kind(&objects, "ClusterRole");
    assert_eq!(cluster_roles.len(), 1);
    let rules = &cluster_roles[0]["rules"];
    for resource in ["configmaps", "secrets", "namespaces"] {
        assert!(
            grants_list_watch(rules, "", resource),
            "{resource}: {rules}"
        );
    }
    assert!(
        !grants_list_watch(rules, "apiextensions.k8s.io", "customresourcedefinitions"),
        "no custom kind, no CRD watch: {rules}"
    );
    // No Role reads a kind: the selected namespaces are not known in advance.
    for role in of_kind(&objects, "Role") {
        assert!(
            !grants_list_watch(&role["rules"], "", "configmaps"),
            "{role}"
        );
    }
    let yaml = informant(&["rbac", "--config", "config/samples/namespace-selector.yaml"]);
    let text = String::from_utf8_lossy(&yaml.stdout);
    assert!(
        text.starts_with("---\n# namespaceSelector: the namespaces are chosen by label while the manager runs, so the kinds it caches are read cluster-wide"),
        "{text}"
    );
}

#[test]
fn a_custom_by_object_kind_adds_the_crd_watch() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "config.yaml",
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\nspec:\n  defaultNamespaces: {shop: {}}\n  byObject: [{apiVersion: shop.example.com/v1, kind: Cart}]\n",
    );
    let objects = objects(&["--config", &config]);
    let rules = &of_kind(&objects, "ClusterRole")[0]["rules"];
    assert!(
        grants_list_watch(rules, "apiextensions.k8s.io", "customresourcedefinitions"),
        "{rules}"
    );
    let shop = of_kind(&objects, "Role")
        .into_iter()
        .find(|r| r["metadata"]["namespace"] == "shop")
        .unwrap();
    assert!(grants_list_watch(
        &shop["rules"],
        "shop.example.com",
        "carts"
    ));
}

#[test]
fn sharding_grants_the_member_leases_and_by_namespace_watches_namespaces() {
    let objects = objects(&["--config", "config/samples/sharded.yaml"]);
    let role = of_kind(&objects, "Role")
        .into_iter()
        .find(|r| r["metadata"]["namespace"] == "informant-system")
        .expect("a Role in the manager's namespace");
    let leases: Vec<Vec<String>> = grants(&role["rules"])
        .into_iter()
        .filter(|(group, resource, _)| group == "coordination.k8s.io" && resource == "leases")
        .map(|(_, _, verbs)| verbs)
        .collect();
    assert_eq!(
        leases,
        [["get", "list", "create", "update", "delete"]],
        "the member Leases, by no name: {role}"
    );
    let cluster = &of_kind(&objects, "ClusterRole")[0]["rules"];
    for resource in ["namespaces", "configmaps", "nodes"] {
        assert!(
            grants_list_watch(cluster, "", resource),
            "{resource}: {cluster}"
        );
    }
    assert!(
        grants_list_watch(cluster, "apps", "deployments"),
        "{cluster}"
    );
    assert_eq!(of_kind(&objects, "ClusterRoleBinding").len(), 1);
    let yaml = informant(&["rbac", "--config", "config/samples/sharded.yaml"]);
    let text = String::from_utf8_lossy(&yaml.stdout);
    assert!(
        text.starts_with(
            "---\n# sharding by namespace: each replica caches the namespaces it owns"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "\n# sharding: each replica creates, renews and at shutdown deletes a member Lease"
        ),
        "{text}"
    );
}

/// Every rule of `objects`' `kind` named `name` (in `namespace` for a `Role`) that grants on
/// `resource`, as (resourceNames, verbs).
fn rules_on(
    objects: &[Value],
    kind: &str,
    namespace: &str,
    resource: &str,
) -> Vec<(Option<Vec<String>>, Vec<String>)> {
    of_kind(objects, kind)
        .into_iter()
        .filter(|o| o["metadata"]["namespace"].as_str().unwrap_or_default() == namespace)
        .flat_map(|o| o["rules"].as_array().unwrap().clone())
        .filter(|r| {
            r["resources"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|x| x == resource))
        })
        .map(|r| {
            (
                serde_json::from_value(r["resourceNames"].clone()).unwrap(),
                serde_json::from_value(r["verbs"].clone()).unwrap(),
            )
        })
        .collect()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn a_webhook_service_grants_its_configurations_secret_and_injected_crds() {
    let minimal = ["--config", "config/samples/minimal.yaml", "-n", "sys"];
    let mut args = minimal.to_vec();
    args.extend([
        "--webhook-service",
        "hooks",
        "--webhook-service-namespace",
        "web",
        "--webhook-inject",
        "customresourcedefinition/carts.shop.example.com",
    ]);
    let managed = objects(&args);
    let configurations = rules_on(
        &managed,
        "ClusterRole",
        "",
        "validatingwebhookconfigurations",
    );
    assert_eq!(
        configurations,
        [
            (None, strings(&["create"])),
            (
                Some(strings(&["hooks"])),
                strings(&["get", "update", "delete"])
            )
        ],
        "the configuration is named after the service by default"
    );
    assert_eq!(
        rules_on(&managed, "ClusterRole", "", "customresourcedefinitions"),
        [(
            Some(strings(&["carts.shop.example.com"])),
            strings(&["get", "patch"])
        )]
    );
    assert_eq!(
        rules_on(&managed, "Role", "web", "secrets"),
        [
            (None, strings(&["create"])),
            (
                Some(strings(&["hooks-cert"])),
                strings(&["get", "list", "watch", "update"])
            )
        ],
        "the managed certificates' Secret, in the service's namespace"
    );
    assert_eq!(
        of_kind(&managed, "RoleBinding")
            .iter()
            .filter(|b| b["metadata"]["namespace"] == "web")
            .count(),
        1
    );
    // The same without the flags: none of it.
    let plain = objects_of_minimal();
    assert!(rules_on(&plain, "ClusterRole", "", "validatingwebhookconfigurations").is_empty());

    // A mounted certificate: no Secret, the configuration's own name.
    let mut args = minimal.to_vec();
    args.extend([
        "--webhook-service",
        "hooks",
        "--webhook-cert-dir",
        "/certs",
        "--webhook-configuration",
        "shop-hooks",
    ]);
    let mounted = objects(&args);
    assert!(rules_on(&mounted, "Role", "sys", "secrets").is_empty());
    assert_eq!(
        rules_on(&mounted, "ClusterRole", "", "mutatingwebhookconfigurations")[1],
        (
            Some(strings(&["shop-hooks"])),
            strings(&["get", "update", "delete"])
        )
    );
}

#[test]
fn bad_webhook_flags_exit_64_with_every_error() {
    let out = informant(&[
        "rbac",
        "--config",
        "config/samples/minimal.yaml",
        "--webhook-service",
        "Hooks",
        "--webhook-inject",
        "deployment/x",
        "--webhook-inject",
        "customresourcedefinition/Bad_Name",
    ]);
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for wanted in [
        "--webhook-service \"Hooks\": must consist of lowercase",
        "--webhook-inject \"deployment/x\": expected KIND/NAME",
        "--webhook-inject \"customresourcedefinition/Bad_Name\": must consist",
    ] {
        assert!(stderr.contains(wanted), "{wanted} in {stderr}");
    }
    // Injection is for managed certificates; every webhook flag needs the service.
    for args in [
        &[
            "--webhook-service",
            "h",
            "--webhook-cert-dir",
            "/c",
            "--webhook-inject",
            "customresourcedefinition/a.b",
        ][..],
        &["--webhook-configuration", "c"][..],
    ] {
        let mut all = vec!["rbac", "--config", "config/samples/minimal.yaml"];
        all.extend_from_slice(args);
        let out = informant(&all);
        // clap's usage error, naming the flags at odds.
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("--webhook-cert-dir") || stderr.contains("--webhook-service"),
            "{stderr}"
        );
    }
}
