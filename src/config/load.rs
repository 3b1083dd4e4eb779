//! Loading a `CacheConfig` document (a file, a string, or an object from the cluster) into
//! validated typed options, reporting every problem at once.

use std::path::Path;
use std::sync::OnceLock;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::CustomResourceExt;
use kube::core::Resource;
use serde_json::Value;

use super::error::{Error, FieldError, FieldPath, Origin, Result};
use super::names::dns1123_subdomain_problem;
use super::status::CacheConfigStatus;
use super::structure;
use super::types::{CacheConfig, CacheConfigSpec};
use super::validate::validate_spec;
use crate::{cache, recorder};

/// A valid `CacheConfig` and the typed options built from it.
#[derive(Clone, Debug, PartialEq)]
pub struct Validated {
    /// The document as loaded (structure already checked).
    pub resource: CacheConfig,
    /// The cache options, not yet defaulted (see [`cache::Options::defaulted`]).
    pub cache: cache::Options,
    /// The recorder options, with client-go's defaults for what the spec leaves out.
    pub recorder: recorder::Options,
}

/// Loads and validates a `CacheConfig` YAML file (the document a user would `kubectl apply`).
///
/// # Errors
///
/// [`Error::Read`] if the file cannot be read, [`Error::Syntax`] if it is not YAML,
/// [`Error::Invalid`] with every problem if it is not a valid `CacheConfig`.
pub fn load(path: impl AsRef<Path>) -> Result<Validated> {
    let path = path.as_ref();
    load_file_text(path, &read(path)?)
}

/// The text of the file at `path`, or [`Error::Read`].
pub(crate) fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })
}

/// Loads and validates `text`, read from the file at `path` (errors name the file).
pub(crate) fn load_file_text(path: &Path, text: &str) -> Result<Validated> {
    load_text(text, &Origin::File(path.to_owned()))
}

/// Loads and validates a `CacheConfig` YAML document from a string.
///
/// # Errors
///
/// [`Error::Syntax`] if it is not YAML, [`Error::Invalid`] with every problem if it is not a
/// valid `CacheConfig`.
pub fn load_str(text: &str) -> Result<Validated> {
    load_text(text, &Origin::Text)
}

/// Validates a `CacheConfig` read from the cluster.
///
/// # Errors
///
/// [`Error::Invalid`] with every problem.
pub fn validate(resource: &CacheConfig) -> Result<Validated> {
    let origin = Origin::Resource {
        namespace: resource.metadata.namespace.clone().unwrap_or_default(),
        name: resource.metadata.name.clone().unwrap_or_default(),
    };
    let value = serde_json::to_value(resource).map_err(|e| Error::Invalid {
        origin: origin.clone(),
        errors: vec![FieldError::new(
            &FieldPath::default(),
            format!("cannot serialize: {e}"),
        )],
    })?;
    load_value(value, &origin)
}

