//! CREATE, UPDATE (PUT), DELETE and DELETECOLLECTION, including finalizers, namespace checks,
//! and the CRD and namespace side effects.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::admitted::{
    admit_delete, at_request_version, attributes, modify_admitted, mutated, to_storage_version,
    validated,
};
use super::managed;
use crate::apiserver::admission::{self, Operation};
use crate::apiserver::filter::Filter;
use crate::apiserver::meta::{
    self, Target, check_type, prepare_create, prepare_update, ready_to_delete,
};
use crate::apiserver::registry::ResourceType;
use crate::apiserver::request::{Ctx, parse_body};
use crate::apiserver::respond::{json_bytes, json_value};
use crate::apiserver::state::App;
use crate::apiserver::status::{ApiError, ApiResult};
use crate::apiserver::store::{Action, ChangeType, ObjKey, Stored};
use crate::apiserver::{crd, crd_conversion, namespaces};

/// Whether PUT of a missing object creates it (kube-apiserver's `AllowCreateOnUpdate`).
fn allow_create_on_update(rt: &ResourceType) -> bool {
    matches!(
        (rt.group.as_str(), rt.plural.as_str()),
        ("" | "events.k8s.io", "events") | ("coordination.k8s.io", "leases")
    )
}

pub(super) fn strip_rv(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    v
}

/// Run side effects of a stored change: CRDs (un)register their resources; a terminating
/// namespace loses its content and goes once empty (the namespace controller).
pub(crate) fn after_change(app: &App, rt: &ResourceType, kind: ChangeType, obj: &Stored) {
    match (rt.group.as_str(), rt.plural.as_str(), kind) {
        ("apiextensions.k8s.io", "customresourcedefinitions", ChangeType::Deleted) => {
            crd::unregister(app, &obj.value);
        }
        ("apiextensions.k8s.io", "customresourcedefinitions", _) => crd::register(app, &obj.value),
        ("", "namespaces", ChangeType::Deleted) => {
            // Normally empty already (the controller finalized it); a safety net.
            if let Some(ns) = obj.value["metadata"]["name"].as_str() {
                app.store.delete_namespace_contents(ns);
            }
        }
        _ => {}
    }
    if let Some(ns) = namespaces::affected(rt, &obj.value, kind == ChangeType::Deleted) {
        namespaces::reconcile(app, &ns);
    }
}

/// Kind-specific checks before an object is stored: a webhook configuration is validated
/// (every error with its field path); a CRD is validated and given its status.
pub(crate) fn prepare(app: &App, rt: &ResourceType, obj: Value) -> ApiResult<Value> {
    let mut errors = admission::validate_configuration(rt, &obj);
    if rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions" {
        errors.extend(crd_conversion::validate(&obj));
    }
    if !errors.is_empty() {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let message = match errors.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        return Err(ApiError::invalid(&rt.kind, &rt.group, name, message));
    }
    crd::prepare(app, rt, obj)
}

/// Store a new object: 409 when it exists, 404 when its namespace does not, 403 when it is
/// terminating.
pub(crate) fn insert(
    app: &App,
    rt: &ResourceType,
    key: &ObjKey,
    obj: Value,
) -> ApiResult<Arc<Stored>> {
    let obj = rt.to_storage(obj);
    let (stored, change) = app.store.mutate(&rt.storage_key(), key, |cur, lookup| {
        if cur.is_some() {
            return Err(ApiError::already_exists(&rt.group, &rt.plural, &key.name));
        }
        namespaces::admit_create(rt, key, lookup)?;
        Ok(Action::Put(obj))
    })?;
    let stored = stored.ok_or_else(|| ApiError::internal("create stored nothing"))?;
    if let Some(kind) = change {
        after_change(app, rt, kind, &stored);
    }
    Ok(stored)
}

/// POST a new object: the mutating webhooks see it as decoded, the validating ones as it will
/// be stored (kube-apiserver's order).
pub(super) async fn create(ctx: &Ctx, body: &[u8]) -> ApiResult<Response> {
    let mut obj = parse_body(ctx, body)?;
    let admit = admission::any_registered(&ctx.app);
    if admit {
        check_type(&ctx.rt, ctx.version(), &mut obj)?;
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        obj = mutated(ctx, Operation::Create, &name, obj, None).await?;
    }
    let (key, obj) = prepare_create(&ctx.rt, ctx.version(), ctx.path.namespace.as_deref(), obj)?;
    let mut obj = prepare(&ctx.app, &ctx.rt, obj)?;
    managed::track(ctx, Target::Main, None, &mut obj);
    if admit {
        validated(ctx, Operation::Create, &key.name, obj.clone(), None).await?;
    }
    if ctx.query.dry_run {
        return Ok(json_value(StatusCode::CREATED, &obj));
    }
    let obj = to_storage_version(ctx, obj).await?;
    let stored = insert(&ctx.app, &ctx.rt, &key, obj)?;
    let stored = at_request_version(ctx, stored).await?;
    Ok(json_bytes(StatusCode::CREATED, ctx.render_bytes(&stored)))
}

