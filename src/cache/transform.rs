//! Applies a [`Transform`](super::Transform) to a typed object before the
//! informer stores it (controller-runtime's `DefaultTransform` / `ByObject.Transform`, declared
//! instead of coded).

use kube::core::DynamicObject;

use super::options::Transform;

/// Applies `transform` in place: drops `metadata.managedFields` (controller-runtime
/// `TransformStripManagedFields`) and the listed annotation and label keys. Label selectors
/// are evaluated by the API server before the transform, so dropping a selected label does not
/// change which objects are cached, but cache lists with that label no longer match them.
pub fn apply(transform: &Transform, obj: &mut DynamicObject) {
    transform.projection.apply(obj);
    let meta = &mut obj.metadata;
    if transform.strip_managed_fields {
        meta.managed_fields = None;
    }
    if let Some(annotations) = meta.annotations.as_mut() {
        for key in &transform.drop_annotations {
            annotations.remove(key);
        }
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
    if let Some(labels) = meta.labels.as_mut() {
        for key in &transform.drop_labels {
            labels.remove(key);
        }
        if labels.is_empty() {
            meta.labels = None;
        }
    }
}

/// Short description for `informant explain` (`none`, `stripManagedFields dropLabels[a,b]`,
/// `keepFields[spec.nodeName,status.phase]`).
#[must_use]
pub fn describe(transform: &Transform) -> String {
    let mut parts = Vec::new();
    if transform.strip_managed_fields {
        parts.push("stripManagedFields".to_string());
    }
    if !transform.drop_annotations.is_empty() {
        parts.push(format!(
            "dropAnnotations[{}]",
            transform.drop_annotations.join(",")
        ));
    }
    if !transform.drop_labels.is_empty() {
        parts.push(format!("dropLabels[{}]", transform.drop_labels.join(",")));
    }
    if !transform.projection.is_identity() {
        parts.push(transform.projection.describe());
    }
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(" ")
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
            ..Transform::default()
        };
        apply(&t, &mut obj);
        assert!(obj.metadata.managed_fields.is_none());
        assert_eq!(
            obj.metadata.annotations.unwrap().keys().collect::<Vec<_>>(),
            vec!["keep"]
        );
        assert!(obj.metadata.labels.is_none());
        assert_eq!(
            describe(&t),
            "stripManagedFields dropAnnotations[drop] dropLabels[gone]"
        );
    }
}
