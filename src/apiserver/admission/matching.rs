//! Which webhooks a request meets, as kube-apiserver decides it (`generic/webhook.go`,
//! `ShouldCallHook`; `predicates/{namespace,object,rules}`): the namespace selector (on the
//! namespace's labels, or a namespace's own), the object selector (on the new or the old
//! object's labels), then the rules on the request's resource, and with `matchPolicy:
//! Equivalent` on the other versions the server serves of the same resource.

use serde_json::Value;

use super::Attributes;
use super::conditions::{self, Verdict};
use super::hooks::{Hook, Rule};
use crate::apiserver::registry::ResourceKey;
use crate::apiserver::state::App;
use crate::apiserver::status::{ApiError, ApiResult};
use crate::apiserver::store::ObjKey;
use crate::selector::LabelSelector;

/// How a matched webhook sees the request: the version it is sent at.
#[derive(Debug, Clone)]
pub(super) struct Matched {
    /// The API version of the resource and kind the webhook matched (`resource.version`).
    pub version: String,
    /// The `apiVersion` the objects are sent at.
    pub api_version: String,
}

/// `object` at `api_version` (the server's conversions between versions of one resource only
/// rename `apiVersion`).
pub(super) fn to_version(object: &Value, api_version: &str) -> Value {
    let mut out = object.clone();
    if let Some(map) = out.as_object_mut()
        && !api_version.is_empty()
    {
        map.insert("apiVersion".into(), Value::String(api_version.to_string()));
    }
    out
}

fn labels_match(selector: &LabelSelector, object: Option<&Value>) -> bool {
    object.is_some_and(|o| selector.matches_object(o))
}

/// The namespace selector's verdict: for a namespace, on its own labels; for another
/// cluster-scoped object, always; else on its namespace's labels (404 when it is missing).
fn namespace_matches(app: &App, hook: &Hook, attrs: &Attributes<'_>) -> ApiResult<bool> {
    if hook.namespace_selector.is_empty() {
        return Ok(true);
    }
    if attrs.rt.group.is_empty() && attrs.rt.plural == "namespaces" && attrs.subresource.is_none() {
        let own = attrs.object.as_ref().or(attrs.old_object.as_ref());
        return Ok(own.is_none_or(|o| hook.namespace_selector.matches_object(o)));
    }
    if attrs.namespace.is_empty() {
        return Ok(true);
    }
    let namespace = app
        .store
        .get(
            &ResourceKey::new("", "namespaces"),
            &ObjKey::new("", attrs.namespace),
        )
        .ok_or_else(|| ApiError::not_found("", "namespaces", attrs.namespace))?;
    Ok(hook.namespace_selector.matches_object(&namespace.value))
}

/// The object selector's verdict: the new or the old object carries matching labels.
fn object_matches(hook: &Hook, attrs: &Attributes<'_>) -> bool {
    hook.object_selector.is_empty()
        || labels_match(&hook.object_selector, attrs.object.as_ref())
        || labels_match(&hook.object_selector, attrs.old_object.as_ref())
}

fn listed(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == "*" || item == value)
}

/// `rules.Matcher`: operation, group, version, resource (`*`, `*/*`, `pods/status`, `*/status`,
/// `pods/*`) and scope.
fn rule_matches(rule: &Rule, attrs: &Attributes<'_>, version: &str) -> bool {
    let plural = attrs.rt.plural.as_str();
    let sub = attrs.subresource.unwrap_or("");
    let resource = rule.resources.iter().any(|r| {
        let (res, rule_sub) = r.split_once('/').unwrap_or((r, ""));
        (res == "*" || res == plural) && (rule_sub == "*" || rule_sub == sub)
    });
    let is_namespace = attrs.rt.group.is_empty() && plural == "namespaces";
    let scope = match rule.scope.as_str() {
        "Namespaced" => !is_namespace && !attrs.namespace.is_empty(),
        "Cluster" => is_namespace || attrs.namespace.is_empty(),
        _ => true,
    };
    listed(&rule.operations, attrs.operation.as_str())
        && listed(&rule.api_groups, &attrs.rt.group)
        && listed(&rule.api_versions, version)
        && resource
        && scope
}

