//! Validation of a `Controller`: its schema, its values, and its kinds against the active
//! cache plan, every problem at once with its field path.

use std::time::Duration;

use kube::CustomResourceExt;
use kube::core::{GroupVersion, GroupVersionKind};
use serde_json::Value;

use super::types::{
    Controller, ControllerError, ControllerKey, ControllerSettings, ControllerSpec,
    ControllerStatus, DEFAULT_HOOK_TIMEOUT, FINALIZER_PREFIX, ForSpec, Hook, HookSpec,
    MAX_CONCURRENCY, MapTo, MapToSpec, ValidatedController, WatchSpec, WebhookSpec, WebhookTls,
};
use crate::cache::{self, Plan, builtin_scope};
use crate::config::{
    self, FieldError, FieldPath, Origin, api_version_problem, dns1123_subdomain_problem,
    parse_duration,
};
use crate::hooks::policy::Target;
use crate::selector::{FieldSelector, LabelSelector};

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
    config::check_schema(&mut value, &schema, &FieldPath::default(), &mut errors);
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
    let mut schema = config::document_schema(Controller::crd());
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
    let resync_period = period(
        spec.resync_period.as_deref(),
        &path.field("resyncPeriod"),
        "10m",
        &mut errors,
    );
    let timeout = period(
        spec.timeout.as_deref(),
        &path.field("timeout"),
        "2m",
        &mut errors,
    );
    let schedule = crate::hooks::schedule::validate(spec, &path, &mut errors);
    let admission = super::admission::validate(
        spec.admission.as_deref(),
        hook.as_ref(),
        (meta.namespace.as_deref().unwrap_or("default"), &name),
        &path.field("admission"),
        &mut errors,
        self::hook,
    );
    let conversion = super::conversion::validate(
        spec.conversion.as_ref(),
        for_kind.as_ref(),
        hook.as_ref(),
        &path.field("conversion"),
        &mut errors,
        self::hook,
    );
    concurrency(spec.concurrency, &path.field("concurrency"), &mut errors);
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
            key: ControllerKey::new(meta.namespace.as_deref().unwrap_or("default"), &name),
            for_kind,
            label_selector,
            field_selector,
            owns,
            watches,
            map_to,
            hook,
            concurrency: spec.concurrency.unwrap_or(1),
            resync_period,
            timeout,
            finalizer: (spec.finalize == Some(true)).then_some(finalizer),
            schedule,
            admission,
            conversion,
        }),
        _ => Err(errors),
    }
}

/// An optional Go duration (at `path`): `None` when absent or zero (the setting is off); an
/// error naming `example` when it does not parse.
fn period(
    text: Option<&str>,
    path: &FieldPath,
    example: &str,
    errors: &mut Vec<FieldError>,
) -> Option<Duration> {
    let parsed = parse_duration(text?)
        .map_err(|e| {
            errors.push(FieldError::new(
                path,
                format!("{e}; write a Go duration such as {example}"),
            ));
        })
        .ok()?;
    (!parsed.is_zero()).then_some(parsed)
}

