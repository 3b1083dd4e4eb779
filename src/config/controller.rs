//! The `Controller` custom resource: an operator written as a hook (an executable or a
//! webhook, in any language) that the manager calls with an object and its children from the
//! cache tree, and whose answer (events, children, status) the manager writes.
//!
//! Validation reports every problem at once with its field path, as for a `CacheConfig`, and
//! checks the kinds against the active cache plan: a controller on a kind the cache would
//! refuse to read is an error that says which `CacheConfig` setting to change.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use kube::CustomResourceExt;
use kube::core::{GroupVersion, GroupVersionKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::duration::parse_duration;
use super::error::{FieldError, FieldPath, Origin};
use super::names::dns1123_subdomain_problem;
use super::validate::api_version_problem;
use crate::cache::{self, Plan, builtin_scope};
use crate::selector::{FieldSelector, LabelSelector};

/// How long a hook may take before it is killed (exec) or abandoned (webhook) unless
/// `timeout` says otherwise.
///
/// metacontroller docs/api/hook.md: a webhook's `timeout` defaults to 10 seconds.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// Declares an operator written as a hook: the kind it reconciles (`for`), the kinds it owns
/// (its children, found by owner reference) and watches, and the hook the manager calls with
/// each object. The manager reads everything through its cache tree and writes the hook's
/// answer: events through its recorder, children with server-side apply, status through the
/// status subresource; an unchanged answer writes nothing.
#[allow(
    clippy::duplicated_attributes,
    reason = "each printcolumn of the kube derive repeats type_"
)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "informant.dev",
    version = "v1alpha1",
    kind = "Controller",
    namespaced,
    status = "ControllerStatus",
    shortname = "ctl",
    derive = "PartialEq",
    doc = "A Controller: an operator written as a hook (exec or webhook) that informant runs.",
    category = "informant",
    printcolumn(
        name = "Valid",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status",
        description = "whether the spec passed validation"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "whether the controller runs on the leader"
    ),
    printcolumn(
        name = "Reconciles",
        type_ = "integer",
        json_path = ".status.reconciles",
        description = "hook calls since the controller started"
    ),
    printcolumn(
        name = "Failures",
        type_ = "integer",
        json_path = ".status.failures",
        description = "failed hook calls since the controller started"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControllerSpec {
    /// The kind this controller reconciles: the hook is called for each of its objects the
    /// cache holds, when it or one of its children changes.
    #[serde(rename = "for")]
    pub for_: ForSpec,

    /// Kinds of the children: objects of these kinds whose controller owner reference names a
    /// reconciled object are sent to the hook under `children`, trigger a reconcile of their
    /// owner when they change, and are the kinds the hook may return in `children`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owns: Option<Vec<KindSpec>>,

    /// Kinds of related objects: every object of these kinds in the reconciled object's
    /// namespace is sent to the hook under `related`, and a change of one reconciles every
    /// object of this controller in its namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watches: Option<Vec<KindSpec>>,

    /// The hook: exactly one of `exec` or `webhook`.
    pub hook: HookSpec,

    /// How many hook calls run at once (never two for the same object). Default 1
    /// (controller-runtime's `MaxConcurrentReconciles`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub concurrency: Option<u16>,

    /// How often every object is reconciled even when nothing changed (a Go duration such as
    /// `10m`). Default: never (the hook can ask with `requeueAfterSeconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resync_period: Option<String>,

    /// Hold each object with the finalizer `hooks.informant.dev/<namespace>.<name>` (of this
    /// Controller) so that, once it is deleted, the hook is called with `finalizing: true`
    /// until it answers `finalized: true`; then the finalizer is removed and the object goes.
    /// Default `false` (the hook may never see a deletion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalize: Option<bool>,
}

/// The reconciled kind, and which of its objects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForSpec {
    /// API version of the kind, e.g. `batch/v1`.
    pub api_version: String,
    /// The kind, e.g. `CronJob`.
    pub kind: String,
    /// Only objects whose labels match (Kubernetes selector syntax). Default: every object
    /// the cache holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
    /// Only objects whose fields match (e.g. `metadata.name=hello`). Default: every object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<String>,
}

