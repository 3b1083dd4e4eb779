//! Admission webhooks, called as kube-apiserver calls them: the `MutatingWebhookConfiguration`s
//! in name order (their webhooks in order, `reinvocationPolicy: IfNeeded` honoured), then the
//! `ValidatingWebhookConfiguration`s, for every create, update (PUT, patch, server-side apply)
//! and delete of any resource but the webhook configurations themselves
//! (`k8s.io/apiserver/pkg/admission/plugin/webhook/{mutating,validating,generic,predicates}`).
//!
//! Layout: `hooks` reads and validates the configurations, `matching` decides which webhooks a
//! request meets (rules, scope, selectors, with `conditions` evaluating the CEL
//! `matchConditions`), `call` posts the `AdmissionReview` and reads its
//! answer, `client` holds the HTTPS client and the service resolver.

mod call;
mod client;
mod conditions;
mod hooks;
mod matching;

use serde_json::{Value, json};

pub(crate) use client::{Resolver, client as webhook_client};
pub(crate) use hooks::{Endpoint, endpoint, validate_configuration};

use super::auth::User;
use super::registry::ResourceType;
use super::state::App;
use super::status::{ApiError, ApiResult};
use call::Called;
use hooks::{Hook, Kind};

/// An admission operation (`admission.Operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    /// `CREATE`.
    Create,
    /// `UPDATE`.
    Update,
    /// `DELETE`.
    Delete,
}

impl Operation {
    /// The wire name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }

    /// The `kind` of the options object the review carries (`CreateOptions`, ...).
    fn options_kind(self) -> &'static str {
        match self {
            Self::Create => "CreateOptions",
            Self::Update => "UpdateOptions",
            Self::Delete => "DeleteOptions",
        }
    }
}

/// What admission is asked about: kube-apiserver's `admission.Attributes`.
#[derive(Debug, Clone)]
pub(crate) struct Attributes<'a> {
    /// The operation.
    pub operation: Operation,
    /// The addressed resource.
    pub rt: &'a ResourceType,
    /// The version the client addressed.
    pub version: &'a str,
    /// The subresource (`status`), if any.
    pub subresource: Option<&'a str>,
    /// The namespace ("" for cluster-scoped objects; a namespace's own name for namespaces).
    pub namespace: &'a str,
    /// The object's name ("" for a collection).
    pub name: &'a str,
    /// The new object (none for DELETE).
    pub object: Option<Value>,
    /// The object before the change (UPDATE, and DELETE's validation).
    pub old_object: Option<Value>,
    /// Whether the request is a dry run.
    pub dry_run: bool,
    /// The request's options (`fieldManager`, a `DeleteOptions` body), without kind.
    pub options: Value,
    /// Who asks.
    pub user: &'a User,
}

impl Attributes<'_> {
    /// The options object of the review, with its kind and `dryRun`.
    fn options_object(&self) -> Value {
        let mut options = match &self.options {
            Value::Object(map) => Value::Object(map.clone()),
            _ => json!({}),
        };
        options["kind"] = json!(self.operation.options_kind());
        options["apiVersion"] = json!("meta.k8s.io/v1");
        if self.dry_run {
            options["dryRun"] = json!(["All"]);
        }
        options
    }
}

/// Whether any admission webhook is registered (a request with none takes the plain path).
pub(crate) fn any_registered(app: &App) -> bool {
    hooks::registered(app)
}

/// Runs the mutating webhooks that match `attrs`, in order, replacing `attrs.object` with
/// every patch; their warnings go to `warnings`.
///
/// # Errors
///
/// A denial (`admission webhook "NAME" denied the request: ...`), a failed call under
/// `failurePolicy: Fail` (500 `failed calling webhook "NAME": ...`), a dry run meeting a webhook
/// with side effects, a patch that does not apply.
pub(crate) async fn mutate(
    app: &App,
    attrs: &mut Attributes<'_>,
    warnings: &mut Vec<String>,
) -> ApiResult<()> {
    if hooks::is_configuration(attrs.rt) {
        return Ok(());
    }
    let hooks = hooks::load(app, Kind::Mutating);
    // How many patches changed the object, and the count just after each webhook ran: a
    // webhook with `reinvocationPolicy: IfNeeded` runs again when a later one changed it.
    let mut modifications = 0_usize;
    let mut after: Vec<Option<usize>> = vec![None; hooks.len()];
    for (index, hook) in hooks.iter().enumerate() {
        let Some(modified) = run_one(app, hook, attrs, warnings).await? else {
            continue;
        };
        modifications += usize::from(modified);
        after[index] = Some(modifications);
    }
    for (index, hook) in hooks.iter().enumerate() {
        let Some(seen) = after[index] else { continue };
        if hook.reinvoke_if_needed && modifications > seen {
            run_one(app, hook, attrs, warnings).await?;
        }
    }
    Ok(())
}