/// How `hook` sees the request, or `None` when it does not apply.
///
/// # Errors
///
/// 404 when its namespace selector must read a namespace that does not exist, and the rules
/// match.
pub(super) fn matched(
    app: &App,
    hook: &Hook,
    attrs: &Attributes<'_>,
) -> ApiResult<Option<Matched>> {
    let namespace = namespace_matches(app, hook, attrs);
    if matches!(namespace, Ok(false)) || !object_matches(hook, attrs) {
        return Ok(None);
    }
    let at = |version: &str| Matched {
        version: version.to_string(),
        api_version: attrs.rt.api_version(version),
    };
    let mut found = hook
        .rules
        .iter()
        .any(|r| rule_matches(r, attrs, attrs.version))
        .then(|| at(attrs.version));
    if found.is_none() && !hook.exact {
        // The rules in order, each against every other served version of the resource.
        found = hook.rules.iter().find_map(|r| {
            attrs
                .rt
                .versions
                .iter()
                .filter(|v| *v != attrs.version)
                .find(|v| rule_matches(r, attrs, v))
                .map(|v| at(v))
        });
    }
    let Some(found) = found else {
        return Ok(None);
    };
    namespace?;
    if !hook.match_conditions.is_empty() {
        let request = super::call::review(attrs, &found, "")["request"].clone();
        match conditions::evaluate(&hook.match_conditions, &request) {
            Verdict::Call => {}
            Verdict::Skip => return Ok(None),
            Verdict::Error(why) if hook.ignore_failures => {
                tracing::warn!(webhook = %hook.name, error = %why, "match conditions failed open");
                return Ok(None);
            }
            Verdict::Error(why) => {
                return Err(ApiError::forbidden(
                    &attrs.rt.group,
                    &attrs.rt.plural,
                    attrs.name,
                    &why,
                ));
            }
        }
    }
    Ok(Some(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::admission::Operation;
    use crate::apiserver::auth::User;
    use crate::apiserver::registry::Registry;

    fn rule(resources: &[&str], scope: &str) -> Rule {
        Rule {
            operations: vec!["CREATE".into()],
            api_groups: vec!["*".into()],
            api_versions: vec!["*".into()],
            resources: resources.iter().map(ToString::to_string).collect(),
            scope: scope.into(),
        }
    }

    fn matches(rule: &Rule, plural: &str, sub: Option<&str>, namespace: &str) -> bool {
        let registry = Registry::new();
        let group = if plural == "deployments" { "apps" } else { "" };
        let rt = registry.get(&ResourceKey::new(group, plural)).unwrap();
        let user = User::admin();
        let attrs = Attributes {
            operation: Operation::Create,
            rt: &rt,
            version: "v1",
            subresource: sub,
            namespace,
            name: "x",
            object: None,
            old_object: None,
            dry_run: false,
            options: Value::Null,
            user: &user,
        };
        rule_matches(rule, &attrs, "v1")
    }

    #[test]
    fn resources_match_as_upstream_rules_matcher_does() {
        let cases: &[(&[&str], &str, Option<&str>, bool)] = &[
            (&["*"], "pods", None, true),
            (&["*"], "pods", Some("status"), false),
            (&["*/*"], "pods", Some("status"), true),
            (&["pods"], "pods", Some("status"), false),
            (&["pods/status"], "pods", Some("status"), true),
            (&["pods/status"], "pods", None, false),
            (&["*/status"], "deployments", Some("status"), true),
            (&["pods/*"], "pods", None, true),
            (&["configmaps"], "pods", None, false),
        ];
        for (resources, plural, sub, want) in cases {
            assert_eq!(
                matches(&rule(resources, "*"), plural, *sub, "default"),
                *want,
                "{resources:?} on {plural} {sub:?}"
            );
        }
    }

    #[test]
    fn scope_tells_namespaced_from_cluster_objects_and_namespaces_are_cluster_scoped() {
        let namespaced = rule(&["*"], "Namespaced");
        let cluster = rule(&["*"], "Cluster");
        assert!(matches(&namespaced, "pods", None, "default"));
        assert!(!matches(&namespaced, "nodes", None, ""));
        assert!(!matches(&namespaced, "namespaces", None, "ops"));
        assert!(matches(&cluster, "namespaces", None, "ops"));
        assert!(matches(&cluster, "nodes", None, ""));
        assert!(!matches(&cluster, "pods", None, "default"));
    }
}