/// A kind, by API version and kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KindSpec {
    /// API version of the kind, e.g. `batch/v1`.
    pub api_version: String,
    /// The kind, e.g. `Job`.
    pub kind: String,
}

/// The hook: exactly one of `exec` or `webhook`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookSpec {
    /// Run a command: the request on its standard input, the response on its standard output
    /// (standard error is logged). A non-zero exit, a timeout or malformed JSON is a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecHookSpec>,
    /// POST the request to a URL; the response body is the answer. A non-2xx status, a
    /// timeout or malformed JSON is a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookSpec>,
}

/// A hook run as a command.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecHookSpec {
    /// The program and its arguments (no shell), e.g. `[python3, hooks/cronjob.py]`.
    pub command: Vec<String>,
    /// How long a call may take before the process is killed (a Go duration). Default `10s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// A hook called over HTTP.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookSpec {
    /// The URL the request is posted to (`http://...`), e.g. `http://hooks.ops:8080/sync`.
    pub url: String,
    /// How long a call may take (a Go duration). Default `10s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// Condition type: the spec passed validation (`True`) or not (`False`, every error in the
/// message; the previous valid spec keeps running).
pub const CONTROLLER_CONDITION_VALID: &str = "Valid";

/// Condition type: the controller runs (on the leader) and its informers synced.
pub const CONTROLLER_CONDITION_READY: &str = "Ready";

/// Observed state of a `Controller`, written by the manager.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControllerStatus {
    /// The `metadata.generation` the rest of this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Valid` and `Ready` conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Hook calls since the controller (re)started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciles: Option<i64>,
    /// Failed hook calls since the controller (re)started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failures: Option<i64>,
    /// The last hook failure, with the object it was about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// A `Controller` that is not valid: every problem, each with its field path.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{origin}: invalid controller ({} error{}):{}", errors.len(), if errors.len() == 1 { "" } else { "s" }, bullets(errors))]
pub struct ControllerError {
    /// Where the document came from.
    pub origin: Origin,
    /// Every problem found.
    pub errors: Vec<FieldError>,
}

fn bullets(errors: &[FieldError]) -> String {
    let mut out = String::new();
    for e in errors {
        out.push_str("\n  ");
        out.push_str(&e.to_string());
    }
    out
}

/// How the manager calls a hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hook {
    /// Run `command` (program and arguments), killed after `timeout`.
    Exec {
        /// Program and arguments.
        command: Vec<String>,
        /// How long a call may take.
        timeout: Duration,
    },
    /// POST to `url`, abandoned after `timeout`.
    Webhook {
        /// The URL.
        url: String,
        /// How long a call may take.
        timeout: Duration,
    },
}

/// A valid `Controller` as typed settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ControllerSettings {
    /// `metadata.namespace/metadata.name`: the field manager of the children and the metrics
    /// label.
    pub name: String,
    /// The reconciled kind.
    pub for_kind: GroupVersionKind,
    /// Only objects whose labels match.
    pub label_selector: Option<LabelSelector>,
    /// Only objects whose fields match.
    pub field_selector: Option<FieldSelector>,
    /// Child kinds.
    pub owns: Vec<GroupVersionKind>,
    /// Related kinds.
    pub watches: Vec<GroupVersionKind>,
    /// The hook.
    pub hook: Hook,
    /// Hook calls at once.
    pub concurrency: u16,
    /// Periodic reconcile, if any.
    pub resync_period: Option<Duration>,
    /// The finalizer held on each object (`spec.finalize`), if any.
    pub finalizer: Option<String>,
}

/// The prefix of the finalizer of a `Controller` with `finalize: true`, followed by
/// `<namespace>.<name>`.
pub const FINALIZER_PREFIX: &str = "hooks.informant.dev/";

/// A valid `Controller` and its typed settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidatedController {
    /// The resource as loaded.
    pub resource: Controller,
    /// What the manager runs.
    pub settings: ControllerSettings,
}