/// Calls one mutating webhook if it matches: `None` when it does not, else whether its patch
/// changed the object.
async fn run_one(
    app: &App,
    hook: &Hook,
    attrs: &mut Attributes<'_>,
    warnings: &mut Vec<String>,
) -> ApiResult<Option<bool>> {
    let Some(matched) = matching::matched(app, hook, attrs)? else {
        return Ok(None);
    };
    check_dry_run(hook, attrs)?;
    let seen = seen_at(app, attrs, &matched).await?;
    match call::call(app, hook, &seen, &matched).await {
        Ok(Called {
            allowed,
            status,
            patch,
            warnings: more,
        }) => {
            warnings.extend(more);
            if !allowed {
                return Err(call::denied(&hook.name, &status));
            }
            let Some(patch) = patch else {
                return Ok(Some(false));
            };
            let (Some(object), Some(sent)) = (attrs.object.as_ref(), seen.object) else {
                return Err(ApiError::internal(format!(
                    "admission webhook {:?} attempted to modify the object, which is not \
                     supported for this operation",
                    hook.name
                )));
            };
            let mut patched = sent;
            json_patch::patch_unsafe(&mut patched, &patch).map_err(|e| {
                ApiError::internal(format!(
                    "admission webhook {:?} returned a patch that does not apply: {e}",
                    hook.name
                ))
            })?;
            let patched = if matched.version == attrs.version {
                patched
            } else {
                one_at(app, attrs.rt, patched, attrs.version).await?
            };
            let changed = patched != *object;
            attrs.object = Some(patched);
            Ok(Some(changed))
        }
        Err(failure) => ignore_or_fail(hook, &failure).map(|()| Some(false)),
    }
}

/// Runs the validating webhooks that match `attrs` (in order; kube-apiserver calls them in
/// parallel, and only the first denial it meets is answered either way).
///
/// # Errors
///
/// As [`mutate`], but for patches, which validating webhooks cannot send.
pub(crate) async fn validate(
    app: &App,
    attrs: &Attributes<'_>,
    warnings: &mut Vec<String>,
) -> ApiResult<()> {
    if hooks::is_configuration(attrs.rt) {
        return Ok(());
    }
    let hooks = hooks::load(app, Kind::Validating);
    let mut calls = Vec::new();
    for hook in &hooks {
        let Some(matched) = matching::matched(app, hook, attrs)? else {
            continue;
        };
        check_dry_run(hook, attrs)?;
        let seen = seen_at(app, attrs, &matched).await?;
        calls.push(async move { (hook, call::call(app, hook, &seen, &matched).await) });
    }
    let answers = futures::future::join_all(calls).await;
    let mut first_error = None;
    for (hook, answer) in answers {
        let outcome = match answer {
            Ok(called) => {
                warnings.extend(called.warnings);
                if called.allowed {
                    Ok(())
                } else {
                    Err(call::denied(&hook.name, &called.status))
                }
            }
            Err(failure) => ignore_or_fail(hook, &failure),
        };
        if let Err(e) = outcome {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// `object` (of `rt`) at `version`, converted as the server converts (its CRD's webhook).
async fn one_at(app: &App, rt: &ResourceType, object: Value, version: &str) -> ApiResult<Value> {
    super::crd_conversion::convert(app, rt, vec![object], version, false)
        .await?
        .pop()
        .ok_or_else(|| ApiError::internal("conversion returned no object"))
}

/// The attributes as a webhook that matched another version of the resource sees them
/// (`matchPolicy: Equivalent`): the objects converted to that version.
async fn seen_at<'a>(
    app: &App,
    attrs: &Attributes<'a>,
    matched: &matching::Matched,
) -> ApiResult<Attributes<'a>> {
    let mut seen = attrs.clone();
    if matched.version != attrs.version {
        for slot in [&mut seen.object, &mut seen.old_object] {
            if let Some(object) = slot.take() {
                *slot = Some(one_at(app, attrs.rt, object, &matched.version).await?);
            }
        }
    }
    Ok(seen)
}

/// A dry run may call only webhooks without side effects (`sideEffects: None` or
/// `NoneOnDryRun`): kube-apiserver's `NewDryRunUnsupportedErr`.
fn check_dry_run(hook: &Hook, attrs: &Attributes<'_>) -> ApiResult<()> {
    if attrs.dry_run && !matches!(hook.side_effects.as_str(), "None" | "NoneOnDryRun") {
        return Err(ApiError::bad_request(format!(
            "admission webhook {:?} does not support dry run",
            hook.name
        )));
    }
    Ok(())
}

/// A failed call: logged and passed over under `failurePolicy: Ignore`, kube-apiserver's 500
/// `Internal error occurred: failed calling webhook "NAME": ...` under `Fail`.
fn ignore_or_fail(hook: &Hook, failure: &call::Failure) -> ApiResult<()> {
    let message = format!("failed calling webhook {:?}: {failure}", hook.name);
    if hook.ignore_failures {
        tracing::warn!(webhook = %hook.name, error = %failure, "admission webhook failed open");
        return Ok(());
    }
    tracing::warn!(webhook = %hook.name, error = %failure, "admission webhook failed closed");
    let mut err = ApiError::internal(format!("Internal error occurred: {message}"));
    err.causes = vec![super::status::Cause {
        reason: String::new(),
        message,
        field: String::new(),
    }];
    Err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::{Registry, ResourceKey};

    #[test]
    fn a_dry_run_refuses_a_webhook_with_side_effects_as_kube_apiserver() {
        let registry = Registry::new();
        let rt = registry.get(&ResourceKey::new("", "configmaps")).unwrap();
        let user = User::admin();
        let attrs = Attributes {
            operation: Operation::Create,
            rt: &rt,
            version: "v1",
            subresource: None,
            namespace: "default",
            name: "x",
            object: None,
            old_object: None,
            dry_run: true,
            options: Value::Null,
            user: &user,
        };
        let webhook = json!({"name": "a.b.c", "clientConfig": {"url": "https://x/"}, "sideEffects": "Unknown"});
        let mut hook = hooks::tests_support::parse_mutating(&webhook);
        let err = check_dry_run(&hook, &attrs).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "admission webhook \"a.b.c\" does not support dry run")
        );
        hook.side_effects = "NoneOnDryRun".into();
        assert!(check_dry_run(&hook, &attrs).is_ok());
        assert_eq!(attrs.options_object()["dryRun"], json!(["All"]));
    }
}
