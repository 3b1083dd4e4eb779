//! Field projections: which parts of an object the cache keeps (`keepFields`) and which it
//! drops (`dropFields`), declared as paths instead of coded as a transform function.
//!
//! A path names a field from the object's root: dot-separated field names, `[*]` for every
//! element of a list (or every value of a map), and `["key"]` for a map key that holds dots or
//! slashes (`data["config.yaml"]`, `metadata.annotations["example.com/owner"]`):
//!
//! ```text
//! spec.nodeName
//! spec.containers[*].image
//! status.conditions
//! metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]
//! ```
//!
//! `keepFields` keeps the named fields and drops everything else, except `apiVersion`, `kind`
//! and the metadata the cache itself needs (name, namespace, uid, resourceVersion, labels,
//! ownerReferences, deletionTimestamp, finalizers, generation: identity, selectors, owners,
//! finalizers, deletion). `dropFields` removes the named fields; it applies after
//! `keepFields`. A path that is absent from an object changes nothing in it.
//!
//! `metadata` is addressed by whole fields (`metadata.annotations`), or by key inside
//! `metadata.annotations` and `metadata.labels`.

mod path;
mod rules;

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use kube::core::{DynamicObject, ObjectMeta};
use serde_json::Value;

pub(crate) use path::Step;
pub use path::{ObjectPath, PathError};
use rules::PROJECTABLE_META;
pub use rules::{Side, check};

/// The set of paths below one point of the object, as a tree.
#[derive(Clone, Debug, Default)]
struct Tree {
    whole: bool,
    fields: BTreeMap<String, Tree>,
    each: Option<Box<Tree>>,
}

impl Tree {
    fn insert(&mut self, steps: &[Step]) {
        let Some((first, rest)) = steps.split_first() else {
            self.whole = true;
            return;
        };
        let child = match first {
            Step::Field(name) => self.fields.entry(name.clone()).or_default(),
            Step::Each => self.each.get_or_insert_with(Box::default),
        };
        child.insert(rest);
    }
}

/// Keeps, of `value`, what one of `trees` names; returns whether `value` itself is kept.
fn keep(value: &mut Value, trees: &[&Tree]) -> bool {
    if trees.iter().any(|t| t.whole) {
        return true;
    }
    match value {
        Value::Object(map) => {
            map.retain(|key, child| {
                let below: Vec<&Tree> = trees
                    .iter()
                    .flat_map(|t| t.fields.get(key).into_iter().chain(t.each.as_deref()))
                    .collect();
                !below.is_empty() && keep(child, &below)
            });
            true
        }
        Value::Array(items) => {
            let below: Vec<&Tree> = trees.iter().filter_map(|t| t.each.as_deref()).collect();
            if below.is_empty() {
                return false;
            }
            items.retain_mut(|item| keep(item, &below));
            true
        }
        _ => false,
    }
}

/// Removes what `steps` names below `value`.
fn drop_path(value: &mut Value, steps: &[Step]) {
    let Some((first, rest)) = steps.split_first() else {
        return;
    };
    match (first, value) {
        (Step::Field(name), Value::Object(map)) => {
            if rest.is_empty() {
                map.remove(name);
            } else if let Some(child) = map.get_mut(name) {
                drop_path(child, rest);
            }
        }
        (Step::Each, Value::Object(map)) => {
            if rest.is_empty() {
                map.clear();
            } else {
                for v in map.values_mut() {
                    drop_path(v, rest);
                }
            }
        }
        (Step::Each, Value::Array(items)) => {
            if rest.is_empty() {
                items.clear();
            } else {
                for v in items.iter_mut() {
                    drop_path(v, rest);
                }
            }
        }
        _ => {}
    }
}

/// What a projection does to `metadata`, resolved from its paths.
#[derive(Clone, Debug, Default)]
struct MetaPlan {
    /// With `keepFields`: the projectable fields kept (`None`: no `keepFields`, all kept).
    kept: Option<Vec<String>>,
    /// With `keepFields`: annotation keys kept when `annotations` is not kept whole.
    kept_annotations: Vec<String>,
    /// Fields dropped whole.
    dropped: Vec<String>,
    /// Annotation and label keys dropped.
    dropped_annotations: Vec<String>,
    dropped_labels: Vec<String>,
}

/// A declared projection: `keepFields` and `dropFields`, compiled. The default projection
/// keeps everything. Cloning shares the compiled form.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Projection(Option<Arc<Compiled>>);

/// The compiled form of a projection that changes something.
#[derive(Debug)]
struct Compiled {
    keep_paths: Option<Vec<ObjectPath>>,
    drop_paths: Vec<ObjectPath>,
    keep: Option<Tree>,
    meta: MetaPlan,
}

impl PartialEq for Compiled {
    fn eq(&self, other: &Self) -> bool {
        self.keep_paths == other.keep_paths && self.drop_paths == other.drop_paths
    }
}

impl Eq for Compiled {}