/// Validates a `Controller` document (a file's document or an object from the cluster) against
/// its schema, and its kinds against `cache` (the active `CacheConfig`'s options; `None`
/// skips that check).
///
/// # Errors
/// Every problem, with its field path.
pub fn validate_controller_value(
    mut value: Value,
    origin: &Origin,
    cache: Option<&cache::Options>,
) -> Result<ValidatedController, ControllerError> {
    let mut errors = Vec::new();
    let status = value
        .as_object_mut()
        .and_then(|m| m.remove("status"))
        .and_then(|s| serde_json::from_value::<ControllerStatus>(s).ok());
    let schema = root_schema();
    super::structure::check(&mut value, &schema, &FieldPath::default(), &mut errors);
    if !errors.is_empty() {
        return Err(ControllerError {
            origin: origin.clone(),
            errors,
        });
    }
    let mut resource: Controller = match serde_json::from_value(value) {
        Ok(r) => r,
        Err(e) => {
            return Err(ControllerError {
                origin: origin.clone(),
                errors: vec![FieldError::new(
                    &FieldPath::default(),
                    format!("{e}; fix the document"),
                )],
            });
        }
    };
    resource.status = status;
    match validate_controller(&resource, cache) {
        Ok(settings) => Ok(ValidatedController { resource, settings }),
        Err(errors) => Err(ControllerError {
            origin: origin.clone(),
            errors,
        }),
    }
}

/// The CRD's schema of the whole object, with the fields every object has.
fn root_schema()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
    let mut schema = Controller::crd()
        .spec
        .versions
        .into_iter()
        .next()
        .and_then(|v| v.schema)
        .and_then(|s| s.open_api_v3_schema)
        .unwrap_or_default();
    let string = JSONSchemaProps {
        type_: Some("string".to_owned()),
        ..JSONSchemaProps::default()
    };
    let object = JSONSchemaProps {
        type_: Some("object".to_owned()),
        x_kubernetes_preserve_unknown_fields: Some(true),
        ..JSONSchemaProps::default()
    };
    let props = schema.properties.get_or_insert_with(Default::default);
    props.insert("apiVersion".to_owned(), string.clone());
    props.insert("kind".to_owned(), string);
    props.insert("metadata".to_owned(), object);
    props.remove("status");
    schema
}

/// Validates a decoded `Controller` into settings, or returns every problem.
///
/// # Errors
/// Every problem, with its field path and a fix.
pub fn validate_controller(
    resource: &Controller,
    cache: Option<&cache::Options>,
) -> Result<ControllerSettings, Vec<FieldError>> {
    let mut errors = Vec::new();
    let meta = &resource.metadata;
    let name = meta.name.clone().unwrap_or_default();
    match dns1123_subdomain_problem(&name) {
        _ if name.is_empty() => errors.push(FieldError::new(
            &FieldPath::root("metadata").field("name"),
            "required; name the controller, e.g. `name: cronjob-watch`",
        )),
        Some(problem) => errors.push(FieldError::new(
            &FieldPath::root("metadata").field("name"),
            format!("invalid name {name:?}: {problem}; use lowercase letters, digits, '-' and '.'"),
        )),
        None => {}
    }
    let spec = &resource.spec;
    let path = FieldPath::root("spec");
    let for_path = path.field("for");
    let for_kind = kind(
        &spec.for_.api_version,
        &spec.for_.kind,
        &for_path,
        &mut errors,
    );
    let (label_selector, field_selector) = selectors(&spec.for_, &for_path, &mut errors);
    let mut kinds_of = |list: Option<&Vec<KindSpec>>, field: &str| -> Vec<GroupVersionKind> {
        let list_path = path.field(field);
        let mut out: Vec<GroupVersionKind> = Vec::new();
        for (i, k) in list.into_iter().flatten().enumerate() {
            let p = list_path.index(i);
            if let Some(gvk) = kind(&k.api_version, &k.kind, &p, &mut errors) {
                if out.contains(&gvk) {
                    errors.push(FieldError::new(
                        &p,
                        format!("{} {} is listed twice; remove one", k.api_version, k.kind),
                    ));
                } else {
                    out.push(gvk);
                }
            }
        }
        out
    };
    let owns = kinds_of(spec.owns.as_ref(), "owns");
    let watches = kinds_of(spec.watches.as_ref(), "watches");
    let hook = hook(&spec.hook, &path.field("hook"), &mut errors);
    let resync_period = spec.resync_period.as_deref().and_then(|text| {
        parse_duration(text)
            .map_err(|e| {
                errors.push(FieldError::new(
                    &path.field("resyncPeriod"),
                    format!("{e}; write a Go duration such as 10m"),
                ));
            })
            .ok()
            .filter(|d| !d.is_zero())
    });
    if spec.concurrency == Some(0) {
        errors.push(FieldError::new(
            &path.field("concurrency"),
            "must be at least 1; remove it for the default of 1",
        ));
    }
    let namespace = meta.namespace.as_deref().unwrap_or("default");
    let finalizer = format!("{FINALIZER_PREFIX}{namespace}.{name}");
    if spec.finalize == Some(true) && finalizer.len() - FINALIZER_PREFIX.len() > 63 {
        errors.push(FieldError::new(
            &path.field("finalize"),
            format!(
                "the finalizer name {namespace}.{name} is longer than 63 characters; shorten \
                 the controller's name"
            ),
        ));
    }
    if let (Some(options), Some(for_kind)) = (cache, &for_kind) {
        check_cached(options, for_kind, &for_path, &mut errors);
        for (i, gvk) in owns.iter().enumerate() {
            check_cached(options, gvk, &path.field("owns").index(i), &mut errors);
        }
        for (i, gvk) in watches.iter().enumerate() {
            check_cached(options, gvk, &path.field("watches").index(i), &mut errors);
        }
    }
    match (for_kind, hook) {
        (Some(for_kind), Some(hook)) if errors.is_empty() => Ok(ControllerSettings {
            name: format!("{}/{name}", meta.namespace.as_deref().unwrap_or("default")),
            for_kind,
            label_selector,
            field_selector,
            owns,
            watches,
            hook,
            concurrency: spec.concurrency.unwrap_or(1),
            resync_period,
            finalizer: (spec.finalize == Some(true)).then_some(finalizer),
        }),
        _ => Err(errors),
    }
}

