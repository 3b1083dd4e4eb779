//! Tables after upstream's `TestAuthorizer` and `TestRuleMatches`
//! (`plugin/pkg/auth/authorizer/rbac/rbac_test.go`), plus what the chart's rules rely on:
//! `resourceNames` with list and watch, subresources, `ServiceAccount` and group subjects.

use super::*;
use k8s_openapi::api::rbac::v1::AggregationRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector as MetaSelector, ObjectMeta};

#[derive(Default)]
struct Static {
    roles: Vec<Role>,
    role_bindings: Vec<RoleBinding>,
    cluster_roles: Vec<ClusterRole>,
    cluster_role_bindings: Vec<ClusterRoleBinding>,
}

impl RoleSource for Static {
    fn cluster_role_bindings(&self) -> Vec<ClusterRoleBinding> {
        self.cluster_role_bindings.clone()
    }
    fn role_bindings(&self, namespace: &str) -> Vec<RoleBinding> {
        self.role_bindings
            .iter()
            .filter(|b| b.metadata.namespace.as_deref() == Some(namespace))
            .cloned()
            .collect()
    }
    fn role(&self, namespace: &str, name: &str) -> Option<Role> {
        self.roles
            .iter()
            .find(|r| {
                r.metadata.namespace.as_deref() == Some(namespace)
                    && r.metadata.name.as_deref() == Some(name)
            })
            .cloned()
    }
    fn cluster_roles(&self) -> Vec<ClusterRole> {
        self.cluster_roles.clone()
    }
}

fn split(s: &str) -> Vec<String> {
    s.split(',').map(str::to_string).collect()
}

/// `newRule(verbs, apiGroups, resources, nonResourceURLs)`, comma-separated.
fn rule(verbs: &str, groups: &str, resources: &str, urls: &str) -> PolicyRule {
    PolicyRule {
        verbs: split(verbs),
        api_groups: Some(split(groups)),
        resources: Some(split(resources)),
        non_resource_urls: Some(split(urls)),
        resource_names: None,
    }
}

fn named(mut rule: PolicyRule, names: &str) -> PolicyRule {
    rule.resource_names = Some(split(names));
    rule
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        ..ObjectMeta::default()
    }
}

fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: meta(name, None),
        rules: Some(rules),
        aggregation_rule: None,
    }
}

/// `Kind:name` subjects (`ServiceAccount:ns/name` or `ServiceAccount:name`).
fn subjects(list: &[&str]) -> Vec<Subject> {
    list.iter()
        .map(|s| {
            let (kind, name) = s.split_once(':').unwrap();
            let (namespace, name) = match name.split_once('/') {
                Some((ns, n)) if kind == "ServiceAccount" => (Some(ns.to_string()), n),
                _ => (None, name),
            };
            Subject {
                kind: kind.into(),
                name: name.into(),
                namespace,
                api_group: None,
            }
        })
        .collect()
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: GROUP.into(),
        kind: kind.into(),
        name: name.into(),
    }
}

fn cluster_binding(role: &str, who: &[&str]) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(&format!("{role}-binding"), None),
        role_ref: role_ref("ClusterRole", role),
        subjects: Some(subjects(who)),
    }
}

fn binding(namespace: &str, kind: &str, role: &str, who: &[&str]) -> RoleBinding {
    RoleBinding {
        metadata: meta(&format!("{role}-binding"), Some(namespace)),
        role_ref: role_ref(kind, role),
        subjects: Some(subjects(who)),
    }
}

fn user(name: &str, groups: &str) -> User {
    User {
        name: name.into(),
        groups: groups
            .split(',')
            .filter(|g| !g.is_empty())
            .map(Into::into)
            .collect(),
        ..User::default()
    }
}

fn res(verb: &str, resource: &str, subresource: &str, namespace: &str) -> RequestInfo {
    RequestInfo::resource(verb, "", resource, subresource, namespace, "")
}

fn check(source: &Static, pass: &[(User, RequestInfo)], fail: &[(User, RequestInfo)]) {
    for (u, info) in pass {
        assert!(
            authorize(source, u, info).allowed(),
            "incorrectly restricted {u:?} {info:?}"
        );
    }
    for (u, info) in fail {
        assert!(
            !authorize(source, u, info).allowed(),
            "incorrectly passed {u:?} {info:?}"
        );
    }
}

