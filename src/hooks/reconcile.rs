//! One hook reconcile: read the object's children and related objects from the cache tree,
//! call the hook, then write its answer — events through the recorder, children with
//! server-side apply (and deletes of the ones it dropped), the status through the status
//! subresource — each only when it differs from what the cache holds.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, Patch, PatchParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::call::CallError;
use super::contract::{self, ControllerRef, Request, Response};
use super::resource::ControllerKey;
use super::shared::{Shared, child_key};
use crate::cache::{self, Cache as _, KindInfo, ListOptions};
use crate::controller::{
    apply_as, apply_status_as, controlled_by, delete_child, set_controller_owner,
};
use crate::recorder::{self, EventType};

/// Why a reconcile failed; it is retried with the object's backoff.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReconcileError {
    /// The hook failed (exit, timeout, malformed answer, HTTP error).
    #[error(transparent)]
    Hook(#[from] CallError),
    /// The children or related objects could not be read from the cache tree.
    #[error("cannot read {} objects through the cache", api_version_kind(.gvk))]
    Cache {
        /// The kind.
        gvk: GroupVersionKind,
        /// Why.
        #[source]
        source: Box<cache::Error>,
    },
    /// A child in the answer is not one this controller may write.
    #[error("hook answer: children[{index}]: {message}")]
    Child {
        /// Its index in `children`.
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// The API server refused a write.
    #[error("cannot {verb} {what}")]
    Write {
        /// `apply`, `delete` or `write the status of`.
        verb: &'static str,
        /// `Kind namespace/name`.
        what: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The reconcile ran past the Controller's `spec.timeout` and was cancelled.
    #[error("the reconcile did not finish within spec.timeout ({0:?}) and was cancelled")]
    TimedOut(std::time::Duration),
}

impl ReconcileError {
    /// The `reason` label of `informant_hook_failures_total`.
    pub(super) fn reason(&self) -> &'static str {
        match self {
            ReconcileError::Hook(CallError::Timeout(_)) => "timeout",
            ReconcileError::Hook(CallError::Exit { .. } | CallError::Exited { .. }) => "exit",
            ReconcileError::Hook(
                CallError::Malformed { .. } | CallError::Invalid(_) | CallError::Envelope { .. },
            ) => "malformed",
            ReconcileError::Hook(CallError::TooLarge { .. }) => "too_large",
            ReconcileError::Hook(CallError::Refused { .. }) => "refused",
            ReconcileError::Hook(
                CallError::Status { .. } | CallError::Http { .. } | CallError::ClientCert { .. },
            ) => "http",
            ReconcileError::Hook(_) => "start",
            ReconcileError::Cache { .. } => "cache",
            ReconcileError::Child { .. } => "child",
            ReconcileError::Write { .. } => "write",
            ReconcileError::TimedOut(_) => "reconcile_timeout",
        }
    }
}

fn api_version_kind(gvk: &GroupVersionKind) -> String {
    format!("{} {}", gvk.api_version(), gvk.kind)
}

fn gvk_of(info: &KindInfo) -> GroupVersionKind {
    GroupVersionKind::gvk(
        &info.resource.group,
        &info.resource.version,
        &info.resource.kind,
    )
}

/// What one reconcile wrote, for tests and logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Writes {
    pub(super) applied: usize,
    pub(super) deleted: usize,
    pub(super) status: bool,
    pub(super) events: usize,
}

