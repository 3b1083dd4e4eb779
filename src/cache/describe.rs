//! `Description`: how a planned cache tree describes itself for `informant explain`, as text
//! or JSON.

use std::fmt::Write as _;

use super::plan::InformerScope;

/// One layer of a planned tree, for `informant explain`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Description {
    /// `InformerCache`, `MultiNamespaceCache`, `ByKindCache`, or `WaitingForKind` for a
    /// `byObject` kind the API server does not serve yet.
    pub cache: &'static str,
    /// Why this layer exists in its parent (`byObject v1/Pod`, `namespace team-a`, `default`).
    pub role: String,
    /// What the informers of an `InformerCache` watch and how; `None` for routing layers,
    /// which start no informer of their own.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub scope: Option<InformerScopeDescription>,
    /// The namespace selector of a `MultiNamespaceCache` that chooses namespaces by label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<String>,
    /// The namespaces that selector matches now; absent when they are known only at run time
    /// (a plan made without a cluster).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matching: Option<Vec<String>>,
    /// Why a `byObject` kind has no informer (`WaitingForKind`: the API server does not serve
    /// it yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// Layers below this one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Description>,
}

/// The scope and settings of an `InformerCache`'s informers. Every field is always present:
/// an empty namespace is every namespace (`metav1.NamespaceAll`), an empty selector selects
/// everything, as in the Kubernetes API.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InformerScopeDescription {
    /// The namespace watched; `""` for every namespace.
    pub namespace: String,
    /// The label selector sent to the API server; `""` selects everything.
    pub label_selector: String,
    /// The field selector sent to the API server; `""` selects everything.
    pub field_selector: String,
    /// The transform applied before storing (`none`, `stripManagedFields dropAnnotations[...]`).
    pub transform: String,
    /// Reads hand out shared objects.
    pub unsafe_disable_deep_copy: bool,
    /// Only metadata is cached.
    pub metadata_only: bool,
    /// Reads of a kind without informer fail instead of starting one.
    pub reader_fail_on_missing_informer: bool,
}

impl InformerScopeDescription {
    /// Describes `scope`.
    #[must_use]
    pub fn of(scope: &InformerScope, reader_fail_on_missing_informer: bool) -> Self {
        let settings = &scope.settings;
        Self {
            namespace: scope.namespace.clone().unwrap_or_default(),
            label_selector: settings
                .label_selector
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            field_selector: settings
                .field_selector
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            transform: super::transform::describe(&settings.transform),
            unsafe_disable_deep_copy: settings.unsafe_disable_deep_copy,
            metadata_only: settings.metadata_only,
            reader_fail_on_missing_informer,
        }
    }

    /// `namespace=<all> labelSelector="" fieldSelector="" transform=none`, then the flags set.
    #[must_use]
    pub fn to_text(&self) -> String {
        let namespace = if self.namespace.is_empty() {
            "<all>"
        } else {
            &self.namespace
        };
        let mut out = format!(
            "namespace={namespace} labelSelector={:?} fieldSelector={:?} transform={}",
            self.label_selector, self.field_selector, self.transform
        );
        for (set, flag) in [
            (self.unsafe_disable_deep_copy, " unsafeDisableDeepCopy"),
            (self.metadata_only, " metadataOnly"),
            (
                self.reader_fail_on_missing_informer,
                " readerFailOnMissingInformer",
            ),
        ] {
            if set {
                out.push_str(flag);
            }
        }
        out
    }
}

impl Description {
    /// A routing layer (`MultiNamespaceCache`, `ByKindCache`).
    #[must_use]
    pub fn routing(cache: &'static str, role: &str, children: Vec<Description>) -> Self {
        Self {
            cache,
            role: role.to_string(),
            scope: None,
            namespace_selector: None,
            matching: None,
            waiting: None,
            children,
        }
    }

    /// This routing layer, choosing namespaces by `selector`, which matches `matching` (`None`:
    /// known at run time).
    #[must_use]
    pub(crate) fn with_selection(
        mut self,
        selector: String,
        matching: Option<Vec<String>>,
    ) -> Self {
        self.namespace_selector = Some(selector);
        self.matching = matching;
        self
    }

    /// A `byObject` kind that waits for the API server to serve it.
    #[must_use]
    pub fn waiting(role: &str, reason: &str) -> Self {
        Self {
            cache: "WaitingForKind",
            role: role.to_string(),
            scope: None,
            namespace_selector: None,
            matching: None,
            waiting: Some(reason.to_owned()),
            children: Vec::new(),
        }
    }

    /// An `InformerCache` layer.
    #[must_use]
    pub fn informers(role: &str, scope: InformerScopeDescription) -> Self {
        Self {
            cache: "InformerCache",
            role: role.to_string(),
            scope: Some(scope),
            namespace_selector: None,
            matching: None,
            waiting: None,
            children: Vec::new(),
        }
    }

    /// Renders the tree as indented text, one layer per line.
    #[must_use]
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.write_text(0, &mut out);
        out
    }

    fn write_text(&self, depth: usize, out: &mut String) {
        out.push_str(&"  ".repeat(depth));
        out.push_str(self.cache);
        out.push_str(" (");
        out.push_str(&self.role);
        out.push(')');
        if let Some(scope) = &self.scope {
            out.push(' ');
            out.push_str(&scope.to_text());
        }
        if let Some(selector) = &self.namespace_selector {
            // Writing to a String does not fail.
            let _ = write!(out, " namespaceSelector={selector:?}");
            let _ = match &self.matching {
                Some(names) => write!(out, " matching {}: [{}]", names.len(), names.join(", ")),
                None => write!(out, " matching: known at run time"),
            };
        }
        if let Some(reason) = &self.waiting {
            out.push_str(": ");
            out.push_str(reason);
        }
        out.push('\n');
        for child in &self.children {
            child.write_text(depth + 1, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::cache::{Options, Plan};

    #[test]
    fn an_informer_cache_over_all_namespaces_says_so_in_json() {
        let tree = Plan::new(&Options::default()).unwrap().describe();
        let json = serde_json::to_value(&tree).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "cache": "InformerCache",
                "role": "root",
                "namespace": "",
                "labelSelector": "",
                "fieldSelector": "",
                "transform": "none",
                "unsafeDisableDeepCopy": false,
                "metadataOnly": false,
                "readerFailOnMissingInformer": false,
            })
        );
        assert_eq!(
            tree.to_text(),
            "InformerCache (root) namespace=<all> labelSelector=\"\" fieldSelector=\"\" transform=none\n"
        );
    }
}
