//! [`Options::defaulted`]: controller-runtime's `defaultOpts` (v0.24 `pkg/cache/cache.go`),
//! the one pass that resolves the precedence of the module docs.

use std::collections::BTreeMap;

use kube::core::GroupVersionKind;

use super::{Config, NamespaceKey, Namespaces, Options, Scope};
use crate::selector::{FieldRequirement, FieldSelector};

/// Options that cannot be defaulted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// Namespaces were set for a cluster-scoped kind (controller-runtime: `type ... is not
    /// namespaced, but its ByObject.Namespaces setting is not nil`).
    #[error(
        "type \"{}\" is not namespaced, but its by-object namespaces setting is not nil",
        gvk.kind
    )]
    NotNamespaced {
        /// The kind.
        gvk: GroupVersionKind,
    },
}

impl Options {
    /// Returns these options with every unset setting filled in, as controller-runtime's
    /// `defaultOpts` does:
    ///
    /// - For each `by_object` entry of a namespaced kind, [`Namespaces::Inherit`] becomes a
    ///   copy of `default_namespaces` (or [`Namespaces::All`] if that is empty); for a
    ///   cluster-scoped kind it becomes [`Namespaces::All`].
    /// - Each namespace of a `by_object` entry takes unset settings from the entry, then from
    ///   `default_namespaces[ns]`, then from the `default_*` settings.
    /// - The entry's own settings are defaulted from `default_*` only when they are used: for
    ///   cluster-scoped kinds and for kinds cached in all namespaces.
    /// - Each `default_namespaces[ns]` takes unset settings from `default_*`.
    /// - Every [`NamespaceKey::AllOthers`] entry gets `metadata.namespace!=<ns>` for each
    ///   other key of its map `AND`ed to its field selector.
    ///
    /// Settings still unset afterwards take the built-in defaults through [`Config`]'s
    /// `effective_*` accessors. Defaulting twice gives the same result as once, except that
    /// the namespace exclusions would be added again; call it once.
    ///
    /// # Errors
    ///
    /// [`OptionsError::NotNamespaced`] if a cluster-scoped kind has namespaces set.
    pub fn defaulted(&self) -> Result<Options, OptionsError> {
        let defaults = self.default_config();
        let mut out = self.clone();
        for by in &mut out.by_object {
            let namespaced = by.scope == Scope::Namespaced;
            if !namespaced && by.namespaces != Namespaces::Inherit {
                return Err(OptionsError::NotNamespaced {
                    gvk: by.gvk.clone(),
                });
            }
            let map = match &by.namespaces {
                Namespaces::Inherit if namespaced && !self.default_namespaces.is_empty() => {
                    Some(self.default_namespaces.clone())
                }
                Namespaces::Only(map) if !map.is_empty() => Some(map.clone()),
                _ => None,
            };
            if let Some(mut map) = map {
                let exclusion = exclude_listed(&map);
                for (ns, config) in &mut map {
                    // Type level first, undefaulted, so that unset settings can still fall
                    // through to default_namespaces[ns] (upstream's comment on the order).
                    let mut c = config.clone().or(&by.config);
                    if let Some(ns_default) = self.default_namespaces.get(ns) {
                        c = c.or(ns_default);
                    }
                    c = c.or(&defaults);
                    if *ns == NamespaceKey::AllOthers {
                        c.field_selector = Some(exclusion.and(&c.effective_field_selector()));
                    }
                    *config = c;
                }
                by.namespaces = Namespaces::Only(map);
            } else {
                by.namespaces = Namespaces::All;
                by.config = by.config.clone().or(&defaults);
            }
        }
        let exclusion = exclude_listed(&out.default_namespaces);
        for (ns, config) in &mut out.default_namespaces {
            let mut c = config.clone().or(&defaults);
            if *ns == NamespaceKey::AllOthers {
                c.field_selector = Some(exclusion.and(&c.effective_field_selector()));
            }
            *config = c;
        }
        Ok(out)
    }
}

/// `metadata.namespace!=<ns>` for every named key of `map` (upstream `namespaceAllSelector`).
fn exclude_listed(map: &BTreeMap<NamespaceKey, Config>) -> FieldSelector {
    FieldSelector::from_requirements(map.keys().filter_map(|k| match k {
        NamespaceKey::AllOthers => None,
        NamespaceKey::Named(ns) => Some(FieldRequirement::not_equals("metadata.namespace", ns)),
    }))
}

#[cfg(test)]
#[path = "defaulting_cases.rs"]
mod cases;