/// Validates a `CacheConfig` read from the cluster as JSON (a dynamic object), so a field this
/// version of informant does not know is reported at its path, as from a file, instead of
/// failing to decode. `status` is the manager's, not the user's: it is not validated, and is
/// kept in [`Validated::resource`] when it decodes.
///
/// # Errors
///
/// [`Error::Invalid`] with every problem.
pub(crate) fn validate_json(mut object: Value) -> Result<Validated> {
    let text = |field: &str| {
        object["metadata"][field]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let origin = Origin::Resource {
        namespace: text("namespace"),
        name: text("name"),
    };
    let status = object.as_object_mut().and_then(|map| map.remove("status"));
    let mut config = load_value(object, &origin)?;
    config.resource.status = status.and_then(|s| serde_json::from_value(s).ok());
    Ok(config)
}

/// The `CacheConfig` CRD as YAML, exactly as `crds/cacheconfigs.informant.dev.yaml` holds it.
///
/// # Errors
///
/// [`Error::Render`] if YAML rendering fails (it does not for this static type).
pub fn crd_yaml() -> Result<String> {
    crate::yaml::to_string(&CacheConfig::crd()).map_err(Error::Render)
}

impl TryFrom<&CacheConfigSpec> for cache::Options {
    type Error = Error;

    /// Validates a bare spec into cache options (paths start at `spec`).
    fn try_from(spec: &CacheConfigSpec) -> Result<Self> {
        validate_spec(spec)
            .map(|(cache, _)| cache)
            .map_err(|errors| Error::Invalid {
                origin: Origin::Spec,
                errors,
            })
    }
}

fn load_text(text: &str, origin: &Origin) -> Result<Validated> {
    let syntax = |message| Error::Syntax {
        origin: origin.clone(),
        message,
    };
    let documents = crate::yaml::documents(text).map_err(|e| syntax(e.to_string()))?;
    if documents.len() <= 1 {
        let value: Value = crate::yaml::from_str(text).map_err(|e| syntax(e.to_string()))?;
        return load_value(value, origin);
    }
    // A multi-document file: one CacheConfig and any number of Controllers (which
    // `hooks::controllers_in` reads, in a build with the `hooks` feature).
    refuse_unbuilt_controllers(&documents, cfg!(feature = "hooks"), origin)?;
    let mut configs: Vec<Value> = documents
        .into_iter()
        .filter(|d| crate::yaml::document_kind(d) != Some("Controller"))
        .collect();
    match configs.len() {
        1 => load_value(configs.remove(0), origin),
        n => Err(Error::Invalid {
            origin: origin.clone(),
            errors: vec![FieldError::new(
                &FieldPath::default(),
                format!(
                    "a multi-document file holds one CacheConfig and any number of \
                     Controllers; found {n} documents that are not Controllers"
                ),
            )],
        }),
    }
}

/// Without the `hooks` feature (`hooks_built` false) nothing runs a file's `Controller`
/// documents: a file holding one is refused, naming the feature, rather than loaded without
/// them.
fn refuse_unbuilt_controllers(
    documents: &[Value],
    hooks_built: bool,
    origin: &Origin,
) -> Result<()> {
    let controllers = documents
        .iter()
        .filter(|d| crate::yaml::document_kind(d) == Some("Controller"))
        .count();
    if hooks_built || controllers == 0 {
        return Ok(());
    }
    Err(Error::Invalid {
        origin: origin.clone(),
        errors: vec![FieldError::new(
            &FieldPath::default(),
            format!(
                "the file holds {controllers} Controller document(s), which run only in a build \
                 of informant with its `hooks` cargo feature; this one was built without it"
            ),
        )],
    })
}

/// The CRD's `OpenAPI` schema of the whole object, built once, with the fields every object
/// has (the API server adds them; the generated schema leaves them out).
fn root_schema() -> &'static JSONSchemaProps {
    static SCHEMA: OnceLock<JSONSchemaProps> = OnceLock::new();
    SCHEMA.get_or_init(|| document_schema(CacheConfig::crd()))
}

/// The schema of a whole document of `crd`'s kind: its spec (and status) as the CRD declares
/// them, with `apiVersion`, `kind` and `metadata`, which every object has, added; what the
/// structure check of a file's document compares it with.
pub(crate) fn document_schema(crd: CustomResourceDefinition) -> JSONSchemaProps {
    let mut schema = crd
        .spec
        .versions
        .into_iter()
        .next()
        .and_then(|v| v.schema)
        .and_then(|s| s.open_api_v3_schema)
        .unwrap_or_default();
    let string = JSONSchemaProps {
        type_: Some("string".to_owned()),
        ..JSONSchemaProps::default()
    };
    let object = JSONSchemaProps {
        type_: Some("object".to_owned()),
        x_kubernetes_preserve_unknown_fields: Some(true),
        ..JSONSchemaProps::default()
    };
    let props = schema.properties.get_or_insert_with(Default::default);
    props.insert("apiVersion".to_owned(), string.clone());
    props.insert("kind".to_owned(), string);
    props.insert("metadata".to_owned(), object);
    schema
}

fn load_value(mut value: Value, origin: &Origin) -> Result<Validated> {
    let invalid = |errors| Error::Invalid {
        origin: origin.clone(),
        errors,
    };
    let root = FieldPath::default();
    match &value {
        Value::Object(_) => {}
        Value::Null => {
            return Err(invalid(vec![FieldError::new(
                &root,
                "empty document; write a CacheConfig with apiVersion, kind, metadata and spec",
            )]));
        }
        _ => {
            return Err(invalid(vec![FieldError::new(
                &root,
                "must be a mapping; write a CacheConfig with apiVersion, kind, metadata and spec",
            )]));
        }
    }
    let mut errors = Vec::new();
    structure::check(&mut value, root_schema(), &root, &mut errors);
    let structural: Vec<FieldPath> = errors.iter().map(|e| e.path.clone()).collect();
    let mut semantic = Vec::new();

    check_type_meta(&value, &mut semantic);
    let metadata = take_metadata(&mut value, &mut semantic);
    let spec_path = FieldPath::root("spec");
    let spec = match value.get_mut("spec").map(Value::take) {
        None => {
            semantic.push(FieldError::new(
                &spec_path,
                "required; add `spec: {}` to use every default",
            ));
            None
        }
        Some(v) => match serde_json::from_value::<CacheConfigSpec>(v) {
            Ok(spec) => Some(spec),
            Err(e) => {
                semantic.push(FieldError::new(&spec_path, format!("{e}; fix the spec")));
                None
            }
        },
    };
    let built = spec.as_ref().map(validate_spec);
    if let Some(Err(e)) = &built {
        semantic.extend(e.iter().cloned());
    }
    semantic.retain(|e| !structural.iter().any(|p| e.path.starts_with(p)));
    errors.extend(semantic);
    match (spec, built) {
        (Some(spec), Some(Ok((cache, recorder)))) if errors.is_empty() => {
            let status = value
                .get_mut("status")
                .map(Value::take)
                .and_then(|s| serde_json::from_value::<CacheConfigStatus>(s).ok());
            let mut resource = CacheConfig::new("", spec);
            resource.metadata = metadata;
            resource.status = status;
            Ok(Validated {
                resource,
                cache,
                recorder,
            })
        }
        _ => Err(invalid(errors)),
    }
}

