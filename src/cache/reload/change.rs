//! [`CacheChange`]: what one reload of the cache did, as the manager logs it, records it in
//! Events and reports it in status; and the kinds and namespaces that moved between two plans.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use kube::core::GroupVersionKind;

use super::super::{InformerKey, Plan};

/// What one reload of the cache did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheChange {
    /// Whether the plan changed (otherwise nothing was built and nothing else is set).
    pub changed: bool,
    /// Informers started for the new tree.
    pub started: Vec<InformerKey>,
    /// Informers stopped because no tree uses them any more.
    pub stopped: Vec<InformerKey>,
    /// Informers no tree uses any more that reads in flight on the old tree still held when
    /// it was swapped out: they stop at a later sweep, once those reads end (the manager
    /// sweeps again every second while any is held, and logs what that stopped).
    pub stopping: Vec<InformerKey>,
    /// Informers the new tree took over, running, with their stores.
    pub kept: usize,
    /// Eager informers whose first sync failed or timed out: the kind and why.
    pub unsynced: Vec<(GroupVersionKind, String)>,
    /// From the start of the reload to the new tree serving.
    pub took: Duration,
    /// Namespaces a namespace selector matches now and did not before.
    pub namespaces_entered: BTreeSet<String>,
    /// Namespaces a namespace selector matched before and does not now (relabelled or
    /// deleted): their informers stopped, their objects left the cache.
    pub namespaces_left: BTreeSet<String>,
    /// Kinds (`byObject` kinds and kinds controllers read) served now that waited before
    /// (their CRD became established).
    pub kinds_served: Vec<GroupVersionKind>,
    /// Kinds that wait now and did not before (their CRD was deleted, or a controller wants a
    /// kind that is not served): their informers stopped, their objects left the cache.
    pub kinds_waiting: Vec<GroupVersionKind>,
    /// Whether this member's share of its shard ring changed (the ring's members did): the
    /// sharded kinds' informers were replaced.
    pub share_changed: bool,
}

impl CacheChange {
    /// "started 2 informers, stopped 1, kept 7" (the reload summary's cache part); with
    /// informers that reads in flight still held, "stopped 0 (1 more once the reads in flight
    /// on the old tree end)".
    #[must_use]
    pub fn summary(&self) -> String {
        let plural = if self.started.len() == 1 { "" } else { "s" };
        let stopping = if self.stopping.is_empty() {
            String::new()
        } else {
            format!(
                " ({} more once the reads in flight on the old tree end)",
                self.stopping.len()
            )
        };
        format!(
            "started {} informer{plural}, stopped {}{stopping}, kept {}",
            self.started.len(),
            self.stopped.len(),
            self.kept
        )
    }

    /// What a change of the cluster did to the tree's scope: the namespaces that entered
    /// and left, the kinds that started being served or waiting
    /// ("namespaces entered: team-c; kinds waiting: example.com/v1 Widget"); `None` when
    /// none did.
    #[must_use]
    pub fn scope_summary(&self) -> Option<String> {
        let kinds = |gvks: &[GroupVersionKind]| {
            gvks.iter()
                .map(|g| format!("{} {}", g.api_version(), g.kind))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts: Vec<String> = self.namespaces_summary().into_iter().collect();
        if !self.kinds_served.is_empty() {
            parts.push(format!("kinds served: {}", kinds(&self.kinds_served)));
        }
        if !self.kinds_waiting.is_empty() {
            parts.push(format!("kinds waiting: {}", kinds(&self.kinds_waiting)));
        }
        if self.share_changed {
            parts.push("shard share changed".to_owned());
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// "namespaces entered: team-c; left: team-b" (what a scope change did to the
    /// namespaces), or `None` when none entered or left.
    #[must_use]
    pub fn namespaces_summary(&self) -> Option<String> {
        let list = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(", ");
        match (
            self.namespaces_entered.is_empty(),
            self.namespaces_left.is_empty(),
        ) {
            (true, true) => None,
            (false, true) => Some(format!(
                "namespaces entered: {}",
                list(&self.namespaces_entered)
            )),
            (true, false) => Some(format!("namespaces left: {}", list(&self.namespaces_left))),
            (false, false) => Some(format!(
                "namespaces entered: {}; left: {}",
                list(&self.namespaces_entered),
                list(&self.namespaces_left)
            )),
        }
    }
}

/// The kinds served in `new` (its `byObject` kinds, and the `wanted` ones) that waited in
/// `old`, and those waiting in `new` that did not in `old`.
pub(super) fn kind_moves(
    old: Option<&Plan>,
    new: &Plan,
    wanted: &HashSet<GroupVersionKind>,
) -> (Vec<GroupVersionKind>, Vec<GroupVersionKind>) {
    let waiting = |plan: Option<&Plan>| -> Vec<GroupVersionKind> {
        plan.map(Plan::waiting_kinds)
            .unwrap_or_default()
            .into_iter()
            .map(|(gvk, _)| gvk)
            .collect()
    };
    let (before, after) = (waiting(old), waiting(Some(new)));
    let served_now = new.by_object_kinds();
    (
        before
            .iter()
            .filter(|g| served_now.contains(g) || wanted.contains(*g) && !after.contains(g))
            .cloned()
            .collect(),
        after
            .iter()
            .filter(|g| old.is_some() && !before.contains(g))
            .cloned()
            .collect(),
    )
}

/// The namespaces selectors match in `new` and did not in `old`, and the reverse.
pub(super) fn namespace_moves(
    old: Option<&Plan>,
    new: &Plan,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let matched = |plan: Option<&Plan>| -> BTreeSet<String> {
        plan.map(Plan::namespace_selections)
            .unwrap_or_default()
            .into_values()
            .flatten()
            .flatten()
            .collect()
    };
    let (before, after) = (matched(old), matched(Some(new)));
    (
        after.difference(&before).cloned().collect(),
        before.difference(&after).cloned().collect(),
    )
}