impl Hash for Compiled {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.keep_paths.hash(state);
        self.drop_paths.hash(state);
    }
}

impl Projection {
    /// Compiles `keepFields` (`None`: keep everything) and `dropFields`. The paths must have
    /// passed [`check`].
    #[must_use]
    pub fn new(keep_paths: Option<Vec<ObjectPath>>, drop_paths: Vec<ObjectPath>) -> Self {
        if keep_paths.is_none() && drop_paths.is_empty() {
            return Self(None);
        }
        let mut meta = MetaPlan::default();
        let keep = keep_paths.as_ref().map(|paths| {
            let mut tree = Tree::default();
            let mut kept = Vec::new();
            let mut whole_meta = false;
            for path in paths {
                match path.steps() {
                    [Step::Field(root), rest @ ..] if root == "metadata" => match rest {
                        [] => whole_meta = true,
                        [Step::Field(field)] => kept.push(field.clone()),
                        [Step::Field(field), Step::Field(key)] if field == "annotations" => {
                            meta.kept_annotations.push(key.clone());
                        }
                        _ => {}
                    },
                    steps => tree.insert(steps),
                }
            }
            if whole_meta {
                kept = PROJECTABLE_META.iter().map(|f| (*f).to_owned()).collect();
            }
            meta.kept = Some(kept);
            tree
        });
        for path in &drop_paths {
            match path.steps() {
                [Step::Field(root), rest @ ..] if root == "metadata" => match rest {
                    [Step::Field(field)] => meta.dropped.push(field.clone()),
                    [Step::Field(field), Step::Field(key)] if field == "annotations" => {
                        meta.dropped_annotations.push(key.clone());
                    }
                    [Step::Field(field), Step::Field(key)] if field == "labels" => {
                        meta.dropped_labels.push(key.clone());
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        Self(Some(Arc::new(Compiled {
            keep_paths,
            drop_paths,
            keep,
            meta,
        })))
    }

    /// The `keepFields` paths, if any.
    #[must_use]
    pub(crate) fn keep_paths(&self) -> Option<&[ObjectPath]> {
        self.0.as_ref()?.keep_paths.as_deref()
    }

    /// The `dropFields` paths.
    #[must_use]
    pub(crate) fn drop_paths(&self) -> &[ObjectPath] {
        self.0.as_ref().map_or(&[], |c| &c.drop_paths)
    }

    /// Whether the projection changes nothing.
    #[must_use]
    pub fn is_identity(&self) -> bool {
        self.0.is_none()
    }

    /// Applies the projection to an object as the informer holds it.
    pub fn apply(&self, obj: &mut DynamicObject) {
        if let Some(compiled) = &self.0 {
            compiled.apply(obj);
        }
    }

    /// Short description for `informant explain`: `keepFields[spec.nodeName,status]
    /// dropFields[data]`; empty for the identity.
    #[must_use]
    pub fn describe(&self) -> String {
        let join = |paths: &[ObjectPath]| {
            paths
                .iter()
                .map(ObjectPath::as_str)
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut parts = Vec::new();
        if let Some(keep) = self.keep_paths() {
            parts.push(format!("keepFields[{}]", join(keep)));
        }
        if !self.drop_paths().is_empty() {
            parts.push(format!("dropFields[{}]", join(self.drop_paths())));
        }
        parts.join(" ")
    }
}

impl Compiled {
    fn apply(&self, obj: &mut DynamicObject) {
        self.apply_meta(&mut obj.metadata);
        if let Some(tree) = &self.keep
            && let Value::Object(map) = &mut obj.data
        {
            map.retain(|key, child| match tree.fields.get(key) {
                Some(below) => keep(child, &[below]),
                None => false,
            });
        }
        for path in &self.drop_paths {
            if !matches!(path.steps().first(), Some(Step::Field(root)) if root == "metadata") {
                drop_path(&mut obj.data, path.steps());
            }
        }
    }

    fn apply_meta(&self, meta: &mut ObjectMeta) {
        let plan = &self.meta;
        let keeps = |field: &str| {
            plan.kept
                .as_ref()
                .is_none_or(|kept| kept.iter().any(|k| k == field))
                && !plan.dropped.iter().any(|d| d == field)
        };
        if !keeps("annotations") {
            let wanted = &plan.kept_annotations;
            match meta.annotations.as_mut() {
                Some(map)
                    if !wanted.is_empty() && !plan.dropped.iter().any(|d| d == "annotations") =>
                {
                    map.retain(|k, _| wanted.contains(k));
                }
                _ => meta.annotations = None,
            }
        }
        if !keeps("creationTimestamp") {
            meta.creation_timestamp = None;
        }
        if !keeps("deletionGracePeriodSeconds") {
            meta.deletion_grace_period_seconds = None;
        }
        if !keeps("generateName") {
            meta.generate_name = None;
        }
        if !keeps("managedFields") {
            meta.managed_fields = None;
        }
        if !keeps("selfLink") {
            meta.self_link = None;
        }
        for (map, keys) in [
            (&mut meta.annotations, &plan.dropped_annotations),
            (&mut meta.labels, &plan.dropped_labels),
        ] {
            if let Some(entries) = map.as_mut() {
                for key in keys {
                    entries.remove(key);
                }
                if entries.is_empty() {
                    *map = None;
                }
            }
        }
        if meta.annotations.as_ref().is_some_and(BTreeMap::is_empty) {
            meta.annotations = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(text: &str) -> ObjectPath {
        ObjectPath::parse(text).unwrap()
    }

    fn project(keep: Option<&[&str]>, drop: &[&str], object: Value) -> Value {
        let projection = Projection::new(
            keep.map(|k| k.iter().map(|p| path(p)).collect()),
            drop.iter().map(|p| path(p)).collect(),
        );
        let mut obj: DynamicObject = serde_json::from_value(object).unwrap();
        projection.apply(&mut obj);
        serde_json::to_value(obj).unwrap()
    }

    fn pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-1", "namespace": "shop", "uid": "u1", "resourceVersion": "7",
                "generation": 2, "labels": {"app": "web"},
                "annotations": {"a.example/x": "1", "b": "2"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "r1"}],
                "finalizers": ["f"], "creationTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{"manager": "kubectl"}]
            },
            "spec": {
                "nodeName": "n1",
                "containers": [
                    {"name": "app", "image": "web:1", "env": [{"name": "X", "value": "1"}]},
                    {"name": "side", "image": "proxy:2"}
                ],
                "volumes": [{"name": "v"}]
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}], "podIP": "10.0.0.1"}
        })
    }

