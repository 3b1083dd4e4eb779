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

    /// A namespace selector was combined with a setting that already means every namespace
    /// not listed (the `""` key, or `namespaces: {}` of a `byObject` entry): which namespaces
    /// the selector would add is ambiguous.
    #[error(
        "{}a namespace selector cannot be combined with every other namespace (the \"\" key or an empty namespaces map)",
        gvk.as_ref().map(|g| format!("type \"{}\": ", g.kind)).unwrap_or_default()
    )]
    SelectorWithAllNamespaces {
        /// The kind of the `byObject` entry; `None` for the defaults.
        gvk: Option<GroupVersionKind>,
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
    /// - A `by_object` entry that inherits its namespaces inherits `default_namespace_selector`
    ///   too; one with a selector (its own or inherited) has [`Namespaces::Only`] (the
    ///   namespaces listed, perhaps none) and its own settings defaulted from `default_*`:
    ///   they are the settings of every namespace the selector adds.
    ///
    /// Settings still unset afterwards take the built-in defaults through [`Config`]'s
    /// `effective_*` accessors. Defaulting twice gives the same result as once, except that
    /// the namespace exclusions would be added again; call it once.
    ///
    /// # Errors
    ///
    /// [`OptionsError::NotNamespaced`] if a cluster-scoped kind has namespaces or a namespace
    /// selector set; [`OptionsError::SelectorWithAllNamespaces`] if a selector is combined
    /// with the `""` key or `namespaces: {}`.
    pub fn defaulted(&self) -> Result<Options, OptionsError> {
        if self.default_namespace_selector.is_some()
            && self
                .default_namespaces
                .contains_key(&NamespaceKey::AllOthers)
        {
            return Err(OptionsError::SelectorWithAllNamespaces { gvk: None });
        }
        let defaults = self.default_config();
        let mut out = self.clone();
        for by in &mut out.by_object {
            let namespaced = by.scope == Scope::Namespaced;
            let inherits = by.inherits_namespaces();
            if !namespaced && !inherits {
                return Err(OptionsError::NotNamespaced {
                    gvk: by.gvk.clone(),
                });
            }
            let every_other = match &by.namespaces {
                Namespaces::All => true,
                Namespaces::Only(map) => map.contains_key(&NamespaceKey::AllOthers),
                Namespaces::Inherit => false,
            };
            if by.namespace_selector.is_some() && every_other {
                return Err(OptionsError::SelectorWithAllNamespaces {
                    gvk: Some(by.gvk.clone()),
                });
            }
            if inherits && namespaced {
                by.namespace_selector
                    .clone_from(&self.default_namespace_selector);
            }
            let map = match &by.namespaces {
                Namespaces::Inherit if inherits && namespaced => {
                    Some(self.default_namespaces.clone())
                }
                Namespaces::Only(map) => Some(map.clone()),
                _ => None,
            }
            .filter(|map| !map.is_empty() || by.namespace_selector.is_some())
            .or_else(|| by.namespace_selector.is_some().then(BTreeMap::new));
            if let Some(mut map) = map {
                if by.namespace_selector.is_some() {
                    // The settings of every namespace the selector adds.
                    by.config = by.config.clone().or(&defaults);
                }
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
