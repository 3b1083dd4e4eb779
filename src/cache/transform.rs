//! Transforms applied to an object before the informer stores it (controller-runtime's
//! `DefaultTransform` / `ByObject.Transform`, declared instead of coded).

use kube::core::DynamicObject;

/// What to remove from every object before it is stored. The default removes nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Transform {
    /// Remove `metadata.managedFields` (controller-runtime `TransformStripManagedFields`,
    /// `pkg/cache/cache.go`): often the largest part of an object's metadata.
    pub strip_managed_fields: bool,
    /// Annotation keys to remove (e.g. `kubectl.kubernetes.io/last-applied-configuration`).
    pub drop_annotations: Vec<String>,
    /// Label keys to remove. Label selectors are evaluated by the API server before the
    /// transform, so dropping a selected label does not change which objects are cached, but
    /// a list with a label selector through the cache will no longer match them.
    pub drop_labels: Vec<String>,
}

impl Transform {
    /// Whether the transform changes nothing.
    #[must_use]
    pub fn is_identity(&self) -> bool {
        !self.strip_managed_fields
            && self.drop_annotations.is_empty()
            && self.drop_labels.is_empty()
    }

    /// Applies the transform in place.
    pub fn apply(&self, obj: &mut DynamicObject) {
        let meta = &mut obj.metadata;
        if self.strip_managed_fields {
            meta.managed_fields = None;
        }
        if let Some(annotations) = meta.annotations.as_mut() {
            for key in &self.drop_annotations {
                annotations.remove(key);
            }
            if annotations.is_empty() {
                meta.annotations = None;
            }
        }
        if let Some(labels) = meta.labels.as_mut() {
            for key in &self.drop_labels {
                labels.remove(key);
            }
            if labels.is_empty() {
                meta.labels = None;
            }
        }
    }

    /// Short description for `informant explain`.
    #[must_use]
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.strip_managed_fields {
            parts.push("stripManagedFields".to_string());
        }
        if !self.drop_annotations.is_empty() {
            parts.push(format!(
                "dropAnnotations[{}]",
                self.drop_annotations.join(",")
            ));
        }
        if !self.drop_labels.is_empty() {
            parts.push(format!("dropLabels[{}]", self.drop_labels.join(",")));
        }
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(" ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    #[test]
    fn transform_removes_managed_fields_and_listed_keys_only() {
        let mut obj = DynamicObject::new(
            "a",
            &kube::core::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        );
        obj.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        obj.metadata.annotations = Some(
            [
                ("drop".to_string(), "x".to_string()),
                ("keep".into(), "y".into()),
            ]
            .into(),
        );
        obj.metadata.labels = Some([("gone".to_string(), "x".to_string())].into());
        let t = Transform {
            strip_managed_fields: true,
            drop_annotations: vec!["drop".into()],
            drop_labels: vec!["gone".into()],
        };
        t.apply(&mut obj);
        assert!(obj.metadata.managed_fields.is_none());
        assert_eq!(
            obj.metadata.annotations.unwrap().keys().collect::<Vec<_>>(),
            vec!["keep"]
        );
        assert!(obj.metadata.labels.is_none());
    }
}