/// `compute`, with its write recorded in `managedFields` as an `Update` of the request's
/// manager (every write but apply, which records its own).
pub(super) fn tracked<'a>(
    ctx: &'a Ctx,
    target: Target,
    compute: impl Fn(Option<&Value>) -> ApiResult<Value> + 'a,
) -> impl Fn(Option<&Value>) -> ApiResult<Value> + 'a {
    move |cur| {
        let mut new = compute(cur)?;
        if target != Target::Finalize {
            managed::track(ctx, target, cur, &mut new);
        }
        Ok(new)
    }
}

/// The result of a read-modify-write.
pub(crate) struct Written {
    pub stored: Arc<Stored>,
    pub created: bool,
}

/// How often a write admitted by webhooks is retried when the object changed during the calls
/// (kube-apiserver's `GuaranteedUpdate` retries as long as it meets conflicts).
const ADMITTED_ATTEMPTS: usize = 8;

/// Read-modify-write one object: `compute` turns the current object into the desired one
/// (`None` when it does not exist yet: return the object to create, or 404). With admission
/// webhooks registered, they see the change (mutating ones the desired object, validating
/// ones the object to store) and the write happens only if the object did not change
/// meanwhile, else all again.
pub(crate) async fn modify(
    ctx: &Ctx,
    target: Target,
    compute: impl Fn(Option<&Value>) -> ApiResult<Value>,
) -> ApiResult<Written> {
    if !admission::any_registered(&ctx.app) && crd_conversion::webhook(&ctx.app, &ctx.rt).is_none()
    {
        let written = modify_now(ctx, target, compute)?;
        return Ok(Written {
            stored: at_request_version(ctx, written.stored).await?,
            created: written.created,
        });
    }
    for _ in 0..ADMITTED_ATTEMPTS {
        if let Some(written) = modify_admitted(ctx, target, &compute).await? {
            return Ok(Written {
                stored: at_request_version(ctx, written.stored).await?,
                created: written.created,
            });
        }
    }
    let key = ctx.key();
    Err(ApiError::conflict(&ctx.rt.group, &ctx.rt.plural, &key.name))
}

/// Read-modify-write one object under the store's lock (no admission webhook to ask).
fn modify_now(
    ctx: &Ctx,
    target: Target,
    compute: impl FnOnce(Option<&Value>) -> ApiResult<Value>,
) -> ApiResult<Written> {
    let rt = &ctx.rt;
    let key = ctx.key();
    let mut created = false;
    // `dryRun=All`: everything is computed and validated, nothing is stored.
    let mut preview: Option<(Value, u64)> = None;
    // The update that emptied the finalizers of an object being deleted (answered as such).
    let mut emptied: Option<Value> = None;
    let (stored, change) = ctx
        .app
        .store
        .mutate(&rt.storage_key(), &key, |cur, lookup| {
            let Some(cur) = cur else {
                let desired = compute(None)?;
                let (new_key, obj) =
                    prepare_create(rt, ctx.version(), ctx.path.namespace.as_deref(), desired)?;
                if new_key != key {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({}) does not match the name on the URL ({})",
                        new_key.name, key.name
                    )));
                }
                namespaces::admit_create(rt, &key, lookup)?;
                created = true;
                let obj = rt.to_storage(prepare(&ctx.app, rt, obj)?);
                if ctx.query.dry_run {
                    preview = Some((obj, 0));
                    return Ok(Action::Keep);
                }
                return Ok(Action::Put(obj));
            };
            let current = rt.view(&cur.value);
            let desired = compute(Some(&current))?;
            let new = prepare_update(rt, ctx.version(), &key, &current, desired, target)?;
            let new = rt.to_storage(new);
            if ctx.query.dry_run {
                preview = Some((prepare(&ctx.app, rt, new)?, cur.rv));
                return Ok(Action::Keep);
            }
            if ready_to_delete(rt, &new) {
                emptied = Some(new);
                return Ok(Action::Delete);
            }
            if strip_rv(&new) == strip_rv(&cur.value) {
                return Ok(Action::Keep);
            }
            Ok(Action::Put(prepare(&ctx.app, rt, new)?))
        })?;
    if let Some((value, rv)) = preview {
        return Ok(Written {
            stored: Arc::new(Stored::unsaved(value, rv)),
            created,
        });
    }
    let stored = stored.ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, &key.name))?;
    if let Some(kind) = change {
        after_change(&ctx.app, rt, kind, &stored);
    }
    Ok(Written {
        stored: answer_of_emptied(emptied, stored),
        created,
    })
}

