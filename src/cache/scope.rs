//! `ClusterScope`: what a [`super::Plan`] takes from the cluster besides the options: which
//! namespaces exist with which labels (for namespace selectors), which kinds (`byObject`
//! kinds and kinds controllers read) the API server does not serve yet (their CRD is not
//! established), and which share of a shard ring this member caches. Plain data: the manager
//! observes it, and a change of it is planned, diffed and applied like a config edit.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kube::core::GroupVersionKind;

use super::shard::ShardScope;
use crate::selector::LabelSelector;

/// The labels of every namespace, by name.
pub(crate) type NamespaceLabels = BTreeMap<String, BTreeMap<String, String>>;

/// What the cluster tells a plan. `Default`: nothing is known, which plans no namespace for a
/// selector (and says so) and every kind as served.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterScope {
    /// Every namespace with its labels; `None` when not known (`informant explain` without a
    /// cluster).
    pub namespaces: Option<NamespaceLabels>,
    /// The kinds the API server does not serve, with why: each waits (`WaitingForKind`)
    /// instead of starting informers, a `byObject` kind in its place and any other in a layer
    /// of its own in front of the default cache.
    pub waiting: HashMap<GroupVersionKind, String>,
    /// The selectors (canonical text) whose namespaces one cluster-wide informer serves in
    /// the tree published now: they keep it until their share of the namespaces falls below
    /// `plan::WIDE_LEAVE_PERCENT`.
    pub wide: BTreeSet<String>,
    /// This member's share of a shard ring (`spec.sharding`), or `None` to cache everything
    /// the options say.
    pub shard: Option<ShardScope>,
}

impl ClusterScope {
    /// A scope knowing these namespaces and their labels.
    #[must_use]
    pub fn with_namespaces(mut self, namespaces: NamespaceLabels) -> Self {
        self.namespaces = Some(namespaces);
        self
    }

    /// A scope in which `gvk` is not served, because of `reason`.
    #[must_use]
    pub fn with_waiting(mut self, gvk: GroupVersionKind, reason: impl Into<String>) -> Self {
        self.waiting.insert(gvk, reason.into());
        self
    }

    /// The namespaces `selector` matches, or `None` when the namespaces are not known.
    #[must_use]
    pub fn matching(&self, selector: &LabelSelector) -> Option<BTreeSet<String>> {
        let namespaces = self.namespaces.as_ref()?;
        Some(
            namespaces
                .iter()
                .filter(|(_, labels)| selector.matches(labels))
                .map(|(name, _)| name.clone())
                .collect(),
        )
    }

    /// A scope in which this member caches only `shard` of the namespaced kinds.
    #[must_use]
    pub fn with_shard(mut self, shard: ShardScope) -> Self {
        self.shard = Some(shard);
        self
    }

    /// Why `gvk` is not served, if it is not.
    #[must_use]
    pub(crate) fn waiting_reason(&self, gvk: &GroupVersionKind) -> Option<&str> {
        self.waiting.get(gvk).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_matches_by_the_namespaces_labels_and_nothing_when_unknown() {
        let selector = LabelSelector::parse("team=shop").unwrap();
        assert_eq!(ClusterScope::default().matching(&selector), None);
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        let scope = ClusterScope::default().with_namespaces(BTreeMap::from([
            ("a".to_owned(), labels(&[("team", "shop")])),
            ("b".to_owned(), labels(&[("team", "web")])),
            ("c".to_owned(), labels(&[])),
        ]));
        assert_eq!(
            scope.matching(&selector),
            Some(BTreeSet::from(["a".to_owned()]))
        );
    }
}