/// The `for` selectors, parsed.
fn selectors(
    spec: &ForSpec,
    for_path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> (Option<LabelSelector>, Option<FieldSelector>) {
    let label_selector = spec.label_selector.as_deref().and_then(|s| {
        LabelSelector::parse(s)
            .map_err(|e| {
                errors.push(FieldError::new(
                    &for_path.field("labelSelector"),
                    format!("{e}; write requirements such as app=web, tier!=db"),
                ));
            })
            .ok()
    });
    let field_selector = spec.field_selector.as_deref().and_then(|s| {
        FieldSelector::parse(s)
            .map_err(|e| {
                errors.push(FieldError::new(
                    &for_path.field("fieldSelector"),
                    format!("{e}; write terms such as metadata.name=x"),
                ));
            })
            .ok()
    });
    (label_selector, field_selector)
}

fn kind(
    api_version: &str,
    kind: &str,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> Option<GroupVersionKind> {
    let gv = if api_version.is_empty() {
        errors.push(FieldError::new(
            &path.field("apiVersion"),
            "required; set the kind's API version, e.g. v1 or batch/v1",
        ));
        None
    } else if let Some(problem) = api_version_problem(api_version) {
        errors.push(FieldError::new(
            &path.field("apiVersion"),
            format!(
                "invalid API version {api_version:?}: {problem}; write v1 or <group>/<version>"
            ),
        ));
        None
    } else {
        api_version.parse::<GroupVersion>().ok()
    };
    if kind.is_empty()
        || !kind.starts_with(|c: char| c.is_ascii_uppercase())
        || !kind.chars().all(|c| c.is_ascii_alphanumeric())
    {
        errors.push(FieldError::new(
            &path.field("kind"),
            format!("invalid kind {kind:?}: write it as in the object's `kind`, e.g. CronJob"),
        ));
        return None;
    }
    gv.map(|gv| GroupVersionKind::gvk(&gv.group, &gv.version, kind))
}

fn hook(spec: &HookSpec, path: &FieldPath, errors: &mut Vec<FieldError>) -> Option<Hook> {
    let mut timeout = |text: Option<&str>, path: FieldPath| match text {
        None => Some(DEFAULT_HOOK_TIMEOUT),
        Some(t) => match parse_duration(t) {
            Ok(d) if !d.is_zero() => Some(d),
            Ok(_) => {
                errors.push(FieldError::new(
                    &path,
                    "must be more than 0; remove it for the default of 10s",
                ));
                None
            }
            Err(e) => {
                errors.push(FieldError::new(
                    &path,
                    format!("{e}; write a Go duration such as 10s"),
                ));
                None
            }
        },
    };
    match (&spec.exec, &spec.webhook) {
        (Some(exec), None) => {
            let timeout = timeout(exec.timeout.as_deref(), path.field("exec").field("timeout"));
            if exec.command.first().is_none_or(String::is_empty) {
                errors.push(FieldError::new(
                    &path.field("exec").field("command"),
                    "required; name the program and its arguments, e.g. [python3, hooks/sync.py]",
                ));
                return None;
            }
            Some(Hook::Exec {
                command: exec.command.clone(),
                timeout: timeout?,
            })
        }
        (None, Some(webhook)) => {
            let timeout = timeout(
                webhook.timeout.as_deref(),
                path.field("webhook").field("timeout"),
            );
            if !webhook.url.starts_with("http://") || webhook.url.len() <= "http://".len() {
                errors.push(FieldError::new(
                    &path.field("webhook").field("url"),
                    format!(
                        "invalid URL {:?}: write http://<host>[:<port>]/<path>",
                        webhook.url
                    ),
                ));
                return None;
            }
            Some(Hook::Webhook {
                url: webhook.url.clone(),
                timeout: timeout?,
            })
        }
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                path,
                "set exactly one of exec or webhook, not both",
            ));
            None
        }
        (None, None) => {
            errors.push(FieldError::new(
                path,
                "required; set exec: {command: [...]} or webhook: {url: ...}",
            ));
            None
        }
    }
}

