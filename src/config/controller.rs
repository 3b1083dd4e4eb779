//! The `Controller` custom resource: an operator written as a hook (an executable or a
//! webhook, in any language) that the manager calls with an object and its children from the
//! cache tree, and whose answer (events, children, status) the manager writes.
//!
//! Validation reports every problem at once with its field path, as for a `CacheConfig`, and
//! checks the kinds against the active cache plan: a controller on a kind the cache would
//! refuse to read is an error that says which `CacheConfig` setting to change.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
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

    /// Kinds of related objects: the objects of these kinds that map to the reconciled
    /// object (by default every one in its namespace; see `mapTo`) are sent to the hook under
    /// `related`, and a change of one reconciles the objects it maps to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watches: Option<Vec<WatchSpec>>,

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

/// A kind of related objects, and which reconciled objects each of them is about.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WatchSpec {
    /// API version of the kind, e.g. `v1`.
    pub api_version: String,
    /// The kind, e.g. `ConfigMap`.
    pub kind: String,
    /// Which reconciled objects a related object maps to: exactly one of `sameName` or
    /// `annotation`. Default: every reconciled object in the related object's namespace
    /// (every one, for a cluster-scoped related kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_to: Option<MapToSpec>,
}

/// Which reconciled objects a related object maps to (like a controller-runtime
/// `handler.EnqueueRequestsFromMapFunc`, declared): exactly one field.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MapToSpec {
    /// `true`: the reconciled object with the related object's namespace and name (a
    /// `ConfigMap` `web` configures the object `web`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_name: Option<bool>,
    /// An annotation key, e.g. `informant.dev/for`: the related object names the reconciled
    /// objects it is about in this annotation, comma-separated, each `name` (in the related
    /// object's namespace) or `namespace/name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation: Option<String>,
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
    /// For each related kind (same order as `watches`), which reconciled objects its objects
    /// map to.
    pub map_to: Vec<MapTo>,
    /// The hook.
    pub hook: Hook,
    /// Hook calls at once.
    pub concurrency: u16,
    /// Periodic reconcile, if any.
    pub resync_period: Option<Duration>,
    /// The finalizer held on each object (`spec.finalize`), if any.
    pub finalizer: Option<String>,
}

/// Which reconciled objects a related object maps to (`spec.watches[].mapTo`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MapTo {
    /// Every reconciled object in the related object's namespace (every one, for a
    /// cluster-scoped related object).
    #[default]
    Namespace,
    /// The reconciled object with the related object's namespace and name.
    SameName,
    /// The reconciled objects the related object's annotation with this key names
    /// (comma-separated `name` or `namespace/name`).
    Annotation(String),
}

impl MapTo {
    /// Whether the related object `related` maps to the reconciled object `object`.
    #[must_use]
    pub fn maps(&self, related: &ObjectMeta, object: &ObjectMeta) -> bool {
        match self {
            MapTo::Namespace => {
                related.namespace.is_none() || related.namespace == object.namespace
            }
            MapTo::SameName => related.namespace == object.namespace && related.name == object.name,
            MapTo::Annotation(key) => {
                let Some(value) = related.annotations.as_ref().and_then(|a| a.get(key)) else {
                    return false;
                };
                value.split(',').map(str::trim).any(|entry| {
                    let (namespace_matches, name) = match entry.split_once('/') {
                        Some((namespace, name)) => {
                            (object.namespace.as_deref() == Some(namespace), name)
                        }
                        // A plain name: in the related object's namespace, or a
                        // cluster-scoped object.
                        None => (
                            object.namespace.is_none() || object.namespace == related.namespace,
                            entry,
                        ),
                    };
                    namespace_matches && !name.is_empty() && object.name.as_deref() == Some(name)
                })
            }
        }
    }
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

/// The CRD's schema of the whole object, with the fields every object has (no `status`: a
/// document's status is read apart).
fn root_schema()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps {
    let mut schema = super::load::document_schema(Controller::crd());
    if let Some(props) = schema.properties.as_mut() {
        props.remove("status");
    }
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
    let (owns, watches, map_to) = owned_and_watched(spec, &path, &mut errors);
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
            map_to,
            hook,
            concurrency: spec.concurrency.unwrap_or(1),
            resync_period,
            finalizer: (spec.finalize == Some(true)).then_some(finalizer),
        }),
        _ => Err(errors),
    }
}

