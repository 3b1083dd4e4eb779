//! How the members of a shard ring share what a `CacheConfig` caches (`informant explain`):
//! which kinds are sharded and by which key, which are cached whole on every member, and how a
//! member finds its share. Pure: the kinds' scopes come from the options (built-in kinds from
//! the kind table, others namespaced until discovery says otherwise).

use std::fmt::Write as _;

use serde::Serialize;

use crate::cache::{self, Scope};
use crate::selector::ShardKey;
use crate::selector::Sharding;

/// The label that puts a member's Lease in a ring (`manager::RING_LABEL`; config cannot name
/// the manager).
const RING_LABEL: &str = "informant.dev/ring";

/// What sharding does to a config's kinds, for people.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardingDescription {
    /// The ring's name.
    pub ring: String,
    /// The key: `namespace` or `uid`.
    pub key: &'static str,
    /// The label selector of the members' Leases.
    pub members: String,
    /// The `byObject` kinds that are sharded (`apiVersion/Kind`), then what happens to every
    /// other namespaced kind.
    pub sharded: Vec<String>,
    /// The `byObject` kinds cached whole on every member, then every other cluster-scoped kind.
    pub cached_whole: Vec<String>,
    /// Who reconciles the objects of the kinds cached whole.
    pub cluster_scoped_reconciled_by: String,
    /// How a member finds its share.
    pub share: String,
}

impl ShardingDescription {
    /// The description of `options`' sharding, or `None` when it does not shard.
    #[must_use]
    pub fn of(options: &cache::Options) -> Option<Self> {
        let Sharding { ring, key } = options.sharding.as_ref()?;
        let (mut sharded, mut cached_whole) = (Vec::new(), Vec::new());
        for by_object in &options.by_object {
            let kind = format!("{}/{}", by_object.gvk.api_version(), by_object.gvk.kind);
            match by_object.scope {
                Scope::Namespaced => sharded.push(kind),
                Scope::Cluster => cached_whole.push(kind),
            }
        }
        sharded.push("every other namespaced kind read through the cache".to_owned());
        cached_whole.push("every other cluster-scoped kind read through the cache".to_owned());
        let (key_name, share, reconciled_by) = match key {
            ShardKey::Namespace => (
                "namespace",
                "each namespace is assigned whole to one member: the members' identities place \
                 64 virtual nodes each on a consistent hash ring over the 64-bit FNV-1a space, \
                 and a namespace belongs to the member owning the point of its name (FNV-1a, \
                 mixed so that similar names spread); a member caches the namespaced kinds in \
                 its namespaces only, one informer per namespace and kind, and reconciles the \
                 objects there"
                    .to_owned(),
                "the member that owns the hash of the object's uid, one object at a time"
                    .to_owned(),
            ),
            ShardKey::Uid => (
                "uid",
                "objects are assigned one by one: the members' identities place 64 virtual nodes \
                 each on a consistent hash ring over the 64-bit FNV-1a space, and a member owns \
                 the arcs that end at its nodes; its informers of namespaced kinds list and watch \
                 with shardSelector=shardRange(object.metadata.uid, ...) over those ranges where \
                 the API server supports it (KEP-5866, feature gate ShardedListAndWatch), and \
                 otherwise list everything and keep their share in the process"
                    .to_owned(),
                "the member that owns the hash of the object's uid, as every object".to_owned(),
            ),
        };
        Some(Self {
            ring: ring.clone(),
            key: key_name,
            members: format!("{RING_LABEL}={ring}"),
            sharded,
            cached_whole,
            cluster_scoped_reconciled_by: reconciled_by,
            share,
        })
    }

    /// The description as indented text lines, starting `sharding: ring <ring>, key <key>`.
    #[must_use]
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "sharding: ring {}, key {}", self.ring, self.key);
        out.push_str("  the tree above is the whole; each member caches its share of it\n");
        let _ = writeln!(
            out,
            "  members: the unexpired Leases labelled {} in the lease namespace \
             (kubectl get leases -l {})",
            self.members, self.members
        );
        let by = match self.key {
            "namespace" => "each namespace whole on one member",
            _ => "each object on one member",
        };
        let _ = writeln!(out, "  sharded ({by}): {}", self.sharded.join(", "));
        let _ = writeln!(
            out,
            "  cached whole on every member: {}; reconciled by {}",
            self.cached_whole.join(", "),
            self.cluster_scoped_reconciled_by
        );
        let _ = writeln!(out, "  a member's share: {}", self.share);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_str;

    fn described(spec: &str) -> Option<ShardingDescription> {
        let doc = format!(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: c}}\nspec: {spec}\n"
        );
        ShardingDescription::of(&load_str(&doc).unwrap().cache)
    }

    #[test]
    fn by_object_kinds_are_sorted_into_sharded_and_cached_whole_by_their_scope() {
        assert_eq!(described("{}"), None);
        let d = described(
            "{sharding: {ring: shop}, byObject: [{apiVersion: v1, kind: ConfigMap}, \
             {apiVersion: v1, kind: Node}, {apiVersion: example.com/v1, kind: Widget}]}",
        )
        .unwrap();
        assert_eq!((d.ring.as_str(), d.key), ("shop", "namespace"));
        assert_eq!(d.members, "informant.dev/ring=shop");
        assert_eq!(
            d.sharded,
            [
                "v1/ConfigMap",
                "example.com/v1/Widget",
                "every other namespaced kind read through the cache"
            ]
        );
        assert_eq!(
            d.cached_whole,
            [
                "v1/Node",
                "every other cluster-scoped kind read through the cache"
            ]
        );
        assert!(
            d.cluster_scoped_reconciled_by
                .starts_with("the member that owns the hash of the object's uid")
        );
        let text = d.to_text();
        assert!(
            text.starts_with("sharding: ring shop, key namespace\n  the tree above is the whole"),
            "{text}"
        );
        assert!(
            text.contains(
                "  sharded (each namespace whole on one member): v1/ConfigMap, example.com/v1/Widget, "
            ),
            "{text}"
        );
        let uid = described("{sharding: {ring: shop, key: uid}}").unwrap();
        assert_eq!(uid.key, "uid");
        assert!(uid.share.contains("shardSelector"), "{}", uid.share);
    }
}
