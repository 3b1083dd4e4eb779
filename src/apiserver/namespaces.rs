//! The namespace lifecycle, as kube-apiserver and kube-controller-manager's namespace
//! controller give it: a namespace is created with `spec.finalizers: [kubernetes]`; DELETE
//! marks it `Terminating` (a `deletionTimestamp` and `status.phase`); nothing new may be
//! created in it (403, the `NamespaceLifecycle` admission plugin); its content is deleted
//! (objects with finalizers are marked and waited for); once it is empty the `kubernetes`
//! finalizer is removed and, with no other finalizer left, the namespace goes.
//!
//! The controller runs synchronously, in the request whose change can move a terminating
//! namespace forward (its deletion, or the removal of its last object), so a test never waits
//! on it; watchers see the same sequence of events as from a real cluster.

use std::sync::Arc;

use serde_json::Value;

use super::meta::{self, KUBERNETES_FINALIZER};
use super::registry::{ResourceKey, ResourceType};
use super::state::App;
use super::status::{ApiError, ApiResult, Cause};
use super::store::{Action, ObjKey, Stored};

fn namespaces() -> ResourceKey {
    ResourceKey::new("", "namespaces")
}

/// Whether a namespace object is being deleted.
#[must_use]
pub fn is_terminating(ns: &Value) -> bool {
    !ns["metadata"]["deletionTimestamp"].is_null()
        || ns["status"]["phase"].as_str() == Some("Terminating")
}

/// Whether an object of `rt` may be created under `key`: 404 when its namespace does not exist,
/// 403 Forbidden (with kube-apiserver's `NamespaceLifecycle` message and `NamespaceTerminating`
/// cause) when it is terminating. `lookup` reads the store the caller holds.
///
/// # Errors
///
/// As above.
pub fn admit_create(
    rt: &ResourceType,
    key: &ObjKey,
    lookup: &dyn Fn(&ResourceKey, &ObjKey) -> Option<Arc<Stored>>,
) -> ApiResult<()> {
    if !rt.namespaced {
        return Ok(());
    }
    let ns = lookup(&namespaces(), &ObjKey::new("", &key.namespace))
        .ok_or_else(|| ApiError::not_found("", "namespaces", &key.namespace))?;
    if is_terminating(&ns.value) {
        let mut err = ApiError::forbidden(
            &rt.group,
            &rt.plural,
            &key.name,
            &format!(
                "unable to create new content in namespace {} because it is being terminated",
                key.namespace
            ),
        );
        err.causes.push(Cause {
            reason: "NamespaceTerminating".to_string(),
            message: format!("namespace {} is being terminated", key.namespace),
            field: "metadata.namespace".to_string(),
        });
        return Err(err);
    }
    Ok(())
}

/// Move namespace `name` forward if it is terminating: delete its content (marking objects
/// that have finalizers), then, once nothing is left in it, remove the `kubernetes` finalizer
/// and delete it when no other finalizer remains.
pub fn reconcile(app: &App, name: &str) {
    let Some(ns) = app.store.get(&namespaces(), &ObjKey::new("", name)) else {
        return;
    };
    if !is_terminating(&ns.value) {
        return;
    }
    for (resource, key) in app.store.keys_in_namespace(name) {
        let Some(rt) = app.registry.get(&resource) else {
            continue;
        };
        // Errors cannot happen: the decision below never fails.
        let _ = app.store.mutate(&resource, &key, |cur, _| {
            let Some(cur) = cur else {
                return Ok(Action::Keep);
            };
            if !meta::has_finalizers(&rt, &cur.value) {
                return Ok(Action::Delete);
            }
            if cur.value["metadata"]["deletionTimestamp"].is_null() {
                return Ok(Action::Put(meta::mark_for_deletion(&rt, &cur.value)));
            }
            Ok(Action::Keep)
        });
    }
    if !app.store.keys_in_namespace(name).is_empty() {
        return;
    }
    let Some(ns_rt) = app.registry.get(&namespaces()) else {
        return;
    };
    let _ = app
        .store
        .mutate(&namespaces(), &ObjKey::new("", name), |cur, _| {
            let Some(cur) = cur else {
                return Ok(Action::Keep);
            };
            let mut finalized = cur.value.clone();
            if let Some(list) = finalized["spec"]["finalizers"].as_array_mut() {
                list.retain(|f| f != KUBERNETES_FINALIZER);
            }
            if meta::ready_to_delete(&ns_rt, &finalized) {
                Ok(Action::Delete)
            } else if finalized == cur.value {
                Ok(Action::Keep)
            } else {
                Ok(Action::Put(finalized))
            }
        });
}

/// The namespace an object change concerns, when the controller may have to act on it: a
/// namespace that changed, or the namespace of a namespaced object that was deleted.
#[must_use]
pub fn affected(rt: &ResourceType, obj: &Value, deleted: bool) -> Option<String> {
    if meta::is_namespaces(rt) {
        return obj["metadata"]["name"].as_str().map(str::to_string);
    }
    if rt.namespaced && deleted {
        return obj["metadata"]["namespace"].as_str().map(str::to_string);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn terminating_is_read_from_the_deletion_timestamp_or_the_phase() {
        assert!(is_terminating(
            &json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})
        ));
        assert!(is_terminating(&json!({"status": {"phase": "Terminating"}})));
        assert!(!is_terminating(&json!({"status": {"phase": "Active"}})));
    }
}
