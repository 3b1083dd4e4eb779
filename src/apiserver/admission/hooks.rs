//! The webhooks of the stored `Mutating`/`ValidatingWebhookConfiguration`s ([`Hook`]), and the
//! validation of a configuration before it is stored, as kube-apiserver's
//! (`pkg/apis/admissionregistration/validation`): every error at once, each with its field path.

use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use super::conditions::{self, Condition};
use crate::apiserver::registry::{ResourceKey, ResourceType};
use crate::apiserver::state::App;
use crate::selector::LabelSelector;

const GROUP: &str = "admissionregistration.k8s.io";
const MUTATING: &str = "mutatingwebhookconfigurations";
const VALIDATING: &str = "validatingwebhookconfigurations";

/// Which configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `MutatingWebhookConfiguration`.
    Mutating,
    /// `ValidatingWebhookConfiguration`.
    Validating,
}

/// One rule of a webhook (`RuleWithOperations`).
#[derive(Debug, Clone, Default)]
pub(super) struct Rule {
    pub operations: Vec<String>,
    pub api_groups: Vec<String>,
    pub api_versions: Vec<String>,
    pub resources: Vec<String>,
    /// `*`, `Cluster` or `Namespaced`.
    pub scope: String,
}

/// Where a webhook is reached (`WebhookClientConfig`).
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The URL posted to (`url`, or `https://NAME.NAMESPACE.svc:PORT/PATH` for a service).
    pub url: String,
    /// The PEM certificates trusted for its TLS; empty: the system's roots.
    pub ca_bundle: Vec<u8>,
}

/// One webhook of a stored configuration.
#[derive(Debug, Clone)]
pub(super) struct Hook {
    /// Its name (reported in denials and failures).
    pub name: String,
    pub endpoint: Endpoint,
    pub rules: Vec<Rule>,
    /// `failurePolicy: Ignore`.
    pub ignore_failures: bool,
    /// `matchPolicy: Exact` (the default is `Equivalent`).
    pub exact: bool,
    pub namespace_selector: LabelSelector,
    pub object_selector: LabelSelector,
    pub side_effects: String,
    pub timeout: Duration,
    /// `reinvocationPolicy: IfNeeded` (mutating only).
    pub reinvoke_if_needed: bool,
    /// `matchConditions`.
    pub match_conditions: Vec<Condition>,
}

/// Whether `rt` is one of the webhook configuration kinds, which admission never guards
/// (kube-apiserver's `IsExemptAdmissionConfigurationResource`).
pub(crate) fn is_configuration(rt: &ResourceType) -> bool {
    rt.group == GROUP && (rt.plural == MUTATING || rt.plural == VALIDATING)
}

/// Whether any webhook configuration is stored.
pub(super) fn registered(app: &App) -> bool {
    [MUTATING, VALIDATING].iter().any(|plural| {
        !app.store
            .snapshot(&ResourceKey::new(GROUP, plural))
            .1
            .is_empty()
    })
}

/// The webhooks of every stored configuration of `kind`, configurations by name, webhooks in
/// order.
pub(super) fn load(app: &App, kind: Kind) -> Vec<Hook> {
    let plural = match kind {
        Kind::Mutating => MUTATING,
        Kind::Validating => VALIDATING,
    };
    let (_, objects) = app.store.snapshot(&ResourceKey::new(GROUP, plural));
    let mut hooks = Vec::new();
    for stored in objects.values() {
        for webhook in stored.value["webhooks"].as_array().into_iter().flatten() {
            // Stored configurations were validated; one that no longer parses is skipped.
            if let Ok(hook) = parse(webhook, kind) {
                hooks.push(hook);
            }
        }
    }
    hooks
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn selector(v: &Value) -> Result<LabelSelector, String> {
    if v.is_null() {
        return Ok(LabelSelector::everything());
    }
    let typed: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    LabelSelector::try_from(&typed).map_err(|e| {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        text
    })
}

/// The endpoint of a `clientConfig`.
pub(crate) fn endpoint(client: &Value) -> Result<Endpoint, String> {
    let ca_bundle = match client["caBundle"].as_str() {
        None | Some("") => Vec::new(),
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| format!("caBundle: {e}"))?,
    };
    if let Some(url) = client["url"].as_str() {
        return Ok(Endpoint {
            url: url.to_string(),
            ca_bundle,
        });
    }
    let service = &client["service"];
    let (Some(namespace), Some(name)) = (service["namespace"].as_str(), service["name"].as_str())
    else {
        return Err("exactly one of url or service is required".into());
    };
    let port = service["port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(443);
    let path = service["path"].as_str().unwrap_or("");
    Ok(Endpoint {
        url: format!("https://{name}.{namespace}.svc:{port}{path}"),
        ca_bundle,
    })
}

fn parse(webhook: &Value, kind: Kind) -> Result<Hook, String> {
    let rules = webhook["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| Rule {
            operations: strings(&r["operations"]),
            api_groups: strings(&r["apiGroups"]),
            api_versions: strings(&r["apiVersions"]),
            resources: strings(&r["resources"]),
            scope: r["scope"].as_str().unwrap_or("*").to_string(),
        })
        .collect();
    let timeout = webhook["timeoutSeconds"]
        .as_u64()
        .unwrap_or(10)
        .clamp(1, 30);
    Ok(Hook {
        name: webhook["name"].as_str().unwrap_or_default().to_string(),
        endpoint: endpoint(&webhook["clientConfig"])?,
        rules,
        ignore_failures: webhook["failurePolicy"].as_str() == Some("Ignore"),
        exact: webhook["matchPolicy"].as_str() == Some("Exact"),
        namespace_selector: selector(&webhook["namespaceSelector"])?,
        object_selector: selector(&webhook["objectSelector"])?,
        side_effects: webhook["sideEffects"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        timeout: Duration::from_secs(timeout),
        reinvoke_if_needed: kind == Kind::Mutating
            && webhook["reinvocationPolicy"].as_str() == Some("IfNeeded"),
        match_conditions: webhook["matchConditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| Condition {
                name: c["name"].as_str().unwrap_or_default().to_string(),
                expression: c["expression"].as_str().unwrap_or_default().to_string(),
            })
            .collect(),
    })
}

