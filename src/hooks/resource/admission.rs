//! `spec.admission`: the admission hooks of a `Controller`, which validate or default the
//! objects of its `for` kind before the API server stores them (controller-runtime's
//! `Validator`/`Defaulter`, kopf's `on.validate`/`on.mutate`, shell-operator's
//! `kubernetesValidating`/`kubernetesMutating` bindings), declared on the `Controller` because
//! the kind, the hook, the hook policy and the cache's scope they default to are already there.
//!
//! The wire form ([`AdmissionSpec`]) and what a valid one becomes ([`AdmissionHook`]); the
//! decision itself is `crate::hooks::admission`.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::types::{Hook, HookSpec};
use crate::config::{FieldError, FieldPath};

/// kube-apiserver's default `timeoutSeconds` of a webhook, and its maximum
/// (`k8s.io/api/admissionregistration/v1` `ValidatingWebhook.TimeoutSeconds`: "default to 10
/// seconds ... between 1 and 30 seconds").
pub const DEFAULT_ADMISSION_TIMEOUT_SECONDS: i32 = 10;
/// See [`DEFAULT_ADMISSION_TIMEOUT_SECONDS`].
pub const MAX_ADMISSION_TIMEOUT_SECONDS: i32 = 30;
/// kube-apiserver's limit on `matchConditions` per webhook
/// (`k8s.io/kubernetes/pkg/apis/admissionregistration/validation`).
pub const MAX_MATCH_CONDITIONS: usize = 64;

/// One admission hook of a `Controller`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionSpec {
    /// The hook's name, unique in the `Controller` (a DNS label such as `require-owner`); the
    /// webhook the manager registers is named after it and the `Controller`.
    pub name: String,
    /// `Validating` (allow or deny, with a message) or `Mutating` (also change the object:
    /// answer the changed `object` or a JSON `patch`).
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["Validating", "Mutating"]))]
    pub type_: String,
    /// The operations the hook is called for: `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `*`.
    /// Default `[CREATE, UPDATE]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<Vec<String>>,
    /// The hook to call: exactly one of `exec` or `webhook`. Default: the `Controller`'s
    /// `spec.hook`, which then tells the requests apart by their `admission` field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<HookSpec>,
    /// What the API server does when the hook cannot decide (it fails, times out or answers
    /// something unusable): `Fail` (default; the request is refused) or `Ignore` (it is let in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Fail", "Ignore"]))]
    pub failure_policy: Option<String>,
    /// How long the API server waits for a decision, 1 to 30 seconds. Default 10. The manager
    /// answers half a second before, with the failure policy, if the hook has not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// Only objects in namespaces whose labels match. Default: the namespaces of the active
    /// `CacheConfig`'s scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Only objects whose labels (new or old) match. Default: every object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    /// CEL conditions the API server checks before calling (all must hold), as a webhook's
    /// `matchConditions`; at most 64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_conditions: Option<Vec<MatchConditionSpec>>,
}

/// A CEL condition of an admission hook.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchConditionSpec {
    /// Its name, unique among the hook's conditions.
    pub name: String,
    /// A CEL expression over `object`, `oldObject`, `request` and `authorizer` that yields a
    /// bool.
    pub expression: String,
}

/// Whether an admission hook only decides or may also change the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AdmissionType {
    /// Allows or denies.
    Validating,
    /// Allows (possibly changing the object) or denies.
    Mutating,
}

impl AdmissionType {
    /// `Validating` or `Mutating`, as written.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            AdmissionType::Validating => "Validating",
            AdmissionType::Mutating => "Mutating",
        }
    }
}

/// What the API server does when an admission hook cannot decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailurePolicy {
    /// The request is refused.
    Fail,
    /// The request is let in.
    Ignore,
}

impl FailurePolicy {
    /// `Fail` or `Ignore`, as written (and as a webhook configuration says it).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

/// A valid admission hook.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmissionHook {
    /// Its name in the `Controller`.
    pub name: String,
    /// Validating or mutating.
    pub type_: AdmissionType,
    /// The operations it is called for (`CREATE`, ... or `*`), each once.
    pub operations: Vec<String>,
    /// The hook called.
    pub hook: Hook,
    /// Fail or Ignore.
    pub failure_policy: FailurePolicy,
    /// How long the API server waits (`timeoutSeconds`).
    pub timeout: Duration,
    /// Namespaces whose labels match, if set.
    pub namespace_selector: Option<LabelSelector>,
    /// Objects whose labels match, if set.
    pub object_selector: Option<LabelSelector>,
    /// `(name, expression)` of each CEL condition.
    pub match_conditions: Vec<(String, String)>,
}

impl AdmissionHook {
    /// How long the manager lets the hook run: the API server's `timeout` less half a second
    /// (at least half a second), so that the failure policy, not the API server's own timeout,
    /// answers a hook that is late.
    #[must_use]
    pub fn deadline(&self) -> Duration {
        self.timeout
            .saturating_sub(Duration::from_millis(500))
            .max(Duration::from_millis(500))
    }
}

