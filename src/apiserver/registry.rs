//! The resource registry: which resources the server serves (built-ins and CRDs), with the
//! facts discovery, routing and field selectors need.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

/// The storage identity of a resource: its API group and plural name (versions share storage).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceKey {
    /// API group, "" for the core group.
    pub group: String,
    /// Plural resource name (`configmaps`).
    pub plural: String,
}

impl ResourceKey {
    /// A key from its parts.
    #[must_use]
    pub fn new(group: &str, plural: &str) -> Self {
        Self {
            group: group.to_string(),
            plural: plural.to_string(),
        }
    }
}

/// One column of `kubectl get` output (a CRD's `additionalPrinterColumns`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// `OpenAPI` type (`string`, `integer`, `date`, ...).
    pub type_: String,
    /// A simple `JSONPath` (`.spec.replicas`).
    pub json_path: String,
    /// Column description.
    pub description: String,
    /// Priority: 0 is shown by default, higher only with `-o wide`.
    pub priority: i64,
}

/// Everything the server knows about one resource.
#[derive(Debug, Clone)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts of a resource, as discovery publishes them"
)]
pub struct ResourceType {
    /// API group, "" for core.
    pub group: String,
    /// The versions served; the first is the preferred (storage) version.
    pub versions: Vec<String>,
    /// Plural name, as in URLs.
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind of one object.
    pub kind: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// `kubectl` short names.
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether a `/status` subresource exists (status is then ignored on the main resource).
    pub status_subresource: bool,
    /// Field selector fields beyond `metadata.name` / `metadata.namespace`.
    pub fields: Vec<&'static str>,
    /// Printer columns beyond Name (CRDs only).
    pub printer_columns: Vec<PrinterColumn>,
    /// Whether this is a custom resource (no strategic merge patch, like kube-apiserver).
    pub custom: bool,
    /// Where objects are stored when another resource owns the storage (`events.k8s.io`
    /// events live with core events); `None` for the resource's own key.
    pub storage: Option<ResourceKey>,
    /// The `OpenAPI` v3 schema of one object, when known (CRDs).
    pub schema: Option<Value>,
    /// A create-only resource that stores nothing: the access reviews and
    /// `SelfSubjectReview`, answered by the auth module from who asks.
    pub review: bool,
}

impl ResourceType {
    /// The storage key.
    #[must_use]
    pub fn key(&self) -> ResourceKey {
        ResourceKey::new(&self.group, &self.plural)
    }

    /// `apiVersion` of objects of this resource in `version`.
    #[must_use]
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// The preferred version.
    #[must_use]
    pub fn preferred_version(&self) -> &str {
        self.versions.first().map_or("v1", String::as_str)
    }

    /// Whether `field` may be used in a field selector on this resource.
    #[must_use]
    pub fn supports_field(&self, field: &str) -> bool {
        field == "metadata.name" || field == "metadata.namespace" || self.fields.contains(&field)
    }

    /// The value of a field-selector field of `object`, as kube-apiserver computes it.
    #[must_use]
    pub fn field_value(&self, object: &Value, field: &str) -> Option<String> {
        if !self.supports_field(field) {
            return None;
        }
        let path = match (self.plural.as_str(), field) {
            ("events", "source") => "source.component",
            // pkg/registry/batch/job/strategy.go `JobToSelectableFields`:
            // strconv.Itoa(int(job.Status.Succeeded)), so an absent count reads "0".
            ("jobs", "status.successful") => {
                let succeeded = object
                    .pointer("/status/succeeded")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                return Some(succeeded.to_string());
            }
            _ => field,
        };
        let mut cur = object;
        for part in path.split('.') {
            match cur.get(part) {
                Some(v) => cur = v,
                None => return Some(String::new()),
            }
        }
        Some(match cur {
            Value::String(s) => s.clone(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.to_string(),
            Value::Null => {
                if field == "spec.unschedulable" {
                    "false".to_string()
                } else {
                    String::new()
                }
            }
            other => other.to_string(),
        })
    }
}

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

/// A built-in resource this server serves: its identity in [`crate::kinds::BUILTIN_KINDS`]
/// (which gives its plural and scope) and what only serving needs.
struct Served {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    short: &'static [&'static str],
    /// In the `all` category (`kubectl get all`).
    all: bool,
    /// Has a `/status` subresource.
    status: bool,
    /// Field selector fields beyond `metadata.name` / `metadata.namespace`.
    fields: &'static [&'static str],
}