/// Whether the cache planned from `options` serves `gvk`; if not, an error saying which
/// `CacheConfig` setting to change.
fn check_cached(
    options: &cache::Options,
    gvk: &GroupVersionKind,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) {
    let Ok(plan) = Plan::new(options) else {
        return;
    };
    let api_version = if gvk.group.is_empty() {
        gvk.version.clone()
    } else {
        format!("{}/{}", gvk.group, gvk.version)
    };
    if plan.reader_fail_on_missing_informer() {
        if !plan.by_object_kinds().contains(gvk) {
            errors.push(FieldError::new(
                path,
                format!(
                    "{api_version} {} is not cached: the active CacheConfig sets \
                     readerFailOnMissingInformer and does not list the kind in spec.byObject; add \
                     {{apiVersion: {api_version}, kind: {}}} to the CacheConfig's spec.byObject \
                     (`informant explain` shows which cache serves each kind)",
                    gvk.kind, gvk.kind
                ),
            ));
        }
        return;
    }
    let namespaced = !matches!(builtin_scope(gvk), Some(cache::Scope::Cluster));
    match plan.route(gvk, namespaced, None, None) {
        // A kind cached in a list of namespaces (a multi-namespace cache) refuses a list across
        // all of them, but the controller reads each object in its own namespace: served.
        Ok(_) | Err(cache::Error::UnknownNamespaceList { .. }) => {}
        Err(e) => {
            errors.push(FieldError::new(
                path,
                format!(
                    "{api_version} {} is not served by the active CacheConfig's cache: {e}; change \
                 the CacheConfig's spec.defaultNamespaces or spec.byObject (`informant explain` \
                 shows which cache serves each kind)",
                    gvk.kind
                ),
            ));
        }
    }
}

/// Splits a YAML text of one or more documents (`---`) into JSON values, skipping empty ones.
///
/// # Errors
/// The parser's message, with line and column, when a document is not YAML.
pub fn split_documents(text: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|e| e.to_string())?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// The `namespace/name` a `Controller` document is known by (namespace `default` when it
/// has none), also for an invalid one.
#[must_use]
pub fn controllers_key(document: &Value) -> String {
    let text = |field: &str| document["metadata"][field].as_str().unwrap_or_default();
    let namespace = Some(text("namespace"))
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    format!("{namespace}/{}", text("name"))
}

/// The `kind` of a document, if it has one.
#[must_use]
pub fn document_kind(document: &Value) -> Option<&str> {
    document.get("kind").and_then(Value::as_str)
}

