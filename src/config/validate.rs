//! Validation: the wire [`CacheConfigSpec`] into typed [`cache::Options`] and
//! [`recorder::Options`], collecting every error (with its path and a fix) instead of stopping
//! at the first. The cache's scope is validated here; `spec.recorder` in `recording.rs` and
//! `spec.sharding` in `sharding.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::core::{GroupVersion, GroupVersionKind};

use super::duration::parse_duration;
use super::error::{FieldError, FieldPath};
use super::names::{dns1123_label_problem, dns1123_subdomain_problem};
use super::types::{ByObjectSpec, CacheConfigSpec, NamespaceConfig, TransformSpec};
use crate::cache;
use crate::cache::projection::{self, ObjectPath, Projection, Side};
use crate::cache::{ByObject, Config, NamespaceKey, Namespaces, Scope, Transform, builtin_scope};
use crate::kinds;
use crate::recorder;
use crate::selector::{FieldSelector, LabelSelector, Operator, Requirement};
use crate::suggest::closest;

mod recording;
mod sharding;

const DURATION_HINT: &str = "write a Go duration such as 10h, 30m, 90s or 1h30m";
const LABEL_SELECTOR_HINT: &str =
    "write requirements such as app=web, tier!=db, env in (a,b), !legacy, separated by commas";
const FIELD_SELECTOR_HINT: &str =
    "write terms such as status.phase=Running or metadata.name!=x, separated by commas";

/// Typed options built from a valid spec.
pub(crate) type Built = (cache::Options, recorder::Options);

/// Validates `spec` (reported under the path `spec`) into typed options, or returns every
/// problem found.
pub(crate) fn validate_spec(spec: &CacheConfigSpec) -> Result<Built, Vec<FieldError>> {
    let mut v = Validator::default();
    let built = v.spec(spec, &FieldPath::root("spec"));
    if v.errors.is_empty() {
        Ok(built)
    } else {
        Err(v.errors)
    }
}

#[derive(Default)]
struct Validator {
    errors: Vec<FieldError>,
}

impl Validator {
    fn error(&mut self, path: &FieldPath, message: impl Into<String>) {
        self.errors.push(FieldError::new(path, message));
    }

    fn spec(&mut self, spec: &CacheConfigSpec, path: &FieldPath) -> Built {
        let cache = cache::Options {
            sync_period: self.duration(spec.sync_period.as_deref(), &path.field("syncPeriod")),
            reader_fail_on_missing_informer: spec.reader_fail_on_missing_informer.unwrap_or(false),
            default_namespaces: spec
                .default_namespaces
                .as_ref()
                .map(|m| self.namespace_map(m, &path.field("defaultNamespaces")))
                .unwrap_or_default(),
            default_namespace_selector: self.namespace_selector(
                spec.namespace_selector.as_deref(),
                spec.default_namespaces.as_ref(),
                path,
                &path.field("defaultNamespaces"),
            ),
            default_label_selector: self.label_selector(
                spec.default_label_selector.as_deref(),
                &path.field("defaultLabelSelector"),
            ),
            default_field_selector: self.field_selector(
                spec.default_field_selector.as_deref(),
                &path.field("defaultFieldSelector"),
            ),
            default_transform: self.transform(
                spec.default_transform.as_ref(),
                &path.field("defaultTransform"),
            ),
            default_unsafe_disable_deep_copy: spec.default_unsafe_disable_deep_copy,
            default_enable_watch_bookmarks: spec.default_enable_watch_bookmarks,
            by_object: self.by_objects(spec.by_object.as_deref().unwrap_or_default(), path),
            sharding: spec
                .sharding
                .as_ref()
                .and_then(|s| self.sharding(s, &path.field("sharding"))),
        };
        let recorder = self.recorder(spec.recorder.as_ref(), &path.field("recorder"));
        (cache, recorder)
    }

    fn duration(&mut self, text: Option<&str>, path: &FieldPath) -> Option<Duration> {
        match parse_duration(text?) {
            Ok(d) => Some(d),
            Err(e) => {
                self.error(path, format!("{e}; {DURATION_HINT}"));
                None
            }
        }
    }

    fn label_selector(&mut self, text: Option<&str>, path: &FieldPath) -> Option<LabelSelector> {
        match LabelSelector::parse(text?) {
            Ok(s) => Some(s),
            Err(e) => {
                self.error(path, format!("{e}; {LABEL_SELECTOR_HINT}"));
                None
            }
        }
    }

