//! The admitted and converted side of the writes: the admission attributes of a request, the
//! mutating and validating webhooks' passes, and a read-modify-write computed and admitted
//! outside the store's lock then stored only if the object did not change meanwhile; the
//! conversions to and from a CRD's storage version.

use std::sync::Arc;

use serde_json::{Value, json};

use super::write::{Written, after_change, prepare, strip_rv};
use crate::apiserver::admission::{self, Attributes, Operation};
use crate::apiserver::crd_conversion;
use crate::apiserver::meta::{
    self, Target, check_type, prepare_create, prepare_update, ready_to_delete,
};
use crate::apiserver::namespaces;
use crate::apiserver::request::Ctx;
use crate::apiserver::status::{ApiError, ApiResult};
use crate::apiserver::store::{Action, ObjKey, Stored};

/// The admission attributes of a request on `ctx`'s resource.
pub(super) fn attributes<'a>(
    ctx: &'a Ctx,
    operation: Operation,
    name: &'a str,
    object: Option<Value>,
    old_object: Option<Value>,
    dry_run: bool,
    options: Value,
) -> Attributes<'a> {
    let namespace = if meta::is_namespaces(&ctx.rt) {
        name
    } else {
        ctx.path.namespace.as_deref().unwrap_or_default()
    };
    Attributes {
        operation,
        rt: &ctx.rt,
        version: ctx.version(),
        subresource: ctx.path.subresource.as_deref(),
        namespace,
        name,
        object,
        old_object,
        dry_run,
        options,
        user: &ctx.user,
    }
}

/// The options a create or update carries to admission (`fieldManager`).
pub(super) fn write_options(ctx: &Ctx) -> Value {
    match &ctx.query.field_manager {
        Some(manager) => json!({"fieldManager": manager}),
        None => json!({}),
    }
}

/// `object` after the mutating webhooks (their warnings kept for the answer).
pub(super) async fn mutated(
    ctx: &Ctx,
    operation: Operation,
    name: &str,
    object: Value,
    old_object: Option<Value>,
) -> ApiResult<Value> {
    let mut attrs = attributes(
        ctx,
        operation,
        name,
        Some(object),
        old_object,
        ctx.query.dry_run,
        write_options(ctx),
    );
    let mut warnings = Vec::new();
    let result = admission::mutate(&ctx.app, &mut attrs, &mut warnings).await;
    ctx.warn(warnings);
    result?;
    attrs
        .object
        .ok_or_else(|| ApiError::internal("admission lost the object"))
}

/// `obj`, at the request's version, at the storage version, through the CRD's conversion
/// webhook when it has one (without, objects are stored as written and read at any version).
pub(super) async fn to_storage_version(ctx: &Ctx, obj: Value) -> ApiResult<Value> {
    let storage = ctx.rt.preferred_version();
    if ctx.version() == storage || crd_conversion::webhook(&ctx.app, &ctx.rt).is_none() {
        return Ok(obj);
    }
    crd_conversion::convert(&ctx.app, &ctx.rt, vec![obj], storage, false)
        .await?
        .pop()
        .ok_or_else(|| ApiError::internal("conversion returned no object"))
}

/// A stored object at the request's version.
pub(super) async fn at_request_version(ctx: &Ctx, stored: Arc<Stored>) -> ApiResult<Arc<Stored>> {
    crd_conversion::at_version(&ctx.app, &ctx.rt, ctx.version(), vec![stored], false)
        .await?
        .pop()
        .ok_or_else(|| ApiError::internal("conversion returned no object"))
}

/// The validating webhooks' verdict on a create or update.
pub(super) async fn validated(
    ctx: &Ctx,
    operation: Operation,
    name: &str,
    object: Value,
    old_object: Option<Value>,
) -> ApiResult<()> {
    let attrs = attributes(
        ctx,
        operation,
        name,
        Some(object),
        old_object,
        ctx.query.dry_run,
        write_options(ctx),
    );
    let mut warnings = Vec::new();
    let result = admission::validate(&ctx.app, &attrs, &mut warnings).await;
    ctx.warn(warnings);
    result
}

