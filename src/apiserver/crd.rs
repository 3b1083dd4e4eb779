//! `CustomResourceDefinitions`: validating them, setting their status (names accepted,
//! established), and (un)registering their resources so they are served at once.

use serde_json::{Value, json};

use super::meta;
use super::registry::{PrinterColumn, ResourceKey, ResourceType};
use super::state::App;
use super::status::{ApiError, ApiResult};

fn is_crd(rt: &ResourceType) -> bool {
    rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions"
}

/// The resource a CRD object defines.
///
/// # Errors
///
/// Why the CRD is invalid, with the field path (`spec.scope: ...`).
pub fn resource_type(obj: &Value) -> Result<ResourceType, String> {
    let spec = &obj["spec"];
    let text = |v: &Value, path: &str| -> Result<String, String> {
        match v.as_str() {
            Some(s) if !s.is_empty() => Ok(s.to_string()),
            _ => Err(format!("{path}: Required value")),
        }
    };
    let group = text(&spec["group"], "spec.group")?;
    let names = &spec["names"];
    let plural = text(&names["plural"], "spec.names.plural")?;
    let kind = text(&names["kind"], "spec.names.kind")?;
    let singular = names["singular"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map_or_else(|| kind.to_lowercase(), String::from);
    let namespaced = match spec["scope"].as_str() {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        _ => {
            return Err(
                "spec.scope: Unsupported value: supported values: \"Cluster\", \"Namespaced\""
                    .into(),
            );
        }
    };
    let versions = spec["versions"]
        .as_array()
        .filter(|v| !v.is_empty())
        .ok_or(
            "spec.versions: Invalid value: must have exactly one version marked as storage version",
        )?;
    let storage = versions
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true))
        .ok_or(
            "spec.versions: Invalid value: must have exactly one version marked as storage version",
        )?;
    let mut served: Vec<String> = vec![text(&storage["name"], "spec.versions[].name")?];
    for v in versions {
        let name = text(&v["name"], "spec.versions[].name")?;
        if v["served"].as_bool() == Some(true) && !served.contains(&name) {
            served.push(name);
        }
    }
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let printer_columns = storage["additionalPrinterColumns"]
        .as_array()
        .map(|cols| {
            cols.iter()
                .map(|c| PrinterColumn {
                    name: c["name"].as_str().unwrap_or_default().to_string(),
                    type_: c["type"].as_str().unwrap_or("string").to_string(),
                    json_path: c["jsonPath"].as_str().unwrap_or_default().to_string(),
                    description: c["description"].as_str().unwrap_or_default().to_string(),
                    priority: c["priority"].as_i64().unwrap_or(0),
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(ResourceType {
        group,
        versions: served,
        plural,
        singular,
        kind,
        namespaced,
        short_names: strings(&names["shortNames"]),
        categories: strings(&names["categories"]),
        status_subresource: storage["subresources"]["status"].is_object(),
        fields: Vec::new(),
        printer_columns,
        custom: true,
        storage: None,
        schema: storage["schema"]["openAPIV3Schema"]
            .as_object()
            .map(|s| Value::Object(s.clone())),
        review: false,
    })
}

/// Validate a CRD before it is stored and set its status; other objects pass unchanged.
pub(crate) fn prepare(app: &App, rt: &ResourceType, mut obj: Value) -> ApiResult<Value> {
    if !is_crd(rt) {
        return Ok(obj);
    }
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let invalid = |msg: String| ApiError::invalid(&rt.kind, &rt.group, &name, msg);
    let defined = resource_type(&obj).map_err(invalid)?;
    let expected = format!("{}.{}", defined.plural, defined.group);
    if name != expected {
        return Err(invalid(format!(
            "metadata.name: Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"
        )));
    }
    if app
        .registry
        .get(&defined.key())
        .is_some_and(|existing| !existing.custom)
    {
        return Err(invalid(format!(
            "spec.group: Invalid value: {:?}: is a built-in resource",
            defined.group
        )));
    }
    let now = meta::now();
    let condition = |type_: &str, reason: &str, message: &str| json!({"type": type_, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message});
    obj["status"] = json!({
        "acceptedNames": obj["spec"]["names"].clone(),
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "storedVersions": [defined.preferred_version()],
    });
    Ok(obj)
}

/// Serve the resource a stored CRD defines.
pub(crate) fn register(app: &App, obj: &Value) {
    if let Ok(rt) = resource_type(obj) {
        app.registry.insert(rt);
    }
}

/// Stop serving a deleted CRD's resource and drop its objects.
pub(crate) fn unregister(app: &App, obj: &Value) {
    if let Ok(rt) = resource_type(obj) {
        let key: ResourceKey = rt.key();
        if app.registry.remove(&key).is_some() {
            app.store.delete_resource(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(scope: &str) -> Value {
        json!({
            "metadata": {"name": "cacheconfigs.informant.dev"},
            "spec": {
                "group": "informant.dev",
                "scope": scope,
                "names": {"plural": "cacheconfigs", "kind": "CacheConfig", "shortNames": ["cc"]},
                "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [{"name": "Valid", "type": "string", "jsonPath": ".status.valid"}]}]
            }
        })
    }

    #[test]
    fn a_crd_defines_a_custom_resource_type() {
        let rt = resource_type(&crd("Namespaced")).unwrap();
        assert_eq!(rt.key(), ResourceKey::new("informant.dev", "cacheconfigs"));
        assert!(rt.namespaced && rt.status_subresource && rt.custom);
        assert_eq!(rt.singular, "cacheconfig");
        assert_eq!(rt.printer_columns[0].json_path, ".status.valid");
    }

    #[test]
    fn an_invalid_scope_is_reported_with_its_path() {
        let err = resource_type(&crd("Galaxy")).unwrap_err();
        assert!(err.starts_with("spec.scope"), "{err}");
    }
}