#[test]
fn a_role_binding_to_a_cluster_role_grants_it_in_its_namespace_only() {
    let source = Static {
        cluster_roles: vec![cluster_role("admin", vec![rule("*", "*", "*", "*")])],
        role_bindings: vec![binding(
            "ns1",
            "ClusterRole",
            "admin",
            &["User:admin", "Group:admins"],
        )],
        ..Static::default()
    };
    check(
        &source,
        &[
            (user("admin", ""), res("get", "Pods", "", "ns1")),
            (user("admin", ""), res("watch", "Pods", "", "ns1")),
            (user("admin", "group1"), res("watch", "Foobar", "", "ns1")),
            (user("joe", "admins"), res("watch", "Foobar", "", "ns1")),
            (
                user("joe", "group1,admins"),
                res("watch", "Foobar", "", "ns1"),
            ),
        ],
        &[
            (user("admin", ""), res("GET", "Pods", "", "ns2")),
            (user("admin", ""), res("GET", "Nodes", "", "")),
            (user("admin", "admins"), res("GET", "Pods", "", "ns2")),
            (user("admin", "admins"), res("GET", "Nodes", "", "")),
        ],
    );
}

#[test]
fn non_resource_urls_match_exactly_or_by_a_star_prefix() {
    let source = Static {
        cluster_roles: vec![
            cluster_role("getter", vec![rule("get", "", "", "/apis")]),
            cluster_role("any-verb", vec![rule("*", "", "", "/apis")]),
            cluster_role("prefix", vec![rule("get", "", "", "/apis/*")]),
        ],
        cluster_role_bindings: vec![
            cluster_binding("getter", &["User:foo", "Group:bar"]),
            cluster_binding("any-verb", &["User:admin", "Group:admin"]),
            cluster_binding("prefix", &["User:prefixed", "Group:prefixed"]),
        ],
        ..Static::default()
    };
    let url = |verb: &str, path: &str| RequestInfo::non_resource(verb, path);
    check(
        &source,
        &[
            (user("foo", ""), url("get", "/apis")),
            (user("", "bar"), url("get", "/apis")),
            (user("admin", ""), url("get", "/apis")),
            (user("", "admin"), url("get", "/apis")),
            (user("admin", ""), url("watch", "/apis")),
            (user("", "admin"), url("watch", "/apis")),
            (user("prefixed", ""), url("get", "/apis/v1")),
            (user("", "prefixed"), url("get", "/apis/v1")),
            (user("prefixed", ""), url("get", "/apis/v1/foobar")),
        ],
        &[
            (user("foo", ""), url("watch", "/apis")),
            (user("", "bar"), url("watch", "/apis")),
            (user("foo", ""), url("get", "/api/v1")),
            (user("admin", ""), url("get", "/api/v1")),
            (user("prefixed", ""), url("get", "/api/v1")),
            (user("", "prefixed"), url("get", "/api/v1")),
        ],
    );
}

#[test]
fn a_resource_rule_does_not_cover_its_subresources_nor_the_other_way() {
    for (granted, allowed, refused) in [("pods", "", "status"), ("pods/status", "status", "")] {
        let source = Static {
            cluster_roles: vec![cluster_role("admin", vec![rule("*", "*", granted, "*")])],
            role_bindings: vec![binding("ns1", "ClusterRole", "admin", &["User:admin"])],
            ..Static::default()
        };
        check(
            &source,
            &[(user("admin", ""), res("get", "pods", allowed, "ns1"))],
            &[(user("admin", ""), res("get", "pods", refused, "ns1"))],
        );
    }
}

