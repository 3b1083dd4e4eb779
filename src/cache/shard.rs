//! `ShardScope`: the share of the objects of namespaced kinds one member of a shard ring
//! caches, as the [`super::Plan`] takes it from the cluster (like the namespaces a selector
//! matches): by namespace, each namespace whole on one member; by uid, each object on one
//! member, listed and watched with a KEP-5866 `shardSelector` where the API server has it, else
//! filtered in the process. Cluster-scoped kinds are never sharded: every member caches them
//! whole.
//!
//! A member's share is a set of ranges of the 64-bit hash space ([`ShardRange`]), and an
//! object's point in it is the hash space's ([`crate::selector::point`]): the FNV-1a hash of its
//! uid (the hash KEP-5866's `shardRange(object.metadata.uid, …)` selects by), or the mixed hash
//! of its namespace's name. The ring that hands out the ranges (`manager::Ring`) and the gate
//! of the reconciles own each point by the same functions.

use crate::selector::{ShardKey, ShardRange, ShardSelector, namespace_point};

/// This member's share of a sharded cache.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShardScope {
    /// What assigns an object to a member.
    pub key: ShardKey,
    /// The member's ranges of the hash space, sorted and disjoint.
    pub ranges: Vec<ShardRange>,
    /// With `key: uid`, whether the API server filters lists and watches by `shardSelector`
    /// (KEP-5866): informers then send the member's selector; otherwise they list everything
    /// and keep only the member's objects.
    pub server_side: bool,
}

impl ShardScope {
    /// Whether `point` is in this member's share.
    #[must_use]
    pub fn contains(&self, point: u64) -> bool {
        self.ranges.iter().any(|r| r.contains(point))
    }

    /// Whether this member caches the namespace `name` (with `key: namespace`).
    #[must_use]
    pub fn owns_namespace(&self, name: &str) -> bool {
        self.contains(namespace_point(name))
    }

    /// The settings an informer of a namespaced kind gets with `key: uid`; `None` with
    /// `key: namespace` (namespaces are chosen by the plan instead).
    #[must_use]
    pub(crate) fn informer_shard(&self) -> Option<InformerShard> {
        (self.key == ShardKey::Uid).then(|| InformerShard {
            selector: ShardSelector::new(ShardKey::Uid, self.ranges.clone()).ok(),
            server_side: self.server_side,
        })
    }
}

/// The uid share an informer of a namespaced kind holds (part of its identity: a member whose
/// ranges change lists its sharded kinds again, and only those).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InformerShard {
    /// The member's ranges of `object.metadata.uid`; `None` when it owns nothing.
    pub selector: Option<ShardSelector>,
    /// Whether the selector is sent to the API server (`shardSelector`), or every object is
    /// listed and the others dropped before they are stored.
    pub server_side: bool,
}

impl InformerShard {
    /// Whether an object with this uid belongs to the member.
    #[must_use]
    pub fn keeps(&self, uid: &str) -> bool {
        self.selector.as_ref().is_some_and(|s| s.matches_value(uid))
    }

    /// How the share is filtered, for status and logs: `server-side` or `in-process`.
    #[must_use]
    pub fn mode(&self) -> &'static str {
        if self.server_side && self.selector.is_some() {
            "server-side"
        } else {
            "in-process"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::{fmix64, uid_point};

    #[test]
    fn a_scope_owns_the_points_in_its_ranges() {
        let lower = ShardScope {
            key: ShardKey::Namespace,
            ranges: vec![ShardRange::new(0, 1 << 63).unwrap()],
            server_side: false,
        };
        let owned = (0..40)
            .filter(|i| lower.owns_namespace(&format!("ns-{i}")))
            .count();
        assert!(owned > 10 && owned < 30, "{owned} of 40 in half the space");
        assert_eq!(lower.informer_shard(), None, "namespaces are planned");
        let uid = ShardScope {
            key: ShardKey::Uid,
            ..lower
        };
        let shard = uid.informer_shard().unwrap();
        assert_eq!(shard.mode(), "in-process");
        // Uids differing in more than their last characters (FNV-1a keeps those close).
        let uids: Vec<String> = (0..100).map(|i| format!("{:016x}", fmix64(i))).collect();
        let inside = uids.iter().find(|u| uid_point(u) < 1 << 63).unwrap();
        let outside = uids.iter().find(|u| uid_point(u) >= 1 << 63).unwrap();
        assert!(shard.keeps(inside) && !shard.keeps(outside));
        let nothing = InformerShard {
            selector: None,
            server_side: true,
        };
        assert!(!nothing.keeps(inside));
        assert_eq!(nothing.mode(), "in-process");
    }
}