const OPERATIONS: [&str; 5] = ["CREATE", "UPDATE", "DELETE", "CONNECT", "*"];

/// The name of the webhook that calls admission hook `hook` of `controller` (namespace,
/// name) in the configurations the manager owns.
#[must_use]
pub fn webhook_name(hook: &str, controller: (&str, &str)) -> String {
    format!(
        "{hook}.{}.{}.admission.informant.dev",
        controller.1, controller.0
    )
}

/// The longest webhook name the API server takes: a DNS-1123 subdomain
/// (`k8s.io/apimachinery/pkg/util/validation`, `DNS1123SubdomainMaxLength`), which
/// `ValidateValidatingWebhookConfiguration` checks every webhook's name against.
const MAX_WEBHOOK_NAME: usize = 253;

/// The admission hooks of `specs`, every error at once in `errors`; `default_hook` is the
/// `Controller`'s own (`None` when it is invalid: hooks that rely on it are then left out,
/// its own error already said); `controller` its namespace and name, which the webhook's
/// name carries.
pub(super) fn validate(
    specs: Option<&[AdmissionSpec]>,
    default_hook: Option<&Hook>,
    controller: (&str, &str),
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
    hook: impl Fn(&HookSpec, &FieldPath, &mut Vec<FieldError>) -> Option<Hook>,
) -> Vec<AdmissionHook> {
    let mut names = HashSet::new();
    let mut hooks = Vec::new();
    for (i, spec) in specs.unwrap_or_default().iter().enumerate() {
        let path = path.index(i);
        let before = errors.len();
        check_name(&spec.name, &mut names, &path.field("name"), errors);
        let webhook = webhook_name(&spec.name, controller);
        if webhook.len() > MAX_WEBHOOK_NAME {
            errors.push(FieldError::new(
                &path.field("name"),
                format!(
                    "the webhook registered for it, {webhook:?}, is {} characters: the API \
                     server takes at most {MAX_WEBHOOK_NAME}; shorten the hook's, the \
                     Controller's or the namespace's name",
                    webhook.len()
                ),
            ));
        }
        let type_ = match spec.type_.as_str() {
            "Validating" => Some(AdmissionType::Validating),
            "Mutating" => Some(AdmissionType::Mutating),
            other => {
                errors.push(FieldError::new(
                    &path.field("type"),
                    format!(
                        "{other:?} is not a type of admission hook; write Validating or Mutating"
                    ),
                ));
                None
            }
        };
        let operations = operations(
            spec.operations.as_deref(),
            &path.field("operations"),
            errors,
        );
        let failure_policy = match spec.failure_policy.as_deref() {
            None | Some("Fail") => Some(FailurePolicy::Fail),
            Some("Ignore") => Some(FailurePolicy::Ignore),
            Some(other) => {
                errors.push(FieldError::new(
                    &path.field("failurePolicy"),
                    format!(
                        "{other:?} is not a failure policy; write Fail (the default) or Ignore"
                    ),
                ));
                None
            }
        };
        let seconds = spec
            .timeout_seconds
            .unwrap_or(DEFAULT_ADMISSION_TIMEOUT_SECONDS);
        if !(1..=MAX_ADMISSION_TIMEOUT_SECONDS).contains(&seconds) {
            errors.push(FieldError::new(
                &path.field("timeoutSeconds"),
                format!(
                    "{seconds} is out of range: the API server waits 1 to \
                     {MAX_ADMISSION_TIMEOUT_SECONDS} seconds; remove it for the default of \
                     {DEFAULT_ADMISSION_TIMEOUT_SECONDS}"
                ),
            ));
        }
        for (field, selector) in [
            ("namespaceSelector", &spec.namespace_selector),
            ("objectSelector", &spec.object_selector),
        ] {
            if let Some(selector) = selector {
                check_selector(selector, &path.field(field), errors);
            }
        }
        let match_conditions = match_conditions(
            spec.match_conditions.as_deref(),
            &path.field("matchConditions"),
            errors,
        );
        let called = match &spec.hook {
            Some(own) => hook(own, &path.field("hook"), errors),
            None => default_hook.cloned(),
        };
        if let (Some(type_), Some(failure_policy), Some(called)) = (type_, failure_policy, called)
            && errors.len() == before
        {
            hooks.push(AdmissionHook {
                name: spec.name.clone(),
                type_,
                operations,
                hook: called,
                failure_policy,
                timeout: Duration::from_secs(u64::try_from(seconds).unwrap_or(10)),
                namespace_selector: spec.namespace_selector.clone(),
                object_selector: spec.object_selector.clone(),
                match_conditions,
            });
        }
    }
    hooks
}