/// Checks `apiVersion` and `kind` against the CRD's.
fn check_type_meta(value: &Value, errors: &mut Vec<FieldError>) {
    let want_av = CacheConfig::api_version(&());
    let want_kind = CacheConfig::kind(&());
    for (field, want) in [
        ("apiVersion", want_av.as_ref()),
        ("kind", want_kind.as_ref()),
    ] {
        let path = FieldPath::root(field);
        match value.get(field).and_then(Value::as_str) {
            None => errors.push(FieldError::new(
                &path,
                format!("required; set it to {want}"),
            )),
            Some(got) if got != want => errors.push(FieldError::new(
                &path,
                format!("unsupported {got:?}; set it to {want}"),
            )),
            Some(_) => {}
        }
    }
}

/// The fields of `ObjectMeta` (apimachinery `pkg/apis/meta/v1/types.go`); k8s-openapi's
/// deserializer ignores any other, so typos are caught here.
const OBJECT_META_FIELDS: [&str; 15] = [
    "annotations",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "finalizers",
    "generateName",
    "generation",
    "labels",
    "managedFields",
    "name",
    "namespace",
    "ownerReferences",
    "resourceVersion",
    "selfLink",
    "uid",
];

/// Takes `metadata` out of the document and checks its fields and name.
fn take_metadata(value: &mut Value, errors: &mut Vec<FieldError>) -> ObjectMeta {
    let path = FieldPath::root("metadata");
    if let Some(Value::Object(map)) = value.get_mut("metadata") {
        let known: Vec<String> = OBJECT_META_FIELDS.iter().map(|f| (*f).to_owned()).collect();
        let unknown: Vec<String> = map
            .keys()
            .filter(|k| !OBJECT_META_FIELDS.contains(&k.as_str()))
            .cloned()
            .collect();
        for key in unknown {
            map.remove(&key);
            errors.push(FieldError::new(
                &path.field(&key),
                structure::unknown_field(&key, known.iter()),
            ));
        }
    }
    let meta = match value.get_mut("metadata").map(Value::take) {
        None => ObjectMeta::default(),
        Some(v) => match serde_json::from_value::<ObjectMeta>(v) {
            Ok(m) => m,
            Err(e) => {
                errors.push(FieldError::new(&path, format!("{e}; fix the metadata")));
                return ObjectMeta::default();
            }
        },
    };
    match meta.name.as_deref() {
        None => errors.push(FieldError::new(
            &path.field("name"),
            "required; name the CacheConfig, e.g. `name: default`",
        )),
        Some(name) => {
            if let Some(problem) = dns1123_subdomain_problem(name) {
                errors.push(FieldError::new(
                    &path.field("name"),
                    format!("invalid name {name:?}: {problem}; use lowercase letters, digits, '-' and '.'"),
                ));
            }
        }
    }
    meta
}

#[cfg(test)]
mod tests {
    use super::*;

    const WITH_A_CONTROLLER: &str = "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: c}
spec: {}
---
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: h, namespace: default}
spec: {}
";

    #[test]
    fn a_build_without_hooks_refuses_a_file_of_controllers_naming_the_feature() {
        let documents = crate::yaml::documents(WITH_A_CONTROLLER).unwrap();
        let refused = refuse_unbuilt_controllers(&documents, false, &Origin::Text).unwrap_err();
        assert!(
            refused.to_string().contains("1 Controller document(s)")
                && refused.to_string().contains("`hooks` cargo feature"),
            "{refused}"
        );
        assert!(refuse_unbuilt_controllers(&documents, true, &Origin::Text).is_ok());
        let alone = crate::yaml::documents("kind: CacheConfig\n---\nkind: CacheConfig\n").unwrap();
        assert!(refuse_unbuilt_controllers(&alone, false, &Origin::Text).is_ok());
    }

    #[test]
    fn this_build_loads_a_file_of_controllers_as_its_features_say() {
        let loaded = load_str(WITH_A_CONTROLLER);
        assert_eq!(loaded.is_ok(), cfg!(feature = "hooks"), "{loaded:?}");
    }
}