/// Checks `value` against `allowed`, adding `PATH: Unsupported value: ...` when it is not one.
fn one_of(errors: &mut Vec<String>, path: &str, value: &Value, allowed: &[&str]) {
    if value.is_null() {
        return;
    }
    if !value.as_str().is_some_and(|v| allowed.contains(&v)) {
        let list: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
        errors.push(format!(
            "{path}: Unsupported value: {value}: supported values: {}",
            list.join(", ")
        ));
    }
}

fn check_list(errors: &mut Vec<String>, path: &str, list: &Value, allowed: Option<&[&str]>) {
    let items = strings(list);
    if items.is_empty() {
        errors.push(format!("{path}: Required value"));
        return;
    }
    if items.len() > 1 && items.iter().any(|i| i == "*") {
        errors.push(format!(
            "{path}: Invalid value: {list}: if '*' is present, must not specify other values"
        ));
    }
    if let Some(allowed) = allowed {
        for (i, item) in items.iter().enumerate() {
            one_of(
                errors,
                &format!("{path}[{i}]"),
                &Value::String(item.clone()),
                allowed,
            );
        }
    }
}

fn check_client_config(errors: &mut Vec<String>, path: &str, client: &Value) {
    match (client["url"].as_str(), client["service"].is_object()) {
        (Some(_), true) | (None, false) => errors.push(format!(
            "{path}: Required value: exactly one of url or service is required"
        )),
        (Some(url), false) => {
            let url_path = format!("{path}.url");
            if !url.starts_with("https://") {
                errors.push(format!(
                    "{url_path}: Invalid value: {url:?}: 'https' is the only allowed URL scheme"
                ));
            }
            if url.contains('?') {
                errors.push(format!(
                    "{url_path}: Invalid value: {url:?}: query parameters are not allowed"
                ));
            }
            if url.contains('#') {
                errors.push(format!(
                    "{url_path}: Invalid value: {url:?}: fragments are not allowed"
                ));
            }
            if url.parse::<http::Uri>().is_err() {
                errors.push(format!(
                    "{url_path}: Invalid value: {url:?}: not a valid URL"
                ));
            }
        }
        (None, true) => {
            let service = &client["service"];
            for field in ["namespace", "name"] {
                if service[field].as_str().is_none_or(str::is_empty) {
                    errors.push(format!("{path}.service.{field}: Required value"));
                }
            }
            if let Some(p) = service["path"].as_str()
                && !p.starts_with('/')
            {
                errors.push(format!(
                    "{path}.service.path: Invalid value: {p:?}: must start with a '/'"
                ));
            }
            let port = &service["port"];
            if !port.is_null() && !port.as_u64().is_some_and(|p| (1..=65535).contains(&p)) {
                errors.push(format!(
                    "{path}.service.port: Invalid value: {port}: port is not valid: must be \
                     between 1 and 65535, inclusive"
                ));
            }
        }
    }
    if let Err(e) = endpoint(client)
        && e.starts_with("caBundle")
    {
        errors.push(format!("{path}.{e}"));
    }
}