/// A rule's name, the rule, and requests with the expected answer.
type RuleCase = (&'static str, PolicyRule, Vec<(RequestInfo, bool)>);

/// `TestRuleMatches`: each rule against requests, with the expected answer.
#[test]
fn rules_match_verbs_groups_resources_and_urls_as_upstream_does() {
    let r = |verb: &str, group: &str, resource: &str, sub: &str| {
        RequestInfo::resource(verb, group, resource, sub, "", "")
    };
    let u = RequestInfo::non_resource;
    let resources = |verbs: &[&str], groups: &[&str], resources: &[&str]| PolicyRule {
        verbs: verbs.iter().map(|s| (*s).into()).collect(),
        api_groups: Some(groups.iter().map(|s| (*s).into()).collect()),
        resources: Some(resources.iter().map(|s| (*s).into()).collect()),
        ..PolicyRule::default()
    };
    let urls = |verbs: &[&str], urls: &[&str]| PolicyRule {
        verbs: verbs.iter().map(|s| (*s).into()).collect(),
        non_resource_urls: Some(urls.iter().map(|s| (*s).into()).collect()),
        ..PolicyRule::default()
    };
    let table: Vec<RuleCase> = vec![
        (
            "star verb, exact match other",
            resources(&["*"], &["group1"], &["resource1"]),
            vec![
                (r("verb1", "group1", "resource1", ""), true),
                (r("verb1", "group2", "resource1", ""), false),
                (r("verb1", "group1", "resource2", ""), false),
                (r("verb2", "group1", "resource1", ""), true),
            ],
        ),
        (
            "star group, exact match other",
            resources(&["verb1"], &["*"], &["resource1"]),
            vec![
                (r("verb1", "group1", "resource1", ""), true),
                (r("verb1", "group2", "resource1", ""), true),
                (r("verb1", "group1", "resource2", ""), false),
                (r("verb2", "group1", "resource1", ""), false),
            ],
        ),
        (
            "star resource, exact match other",
            resources(&["verb1"], &["group1"], &["*"]),
            vec![
                (r("verb1", "group1", "resource1", ""), true),
                (r("verb1", "group2", "resource1", ""), false),
                (r("verb1", "group1", "resource2", ""), true),
                (r("verb2", "group1", "resource1", ""), false),
            ],
        ),
        (
            "tuple expansion",
            resources(
                &["verb1", "verb2"],
                &["group1", "group2"],
                &["resource1", "resource2"],
            ),
            vec![
                (r("verb1", "group1", "resource1", ""), true),
                (r("verb1", "group2", "resource2", ""), true),
                (r("verb2", "group2", "resource1", ""), true),
                (r("verb3", "group1", "resource1", ""), false),
            ],
        ),
        (
            "subresource expansion",
            resources(&["*"], &["*"], &["resource1/subresource1"]),
            vec![
                (r("verb1", "group1", "resource1", "subresource1"), true),
                (r("verb1", "group2", "resource1", "subresource2"), false),
                (r("verb1", "group1", "resource2", "subresource1"), false),
                (r("verb1", "group1", "resource1", ""), false),
            ],
        ),
        (
            "star subresource: */status, and resource/* is no wildcard",
            resources(&["*"], &["*"], &["*/status", "pods/*"]),
            vec![
                (r("get", "", "deployments", "status"), true),
                (r("get", "", "pods", "status"), true),
                (r("get", "", "pods", "log"), false),
                (r("get", "", "pods", ""), false),
            ],
        ),
        (
            "star nonresource, exact match other",
            urls(&["verb1"], &["*"]),
            vec![
                (u("verb1", "/foo"), true),
                (u("verb1", "/foo/bar/one"), true),
                (u("verb2", "/foo"), false),
            ],
        ),
        (
            "star nonresource subpath",
            urls(&["verb1"], &["/foo/*"]),
            vec![
                (u("verb1", "/foo"), false),
                (u("verb1", "/foo/bar"), true),
                (u("verb1", "/foo/baz/one"), true),
                (u("verb1", "/notfoo"), false),
                (u("verb1", "/notfoo/bar"), false),
            ],
        ),
        (
            "star verb, exact nonresource",
            urls(&["*"], &["/foo", "/foo/bar/one"]),
            vec![
                (u("verb1", "/foo"), true),
                (u("verb1", "/foo/bar"), false),
                (u("verb2", "/foo/bar/one"), true),
                (u("verb2", "/foo/baz/one"), false),
            ],
        ),
        (
            "a resource rule never matches a non-resource request",
            resources(&["*"], &["*"], &["*"]),
            vec![(u("get", "/healthz"), false)],
        ),
    ];
    for (name, rule, requests) in table {
        for (request, expected) in requests {
            assert_eq!(
                rule_allows(&request, &rule),
                expected,
                "{name}: {request:?}"
            );
        }
    }
}

/// A rule restricted by `resourceNames` allows a list or watch only when its field selector
/// names the object (the request info then carries the name), and never a create.
#[test]
fn resource_names_allow_list_and_watch_only_by_a_name_selector() {
    let rule = named(
        rule("get,list,watch,create", "informant.dev", "cacheconfigs", ""),
        "c",
    );
    let with = |verb: &str, name: &str| {
        RequestInfo::resource(verb, "informant.dev", "cacheconfigs", "", "ops", name)
    };
    assert!(rule_allows(&with("get", "c"), &rule));
    assert!(rule_allows(&with("list", "c"), &rule));
    assert!(rule_allows(&with("watch", "c"), &rule));
    assert!(!rule_allows(&with("list", ""), &rule));
    assert!(!rule_allows(&with("watch", ""), &rule));
    assert!(!rule_allows(&with("get", "other"), &rule));
    assert!(!rule_allows(&with("create", ""), &rule));
    let method = axum::http::Method::GET;
    let path = "/apis/informant.dev/v1alpha1/namespaces/ops/cacheconfigs";
    let selected = RequestInfo::new(
        &method,
        path,
        Some("watch=1&fieldSelector=metadata.name%3Dc"),
    );
    assert!(rule_allows(&selected, &rule));
    let unselected = RequestInfo::new(&method, path, Some("watch=1"));
    assert!(!rule_allows(&unselected, &rule));
}

#[test]
fn service_account_subjects_default_to_the_binding_namespace_and_groups_match() {
    let source = Static {
        roles: vec![Role {
            metadata: meta("reader", Some("ops")),
            rules: Some(vec![rule("list", "", "configmaps", "")]),
        }],
        role_bindings: vec![
            binding("ops", "Role", "reader", &["ServiceAccount:inf"]),
            binding(
                "ops",
                "Role",
                "reader",
                &["Group:system:serviceaccounts:team"],
            ),
        ],
        cluster_roles: vec![cluster_role(
            "events",
            vec![rule("create", "", "events", "")],
        )],
        cluster_role_bindings: vec![
            cluster_binding("events", &["ServiceAccount:ops/inf"]),
            // A ClusterRoleBinding's ServiceAccount needs its namespace.
            cluster_binding("events", &["ServiceAccount:other"]),
        ],
    };
    let inf = User::service_account("ops", "inf", "");
    let team = User::service_account("team", "bot", "");
    let other = User::service_account("ops", "other", "");
    check(
        &source,
        &[
            (inf.clone(), res("list", "configmaps", "", "ops")),
            (team.clone(), res("list", "configmaps", "", "ops")),
            (inf.clone(), res("create", "events", "", "anywhere")),
            (inf.clone(), res("create", "events", "", "")),
        ],
        &[
            (inf.clone(), res("list", "configmaps", "", "other")),
            (inf.clone(), res("list", "configmaps", "", "")),
            (team, res("create", "events", "", "ops")),
            (other.clone(), res("list", "configmaps", "", "ops")),
            (other, res("create", "events", "", "")),
        ],
    );
}

#[test]
fn reasons_name_the_binding_or_the_missing_role() {
    let source = Static {
        cluster_roles: vec![cluster_role(
            "events",
            vec![rule("create", "", "events", "")],
        )],
        cluster_role_bindings: vec![
            cluster_binding("events", &["Group:g"]),
            cluster_binding("gone", &["Group:g"]),
        ],
        role_bindings: vec![binding("ops", "Role", "missing", &["User:u"])],
        ..Static::default()
    };
    let u = user("u", "g");
    assert_eq!(
        authorize(&source, &u, &res("create", "events", "", "")),
        Decision::Allow(
            "RBAC: allowed by ClusterRoleBinding \"events-binding\" of ClusterRole \"events\" to Group \"g\"".into()
        )
    );
    assert_eq!(
        authorize(&source, &u, &res("get", "pods", "", "ops")),
        Decision::Deny(
            "RBAC: [clusterrole.rbac.authorization.k8s.io \"gone\" not found, role.rbac.authorization.k8s.io \"missing\" not found]".into()
        )
    );
    assert_eq!(
        authorize(&source, &user("x", ""), &res("get", "pods", "", "ops")),
        Decision::Deny(String::new())
    );
    assert!(authorize(&source, &User::admin(), &res("delete", "nodes", "", "")).allowed());
}

#[test]
fn an_aggregated_cluster_role_has_the_rules_of_the_roles_it_selects() {
    let mut labelled = cluster_role("pods", vec![rule("list", "", "pods", "")]);
    labelled.metadata.labels = Some([("aggregate-to-view".into(), "true".into())].into());
    let view = ClusterRole {
        metadata: meta("view", None),
        rules: None,
        aggregation_rule: Some(AggregationRule {
            cluster_role_selectors: Some(vec![MetaSelector {
                match_labels: Some([("aggregate-to-view".into(), "true".into())].into()),
                match_expressions: None,
            }]),
        }),
    };
    let source = Static {
        cluster_roles: vec![
            labelled,
            view,
            cluster_role("nodes", vec![rule("list", "", "nodes", "")]),
        ],
        cluster_role_bindings: vec![cluster_binding("view", &["User:u"])],
        ..Static::default()
    };
    check(
        &source,
        &[(user("u", ""), res("list", "pods", "", "a"))],
        &[(user("u", ""), res("list", "nodes", "", ""))],
    );
    let (rules, error) = rules_for(&source, &user("u", ""), "a");
    assert_eq!(rules.len(), 1);
    assert_eq!(error, None);
}