/// The kinds of `owns`, and of `watches` with their `mapTo`, each listed once.
fn owned_and_watched(
    spec: &ControllerSpec,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> (Vec<GroupVersionKind>, Vec<GroupVersionKind>, Vec<MapTo>) {
    let owns = kinds_once(
        spec.owns
            .iter()
            .flatten()
            .map(|k| (k.api_version.as_str(), k.kind.as_str())),
        &path.field("owns"),
        errors,
    )
    .into_iter()
    .map(|(_, gvk)| gvk)
    .collect();
    let watch_specs: Vec<&WatchSpec> = spec.watches.iter().flatten().collect();
    let listed = kinds_once(
        watch_specs
            .iter()
            .map(|w| (w.api_version.as_str(), w.kind.as_str())),
        &path.field("watches"),
        errors,
    );
    let (watches, map_to) = listed
        .into_iter()
        .map(|(i, gvk)| {
            let map_to = map_to(
                watch_specs[i].map_to.as_ref(),
                &path.field("watches").index(i).field("mapTo"),
                errors,
            );
            (gvk, map_to)
        })
        .unzip();
    (owns, watches, map_to)
}

/// The kinds of a list, each with its index; a kind listed twice is an error.
fn kinds_once<'a>(
    list: impl Iterator<Item = (&'a str, &'a str)>,
    list_path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> Vec<(usize, GroupVersionKind)> {
    let mut out: Vec<(usize, GroupVersionKind)> = Vec::new();
    for (i, (api_version, k)) in list.enumerate() {
        let p = list_path.index(i);
        if let Some(gvk) = kind(api_version, k, &p, errors) {
            if out.iter().any(|(_, known)| *known == gvk) {
                errors.push(FieldError::new(
                    &p,
                    format!("{api_version} {k} is listed twice; remove one"),
                ));
            } else {
                out.push((i, gvk));
            }
        }
    }
    out
}

/// A watch's `mapTo`, checked: exactly one of `sameName: true` or `annotation: <key>`.
fn map_to(spec: Option<&MapToSpec>, path: &FieldPath, errors: &mut Vec<FieldError>) -> MapTo {
    let Some(spec) = spec else {
        return MapTo::Namespace;
    };
    match (spec.same_name, spec.annotation.as_deref()) {
        (Some(true), None) => MapTo::SameName,
        (Some(false), None) => {
            errors.push(FieldError::new(
                &path.field("sameName"),
                "false maps to nothing; remove mapTo to reconcile every object of the namespace",
            ));
            MapTo::Namespace
        }
        (None, Some(key)) => {
            if let Some(problem) = annotation_key_problem(key) {
                errors.push(FieldError::new(
                    &path.field("annotation"),
                    format!(
                        "invalid annotation key {key:?}: {problem}; write [<prefix>/]<name>, \
                         e.g. informant.dev/for"
                    ),
                ));
            }
            MapTo::Annotation(key.to_owned())
        }
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                path,
                "set exactly one of sameName or annotation, not both",
            ));
            MapTo::Namespace
        }
        (None, None) => {
            errors.push(FieldError::new(
                path,
                "set sameName: true or annotation: <key>, or remove mapTo to reconcile every \
                 object of the namespace",
            ));
            MapTo::Namespace
        }
    }
}