fn check_webhook(errors: &mut Vec<String>, path: &str, webhook: &Value, kind: Kind) {
    let name = webhook["name"].as_str().unwrap_or_default();
    if name.is_empty() {
        errors.push(format!("{path}.name: Required value"));
    } else if name.split('.').filter(|s| !s.is_empty()).count() < 3 {
        errors.push(format!(
            "{path}.name: Invalid value: {name:?}: should be a domain with at least three \
             segments separated by dots"
        ));
    }
    for (i, rule) in webhook["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let rule_path = format!("{path}.rules[{i}]");
        check_list(
            errors,
            &format!("{rule_path}.operations"),
            &rule["operations"],
            Some(&["*", "CREATE", "UPDATE", "DELETE", "CONNECT"]),
        );
        check_list(
            errors,
            &format!("{rule_path}.apiGroups"),
            &rule["apiGroups"],
            None,
        );
        check_list(
            errors,
            &format!("{rule_path}.apiVersions"),
            &rule["apiVersions"],
            None,
        );
        check_list(
            errors,
            &format!("{rule_path}.resources"),
            &rule["resources"],
            None,
        );
        one_of(
            errors,
            &format!("{rule_path}.scope"),
            &rule["scope"],
            &["*", "Cluster", "Namespaced"],
        );
    }
    check_policies(errors, path, webhook, kind);
    for field in ["namespaceSelector", "objectSelector"] {
        if let Err(e) = selector(&webhook[field]) {
            errors.push(format!("{path}.{field}: Invalid value: {e}"));
        }
    }
    check_conditions(errors, path, &webhook["matchConditions"]);
    check_client_config(
        errors,
        &format!("{path}.clientConfig"),
        &webhook["clientConfig"],
    );
}

/// `matchConditions`: at most 64, each named (uniquely) and with an expression that compiles
/// and reads only the variables offered.
fn check_conditions(errors: &mut Vec<String>, path: &str, list: &Value) {
    let Some(list) = list.as_array() else { return };
    if list.len() > 64 {
        errors.push(format!(
            "{path}.matchConditions: Too many: {}: must have at most 64 items",
            list.len()
        ));
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, condition) in list.iter().enumerate() {
        let at = format!("{path}.matchConditions[{i}]");
        match condition["name"].as_str().filter(|n| !n.is_empty()) {
            None => errors.push(format!("{at}.name: Required value")),
            Some(name) if names.contains(&name) => {
                errors.push(format!("{at}.name: Duplicate value: {name:?}"));
            }
            // kube-apiserver's `validateMatchConditions`
            // (k8s.io/kubernetes pkg/apis/admissionregistration/validation): a qualified name.
            Some(name) => {
                if let Some(problem) = crate::selector::qualified_name_problem(name) {
                    errors.push(format!("{at}.name: Invalid value: {name:?}: {problem}"));
                }
                names.push(name);
            }
        }
        match condition["expression"].as_str().filter(|e| !e.is_empty()) {
            None => errors.push(format!("{at}.expression: Required value")),
            Some(expression) => {
                if let Err(why) = conditions::check(expression) {
                    errors.push(format!(
                        "{at}.expression: Invalid value: {expression:?}: {why}"
                    ));
                }
            }
        }
    }
}

/// The policies of a webhook: failure, match, reinvocation, side effects, timeout and the
/// review versions.
fn check_policies(errors: &mut Vec<String>, path: &str, webhook: &Value, kind: Kind) {
    one_of(
        errors,
        &format!("{path}.failurePolicy"),
        &webhook["failurePolicy"],
        &["Fail", "Ignore"],
    );
    one_of(
        errors,
        &format!("{path}.matchPolicy"),
        &webhook["matchPolicy"],
        &["Exact", "Equivalent"],
    );
    match kind {
        Kind::Mutating => one_of(
            errors,
            &format!("{path}.reinvocationPolicy"),
            &webhook["reinvocationPolicy"],
            &["Never", "IfNeeded"],
        ),
        Kind::Validating if !webhook["reinvocationPolicy"].is_null() => errors.push(format!(
            "{path}.reinvocationPolicy: Forbidden: not allowed on a validating webhook"
        )),
        Kind::Validating => {}
    }
    if webhook["sideEffects"].is_null() {
        errors.push(format!(
            "{path}.sideEffects: Required value: must specify one of None, NoneOnDryRun"
        ));
    } else {
        one_of(
            errors,
            &format!("{path}.sideEffects"),
            &webhook["sideEffects"],
            &["None", "NoneOnDryRun"],
        );
    }
    let timeout = &webhook["timeoutSeconds"];
    if !timeout.is_null() && !timeout.as_u64().is_some_and(|t| (1..=30).contains(&t)) {
        errors.push(format!(
            "{path}.timeoutSeconds: Invalid value: {timeout}: the timeout value must be between \
             1 and 30 seconds"
        ));
    }
    let versions = strings(&webhook["admissionReviewVersions"]);
    if versions.is_empty() {
        errors.push(format!(
            "{path}.admissionReviewVersions: Required value: must specify one of v1, v1beta1"
        ));
    } else if !versions.iter().any(|v| v == "v1") {
        errors.push(format!(
            "{path}.admissionReviewVersions: Unsupported value: {}: the embedded API server \
             speaks AdmissionReview v1 only",
            webhook["admissionReviewVersions"]
        ));
    }
}