/// One attempt of an admitted read-modify-write: `None` when the object changed during the
/// webhook calls.
pub(super) async fn modify_admitted(
    ctx: &Ctx,
    target: Target,
    compute: &impl Fn(Option<&Value>) -> ApiResult<Value>,
) -> ApiResult<Option<Written>> {
    let rt = &ctx.rt;
    let key = ctx.key();
    let snapshot = ctx.app.store.get(&rt.storage_key(), &key);
    let current = match &snapshot {
        Some(s) => {
            let at = at_request_version(ctx, Arc::new(Stored::unsaved(rt.view(&s.value), s.rv)));
            Some(at.await?.value.clone())
        }
        None => None,
    };
    let desired = compute(current.as_ref())?;
    let Some((current, expected_rv)) = current.zip(snapshot.map(|s| s.rv)) else {
        return create_admitted(ctx, desired).await;
    };
    let desired = mutated(
        ctx,
        Operation::Update,
        &key.name,
        desired,
        Some(current.clone()),
    )
    .await?;
    let new = prepare_update(rt, ctx.version(), &key, &current, desired, target)?;
    let to_store = prepare(&ctx.app, rt, new.clone())?;
    validated(
        ctx,
        Operation::Update,
        &key.name,
        to_store.clone(),
        Some(current),
    )
    .await?;
    if ctx.query.dry_run {
        return Ok(Some(Written {
            stored: Arc::new(Stored::unsaved(rt.to_storage(to_store), expected_rv)),
            created: false,
        }));
    }
    let new = rt.to_storage(to_storage_version(ctx, new).await?);
    let mut raced = false;
    let mut emptied: Option<Value> = None;
    let (stored, change) = ctx.app.store.mutate(&rt.storage_key(), &key, |cur, _| {
        let Some(cur) = cur.filter(|c| c.rv == expected_rv) else {
            raced = true;
            return Ok(Action::Keep);
        };
        if ready_to_delete(rt, &new) {
            emptied = Some(new.clone());
            return Ok(Action::Delete);
        }
        if strip_rv(&new) == strip_rv(&cur.value) {
            return Ok(Action::Keep);
        }
        Ok(Action::Put(prepare(&ctx.app, rt, new)?))
    })?;
    if raced {
        return Ok(None);
    }
    let stored = stored.ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, &key.name))?;
    if let Some(kind) = change {
        after_change(&ctx.app, rt, kind, &stored);
    }
    Ok(Some(Written {
        stored: super::write::answer_of_emptied(emptied, stored),
        created: false,
    }))
}

/// An admitted create through a write verb (PUT of a lease, apply): `None` when another
/// request created the object during the webhook calls.
pub(super) async fn create_admitted(ctx: &Ctx, mut desired: Value) -> ApiResult<Option<Written>> {
    let rt = &ctx.rt;
    let key = ctx.key();
    check_type(rt, ctx.version(), &mut desired)?;
    let desired = mutated(ctx, Operation::Create, &key.name, desired, None).await?;
    let (new_key, obj) = prepare_create(rt, ctx.version(), ctx.path.namespace.as_deref(), desired)?;
    if new_key != key {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({})",
            new_key.name, key.name
        )));
    }
    let obj = prepare(&ctx.app, rt, obj)?;
    validated(ctx, Operation::Create, &key.name, obj.clone(), None).await?;
    let obj = if ctx.query.dry_run {
        obj
    } else {
        to_storage_version(ctx, obj).await?
    };
    let obj = rt.to_storage(obj);
    let mut raced = false;
    let preview = obj.clone();
    let (stored, change) = ctx
        .app
        .store
        .mutate(&rt.storage_key(), &key, |cur, lookup| {
            if cur.is_some() {
                raced = true;
                return Ok(Action::Keep);
            }
            namespaces::admit_create(rt, &key, lookup)?;
            if ctx.query.dry_run {
                return Ok(Action::Keep);
            }
            Ok(Action::Put(obj))
        })?;
    if raced {
        return Ok(None);
    }
    if ctx.query.dry_run {
        return Ok(Some(Written {
            stored: Arc::new(Stored::unsaved(preview, 0)),
            created: true,
        }));
    }
    let stored = stored.ok_or_else(|| ApiError::internal("create stored nothing"))?;
    if let Some(kind) = change {
        after_change(&ctx.app, rt, kind, &stored);
    }
    Ok(Some(Written {
        stored,
        created: true,
    }))
}

/// Admission of a DELETE: the mutating webhooks see no object (kube-apiserver's delete
/// handler), the validating ones the object being deleted (its storage's `deleteValidation`).
pub(super) async fn admit_delete(
    ctx: &Ctx,
    key: &ObjKey,
    opts: &Value,
    dry_run: bool,
    mutate: bool,
) -> ApiResult<()> {
    let rt = &ctx.rt;
    let mut warnings = Vec::new();
    if mutate {
        let mut attrs = attributes(
            ctx,
            Operation::Delete,
            &key.name,
            None,
            None,
            dry_run,
            opts.clone(),
        );
        let result = admission::mutate(&ctx.app, &mut attrs, &mut warnings).await;
        ctx.warn(std::mem::take(&mut warnings));
        result?;
    }
    let Some(current) = ctx.app.store.get(&rt.storage_key(), key) else {
        return Ok(());
    };
    let attrs = attributes(
        ctx,
        Operation::Delete,
        &key.name,
        None,
        Some(rt.view(&current.value)),
        dry_run,
        opts.clone(),
    );
    let result = admission::validate(&ctx.app, &attrs, &mut warnings).await;
    ctx.warn(warnings);
    result
}