#[rustfmt::skip]
const SERVED: &[Served] = &[
    Served { group: "", version: "v1", kind: "Namespace", short: &["ns"], all: false, status: true, fields: &["status.phase"] },
    Served { group: "", version: "v1", kind: "Pod", short: &["po"], all: true, status: true, fields: POD_FIELDS },
    Served { group: "", version: "v1", kind: "ConfigMap", short: &["cm"], all: false, status: false, fields: &[] },
    Served { group: "", version: "v1", kind: "Secret", short: &[], all: false, status: false, fields: &["type"] },
    Served { group: "", version: "v1", kind: "Service", short: &["svc"], all: true, status: true, fields: &[] },
    Served { group: "", version: "v1", kind: "Node", short: &["no"], all: false, status: true, fields: &["spec.unschedulable"] },
    Served { group: "", version: "v1", kind: "ServiceAccount", short: &["sa"], all: false, status: false, fields: &[] },
    Served { group: "", version: "v1", kind: "Event", short: &["ev"], all: false, status: false, fields: EVENT_FIELDS },
    Served { group: "events.k8s.io", version: "v1", kind: "Event", short: &["ev"], all: false, status: false, fields: &[] },
    Served { group: "apps", version: "v1", kind: "Deployment", short: &["deploy"], all: true, status: true, fields: &[] },
    Served { group: "batch", version: "v1", kind: "Job", short: &[], all: true, status: true, fields: &["status.successful"] },
    Served { group: "batch", version: "v1", kind: "CronJob", short: &["cj"], all: true, status: true, fields: &[] },
    Served { group: "coordination.k8s.io", version: "v1", kind: "Lease", short: &[], all: false, status: false, fields: &[] },
    Served { group: "rbac.authorization.k8s.io", version: "v1", kind: "Role", short: &[], all: false, status: false, fields: &[] },
    Served { group: "rbac.authorization.k8s.io", version: "v1", kind: "RoleBinding", short: &[], all: false, status: false, fields: &[] },
    Served { group: "rbac.authorization.k8s.io", version: "v1", kind: "ClusterRole", short: &[], all: false, status: false, fields: &[] },
    Served { group: "rbac.authorization.k8s.io", version: "v1", kind: "ClusterRoleBinding", short: &[], all: false, status: false, fields: &[] },
    Served { group: "admissionregistration.k8s.io", version: "v1", kind: "MutatingWebhookConfiguration", short: &[], all: false, status: false, fields: &[] },
    Served { group: "admissionregistration.k8s.io", version: "v1", kind: "ValidatingWebhookConfiguration", short: &[], all: false, status: false, fields: &[] },
    Served { group: "apiextensions.k8s.io", version: "v1", kind: "CustomResourceDefinition", short: &["crd", "crds"], all: false, status: true, fields: &[] },
];

/// The review resources (create-only, nothing stored): group, kind, plural, namespaced.
/// `kinds::BUILTIN_KINDS` leaves them out, as nothing can list or cache them.
const REVIEWS: &[(&str, &str, &str, bool)] = &[
    (
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        false,
    ),
    (
        "authorization.k8s.io",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        false,
    ),
    (
        "authorization.k8s.io",
        "SubjectAccessReview",
        "subjectaccessreviews",
        false,
    ),
    (
        "authentication.k8s.io",
        "SelfSubjectReview",
        "selfsubjectreviews",
        false,
    ),
    (
        "authentication.k8s.io",
        "TokenReview",
        "tokenreviews",
        false,
    ),
];