/// The answer to an update that emptied the finalizers of an object being deleted: the object
/// as the update left it (no finalizers), as kube-apiserver answers (its store deletes the
/// object and returns the update's result, `deleteWithoutFinalizers` of
/// `k8s.io/apiserver/pkg/registry/generic/registry/store.go`), not the last stored state.
/// Watchers still see the last stored state in the `DELETED` event.
pub(super) fn answer_of_emptied(emptied: Option<Value>, stored: Arc<Stored>) -> Arc<Stored> {
    match emptied {
        Some(value) => Arc::new(Stored::unsaved(value, stored.rv)),
        None => stored,
    }
}

/// PUT an object, its status, or a namespace's finalizers (`/finalize`).
pub(super) async fn update(ctx: &Ctx, body: &[u8]) -> ApiResult<Response> {
    let obj = parse_body(ctx, body)?;
    let target = match ctx.path.subresource.as_deref() {
        None => Target::Main,
        Some("finalize") => Target::Finalize,
        Some(_) => Target::Status,
    };
    let can_create = allow_create_on_update(&ctx.rt) && target == Target::Main;
    let (rt, name) = (ctx.rt.clone(), ctx.key().name);
    let written = modify(
        ctx,
        target,
        tracked(ctx, target, |cur| match cur {
            Some(_) => Ok(obj.clone()),
            None if can_create => Ok(obj.clone()),
            None => Err(ApiError::not_found(&rt.group, &rt.plural, &name)),
        }),
    )
    .await?;
    let code = if written.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json_bytes(code, ctx.render_bytes(&written.stored)))
}

fn check_preconditions(
    rt: &ResourceType,
    key: &ObjKey,
    cur: &Value,
    opts: &Value,
) -> ApiResult<()> {
    let pre = &opts["preconditions"];
    let meta = &cur["metadata"];
    for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        if let Some(want) = pre[field].as_str()
            && Some(want) != meta[field].as_str()
        {
            let mut err = ApiError::conflict(&rt.group, &rt.plural, &key.name);
            err.message = format!(
                "Precondition failed: {label} in precondition: {want}, {label} in object meta: {}",
                meta[field].as_str().unwrap_or_default()
            );
            return Err(err);
        }
    }
    Ok(())
}

/// The namespaces kube-apiserver never deletes: `default`, `kube-system`, `kube-public`.
const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Delete one object, or mark it for deletion when finalizers remain.
fn delete_one(
    app: &App,
    rt: &ResourceType,
    key: &ObjKey,
    opts: &Value,
) -> ApiResult<(Arc<Stored>, bool)> {
    let (stored, change) = app.store.mutate(&rt.storage_key(), key, |cur, _| {
        let cur = cur.ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, &key.name))?;
        check_preconditions(rt, key, &cur.value, opts)?;
        // A terminating namespace waits for its controller (`pkg/registry/core/namespace/
        // storage/storage.go`, `Delete`).
        if meta::is_namespaces(rt)
            && !cur.value["metadata"]["deletionTimestamp"].is_null()
            && cur.value["spec"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty())
        {
            let mut err = ApiError::conflict(&rt.group, &rt.plural, &key.name);
            err.message = format!(
                "Operation cannot be fulfilled on namespaces \"{}\": The system is ensuring all \
                 content is removed from this namespace.  Upon completion, this namespace will \
                 automatically be purged by the system.",
                key.name
            );
            return Err(err);
        }
        if !meta::has_finalizers(rt, &cur.value) {
            return Ok(Action::Delete);
        }
        if !cur.value["metadata"]["deletionTimestamp"].is_null() {
            return Ok(Action::Keep);
        }
        Ok(Action::Put(meta::mark_for_deletion(rt, &cur.value)))
    })?;
    let stored = stored.ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, &key.name))?;
    let deleted = change == Some(ChangeType::Deleted);
    if let Some(kind) = change {
        after_change(app, rt, kind, &stored);
    }
    Ok((stored, deleted))
}

fn delete_options(ctx: &Ctx, body: &[u8]) -> ApiResult<Value> {
    if body.iter().all(u8::is_ascii_whitespace) {
        Ok(Value::Null)
    } else {
        parse_body(ctx, body)
    }
}

/// Whether the resource's storage answers a DELETE with the deleted object
/// (`ReturnDeletedObject: true` in `pkg/registry/core/{pod,service,serviceaccount,namespace}/
/// storage/storage.go`); every other kind answers a `Status`.
fn returns_deleted_object(rt: &ResourceType) -> bool {
    rt.group.is_empty()
        && matches!(
            rt.plural.as_str(),
            "pods" | "services" | "serviceaccounts" | "namespaces"
        )
}