    /// The `namespaceSelector` of the object at `path`, whose namespace map (`namespaces` or
    /// `defaultNamespaces`, at `map_path`) is `map`: a label selector that selects something,
    /// and that no setting meaning "every other namespace" contradicts.
    fn namespace_selector(
        &mut self,
        text: Option<&str>,
        map: Option<&BTreeMap<String, NamespaceConfig>>,
        path: &FieldPath,
        map_path: &FieldPath,
    ) -> Option<LabelSelector> {
        let selector_path = path.field("namespaceSelector");
        text?;
        let selector = self.label_selector(text, &selector_path);
        if selector.as_ref().is_some_and(LabelSelector::is_empty) {
            self.error(
                &selector_path,
                "selects every namespace; write requirements such as team=shop to choose \
                 namespaces by label, or remove it to cache every namespace",
            );
        }
        match map {
            Some(map) if map.is_empty() => self.error(
                map_path,
                format!(
                    "{{}} means every namespace, which contradicts {selector_path}; remove \
                     {map_path} to cache only the namespaces the selector matches, or remove \
                     {selector_path} to cache every namespace"
                ),
            ),
            Some(map) if map.contains_key("") => self.error(
                &map_path.key(""),
                format!(
                    "the \"\" entry (every namespace not listed) contradicts {selector_path}, \
                     which chooses the namespaces not listed by label; remove this entry to \
                     cache only the namespaces the selector matches, or remove {selector_path} \
                     to cache every namespace"
                ),
            ),
            _ => {}
        }
        selector.filter(|s| !s.is_empty())
    }

    fn field_selector(&mut self, text: Option<&str>, path: &FieldPath) -> Option<FieldSelector> {
        match FieldSelector::parse_served(text?) {
            Ok(s) => Some(s),
            Err(e) => {
                self.error(path, format!("{e}; {FIELD_SELECTOR_HINT}"));
                None
            }
        }
    }

    fn transform(&mut self, spec: Option<&TransformSpec>, path: &FieldPath) -> Option<Transform> {
        let spec = spec?;
        let mut keys = |list: Option<&Vec<String>>, field: &str, what: &str| -> Vec<String> {
            let list_path = path.field(field);
            let mut out: Vec<String> = Vec::new();
            for (i, key) in list.into_iter().flatten().enumerate() {
                // A label key and an annotation key follow the same rules (qualified names).
                if let Err(e) =
                    Requirement::new(key.as_str(), Operator::Exists, Vec::<String>::new())
                {
                    // The selector's key check names a label key; say which key it is.
                    let problem = e
                        .to_string()
                        .replacen("label key", &format!("{what} key"), 1);
                    self.error(
                        &list_path.index(i),
                        format!("{problem}; write the {what} key exactly as in metadata.{what}s"),
                    );
                } else if !out.contains(key) {
                    out.push(key.clone());
                }
            }
            out
        };
        let drop_annotations = keys(
            spec.drop_annotations.as_ref(),
            "dropAnnotations",
            "annotation",
        );
        let drop_labels = keys(spec.drop_labels.as_ref(), "dropLabels", "label");
        let keep_fields = spec
            .keep_fields
            .as_ref()
            .map(|list| self.object_paths(list, &path.field("keepFields"), Side::Keep));
        let drop_fields = self.object_paths(
            spec.drop_fields.as_deref().unwrap_or_default(),
            &path.field("dropFields"),
            Side::Drop,
        );
        Some(Transform {
            strip_managed_fields: spec.strip_managed_fields.unwrap_or(false),
            drop_annotations,
            drop_labels,
            projection: Projection::new(keep_fields, drop_fields),
        })
    }

    /// The paths of `keepFields` or `dropFields`, each bad one an error at its index.
    fn object_paths(&mut self, list: &[String], path: &FieldPath, side: Side) -> Vec<ObjectPath> {
        let mut out: Vec<ObjectPath> = Vec::new();
        for (i, text) in list.iter().enumerate() {
            let checked = ObjectPath::parse(text)
                .map_err(|e| e.to_string())
                .and_then(|p| projection::check(&p, side).map(|()| p));
            match checked {
                Ok(p) if !out.contains(&p) => out.push(p),
                Ok(_) => {}
                Err(e) => self.error(&path.index(i), format!("{text:?}: {e}")),
            }
        }
        out
    }