/// The set of served resources; CRDs are added and removed at run time.
#[derive(Debug)]
pub struct Registry {
    types: RwLock<BTreeMap<ResourceKey, Arc<ResourceType>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// A registry holding the built-in resources.
    #[must_use]
    pub fn new() -> Self {
        let mut types = BTreeMap::new();
        for b in SERVED {
            let Some(kind) = crate::kinds::builtin(b.group, b.version, b.kind) else {
                // A test checks every served kind is in the table.
                continue;
            };
            let rt = ResourceType {
                group: b.group.to_string(),
                versions: vec![b.version.to_string()],
                plural: kind.plural.to_string(),
                // Built-in kinds' singular names are their lowercased kinds.
                singular: b.kind.to_lowercase(),
                kind: b.kind.to_string(),
                namespaced: kind.namespaced,
                short_names: b.short.iter().map(ToString::to_string).collect(),
                categories: if b.all {
                    vec!["all".to_string()]
                } else {
                    Vec::new()
                },
                status_subresource: b.status,
                fields: b.fields.to_vec(),
                printer_columns: Vec::new(),
                custom: false,
                storage: (b.group == "events.k8s.io").then(|| ResourceKey::new("", "events")),
                schema: None,
                review: false,
            };
            types.insert(rt.key(), Arc::new(rt));
        }
        for (group, kind, plural, namespaced) in REVIEWS {
            let rt = ResourceType {
                group: (*group).to_string(),
                versions: vec!["v1".to_string()],
                plural: (*plural).to_string(),
                singular: kind.to_lowercase(),
                kind: (*kind).to_string(),
                namespaced: *namespaced,
                short_names: Vec::new(),
                categories: Vec::new(),
                status_subresource: false,
                fields: Vec::new(),
                printer_columns: Vec::new(),
                custom: false,
                storage: None,
                schema: None,
                review: true,
            };
            types.insert(rt.key(), Arc::new(rt));
        }
        Self {
            types: RwLock::new(types),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<ResourceKey, Arc<ResourceType>>> {
        self.types
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The resource served at `/{group}/{version}/{plural}`, if any.
    #[must_use]
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.read()
            .get(&ResourceKey::new(group, plural))
            .filter(|rt| rt.versions.iter().any(|v| v == version))
            .cloned()
    }

    /// The resource by storage key.
    #[must_use]
    pub fn get(&self, key: &ResourceKey) -> Option<Arc<ResourceType>> {
        self.read().get(key).cloned()
    }

    /// The resource serving objects of `apiVersion` + `kind`.
    #[must_use]
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.read()
            .values()
            .find(|rt| {
                rt.group == group && rt.kind == kind && rt.versions.iter().any(|v| v == version)
            })
            .cloned()
    }

    /// Every served resource, ordered by group then plural.
    #[must_use]
    pub fn all(&self) -> Vec<Arc<ResourceType>> {
        self.read().values().cloned().collect()
    }

    /// Add or replace a (custom) resource.
    pub fn insert(&self, rt: ResourceType) {
        self.types
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(rt.key(), Arc::new(rt));
    }

    /// Remove a custom resource; built-ins are never removed.
    pub fn remove(&self, key: &ResourceKey) -> Option<Arc<ResourceType>> {
        let mut types = self
            .types
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if types.get(key).is_some_and(|rt| rt.custom) {
            types.remove(key)
        } else {
            None
        }
    }

    /// Every `(group, versions)` pair served, core group first.
    #[must_use]
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for rt in self.read().values() {
            match out.iter_mut().find(|(g, _)| *g == rt.group) {
                Some((_, versions)) => {
                    for v in &rt.versions {
                        if !versions.contains(v) {
                            versions.push(v.clone());
                        }
                    }
                }
                None => out.push((rt.group.clone(), rt.versions.clone())),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lookup_requires_a_served_version() {
        let reg = Registry::new();
        assert!(reg.lookup("apps", "v1", "deployments").is_some());
        assert!(reg.lookup("apps", "v1beta1", "deployments").is_none());
        assert!(reg.lookup("", "v1", "nosuch").is_none());
    }

    #[test]
    fn pod_field_values_default_to_empty_and_unsupported_fields_are_none() {
        let reg = Registry::new();
        let pods = reg.lookup("", "v1", "pods").unwrap();
        let pod = json!({"spec": {"nodeName": "n1"}});
        assert_eq!(
            pods.field_value(&pod, "spec.nodeName").as_deref(),
            Some("n1")
        );
        assert_eq!(pods.field_value(&pod, "status.phase").as_deref(), Some(""));
        assert_eq!(pods.field_value(&pod, "spec.nope"), None);
    }

    #[test]
    fn event_source_reads_the_source_component() {
        let reg = Registry::new();
        let events = reg.lookup("", "v1", "events").unwrap();
        let ev = json!({"source": {"component": "kubelet"}});
        assert_eq!(
            events.field_value(&ev, "source").as_deref(),
            Some("kubelet")
        );
    }

    #[test]
    fn every_served_built_in_is_in_the_shared_kind_table() {
        for served in SERVED {
            assert!(
                crate::kinds::builtin(served.group, served.version, served.kind).is_some(),
                "{}/{} {}",
                served.group,
                served.version,
                served.kind
            );
        }
        assert_eq!(Registry::new().all().len(), SERVED.len() + REVIEWS.len());
    }

    #[test]
    fn built_ins_cannot_be_removed() {
        let reg = Registry::new();
        assert!(reg.remove(&ResourceKey::new("", "pods")).is_none());
        assert!(reg.lookup("", "v1", "pods").is_some());
    }
}
