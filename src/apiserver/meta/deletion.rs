//! Finalizers and graceful deletion: whether finalizers keep an object, marking it for deletion
//! while they do, and a namespace's `spec.finalizers`, which only `/finalize` changes.

use serde_json::{Value, json};

use super::identity::now;
use super::{is_namespaces, set_path};
use crate::apiserver::registry::ResourceType;

/// The finalizer that keeps a namespace until its content is deleted (`FinalizerKubernetes`).
pub const KUBERNETES_FINALIZER: &str = "kubernetes";

/// Gives `new` the `spec.finalizers` of `old` (none when `old` has none).
pub(super) fn keep_spec_finalizers(old: &Value, new: &mut Value) {
    match old.get("spec").and_then(|s| s.get("finalizers")) {
        Some(f) if !f.is_null() => set_path(new, &["spec", "finalizers"], f.clone()),
        _ => remove_spec_finalizers(new),
    }
}

/// Removes `obj.spec.finalizers`, when there is one.
pub(super) fn remove_spec_finalizers(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("finalizers");
    }
}

/// Whether `obj` has finalizers: `metadata.finalizers`, and for namespaces `spec.finalizers`.
#[must_use]
pub fn has_finalizers(rt: &ResourceType, obj: &Value) -> bool {
    let pending = |v: &Value| v.as_array().is_some_and(|f| !f.is_empty());
    pending(&obj["metadata"]["finalizers"])
        || (is_namespaces(rt) && pending(&obj["spec"]["finalizers"]))
}

/// Whether an object is being deleted and has no finalizers left (so it must go now).
#[must_use]
pub fn ready_to_delete(rt: &ResourceType, obj: &Value) -> bool {
    !obj["metadata"]["deletionTimestamp"].is_null() && !has_finalizers(rt, obj)
}

/// `obj` marked for deletion while finalizers keep it: a `deletionTimestamp`, and what the
/// resource's storage adds (a zero grace period for most kinds; the `Terminating` phase for a
/// namespace, whose REST storage sets only the timestamp and the phase). A generation it
/// carries is bumped the first time it is marked, so a controller filtering on generation sees
/// the deletion (k8s.io/apiserver pkg/registry/generic/registry/store.go `markAsDeleting`).
#[must_use]
pub fn mark_for_deletion(rt: &ResourceType, obj: &Value) -> Value {
    let mut marked = obj.clone();
    if obj["metadata"]["deletionTimestamp"].is_null()
        && let Some(generation) = obj["metadata"]["generation"].as_i64().filter(|g| *g > 0)
    {
        set_path(
            &mut marked,
            &["metadata", "generation"],
            json!(generation.saturating_add(1)),
        );
    }
    set_path(
        &mut marked,
        &["metadata", "deletionTimestamp"],
        json!(now()),
    );
    if is_namespaces(rt) {
        set_path(&mut marked, &["status", "phase"], json!("Terminating"));
    } else {
        set_path(
            &mut marked,
            &["metadata", "deletionGracePeriodSeconds"],
            json!(0),
        );
    }
    marked
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::apiserver::meta::fixtures::{deployments, namespaces};

    #[test]
    fn marking_for_deletion_never_panics_on_a_stored_status_of_another_type() {
        let rt = namespaces();
        let marked = mark_for_deletion(&rt, &json!({"metadata": {"name": "ns"}, "status": "x"}));
        assert_eq!(marked["status"], json!({"phase": "Terminating"}));
        assert!(marked["metadata"]["deletionTimestamp"].is_string());
        let marked = mark_for_deletion(&deployments(), &json!({"metadata": 5}));
        assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 0);
    }

    #[test]
    fn marking_bumps_a_generation_once_as_kube_apiserver_does() {
        let rt = deployments();
        let marked = mark_for_deletion(&rt, &json!({"metadata": {"name": "d", "generation": 3}}));
        assert_eq!(marked["metadata"]["generation"], 4, "first marked: bumped");
        let again = mark_for_deletion(&rt, &marked);
        assert_eq!(again["metadata"]["generation"], 4, "already marked: kept");
        let none = mark_for_deletion(&rt, &json!({"metadata": {"name": "c"}}));
        assert!(
            none["metadata"]["generation"].is_null(),
            "none set: none added"
        );
    }
}