    fn namespace_config(&mut self, spec: &NamespaceConfig, path: &FieldPath) -> Config {
        Config {
            label_selector: self
                .label_selector(spec.label_selector.as_deref(), &path.field("labelSelector")),
            field_selector: self
                .field_selector(spec.field_selector.as_deref(), &path.field("fieldSelector")),
            transform: self.transform(spec.transform.as_ref(), &path.field("transform")),
            unsafe_disable_deep_copy: spec.unsafe_disable_deep_copy,
            enable_watch_bookmarks: spec.enable_watch_bookmarks,
            sync_period: self.duration(spec.sync_period.as_deref(), &path.field("syncPeriod")),
        }
    }

    fn namespace_map(
        &mut self,
        map: &BTreeMap<String, NamespaceConfig>,
        path: &FieldPath,
    ) -> BTreeMap<NamespaceKey, Config> {
        let mut out = BTreeMap::new();
        for (name, spec) in map {
            let entry_path = path.key(name);
            let key = if name.is_empty() {
                NamespaceKey::AllOthers
            } else {
                if let Some(problem) = dns1123_label_problem(name) {
                    self.error(
                        &entry_path,
                        format!(
                            "invalid namespace name {name:?}: {problem}; use the namespace's name \
                             as `kubectl get namespaces` shows it, or \"\" for all other namespaces"
                        ),
                    );
                }
                NamespaceKey::Named(name.clone())
            };
            let config = self.namespace_config(spec, &entry_path);
            out.insert(key, config);
        }
        out
    }

    fn by_objects(&mut self, list: &[ByObjectSpec], spec_path: &FieldPath) -> Vec<ByObject> {
        let path = spec_path.field("byObject");
        let mut out: Vec<ByObject> = Vec::new();
        let mut seen: Vec<(GroupVersionKind, usize)> = Vec::new();
        for (i, spec) in list.iter().enumerate() {
            let entry_path = path.index(i);
            let gvk = self.gvk(spec, &entry_path);
            let scope = gvk.as_ref().and_then(builtin_scope).unwrap_or_default();
            if let Some(gvk) = &gvk {
                if let Some((_, first)) = seen.iter().find(|(g, _)| g == gvk) {
                    self.error(
                        &entry_path,
                        format!(
                            "duplicate entry for {} {} (first at {}); merge the two entries",
                            gvk_api_version(gvk),
                            gvk.kind,
                            path.index(*first)
                        ),
                    );
                } else {
                    seen.push((gvk.clone(), i));
                }
            }
            let namespaces_path = entry_path.field("namespaces");
            let namespaces = match &spec.namespaces {
                None => Namespaces::Inherit,
                Some(_) if scope == Scope::Cluster => {
                    let kind = gvk.as_ref().map_or("", |g| g.kind.as_str());
                    self.error(
                        &namespaces_path,
                        format!(
                            "type {kind:?} is not namespaced, but its namespaces setting is not \
                             nil; remove {namespaces_path}"
                        ),
                    );
                    Namespaces::Inherit
                }
                Some(map) if map.is_empty() => Namespaces::All,
                Some(map) => Namespaces::Only(self.namespace_map(map, &namespaces_path)),
            };
            let namespace_selector = if scope == Scope::Cluster && spec.namespace_selector.is_some()
            {
                let kind = gvk.as_ref().map_or("", |g| g.kind.as_str());
                let selector_path = entry_path.field("namespaceSelector");
                self.error(
                    &selector_path,
                    format!(
                        "type {kind:?} is not namespaced, so it cannot be cached by namespace; \
                         remove {selector_path}"
                    ),
                );
                None
            } else {
                self.namespace_selector(
                    spec.namespace_selector.as_deref(),
                    spec.namespaces.as_ref(),
                    &entry_path,
                    &namespaces_path,
                )
            };
            let config = Config {
                label_selector: self.label_selector(
                    spec.label_selector.as_deref(),
                    &entry_path.field("labelSelector"),
                ),
                field_selector: self.field_selector(
                    spec.field_selector.as_deref(),
                    &entry_path.field("fieldSelector"),
                ),
                transform: self.transform(spec.transform.as_ref(), &entry_path.field("transform")),
                unsafe_disable_deep_copy: spec.unsafe_disable_deep_copy,
                enable_watch_bookmarks: spec.enable_watch_bookmarks,
                sync_period: self
                    .duration(spec.sync_period.as_deref(), &entry_path.field("syncPeriod")),
            };
            if let Some(gvk) = gvk {
                out.push(ByObject {
                    gvk,
                    scope,
                    namespaces,
                    namespace_selector,
                    config,
                    metadata_only: spec.metadata_only.unwrap_or(false),
                });
            }
        }
        out
    }

