//! kube-apiserver's RBAC authorizer: which rules apply to a user in a namespace
//! (`pkg/registry/rbac/validation/rule.go`, `VisitRulesFor`: every `ClusterRoleBinding`, then the
//! `RoleBinding`s of the request's namespace, each naming a `Role` of its namespace or a
//! `ClusterRole`) and whether one of them allows the request
//! (`plugin/pkg/auth/authorizer/rbac/rbac.go`, `RuleAllows`;
//! `pkg/apis/rbac/v1/evaluation_helpers.go`).
//!
//! Rules only ever allow. A resource rule matches when its verbs, API groups, resources
//! (`resource`, `resource/subresource`, `*`, or `*/subresource`; not `resource/*`) and
//! resource names (none: every name; else the request's name, which a list or a create never
//! has unless a field selector names it) all match; a non-resource rule when its verbs and URLs
//! (exact, `*`, or a prefix ending in `*`) match. Members of `system:masters` are allowed
//! everything before RBAC is asked, as kube-apiserver's privileged-group authorizer does. A
//! `ClusterRole` with an `aggregationRule` has the rules of every `ClusterRole` its selectors
//! match, computed when asked (kube-controller-manager writes them into the object instead).

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use serde::de::DeserializeOwned;

use super::attributes::RequestInfo;
use super::user::{MASTERS, User, service_account_name};
use crate::apiserver::registry::ResourceKey;
use crate::apiserver::store::{ObjKey, Store};
use crate::selector::LabelSelector;

/// The API group of RBAC objects.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// Where roles and bindings come from: the server's store, or a fixed set in tests.
pub trait RoleSource {
    /// Every `ClusterRoleBinding`.
    fn cluster_role_bindings(&self) -> Vec<ClusterRoleBinding>;
    /// The `RoleBinding`s of `namespace`.
    fn role_bindings(&self, namespace: &str) -> Vec<RoleBinding>;
    /// A `Role`.
    fn role(&self, namespace: &str, name: &str) -> Option<Role>;
    /// Every `ClusterRole` (a `ClusterRole` is found among them by name).
    fn cluster_roles(&self) -> Vec<ClusterRole>;
}

/// The roles and bindings stored in the server.
pub struct StoredRoles<'a>(pub &'a Store);

impl StoredRoles<'_> {
    fn all<T: DeserializeOwned>(&self, plural: &str, namespace: Option<&str>) -> Vec<T> {
        let (_, objects) = self.0.snapshot(&ResourceKey::new(GROUP, plural));
        objects
            .iter()
            .filter(|(key, _)| namespace.is_none_or(|ns| key.namespace == ns))
            .filter_map(|(_, stored)| serde_json::from_value(stored.value.clone()).ok())
            .collect()
    }
}

impl RoleSource for StoredRoles<'_> {
    fn cluster_role_bindings(&self) -> Vec<ClusterRoleBinding> {
        self.all("clusterrolebindings", None)
    }

    fn role_bindings(&self, namespace: &str) -> Vec<RoleBinding> {
        self.all("rolebindings", Some(namespace))
    }

    fn role(&self, namespace: &str, name: &str) -> Option<Role> {
        let stored = self.0.get(
            &ResourceKey::new(GROUP, "roles"),
            &ObjKey::new(namespace, name),
        )?;
        serde_json::from_value(stored.value.clone()).ok()
    }

    fn cluster_roles(&self) -> Vec<ClusterRole> {
        self.all("clusterroles", None)
    }
}

/// What the authorizer decided, with kube-apiserver's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; the reason names the binding (`RBAC: allowed by ClusterRoleBinding "x" of
    /// ClusterRole "y" to Group "z"`), "" for `system:masters`.
    Allow(String),
    /// No rule allows it; the reason is "" or the bindings that could not be resolved
    /// (`RBAC: clusterrole.rbac.authorization.k8s.io "x" not found`).
    Deny(String),
}

impl Decision {
    /// Whether the request is allowed.
    #[must_use]
    pub fn allowed(&self) -> bool {
        matches!(self, Self::Allow(_))
    }

    /// The reason.
    #[must_use]
    pub fn reason(&self) -> &str {
        match self {
            Self::Allow(reason) | Self::Deny(reason) => reason,
        }
    }
}

/// Whether the verbs of `rule` include `verb` (`VerbMatches`).
fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == "*" || v == verb)
}

/// `APIGroupMatches`.
fn group_matches(rule: &PolicyRule, group: &str) -> bool {
    rule.api_groups
        .iter()
        .flatten()
        .any(|g| g == "*" || g == group)
}