    #[test]
    fn keep_fields_keeps_the_paths_and_the_metadata_the_cache_needs() {
        let out = project(
            Some(&[
                "spec.nodeName",
                "spec.containers[*].name",
                "status.phase",
                "status.conditions",
            ]),
            &[],
            pod(),
        );
        assert_eq!(
            out,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "name": "web-1", "namespace": "shop", "uid": "u1", "resourceVersion": "7",
                    "generation": 2, "labels": {"app": "web"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "r1"}],
                    "finalizers": ["f"]
                },
                "spec": {"nodeName": "n1", "containers": [{"name": "app"}, {"name": "side"}]},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            })
        );
    }

    #[test]
    fn keep_fields_may_keep_metadata_fields_and_annotation_keys() {
        let out = project(
            Some(&[
                "metadata.creationTimestamp",
                "metadata.annotations[\"a.example/x\"]",
            ]),
            &[],
            pod(),
        );
        assert_eq!(out["metadata"]["creationTimestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(out["metadata"]["annotations"], json!({"a.example/x": "1"}));
        assert!(out["metadata"].get("managedFields").is_none());
        assert!(out.get("spec").is_none());
        let whole = project(Some(&["metadata"]), &[], pod());
        assert_eq!(whole["metadata"], pod()["metadata"]);
    }

    #[test]
    fn drop_fields_removes_paths_through_lists_and_maps() {
        let out = project(
            None,
            &[
                "spec.containers[*].env",
                "status.podIP",
                "metadata.managedFields",
                "metadata.annotations[\"b\"]",
                "spec.missing.deeper",
            ],
            pod(),
        );
        let mut want = pod();
        want["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("env");
        want["status"].as_object_mut().unwrap().remove("podIP");
        let meta = want["metadata"].as_object_mut().unwrap();
        meta.remove("managedFields");
        meta["annotations"].as_object_mut().unwrap().remove("b");
        assert_eq!(out, want);
    }

    #[test]
    fn drop_applies_after_keep_and_each_walks_map_values() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "d"},
            "data": {"a": "1", "b.yaml": "2"},
            "binaryData": {"x": "AA=="}});
        let out = project(Some(&["data"]), &["data[\"b.yaml\"]"], cm.clone());
        assert_eq!(out["data"], json!({"a": "1"}));
        assert!(out.get("binaryData").is_none());
        let out = project(None, &["data[*]"], cm);
        assert_eq!(out["data"], json!({}));
    }

    #[test]
    fn paths_through_scalars_or_absent_fields_change_nothing_else() {
        let out = project(Some(&["spec.nodeName.deeper", "spec.absent"]), &[], pod());
        assert_eq!(out.get("spec"), Some(&json!({})));
        let out = project(None, &["spec.nodeName.deeper"], pod());
        assert_eq!(out, pod());
    }

    #[test]
    fn equal_projections_hash_equal_whatever_their_compiled_form() {
        use std::collections::hash_map::DefaultHasher;
        let a = Projection::new(Some(vec![path("spec")]), vec![]);
        let b = Projection::new(Some(vec![path("spec")]), vec![]);
        let hash = |p: &Projection| {
            let mut h = DefaultHasher::new();
            p.hash(&mut h);
            h.finish()
        };
        assert_eq!(a, b);
        assert_eq!(hash(&a), hash(&b));
        assert_ne!(a, Projection::new(None, vec![path("spec")]));
    }
}