/// Every `Controller` document of a multi-document YAML text, validated against `cache`, with
/// its index among the documents.
///
/// # Errors
/// The parser's message when the text is not YAML.
pub fn controllers_in(
    text: &str,
    origin: &Origin,
    cache: Option<&cache::Options>,
) -> Result<Vec<Result<ValidatedController, ControllerError>>, String> {
    Ok(split_documents(text)?
        .into_iter()
        .filter(|d| document_kind(d) == Some("Controller"))
        .map(|d| validate_controller_value(d, origin, cache))
        .collect())
}

/// The `Controller` CRD as YAML, exactly as `crds/controllers.informant.dev.yaml` holds it.
///
/// # Errors
/// If YAML rendering fails (it does not for this static type).
pub fn controller_crd_yaml() -> Result<String, serde_yaml::Error> {
    super::yaml::render(&Controller::crd())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(yaml: &str) -> Value {
        serde_yaml::from_str(yaml).unwrap()
    }

    const GOOD: &str = "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: cronjob-watch, namespace: ops}
spec:
  for: {apiVersion: batch/v1, kind: CronJob}
  owns: [{apiVersion: batch/v1, kind: Job}]
  hook: {exec: {command: [python3, hook.py], timeout: 5s}}
  concurrency: 4
";

    #[test]
    fn a_valid_controller_becomes_settings() {
        let v = validate_controller_value(value(GOOD), &Origin::Text, None).unwrap();
        assert_eq!(v.settings.name, "ops/cronjob-watch");
        assert_eq!(
            v.settings.for_kind,
            GroupVersionKind::gvk("batch", "v1", "CronJob")
        );
        assert_eq!(
            v.settings.owns,
            [GroupVersionKind::gvk("batch", "v1", "Job")]
        );
        assert_eq!(v.settings.concurrency, 4);
        assert_eq!(
            v.settings.hook,
            Hook::Exec {
                command: vec!["python3".into(), "hook.py".into()],
                timeout: Duration::from_secs(5)
            }
        );
    }

    #[test]
    fn every_error_is_reported_at_once_with_its_path() {
        let bad = "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: x, namespace: ops}
spec:
  for: {apiVersion: batch/v1/x, kind: cronjob, labelSelector: 'a=('}
  owns: [{apiVersion: batch/v1, kind: Job}, {apiVersion: batch/v1, kind: Job}]
  hook: {exec: {command: [], timeout: forever}}
  resyncPeriod: soon
";
        let e = validate_controller_value(value(bad), &Origin::Text, None).unwrap_err();
        let paths: Vec<String> = e.errors.iter().map(|e| e.path.to_string()).collect();
        assert_eq!(
            paths,
            [
                "spec.for.apiVersion",
                "spec.for.kind",
                "spec.for.labelSelector",
                "spec.owns[1]",
                "spec.hook.exec.timeout",
                "spec.hook.exec.command",
                "spec.resyncPeriod",
            ],
            "{e}"
        );
    }

    #[test]
    fn unknown_fields_are_reported_at_their_path() {
        let e = validate_controller_value(
            value(&GOOD.replace("concurrency: 4", "concurency: 4")),
            &Origin::Text,
            None,
        )
        .unwrap_err();
        assert_eq!(e.errors[0].path.to_string(), "spec.concurency", "{e}");
    }

    #[test]
    fn a_kind_the_cache_refuses_names_the_setting_to_change() {
        let options = crate::config::load_str(
            "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: c}
spec:
  readerFailOnMissingInformer: true
  byObject: [{apiVersion: batch/v1, kind: CronJob}]
",
        )
        .unwrap()
        .cache;
        let e = validate_controller_value(value(GOOD), &Origin::Text, Some(&options)).unwrap_err();
        assert_eq!(e.errors.len(), 1, "{e}");
        assert_eq!(e.errors[0].path.to_string(), "spec.owns[0]");
        assert!(
            e.errors[0].message.contains(
                "add {apiVersion: batch/v1, kind: Job} to the CacheConfig's spec.byObject"
            ),
            "{e}"
        );
    }

    #[test]
    fn multi_document_files_yield_their_controllers() {
        let text = format!(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: c}}\nspec: {{}}\n---\n{GOOD}---\n"
        );
        let controllers = controllers_in(&text, &Origin::Text, None).unwrap();
        assert_eq!(controllers.len(), 1);
        assert!(controllers[0].is_ok());
    }
}