/// The validation errors of a webhook configuration about to be stored (`rt` tells which
/// kind), each with its field path; empty when it is valid or not a configuration.
pub(crate) fn validate_configuration(rt: &ResourceType, obj: &Value) -> Vec<String> {
    let kind = match rt.plural.as_str() {
        MUTATING if rt.group == GROUP => Kind::Mutating,
        VALIDATING if rt.group == GROUP => Kind::Validating,
        _ => return Vec::new(),
    };
    let mut errors = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    match &obj["webhooks"] {
        Value::Null => {}
        Value::Array(webhooks) => {
            for (i, webhook) in webhooks.iter().enumerate() {
                let path = format!("webhooks[{i}]");
                check_webhook(&mut errors, &path, webhook, kind);
                if let Some(name) = webhook["name"].as_str() {
                    if names.contains(&name) {
                        errors.push(format!("{path}.name: Duplicate value: {name:?}"));
                    }
                    names.push(name);
                }
            }
        }
        other => errors.push(format!(
            "webhooks: Invalid value: {other}: must be a list of webhooks"
        )),
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mutating() -> ResourceType {
        let registry = crate::apiserver::registry::Registry::new();
        (*registry.get(&ResourceKey::new(GROUP, MUTATING)).unwrap()).clone()
    }

    #[test]
    fn a_configuration_reports_every_error_with_its_path() {
        let errors = validate_configuration(
            &mutating(),
            &json!({"webhooks": [
                {"name": "short", "clientConfig": {"url": "http://x/y?a=b"},
                 "sideEffects": "Some", "timeoutSeconds": 31, "failurePolicy": "Sometimes",
                 "admissionReviewVersions": ["v1beta1"],
                 "rules": [{"operations": ["CREATE", "PATCH"], "apiGroups": [], "apiVersions": ["*", "v1"], "resources": ["pods"]}],
                 "matchConditions": [{"name": "a", "expression": "true"}, {"name": "a", "expression": "nope("}, {"name": "has owner!", "expression": "true"}]},
                {"name": "a.b.c", "clientConfig": {"service": {"namespace": "ns", "name": "s", "port": 0, "path": "x"}},
                 "admissionReviewVersions": ["v1"]}
            ]}),
        );
        let expected = [
            "webhooks[0].name: Invalid value: \"short\"",
            "webhooks[0].rules[0].operations[1]: Unsupported value: \"PATCH\"",
            "webhooks[0].rules[0].apiGroups: Required value",
            "webhooks[0].rules[0].apiVersions: Invalid value",
            "webhooks[0].failurePolicy: Unsupported value: \"Sometimes\"",
            "webhooks[0].sideEffects: Unsupported value: \"Some\"",
            "webhooks[0].timeoutSeconds: Invalid value: 31",
            "webhooks[0].admissionReviewVersions: Unsupported value",
            "webhooks[0].matchConditions[1].name: Duplicate value: \"a\"",
            "webhooks[0].matchConditions[1].expression: Invalid value: \"nope(\": compilation failed",
            "webhooks[0].matchConditions[2].name: Invalid value: \"has owner!\": name part must consist",
            "webhooks[0].clientConfig.url: Invalid value: \"http://x/y?a=b\": 'https' is the only",
            "webhooks[0].clientConfig.url: Invalid value: \"http://x/y?a=b\": query parameters",
            "webhooks[1].sideEffects: Required value",
            "webhooks[1].clientConfig.service.path: Invalid value: \"x\"",
            "webhooks[1].clientConfig.service.port: Invalid value: 0",
        ];
        for want in expected {
            assert!(
                errors.iter().any(|e| e.starts_with(want)),
                "missing {want:?} in {errors:#?}"
            );
        }
        assert_eq!(errors.len(), expected.len(), "{errors:#?}");
    }

    #[test]
    fn a_service_endpoint_is_its_cluster_dns_name_with_port_443_by_default() {
        let e = endpoint(&json!({"service": {"namespace": "ops", "name": "hook", "path": "/v"}}))
            .unwrap();
        assert_eq!(e.url, "https://hook.ops.svc:443/v");
    }
}

/// What the module's other tests build webhooks with.
#[cfg(test)]
pub(super) mod tests_support {
    use super::{Hook, Kind, parse};

    /// A mutating webhook from its JSON.
    pub(in crate::apiserver::admission) fn parse_mutating(webhook: &serde_json::Value) -> Hook {
        parse(webhook, Kind::Mutating).unwrap()
    }
}