/// The `Status` a store without `ReturnDeletedObject` answers for an object it removed
/// (`k8s.io/apiserver/pkg/registry/generic/registry/store.go`, `finalizeDelete`): `Success`,
/// and the object's name, group, uid and resource (as `details.kind`).
fn deleted_status(rt: &ResourceType, obj: &Value) -> Value {
    let meta = &obj["metadata"];
    let mut details = json!({
        "name": meta["name"],
        "kind": rt.plural,
        "uid": meta["uid"],
    });
    if !rt.group.is_empty() {
        details["group"] = json!(rt.group);
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

/// DELETE one object, answered as kube-apiserver does (`endpoints/handlers/delete.go`): 200
/// with the deleted object for the kinds whose storage returns it and a `Success` Status for
/// the others; 200 with the object, now carrying a `deletionTimestamp`, when finalizers keep
/// it; 202 instead only when the client asked `orphanDependents: false`.
pub(super) async fn delete(ctx: &Ctx, body: &[u8]) -> ApiResult<Response> {
    let opts = delete_options(ctx, body)?;
    let key = ctx.key();
    // The NamespaceLifecycle admission plugin's immortal namespaces
    // (`k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go`), refused
    // whether they exist.
    if meta::is_namespaces(&ctx.rt) && IMMORTAL_NAMESPACES.contains(&key.name.as_str()) {
        return Err(ApiError::forbidden(
            "",
            "namespaces",
            &key.name,
            "this namespace may not be deleted",
        ));
    }
    let dry_run = ctx.query.dry_run || opts["dryRun"].as_array().is_some_and(|a| !a.is_empty());
    if admission::any_registered(&ctx.app) {
        admit_delete(ctx, &key, &opts, dry_run, true).await?;
    }
    if dry_run {
        let cur = ctx
            .app
            .store
            .get(&ctx.rt.storage_key(), &key)
            .ok_or_else(|| ApiError::not_found(&ctx.rt.group, &ctx.rt.plural, &key.name))?;
        if !returns_deleted_object(&ctx.rt) {
            return Ok(json_value(
                StatusCode::OK,
                &deleted_status(&ctx.rt, &cur.value),
            ));
        }
        return Ok(json_bytes(StatusCode::OK, ctx.render_bytes(&cur)));
    }
    let (stored, deleted) = delete_one(&ctx.app, &ctx.rt, &key, &opts)?;
    if deleted && !returns_deleted_object(&ctx.rt) {
        return Ok(json_value(
            StatusCode::OK,
            &deleted_status(&ctx.rt, &stored.value),
        ));
    }
    let code = if !deleted && opts["orphanDependents"] == json!(false) {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok(json_bytes(code, ctx.render_bytes(&stored)))
}

/// DELETE a collection (with selectors): the list of deleted objects. The mutating webhooks
/// are asked once about the collection, the validating ones about each object.
pub(super) async fn delete_collection(ctx: &Ctx, body: &[u8]) -> ApiResult<Response> {
    let opts = delete_options(ctx, body)?;
    let admit = admission::any_registered(&ctx.app);
    let dry_run = ctx.query.dry_run || opts["dryRun"].as_array().is_some_and(|a| !a.is_empty());
    if admit {
        let mut attrs = attributes(
            ctx,
            Operation::Delete,
            "",
            None,
            None,
            dry_run,
            opts.clone(),
        );
        let mut warnings = Vec::new();
        let result = admission::mutate(&ctx.app, &mut attrs, &mut warnings).await;
        ctx.warn(warnings);
        result?;
    }
    let filter = Filter::new(ctx.rt.clone(), ctx.path.namespace.clone(), &ctx.query)?;
    let (rv, objs) = ctx.app.store.snapshot(&ctx.rt.storage_key());
    let (items, _) = super::read::page(&objs, &filter, None, None, rv);
    let keys: Vec<ObjKey> = items
        .iter()
        .map(|o| {
            ObjKey::new(
                o.value["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default(),
                o.value["metadata"]["name"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let mut deleted = Vec::new();
    for key in keys {
        if admit {
            admit_delete(ctx, &key, &opts, dry_run, false).await?;
        }
        match delete_one(&ctx.app, &ctx.rt, &key, &opts) {
            Ok((stored, _)) => {
                let mut item = ctx.rt.view(&stored.value);
                // As in a LIST: a built-in kind's items carry no apiVersion and kind.
                if let (false, Some(map)) = (ctx.rt.custom, item.as_object_mut()) {
                    map.remove("apiVersion");
                    map.remove("kind");
                }
                deleted.push(item);
            }
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({
        "kind": format!("{}List", ctx.rt.kind),
        "apiVersion": ctx.rt.api_version(ctx.version()),
        "metadata": {"resourceVersion": ctx.app.store.current_rv().to_string()},
        "items": deleted,
    });
    Ok(json_value(StatusCode::OK, &list))
}