/// The hook's name: a DNS label, unique among `names` (the names seen so far).
fn check_name<'a>(
    name: &'a str,
    names: &mut HashSet<&'a str>,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) {
    match crate::config::names::dns1123_label_problem(name) {
        _ if name.is_empty() => errors.push(FieldError::new(
            path,
            "required; name the hook, e.g. `name: require-owner`",
        )),
        Some(problem) => errors.push(FieldError::new(
            path,
            format!("invalid name {name:?}: {problem}"),
        )),
        None if !names.insert(name) => errors.push(FieldError::new(
            path,
            format!("{name:?} names another admission hook of this Controller"),
        )),
        None => {}
    }
}

fn operations(
    written: Option<&[String]>,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> Vec<String> {
    let Some(written) = written else {
        return vec!["CREATE".to_owned(), "UPDATE".to_owned()];
    };
    if written.is_empty() {
        errors.push(FieldError::new(
            path,
            "empty: name at least one of CREATE, UPDATE, DELETE, CONNECT or *; remove it for \
             the default [CREATE, UPDATE]",
        ));
    }
    let mut seen = Vec::new();
    for (i, op) in written.iter().enumerate() {
        if !OPERATIONS.contains(&op.as_str()) {
            errors.push(FieldError::new(
                &path.index(i),
                format!("{op:?} is not an operation; write CREATE, UPDATE, DELETE, CONNECT or *"),
            ));
        } else if seen.contains(op) {
            errors.push(FieldError::new(
                &path.index(i),
                format!("{op} is listed twice"),
            ));
        } else {
            seen.push(op.clone());
        }
    }
    if seen.len() > 1 && seen.iter().any(|op| op == "*") {
        errors.push(FieldError::new(
            path,
            "* already means every operation; list it alone",
        ));
    }
    seen
}

/// A label selector's expressions as kube-apiserver checks them: `In`/`NotIn` need values,
/// `Exists`/`DoesNotExist` take none.
fn check_selector(selector: &LabelSelector, path: &FieldPath, errors: &mut Vec<FieldError>) {
    for (i, expression) in selector.match_expressions.iter().flatten().enumerate() {
        let path = path.field("matchExpressions").index(i);
        let values = expression.values.as_ref().map_or(0, Vec::len);
        match expression.operator.as_str() {
            "In" | "NotIn" if values == 0 => errors.push(FieldError::new(
                &path.field("values"),
                format!(
                    "required with operator {}: list at least one value",
                    expression.operator
                ),
            )),
            "Exists" | "DoesNotExist" if values > 0 => errors.push(FieldError::new(
                &path.field("values"),
                format!("must be empty with operator {}", expression.operator),
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errors.push(FieldError::new(
                &path.field("operator"),
                format!("{other:?} is not an operator; write In, NotIn, Exists or DoesNotExist"),
            )),
        }
    }
}

/// Why `expression` cannot be a webhook's match condition, as kube-apiserver compiles it when
/// the configuration is written (a 422 for the whole configuration otherwise): CEL that
/// parses, naming only the variables a match condition has (`object`, `oldObject`,
/// `request`, `authorizer`). The embedded API server's own check is
/// `apiserver::admission::conditions::check`, which the `hooks` room may not use.
fn check_condition(expression: &str) -> Result<(), String> {
    let program = cel::Program::compile(expression)
        .map_err(|e| format!("{expression:?} is not CEL: compilation failed: {e}"))?;
    for variable in program.references().variables() {
        if !matches!(variable, "object" | "oldObject" | "request" | "authorizer") {
            return Err(format!(
                "undeclared reference to {variable:?}; a match condition may use object, \
                 oldObject, request and authorizer"
            ));
        }
    }
    Ok(())
}

fn match_conditions(
    written: Option<&[MatchConditionSpec]>,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> Vec<(String, String)> {
    let written = written.unwrap_or_default();
    if written.len() > MAX_MATCH_CONDITIONS {
        errors.push(FieldError::new(
            path,
            format!(
                "{} conditions: the API server takes at most {MAX_MATCH_CONDITIONS}",
                written.len()
            ),
        ));
    }
    let mut names = HashSet::new();
    for (i, condition) in written.iter().enumerate() {
        let path = path.index(i);
        if condition.name.is_empty() {
            errors.push(FieldError::new(&path.field("name"), "required"));
        } else if let Some(problem) = crate::selector::qualified_name_problem(&condition.name) {
            // kube-apiserver refuses a condition whose name is not a qualified name.
            errors.push(FieldError::new(
                &path.field("name"),
                format!("invalid name {:?}: {problem}", condition.name),
            ));
        } else if !names.insert(condition.name.as_str()) {
            errors.push(FieldError::new(
                &path.field("name"),
                format!("{:?} names another condition of this hook", condition.name),
            ));
        }
        if condition.expression.trim().is_empty() {
            errors.push(FieldError::new(
                &path.field("expression"),
                "required; a CEL expression yielding a bool, e.g. `object.metadata.name != \"\"`",
            ));
        } else if let Err(why) = check_condition(&condition.expression) {
            errors.push(FieldError::new(&path.field("expression"), why));
        }
    }
    written
        .iter()
        .map(|c| (c.name.clone(), c.expression.clone()))
        .collect()
}