/// `ResourceMatches`: `*`, the exact `resource[/subresource]`, or `*/subresource`.
fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    rule.resources.iter().flatten().any(|r| {
        r == "*"
            || r == combined
            || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
    })
}

/// `ResourceNameMatches`: no names match every request; else the request's name is listed.
fn name_matches(rule: &PolicyRule, name: &str) -> bool {
    match rule.resource_names.as_deref() {
        None | Some([]) => true,
        Some(names) => names.iter().any(|n| n == name),
    }
}

/// `NonResourceURLMatches`: `*`, the exact path, or a prefix ending in `*`.
fn url_matches(rule: &PolicyRule, path: &str) -> bool {
    rule.non_resource_urls.iter().flatten().any(|u| {
        u == "*" || u == path || (u.ends_with('*') && path.starts_with(u.trim_end_matches('*')))
    })
}

/// Whether `rule` allows the request `info` (`RuleAllows`).
#[must_use]
pub fn rule_allows(info: &RequestInfo, rule: &PolicyRule) -> bool {
    if info.resource_request {
        let combined = if info.subresource.is_empty() {
            info.resource.clone()
        } else {
            format!("{}/{}", info.resource, info.subresource)
        };
        verb_matches(rule, &info.verb)
            && group_matches(rule, &info.api_group)
            && resource_matches(rule, &combined, &info.subresource)
            && name_matches(rule, &info.name)
    } else {
        verb_matches(rule, &info.verb) && url_matches(rule, &info.path)
    }
}

/// Whether `subject` names `user` in a binding of `namespace` ("" for a
/// `ClusterRoleBinding`): a `ServiceAccount` without namespace is the binding's own
/// (`appliesToUser`).
fn applies_to(user: &User, subject: &Subject, namespace: &str) -> bool {
    match subject.kind.as_str() {
        "User" => user.name == subject.name,
        "Group" => user.in_group(&subject.name),
        "ServiceAccount" => {
            let ns = subject
                .namespace
                .as_deref()
                .filter(|ns| !ns.is_empty())
                .unwrap_or(namespace);
            !ns.is_empty() && user.name == service_account_name(ns, &subject.name)
        }
        _ => false,
    }
}

/// A subject as kube-apiserver describes it (`describeSubject`).
fn describe_subject(subject: &Subject, namespace: &str) -> String {
    if subject.kind == "ServiceAccount" {
        let ns = subject
            .namespace
            .as_deref()
            .filter(|ns| !ns.is_empty())
            .unwrap_or(namespace);
        format!("{} {:?}", subject.kind, format!("{}/{ns}", subject.name))
    } else {
        format!("{} {:?}", subject.kind, subject.name)
    }
}

/// Which binding a rule came from.
struct Source<'a> {
    /// `ClusterRoleBinding` or `RoleBinding`.
    kind: &'static str,
    /// Its name (`name/namespace` for a `RoleBinding`, as upstream prints it).
    name: String,
    role_ref: &'a RoleRef,
    subject: &'a Subject,
    namespace: &'a str,
}

impl fmt::Display for Source<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?} of {} {:?} to {}",
            self.kind,
            self.name,
            self.role_ref.kind,
            self.role_ref.name,
            describe_subject(self.subject, self.namespace)
        )
    }
}

/// The rules of every `ClusterRole` an aggregation rule selects, with `visited` guarding
/// against cycles.
fn cluster_role_rules(
    all: &[ClusterRole],
    role: &ClusterRole,
    visited: &mut BTreeSet<String>,
) -> Vec<PolicyRule> {
    let name = role.metadata.name.clone().unwrap_or_default();
    if !visited.insert(name) {
        return Vec::new();
    }
    let Some(aggregation) = &role.aggregation_rule else {
        return role.rules.clone().unwrap_or_default();
    };
    let selectors: Vec<LabelSelector> = aggregation
        .cluster_role_selectors
        .iter()
        .flatten()
        .filter_map(|s| LabelSelector::try_from(s).ok())
        .collect();
    let mut rules = Vec::new();
    for other in all {
        let labels = other.metadata.labels.clone().unwrap_or_default();
        if other.metadata.name != role.metadata.name && selectors.iter().any(|s| s.matches(&labels))
        {
            for rule in cluster_role_rules(all, other, visited) {
                if !rules.contains(&rule) {
                    rules.push(rule);
                }
            }
        }
    }
    rules
}