/// Why `key` is not a Kubernetes annotation key (a qualified name: an optional DNS subdomain
/// prefix and `/`, then a name of at most 63 alphanumerics, `-`, `_` or `.`, starting and
/// ending with an alphanumeric), or `None`.
fn annotation_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(problem) = prefix.and_then(dns1123_subdomain_problem) {
        return Some(format!("its prefix {problem}"));
    }
    let alphanumeric = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if name.is_empty()
        || name.len() > 63
        || !alphanumeric(name.chars().next())
        || !alphanumeric(name.chars().last())
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Some(
            "its name must be 1 to 63 letters, digits, '-', '_' or '.', starting and ending \
             with a letter or digit"
                .to_owned(),
        );
    }
    None
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
        Ok(_) => {}
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

    fn meta(namespace: Option<&str>, name: &str, annotation: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            namespace: namespace.map(str::to_owned),
            name: Some(name.to_owned()),
            annotations: annotation
                .map(|a| [("informant.dev/for".to_owned(), a.to_owned())].into()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn map_to_names_which_objects_a_related_object_reconciles() {
        let web = meta(Some("ops"), "web", None);
        let db = meta(Some("ops"), "db", None);
        let other_namespace = meta(Some("dev"), "web", None);
        let cluster = meta(None, "web", None);
        let plain = meta(Some("ops"), "web", None);
        assert!(MapTo::Namespace.maps(&plain, &web) && MapTo::Namespace.maps(&plain, &db));
        assert!(!MapTo::Namespace.maps(&plain, &other_namespace));
        assert!(MapTo::Namespace.maps(&meta(None, "node", None), &other_namespace));
        assert!(MapTo::SameName.maps(&plain, &web));
        assert!(
            !MapTo::SameName.maps(&plain, &db) && !MapTo::SameName.maps(&plain, &other_namespace)
        );
        let by = MapTo::Annotation("informant.dev/for".to_owned());
        let names = meta(Some("ops"), "cfg", Some("web, dev/web"));
        assert!(by.maps(&names, &web) && by.maps(&names, &other_namespace));
        assert!(
            by.maps(&names, &cluster),
            "a plain name also names a cluster-scoped object"
        );
        assert!(!by.maps(&names, &db));
        assert!(!by.maps(&plain, &web), "no annotation maps to nothing");
        assert!(!by.maps(&meta(Some("ops"), "cfg", Some("")), &web));
    }

    #[test]
    fn map_to_is_validated_with_its_path() {
        let spec = |map_to: &str| {
            format!(
                "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: x, namespace: ops}}
spec:
  for: {{apiVersion: batch/v1, kind: CronJob}}
  watches:
    - {{apiVersion: v1, kind: Secret}}
    - {{apiVersion: v1, kind: ConfigMap, mapTo: {map_to}}}
  hook: {{exec: {{command: [x]}}}}
"
            )
        };
        let ok = |map_to: &str| {
            validate_controller_value(value(&spec(map_to)), &Origin::Text, None)
                .map(|v| v.settings.map_to)
        };
        assert_eq!(
            ok("{sameName: true}").unwrap(),
            [MapTo::Namespace, MapTo::SameName]
        );
        assert_eq!(
            ok("{annotation: informant.dev/for}").unwrap(),
            [
                MapTo::Namespace,
                MapTo::Annotation("informant.dev/for".to_owned())
            ]
        );
        for (bad, path, message) in [
            (
                "{}",
                "spec.watches[1].mapTo",
                "set sameName: true or annotation",
            ),
            (
                "{sameName: false}",
                "spec.watches[1].mapTo.sameName",
                "false maps to nothing",
            ),
            (
                "{sameName: true, annotation: a}",
                "spec.watches[1].mapTo",
                "exactly one",
            ),
            (
                "{annotation: 'x/-y'}",
                "spec.watches[1].mapTo.annotation",
                "invalid annotation key",
            ),
            (
                "{annotation: 'A_B/y'}",
                "spec.watches[1].mapTo.annotation",
                "its prefix",
            ),
            (
                "{nameFrom: x}",
                "spec.watches[1].mapTo.nameFrom",
                "unknown field",
            ),
        ] {
            let errors = ok(bad).unwrap_err().errors;
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert_eq!(errors[0].path.to_string(), path, "{bad}");
            assert!(
                errors[0].message.contains(message),
                "{bad}: {}",
                errors[0].message
            );
        }
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
    fn a_kind_cached_in_a_list_of_namespaces_is_served() {
        // The demo's config: the kinds cached in team-a only (a multi-namespace cache, which
        // refuses a list across all namespaces but serves each object's own namespace).
        let options = crate::config::load_str(
            "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: c}
spec:
  byObject:
    - {apiVersion: batch/v1, kind: CronJob, namespaces: {team-a: {}}}
    - {apiVersion: batch/v1, kind: Job, namespaces: {team-a: {}}}
",
        )
        .unwrap()
        .cache;
        validate_controller_value(value(GOOD), &Origin::Text, Some(&options)).unwrap();
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
