//! The committed CRD (`crds/cacheconfigs.informant.dev.yaml`) is exactly what the code
//! generates, and has the shape users rely on (printer columns, status subresource, schema).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

const COMMITTED: &str = include_str!("../../crds/cacheconfigs.informant.dev.yaml");

/// `committed` (the file `path`) is what crdgen generates now.
fn assert_up_to_date(generated: &str, committed: &str, path: &str) {
    assert!(
        generated == committed,
        "{path} is stale: regenerate it with `cargo run --bin crdgen` and commit the result"
    );
}

#[test]
fn committed_crd_is_up_to_date() {
    assert_up_to_date(
        &informant::config::crd_yaml().unwrap(),
        COMMITTED,
        "crds/cacheconfigs.informant.dev.yaml",
    );
}

#[test]
fn crd_is_namespaced_with_status_short_name_and_printer_columns() {
    let crd: CustomResourceDefinition = serde_yaml::from_str(COMMITTED).unwrap();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("cacheconfigs.informant.dev")
    );
    assert_eq!(crd.spec.group, "informant.dev");
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.kind, "CacheConfig");
    assert_eq!(
        crd.spec.names.short_names.as_deref(),
        Some(&["cc".to_owned()][..])
    );
    let version = &crd.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(version.subresources.as_ref().unwrap().status.is_some());
    let columns: Vec<&str> = version
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(columns, ["Valid", "Ready", "Informers", "Memory", "Age"]);
    assert_eq!(crd, informant::config::CacheConfig::crd());
}

#[test]
fn every_spec_field_has_a_description_for_kubectl_explain() {
    let crd = informant::config::CacheConfig::crd();
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref()
        .unwrap();
    let spec = &schema.properties.as_ref().unwrap()["spec"];
    let mut missing = Vec::new();
    walk(spec, "spec", &mut missing);
    assert!(
        missing.is_empty(),
        "fields without a description: {missing:?}"
    );
}

fn walk(
    schema: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps,
    path: &str,
    missing: &mut Vec<String>,
) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
    };
    for (name, prop) in schema.properties.iter().flatten() {
        let p = format!("{path}.{name}");
        if prop.description.as_deref().unwrap_or("").is_empty() {
            missing.push(p.clone());
        }
        walk(prop, &p, missing);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &schema.items {
        walk(items, &format!("{path}[]"), missing);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = &schema.additional_properties {
        walk(values, &format!("{path}{{}}"), missing);
    }
}

const COMMITTED_CONTROLLERS: &str = include_str!("../../crds/controllers.informant.dev.yaml");

#[test]
fn committed_controller_crd_is_up_to_date() {
    assert_up_to_date(
        &informant::hooks::controller_crd_yaml().unwrap(),
        COMMITTED_CONTROLLERS,
        "crds/controllers.informant.dev.yaml",
    );
}

#[test]
fn controller_crd_is_namespaced_with_status_and_printer_columns() {
    let crd: CustomResourceDefinition = serde_yaml::from_str(COMMITTED_CONTROLLERS).unwrap();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("controllers.informant.dev")
    );
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.kind, "Controller");
    let version = &crd.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(version.subresources.as_ref().unwrap().status.is_some());
    let columns: Vec<&str> = version
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(columns, ["Valid", "Ready", "Reconciles", "Failures", "Age"]);
    let schema = version
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref()
        .unwrap();
    let mut missing = Vec::new();
    walk(
        &schema.properties.as_ref().unwrap()["spec"],
        "spec",
        &mut missing,
    );
    assert!(
        missing.is_empty(),
        "fields without a description: {missing:?}"
    );
}
