//! How the cache evaluates label and field selectors against cached objects (the one place that
//! adapts `selector` to the reader).

use std::collections::BTreeMap;

use kube::core::DynamicObject;

use super::error::{Error, Result};
use crate::selector::{FieldOperator, FieldRequirement, FieldSelector, LabelSelector};

/// A selector `metadata.namespace!=a,metadata.namespace!=b` excluding the namespaces
/// (controller-runtime `namespaceAllSelector`, `pkg/cache/cache.go`).
#[must_use]
pub(crate) fn excluding_namespaces<'a>(
    namespaces: impl IntoIterator<Item = &'a str>,
) -> FieldSelector {
    FieldSelector::from_requirements(
        namespaces
            .into_iter()
            .map(|ns| FieldRequirement::not_equals("metadata.namespace", ns)),
    )
}

/// The `(field, value)` pairs of a list's field selector, which must be a non-empty
/// conjunction of exact matches (controller-runtime `RequiresExactMatch`,
/// `pkg/internal/field/selector/utils.go`: an empty selector is not exact either).
///
/// # Errors
/// [`Error::NonExactFieldSelector`] otherwise.
pub(crate) fn exact_requirements(selector: &FieldSelector) -> Result<Vec<(&str, &str)>> {
    let requirements = selector.requirements();
    if requirements.is_empty() {
        return Err(Error::NonExactFieldSelector);
    }
    requirements
        .iter()
        .map(|r| match r.operator {
            FieldOperator::Equals => Ok((r.field.as_str(), r.value.as_str())),
            FieldOperator::NotEquals => Err(Error::NonExactFieldSelector),
        })
        .collect()
}

/// The value of a field path on a cached object, as a field selector compares it (empty when
/// absent): `metadata.name` and `metadata.namespace` from the typed metadata, every other path
/// from the object's remaining JSON.
#[must_use]
pub fn field_value(obj: &DynamicObject, path: &str) -> String {
    match path {
        "metadata.name" => return obj.metadata.name.clone().unwrap_or_default(),
        "metadata.namespace" => return obj.metadata.namespace.clone().unwrap_or_default(),
        _ => {}
    }
    let mut cur = &obj.data;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(next) => cur = next,
            None => return String::new(),
        }
    }
    match cur {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Bool(b) => b.to_string(),
        serde_json::Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// Whether `obj` passes the list's label selector and exact field requirements.
#[must_use]
pub(crate) fn list_matches(
    obj: &DynamicObject,
    labels: Option<&LabelSelector>,
    fields: &[(&str, &str)],
) -> bool {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    if let Some(sel) = labels
        && !sel.matches(obj.metadata.labels.as_ref().unwrap_or(&EMPTY))
    {
        return false;
    }
    fields.iter().all(|(f, v)| field_value(obj, f) == *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inequality_and_empty_field_selectors_are_not_exact() {
        let sel = FieldSelector::parse("metadata.name=a,status.phase!=Running").unwrap();
        assert!(matches!(
            exact_requirements(&sel),
            Err(Error::NonExactFieldSelector)
        ));
        assert!(matches!(
            exact_requirements(&FieldSelector::everything()),
            Err(Error::NonExactFieldSelector)
        ));
        let exact = FieldSelector::parse("spec.nodeName==n1").unwrap();
        assert_eq!(
            exact_requirements(&exact).unwrap(),
            vec![("spec.nodeName", "n1")]
        );
    }

    #[test]
    fn field_values_come_from_metadata_and_data() {
        let mut obj = DynamicObject::new(
            "x",
            &kube::core::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
        )
        .within("ns");
        obj.data = serde_json::json!({"spec": {"nodeName": "n1", "replicas": 3}});
        assert_eq!(field_value(&obj, "metadata.namespace"), "ns");
        assert_eq!(field_value(&obj, "spec.nodeName"), "n1");
        assert_eq!(field_value(&obj, "spec.replicas"), "3");
        assert_eq!(field_value(&obj, "status.phase"), "");
    }
}