/// The rules a role reference grants in a binding of `namespace`, or why it cannot be resolved
/// (`GetRoleReferenceRules`, with the listers' `NotFound` wording).
fn role_ref_rules(
    source: &dyn RoleSource,
    cluster_roles: &[ClusterRole],
    role_ref: &RoleRef,
    namespace: &str,
) -> Result<Vec<PolicyRule>, String> {
    match role_ref.kind.as_str() {
        "Role" => source
            .role(namespace, &role_ref.name)
            .map(|r| r.rules.unwrap_or_default())
            .ok_or_else(|| format!("role.{GROUP} {:?} not found", role_ref.name)),
        "ClusterRole" => cluster_roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(role_ref.name.as_str()))
            .map(|r| cluster_role_rules(cluster_roles, r, &mut BTreeSet::new()))
            .ok_or_else(|| format!("clusterrole.{GROUP} {:?} not found", role_ref.name)),
        other => Err(format!("unsupported role reference kind: {other:?}")),
    }
}

/// Visits every rule that applies to `user` in `namespace` with its source; `visit` returns
/// false to stop. Resolution errors are collected.
fn visit_rules(
    source: &dyn RoleSource,
    user: &User,
    namespace: &str,
    visit: &mut dyn FnMut(&Source<'_>, &PolicyRule) -> bool,
) -> Vec<String> {
    let cluster_roles = source.cluster_roles();
    let mut errors = Vec::new();
    for binding in source.cluster_role_bindings() {
        let subjects = binding.subjects.as_deref().unwrap_or_default();
        let Some(subject) = subjects.iter().find(|s| applies_to(user, s, "")) else {
            continue;
        };
        match role_ref_rules(source, &cluster_roles, &binding.role_ref, "") {
            Err(e) => errors.push(e),
            Ok(rules) => {
                let from = Source {
                    kind: "ClusterRoleBinding",
                    name: binding.metadata.name.clone().unwrap_or_default(),
                    role_ref: &binding.role_ref,
                    subject,
                    namespace: "",
                };
                if rules.iter().any(|rule| !visit(&from, rule)) {
                    return errors;
                }
            }
        }
    }
    if namespace.is_empty() {
        return errors;
    }
    for binding in source.role_bindings(namespace) {
        let subjects = binding.subjects.as_deref().unwrap_or_default();
        let Some(subject) = subjects.iter().find(|s| applies_to(user, s, namespace)) else {
            continue;
        };
        match role_ref_rules(source, &cluster_roles, &binding.role_ref, namespace) {
            Err(e) => errors.push(e),
            Ok(rules) => {
                let from = Source {
                    kind: "RoleBinding",
                    name: format!(
                        "{}/{namespace}",
                        binding.metadata.name.clone().unwrap_or_default()
                    ),
                    role_ref: &binding.role_ref,
                    subject,
                    namespace,
                };
                if rules.iter().any(|rule| !visit(&from, rule)) {
                    return errors;
                }
            }
        }
    }
    errors
}

/// apimachinery's aggregate error text: one error alone, several (deduplicated) in brackets.
fn aggregate(errors: &[String]) -> String {
    let mut seen: Vec<&String> = Vec::new();
    for e in errors {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [] => String::new(),
        [one] => (*one).clone(),
        many => format!(
            "[{}]",
            many.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Whether `user` may do `info`: `system:masters` always; else the first rule that allows it.
#[must_use]
pub fn authorize(source: &dyn RoleSource, user: &User, info: &RequestInfo) -> Decision {
    if user.in_group(MASTERS) {
        return Decision::Allow(String::new());
    }
    let mut allowed = None;
    let errors = visit_rules(source, user, &info.namespace, &mut |from, rule| {
        if rule_allows(info, rule) {
            allowed = Some(format!("RBAC: allowed by {from}"));
            false
        } else {
            true
        }
    });
    match allowed {
        Some(reason) => Decision::Allow(reason),
        None if errors.is_empty() => Decision::Deny(String::new()),
        None => Decision::Deny(format!("RBAC: {}", aggregate(&errors))),
    }
}

/// Every rule that applies to `user` in `namespace` ("" for the cluster-wide ones only), and
/// the resolution errors met (`RulesFor`).
#[must_use]
pub fn rules_for(
    source: &dyn RoleSource,
    user: &User,
    namespace: &str,
) -> (Vec<PolicyRule>, Option<String>) {
    let mut rules = Vec::new();
    let errors = visit_rules(source, user, namespace, &mut |_, rule| {
        rules.push(rule.clone());
        true
    });
    let error = (!errors.is_empty()).then(|| aggregate(&errors));
    (rules, error)
}

#[cfg(test)]
mod tests;