/// Reconciles `object`: the hook's answer written, or why not.
pub(super) async fn reconcile(
    object: &DynamicObject,
    shared: &Shared,
) -> Result<(Action, Writes), ReconcileError> {
    let held = held_finalizer(object, shared);
    if let Some((finalizer, false)) = held
        && object.metadata.deletion_timestamp.is_none()
    {
        // Hold the object first; the echo of this write reconciles it again.
        let mut finalizers = object.metadata.finalizers.clone().unwrap_or_default();
        finalizers.push(finalizer.to_owned());
        set_finalizers(object, finalizers, shared).await?;
        return Ok((Action::await_change(), Writes::default()));
    }
    if shared.cache_behind(object) {
        // The echo of the manager's own status write reconciles it again; the requeue is
        // only a safety net should that event never come.
        return Ok((Action::requeue(ECHO_WAIT), Writes::default()));
    }
    let value = serde_json::to_value(object).unwrap_or(Value::Null);
    let (children, existing, related) = read_children(object, shared).await?;

    let request = Request {
        api_version: contract::API_VERSION.to_owned(),
        controller: shared.controller.clone(),
        finalizing: object.metadata.deletion_timestamp.is_some(),
        object: value,
        children,
        related,
    };
    let _call = shared.hook_called();
    let response = shared.caller.call(&request).await?;
    let mut writes = Writes {
        events: response.events.len(),
        ..Writes::default()
    };
    // A malformed child fails the whole answer before anything is recorded or written, so a
    // retried answer does not record its events again.
    let desired = response
        .children
        .as_ref()
        .map(|children| {
            children
                .iter()
                .enumerate()
                .map(|(index, child)| desire(index, child, object, shared))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    record_events(object, &request, &response, shared);
    let (applied, deleted) = match desired {
        Some(desired) => write_children(&desired, existing, shared).await?,
        None => (0, 0),
    };
    writes.applied = applied;
    writes.deleted = deleted;
    writes.status = write_status(object, &request.object, &response, shared).await?;
    // Checked when the answer was decoded: an invalid one failed the call.
    let requeue = response.requeue_after().ok().flatten();
    if let (Some((finalizer, true)), Some(_)) = (held, &object.metadata.deletion_timestamp) {
        if response.finalized == Some(true) {
            set_finalizers(object, finalizers_without(object, finalizer), shared).await?;
            return Ok((Action::await_change(), writes));
        }
        // Not finalized yet: ask again.
        return Ok((Action::requeue(requeue.unwrap_or(FINALIZE_RETRY)), writes));
    }
    let action = match requeue {
        Some(after) => Action::requeue(after),
        None => shared
            .settings
            .resync_period
            .map_or_else(Action::await_change, Action::requeue),
    };
    Ok((action, writes))
}

/// A reconciled object's children (by kind key, and each with its `owns` index) and its
/// related objects, from the cache tree.
type Read = (
    BTreeMap<String, Vec<Value>>,
    Vec<(usize, Arc<DynamicObject>)>,
    Vec<Value>,
);

async fn read_children(object: &DynamicObject, shared: &Shared) -> Result<Read, ReconcileError> {
    let namespace = object.metadata.namespace.clone();
    let uid = object.metadata.uid.clone().unwrap_or_default();
    let list = ListOptions {
        namespace: namespace.clone(),
        ..ListOptions::default()
    };

    let mut children: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut existing: Vec<(usize, Arc<DynamicObject>)> = Vec::new();
    for (k, info) in shared.owns.iter().enumerate() {
        let gvk = gvk_of(info);
        let objects = shared
            .ctx
            .cache()
            .list(&gvk, &list)
            .await
            .map_err(|source| ReconcileError::Cache {
                gvk: gvk.clone(),
                source: Box::new(source),
            })?;
        let mut mine: Vec<Arc<DynamicObject>> = objects
            .into_iter()
            .filter(|child| controlled_by(&child.metadata, &uid))
            .collect();
        mine.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
        let key = contract::children_key(&info.resource.api_version, &info.resource.kind);
        children.insert(
            key,
            mine.iter()
                .map(|c| serde_json::to_value(c.as_ref()).unwrap_or(Value::Null))
                .collect(),
        );
        existing.extend(mine.into_iter().map(|c| (k, c)));
    }
    let mut related = Vec::new();
    for (info, map_to) in shared.watches.iter().zip(&shared.settings.map_to) {
        let gvk = gvk_of(info);
        let objects = shared
            .ctx
            .cache()
            .list(&gvk, &list)
            .await
            .map_err(|source| ReconcileError::Cache {
                gvk: gvk.clone(),
                source: Box::new(source),
            })?;
        related.extend(
            objects
                .iter()
                .filter(|o| map_to.maps(&o.metadata, &object.metadata))
                .map(|o| serde_json::to_value(o.as_ref()).unwrap_or(Value::Null)),
        );
    }

    Ok((children, existing, related))
}

/// How long a reconcile that found the cache behind the manager's own status write waits
/// at most for the write's echo before it runs again.
const ECHO_WAIT: Duration = Duration::from_secs(1);

/// How soon a hook that has not finalized a deleted object yet is called again, unless it
/// says `requeueAfterSeconds`.
const FINALIZE_RETRY: Duration = Duration::from_secs(5);

/// The controller's finalizer, if it holds one (`spec.finalize`), and whether `object` has it.
fn held_finalizer<'a>(object: &DynamicObject, shared: &'a Shared) -> Option<(&'a str, bool)> {
    let finalizer = shared.settings.finalizer.as_deref()?;
    Some((finalizer, has_finalizer(object, finalizer)))
}

/// Sets `object`'s finalizers with [`finalizers_patch`]. A conflict, or a write already made
/// over the same version, is left to the reconcile the newer version triggers.
async fn set_finalizers(
    object: &DynamicObject,
    finalizers: Vec<String>,
    shared: &Shared,
) -> Result<(), ReconcileError> {
    let seen = object.metadata.resource_version.clone();
    let key = format!(
        "finalizers:{}",
        object.metadata.uid.as_deref().unwrap_or_default()
    );
    let body = finalizers_patch(object, &finalizers);
    if shared.already_wrote(&key, seen.as_deref(), &body) {
        return Ok(());
    }
    let name = object.metadata.name.as_deref().unwrap_or_default();
    let namespace = object.metadata.namespace.as_deref();
    let api = api_for(shared, &shared.parent, namespace);
    match patch_finalizers(&api, object, &body).await {
        Ok(()) => {
            shared.wrote(key, seen, body);
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => Ok(()),
        Err(source) => Err(ReconcileError::Write {
            verb: "set the finalizers of",
            what: describe(&shared.parent, namespace, name),
            source,
        }),
    }
}

/// The merge patch that sets `object`'s finalizers to `finalizers`, carrying the
/// resourceVersion it was read at: the API server refuses it (409) if the object changed
/// since, so no one else's finalizer is lost. An object without one (never read from a
/// server) gets no `resourceVersion` key at all: a `null` there removes the field, which
/// kube-apiserver refuses (422, "metadata.resourceVersion: must be specified for an update").
pub(super) fn finalizers_patch(object: &DynamicObject, finalizers: &[String]) -> Value {
    match &object.metadata.resource_version {
        Some(seen) => json!({"metadata": {"finalizers": finalizers, "resourceVersion": seen}}),
        None => json!({"metadata": {"finalizers": finalizers}}),
    }
}

/// Whether `object` carries `finalizer`.
pub(super) fn has_finalizer(object: &DynamicObject, finalizer: &str) -> bool {
    object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == finalizer)
}

/// `object`'s finalizers but `finalizer`.
pub(super) fn finalizers_without(object: &DynamicObject, finalizer: &str) -> Vec<String> {
    object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect()
}

/// Sends a [`finalizers_patch`] `body` for `object` through `api`.
pub(super) async fn patch_finalizers(
    api: &Api<DynamicObject>,
    object: &DynamicObject,
    body: &Value,
) -> Result<(), kube::Error> {
    let name = object.metadata.name.as_deref().unwrap_or_default();
    api.patch(name, &PatchParams::default(), &Patch::Merge(body))
        .await
        .map(drop)
}

/// The recorder's reference to the reconciled object.
pub(super) fn object_ref(object: &DynamicObject, info: &KindInfo) -> Arc<recorder::ObjectRef> {
    Arc::new(recorder::ObjectRef::new(
        &info.resource.api_version,
        &info.resource.kind,
        object.metadata.namespace.as_deref().unwrap_or_default(),
        object.metadata.name.as_deref().unwrap_or_default(),
        object.metadata.uid.as_deref().unwrap_or_default(),
    ))
}

/// Records the answer's events, each against the object or the one it names (its uid taken
/// from the request's objects when it is one of them).
fn record_events(object: &DynamicObject, request: &Request, response: &Response, shared: &Shared) {
    let among = request
        .children
        .values()
        .flatten()
        .chain(request.related.iter())
        .chain(std::iter::once(&request.object));
    record_answer_events(
        response,
        shared,
        || object_ref(object, &shared.parent),
        object.metadata.namespace.as_deref(),
        &among,
    );
}

/// Records `response`'s events: each against the object its `regarding` names (in
/// `namespace` unless it names one; its uid taken from `among`, the objects the request
/// carried, when it is one of them), else against `default`'s object. Shared by per-object
/// calls and schedule batches.
pub(super) fn record_answer_events<'a>(
    response: &Response,
    shared: &Shared,
    default: impl Fn() -> Arc<recorder::ObjectRef>,
    namespace: Option<&str>,
    among: &(impl Iterator<Item = &'a Value> + Clone),
) {
    let recorder = shared.ctx.recorder();
    for event in &response.events {
        let event_type = match event.type_ {
            contract::EventType::Normal => EventType::Normal,
            contract::EventType::Warning => EventType::Warning,
        };
        let target = match &event.regarding {
            None => default(),
            Some(r) => {
                let namespace = r.namespace.as_deref().or(namespace).unwrap_or_default();
                let uid = among
                    .clone()
                    .find(|o| {
                        o["apiVersion"] == r.api_version.as_str()
                            && o["kind"] == r.kind.as_str()
                            && o["metadata"]["name"] == r.name.as_str()
                            && o["metadata"]["namespace"].as_str().unwrap_or_default() == namespace
                    })
                    .and_then(|o| o["metadata"]["uid"].as_str())
                    .unwrap_or_default();
                Arc::new(recorder::ObjectRef::new(
                    &r.api_version,
                    &r.kind,
                    namespace,
                    &r.name,
                    uid,
                ))
            }
        };
        recorder.record(&target, event_type, &event.reason, &event.message);
    }
}

/// A desired child, checked and completed: its kind, namespace, name and applied body.
struct Desired {
    kind: usize,
    namespace: Option<String>,
    name: String,
    body: Value,
}

/// Applies the answer's children that differ from the cached ones and deletes the cached
/// children the answer dropped. Returns how many were applied and deleted.
async fn write_children(
    desired: &[Desired],
    existing: Vec<(usize, Arc<DynamicObject>)>,
    shared: &Shared,
) -> Result<(usize, usize), ReconcileError> {
    let mut applied = 0;
    for child in desired {
        let info = &shared.owns[child.kind];
        let cached = existing.iter().find(|(k, c)| {
            *k == child.kind
                && c.metadata.name.as_deref() == Some(child.name.as_str())
                && c.metadata.namespace == child.namespace
        });
        if let Some((_, cached)) = cached {
            let actual = serde_json::to_value(cached.as_ref()).unwrap_or(Value::Null);
            if is_subset(&child.body, &actual) {
                continue;
            }
        }
        let seen = cached.and_then(|(_, c)| c.metadata.resource_version.clone());
        let key = child_key(
            &info.resource.plural,
            child.namespace.as_deref(),
            &child.name,
        );
        if shared.already_wrote(&key, seen.as_deref(), &child.body) {
            continue;
        }
        let api = api_for(shared, info, child.namespace.as_deref());
        apply_as(&api, &child.name, &child.body, &shared.field_manager)
            .await
            .map_err(|source| ReconcileError::Write {
                verb: "apply",
                what: describe(info, child.namespace.as_deref(), &child.name),
                source,
            })?;
        shared.wrote(key, seen, child.body.clone());
        applied += 1;
    }
    let wanted: HashSet<(usize, Option<&str>, &str)> = desired
        .iter()
        .map(|d| (d.kind, d.namespace.as_deref(), d.name.as_str()))
        .collect();
    let mut deleted = 0;
    for (kind, child) in &existing {
        let name = child.metadata.name.as_deref().unwrap_or_default();
        let namespace = child.metadata.namespace.as_deref();
        if wanted.contains(&(*kind, namespace, name)) || child.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        let key = format!(
            "deleted:{}",
            child.metadata.uid.as_deref().unwrap_or_default()
        );
        if shared.already_wrote(&key, None, &Value::Null) {
            continue;
        }
        let info = &shared.owns[*kind];
        let api = api_for(shared, info, namespace);
        // Already gone (a user, or a retried reconcile): nothing left to do.
        let gone = delete_child(&api, name, child.metadata.uid.as_deref())
            .await
            .map_err(|source| ReconcileError::Write {
                verb: "delete",
                what: describe(info, namespace, name),
                source,
            })?;
        if gone {
            shared.wrote(key, None, Value::Null);
            deleted += 1;
        }
    }
    Ok((applied, deleted))
}

/// Checks one child of the answer and adds what the manager sets: its namespace (the
/// object's) and the controller owner reference to the object.
fn desire(
    index: usize,
    child: &Value,
    object: &DynamicObject,
    shared: &Shared,
) -> Result<Desired, ReconcileError> {
    let bad = |message: String| ReconcileError::Child { index, message };
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let (Some(av), Some(kind)) = (text(&child["apiVersion"]), text(&child["kind"])) else {
        return Err(bad("apiVersion and kind are required".to_owned()));
    };
    let Some(k) = shared
        .owns
        .iter()
        .position(|i| i.resource.api_version == av && i.resource.kind == kind)
    else {
        return Err(bad(format!(
            "{av} {kind} is not one of the controller's spec.owns kinds; add it there"
        )));
    };
    let Some(name) = text(&child["metadata"]["name"]).filter(|n| !n.is_empty()) else {
        return Err(bad("metadata.name is required".to_owned()));
    };
    let parent_ns = object.metadata.namespace.clone();
    let namespace = if shared.owns[k].namespaced {
        let ns = text(&child["metadata"]["namespace"]).or_else(|| parent_ns.clone());
        if ns != parent_ns {
            return Err(bad(format!(
                "metadata.namespace {:?} is not the object's namespace {:?}; owner references \
                 cannot cross namespaces",
                ns.unwrap_or_default(),
                parent_ns.unwrap_or_default()
            )));
        }
        ns
    } else {
        None
    };
    let mut body = child.clone();
    let owner = OwnerReference {
        api_version: shared.parent.resource.api_version.clone(),
        kind: shared.parent.resource.kind.clone(),
        name: object.metadata.name.clone().unwrap_or_default(),
        uid: object.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let Some(metadata) = body["metadata"].as_object_mut() else {
        return Err(bad("metadata must be a mapping".to_owned()));
    };
    if let Some(ns) = &namespace {
        metadata.insert("namespace".to_owned(), json!(ns));
    }
    set_controller_owner(metadata, &owner);
    Ok(Desired {
        kind: k,
        namespace,
        name,
        body,
    })
}

/// Writes the answer's status through the status subresource when it differs from the
/// object's. Returns whether it wrote.
async fn write_status(
    object: &DynamicObject,
    value: &Value,
    response: &Response,
    shared: &Shared,
) -> Result<bool, ReconcileError> {
    let Some(status) = response.status.as_ref().filter(|s| !s.is_null()) else {
        return Ok(false);
    };
    if value.get("status") == Some(status) {
        return Ok(false);
    }
    let seen = object.metadata.resource_version.clone();
    let key = format!(
        "status:{}",
        object.metadata.uid.as_deref().unwrap_or_default()
    );
    if shared.already_wrote(&key, seen.as_deref(), status) {
        return Ok(false);
    }
    let name = object.metadata.name.as_deref().unwrap_or_default();
    let namespace = object.metadata.namespace.as_deref();
    let api = api_for(shared, &shared.parent, namespace);
    let kind = &shared.parent.resource;
    let written = apply_status_as(
        &api,
        (&kind.api_version, &kind.kind, name),
        status,
        &shared.field_manager,
    )
    .await
    .map_err(|source| ReconcileError::Write {
        verb: "write the status of",
        what: describe(&shared.parent, namespace, name),
        source,
    })?;
    if let (Some(uid), Some(based_on), Some(produced)) = (
        object.metadata.uid.as_deref(),
        seen.clone(),
        written.metadata.resource_version,
    ) {
        shared.status_written(uid, based_on, produced);
    }
    shared.wrote(key, seen, status.clone());
    Ok(true)
}

fn api_for(shared: &Shared, info: &KindInfo, namespace: Option<&str>) -> Api<DynamicObject> {
    let client = shared.ctx.client().clone();
    match namespace {
        Some(ns) if info.namespaced => Api::namespaced_with(client, ns, &info.resource),
        _ => Api::all_with(client, &info.resource),
    }
}

fn describe(info: &KindInfo, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{} {ns}/{name}", info.resource.kind),
        None => format!("{} {name}", info.resource.kind),
    }
}

/// Whether every field `desired` sets has the same value in `actual` (lists element by
/// element): the server-side apply of `desired` would change nothing the hook asked for.
pub(super) fn is_subset(desired: &Value, actual: &Value) -> bool {
    match (desired, actual) {
        (Value::Object(d), Value::Object(a)) => d.iter().all(|(k, v)| {
            a.get(k).is_some_and(|av| is_subset(v, av)) || v.is_null() && !a.contains_key(k)
        }),
        (Value::Array(d), Value::Array(a)) => {
            d.len() == a.len() && d.iter().zip(a).all(|(dv, av)| is_subset(dv, av))
        }
        (Value::Number(d), Value::Number(a)) => d.as_f64() == a.as_f64(),
        _ => desired == actual,
    }
}

/// The `Controller` `key` names, as the hook contract refers to it.
pub(super) fn controller_ref(key: &ControllerKey) -> ControllerRef {
    ControllerRef {
        namespace: key.namespace.clone(),
        name: key.name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_the_server_completed_is_still_what_the_hook_asked_for() {
        let desired = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}});
        let actual = json!({"metadata": {"name": "a", "uid": "u", "labels": {"x": "1", "y": "2"}},
                            "data": {"k": "v"}});
        assert!(is_subset(&desired, &actual));
        assert!(!is_subset(&json!({"data": {"k": "w"}}), &actual));
        assert!(!is_subset(&json!({"list": [1]}), &json!({"list": [1, 2]})));
        assert!(is_subset(&json!({"n": 1}), &json!({"n": 1.0})));
    }

    #[test]
    fn controller_names_split_into_namespace_and_name() {
        assert_eq!(
            controller_ref(&ControllerKey::new("ops", "cron")),
            ControllerRef {
                namespace: "ops".into(),
                name: "cron".into()
            }
        );
    }
}