/// Validates `concurrency` (at `path`): at least 1, at most [`MAX_CONCURRENCY`].
fn concurrency(concurrency: Option<u16>, path: &FieldPath, errors: &mut Vec<FieldError>) {
    match concurrency {
        Some(0) => errors.push(FieldError::new(
            path,
            "must be at least 1; remove it for the default of 1",
        )),
        Some(n) if n > MAX_CONCURRENCY => errors.push(FieldError::new(
            path,
            format!(
                "{n} is over the most of {MAX_CONCURRENCY} (each call at once may hold a \
                 process and an answer of up to --hook-max-response-bytes); for more \
                 throughput, use exec.mode: persistent with callsPerProcess"
            ),
        )),
        _ => {}
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
            let mode = super::super::persistent::exec_mode(exec, &path.field("exec"), errors);
            let env = super::env::exec_env(&exec.env, &path.field("exec").field("env"), errors);
            if exec.command.first().is_none_or(String::is_empty) {
                errors.push(FieldError::new(
                    &path.field("exec").field("command"),
                    "required; name the program and its arguments, e.g. [python3, hooks/sync.py]",
                ));
                return None;
            }
            Some(mode?.hook(exec.command.clone(), env?, timeout?))
        }
        (None, Some(webhook)) => {
            let timeout = timeout(
                webhook.timeout.as_deref(),
                path.field("webhook").field("timeout"),
            );
            let webhook_path = path.field("webhook");
            let Some(target) = Target::of(&webhook.url) else {
                errors.push(FieldError::new(
                    &webhook_path.field("url"),
                    format!(
                        "invalid URL {:?}: write https://<host>[:<port>]/<path> (with caBundle) \
                         or http://<host>[:<port>]/<path>",
                        webhook.url
                    ),
                ));
                return None;
            };
            let tls = webhook_tls(webhook, target.https, &webhook_path, errors);
            Some(Hook::Webhook {
                url: webhook.url.clone(),
                timeout: timeout?,
                tls: tls?,
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

/// The TLS settings of a webhook: for `https://`, a `caBundle` of PEM certificates (required)
/// and an optional client certificate Secret; for `http://`, neither. `None` inside when the
/// URL is plain HTTP, `None` outside after an error.
#[allow(
    clippy::option_option,
    reason = "an error (outer None) differs from a plain http URL (inner None)"
)]
fn webhook_tls(
    webhook: &WebhookSpec,
    https: bool,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> Option<Option<WebhookTls>> {
    let secret = webhook
        .client_cert_secret_ref
        .as_ref()
        .map(|r| r.name.clone());
    if !https {
        let mut ok = true;
        if webhook.ca_bundle.is_some() {
            errors.push(FieldError::new(
                &path.field("caBundle"),
                "only for an https:// URL; remove it or write https://",
            ));
            ok = false;
        }
        if secret.is_some() {
            errors.push(FieldError::new(
                &path.field("clientCertSecretRef"),
                "only for an https:// URL; remove it or write https://",
            ));
            ok = false;
        }
        return ok.then_some(None);
    }
    if let Some(name) = &secret
        && let Some(problem) = dns1123_subdomain_problem(name)
    {
        errors.push(FieldError::new(
            &path.field("clientCertSecretRef").field("name"),
            format!("invalid Secret name {name:?}: {problem}"),
        ));
        return None;
    }
    let Some(bundle) = webhook.ca_bundle.as_deref() else {
        errors.push(FieldError::new(
            &path.field("caBundle"),
            "required for an https:// URL: the base64 of the PEM certificates of the CA that \
             signed the webhook's certificate (as an admission webhook's caBundle)",
        ));
        return None;
    };
    match ca_bundle(bundle) {
        Ok(pem) => Some(Some(WebhookTls {
            ca_bundle: pem,
            client_cert_secret: secret,
        })),
        Err(problem) => {
            errors.push(FieldError::new(&path.field("caBundle"), problem));
            None
        }
    }
}

/// The PEM text of a `caBundle` (base64 of PEM certificates), or what is wrong with it.
fn ca_bundle(text: &str) -> Result<Vec<u8>, String> {
    use base64::Engine as _;
    use tokio_rustls::rustls::pki_types::CertificateDer;
    use tokio_rustls::rustls::pki_types::pem::PemObject as _;
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let pem = base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|e| format!("not base64 ({e}); write the base64 of the PEM certificates"))?;
    let mut count = 0;
    for cert in CertificateDer::pem_slice_iter(&pem) {
        cert.map_err(|e| format!("not PEM certificates ({e})"))?;
        count += 1;
    }
    if count == 0 {
        return Err(
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----); write the base64 of the \
             CA's PEM certificates"
                .to_owned(),
        );
    }
    Ok(pem)
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
    let api_version = gvk.api_version();
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
    Ok(crate::yaml::documents(text)
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|d| crate::yaml::document_kind(d) == Some("Controller"))
        .map(|d| validate_controller_value(d, origin, cache))
        .collect())
}

/// The key a `Controller` document is known by (namespace `default` when it has none), also
/// for an invalid one.
#[must_use]
pub fn controllers_key(document: &Value) -> ControllerKey {
    let text = |field: &str| document["metadata"][field].as_str().unwrap_or_default();
    let namespace = Some(text("namespace"))
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    ControllerKey::new(namespace, text("name"))
}