    /// The entry's kind, checked against the built-in kinds where its group is built in.
    fn gvk(&mut self, spec: &ByObjectSpec, path: &FieldPath) -> Option<GroupVersionKind> {
        let av_path = path.field("apiVersion");
        let kind_path = path.field("kind");
        let gv = if spec.api_version.is_empty() {
            self.error(
                &av_path,
                "required; set the kind's API version, e.g. v1 or apps/v1",
            );
            None
        } else if let Some(problem) = api_version_problem(&spec.api_version) {
            self.error(
                &av_path,
                format!(
                    "invalid API version {:?}: {problem}; write <version> for the core group \
                     (v1) or <group>/<version> (apps/v1)",
                    spec.api_version
                ),
            );
            None
        } else {
            spec.api_version.parse::<GroupVersion>().ok()
        };
        let kind = &spec.kind;
        if kind.is_empty() {
            self.error(&kind_path, "required; set the kind, e.g. Pod");
            return None;
        }
        if !kind.starts_with(|c: char| c.is_ascii_uppercase())
            || !kind.chars().all(|c| c.is_ascii_alphanumeric())
        {
            let hint = match gv.as_ref().and_then(|gv| suggest_kind(&gv.group, kind)) {
                Some(k) => format!("did you mean {k:?}?"),
                None => "write it as in the object's `kind`, e.g. Pod".to_owned(),
            };
            self.error(
                &kind_path,
                format!("invalid kind {kind:?}: a kind is a CamelCase name of letters and digits; {hint}"),
            );
            return None;
        }
        let gv = gv?;
        if kinds::is_builtin_group(&gv.group) {
            let versions: Vec<&str> = kinds::in_group(&gv.group)
                .filter(|k| k.kind == kind)
                .map(|k| k.version)
                .collect();
            if versions.is_empty() {
                // A built-in kind in the wrong group (`v1 Deployment`): name where it lives.
                let elsewhere: Vec<String> = kinds::BUILTIN_KINDS
                    .iter()
                    .filter(|k| k.kind == kind)
                    .map(|k| gv_string(k.group, k.version))
                    .collect();
                if !elsewhere.is_empty() {
                    self.error(
                        &av_path,
                        format!(
                            "{kind} is not served as {}; set apiVersion to {}",
                            spec.api_version,
                            elsewhere.join(" or ")
                        ),
                    );
                    return None;
                }
                let hint = match suggest_kind(&gv.group, kind) {
                    Some(k) => format!("did you mean {k:?}?"),
                    None => "check the kind with `kubectl api-resources`".to_owned(),
                };
                self.error(
                    &kind_path,
                    format!(
                        "unknown kind {kind:?} in API version {}; {hint}",
                        spec.api_version
                    ),
                );
                return None;
            }
            if !versions.contains(&gv.version.as_str()) {
                let served: Vec<String> =
                    versions.iter().map(|v| gv_string(&gv.group, v)).collect();
                self.error(
                    &av_path,
                    format!(
                        "{kind} is not served as {}; set apiVersion to {}",
                        spec.api_version,
                        served.join(" or ")
                    ),
                );
                return None;
            }
        }
        Some(gv.with_kind(kind))
    }
}

/// Why an `apiVersion` is malformed, or `None`.
pub(crate) fn api_version_problem(av: &str) -> Option<String> {
    let (group, version) = match av.split('/').collect::<Vec<_>>().as_slice() {
        [v] => ("", *v),
        [g, v] => (*g, *v),
        _ => return Some("it has more than one \"/\"".to_owned()),
    };
    if let Some(p) = dns1123_subdomain_problem(group).filter(|_| av.contains('/')) {
        return Some(format!("the group {group:?} {p}"));
    }
    if let Some(p) = dns1123_label_problem(version) {
        return Some(format!("the version {version:?} {p}"));
    }
    if !version.starts_with('v') {
        return Some(format!(
            "the version {version:?} must start with \"v\", as v1 or v1beta1"
        ));
    }
    None
}

/// The built-in kind of `group` closest to `kind`.
fn suggest_kind(group: &str, kind: &str) -> Option<String> {
    let known: Vec<String> = kinds::in_group(group).map(|k| k.kind.to_owned()).collect();
    closest(kind, known.iter()).map(str::to_owned)
}

fn gv_string(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

fn gvk_api_version(gvk: &GroupVersionKind) -> String {
    gv_string(&gvk.group, &gvk.version)
}
