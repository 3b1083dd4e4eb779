//! The default `ClusterRole`s and `ClusterRoleBinding`s kube-apiserver creates at start that
//! matter to a client without privileges
//! (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`, `ClusterRoles` and
//! `ClusterRoleBindings`): `cluster-admin` for `system:masters`, `system:discovery` and
//! `system:basic-user` for every authenticated user, `system:public-info-viewer` for everyone.

use serde_json::{Value, json};

use super::rbac::GROUP;
use super::user::{AUTHENTICATED, MASTERS, UNAUTHENTICATED};

/// The metadata upstream gives every default (`addClusterRoleLabel`, and the annotation the
/// reconciler looks for).
fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, rules: &Value) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "ClusterRole",
        "metadata": metadata(name),
        "rules": rules,
    })
}

fn binding(role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": GROUP, "kind": "Group", "name": g}))
        .collect();
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": "ClusterRoleBinding",
        "metadata": metadata(role),
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

/// The default roles, then their bindings.
#[must_use]
pub fn objects() -> Vec<Value> {
    vec![
        cluster_role(
            "cluster-admin",
            &json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        cluster_role(
            "system:discovery",
            &json!([{"nonResourceURLs": [
                "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                "/openapi/*", "/readyz", "/version", "/version/",
            ], "verbs": ["get"]}]),
        ),
        cluster_role(
            "system:basic-user",
            &json!([
                {"apiGroups": ["authorization.k8s.io"],
                 "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                 "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"],
                 "verbs": ["create"]},
            ]),
        ),
        cluster_role(
            "system:public-info-viewer",
            &json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                     "verbs": ["get"]}]),
        ),
        binding("cluster-admin", &[MASTERS]),
        binding("system:discovery", &[AUTHENTICATED]),
        binding("system:basic-user", &[AUTHENTICATED]),
        binding(
            "system:public-info-viewer",
            &[AUTHENTICATED, UNAUTHENTICATED],
        ),
    ]
}
