//! The consistent hash ring that assigns the 64-bit hash space to the members of a shard ring.
//!
//! Each member places [`Ring::DEFAULT_VIRTUAL_NODES`] tokens on the ring, at a well-mixed hash
//! of `<identity>#<i>`: FNV-1a (the hash KEP-5866 shards objects with) finished by
//! `MurmurHash3`'s `fmix64`, because FNV-1a alone puts strings that differ only in their last
//! characters within a sliver of the space (`a#1` and `a#2` differ by about 2^40 of 2^64), and
//! tokens must spread. An object's hash stays plain FNV-1a, as the API server computes it.
//!
//! A hash belongs to the member holding the first token at or after it, wrapping past 2^64 to
//! the first token. Adding a member takes over the arcs before its own tokens and nothing else,
//! so a fourth member joining three moves about a quarter of the hash space; a member leaving
//! hands its arcs to its successors. The assignment depends on the set of identities only,
//! never on the order members were seen in, so every member computes the same ring from the
//! same Leases.
//!
//! The arcs of a member are merged where they touch (a [`RangeSet`]) and returned as half-open
//! [`ShardRange`]s, ready for a [`ShardSelector`]. The hashes are the hash space's
//! ([`crate::selector`]): an object's point is the one the cache's share and the gate use.
//!
//! Ranges of FNV-1a suit uids (random, so their hashes spread) and not namespace names: the
//! thirty names `ns-0` … `ns-29` all hash into one quarter of the space, so contiguous ranges of
//! `object.metadata.namespace` would hand every one of them to one member. Namespaces are
//! therefore assigned by [`Ring::owner`] of their mixed hash ([`Ring::namespace_owner`]), one
//! name at a time, not by ranges.

use std::collections::BTreeMap;

use crate::selector::{
    HASH_SPACE_END, RangeSet, ShardKey, ShardRange, ShardSelector, mixed_hash, namespace_point,
    uid_point,
};

/// An assignment of the hash space to members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    /// Token position → the member holding it; ties (two identities hashing a token to the same
    /// position) go to the smaller identity, so the ring is still a function of the set.
    tokens: BTreeMap<u64, String>,
}

impl Ring {
    /// Tokens per member: with 64, a member's share of the hash space stays within about ±15%
    /// of 1/N for a handful of members, and its selector within a few KiB.
    pub(crate) const DEFAULT_VIRTUAL_NODES: usize = 64;

    /// The ring of `members` with 64 tokens each.
    #[must_use]
    pub fn new<'a>(members: impl IntoIterator<Item = &'a str>) -> Self {
        Self::with_virtual_nodes(members, Self::DEFAULT_VIRTUAL_NODES)
    }

    /// The ring of `members` with `virtual_nodes` tokens each (at least one).
    #[must_use]
    pub(crate) fn with_virtual_nodes<'a>(
        members: impl IntoIterator<Item = &'a str>,
        virtual_nodes: usize,
    ) -> Self {
        let mut tokens: BTreeMap<u64, String> = BTreeMap::new();
        for member in members {
            for i in 0..virtual_nodes.max(1) {
                let position = mixed_hash(&format!("{member}#{i}"));
                match tokens.get(&position) {
                    Some(holder) if holder.as_str() <= member => {}
                    _ => {
                        tokens.insert(position, member.to_string());
                    }
                }
            }
        }
        Self { tokens }
    }

    /// Whether the ring has no member.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The member that owns `hash`, or `None` on an empty ring.
    #[must_use]
    pub fn owner(&self, hash: u64) -> Option<&str> {
        self.tokens
            .range(hash..)
            .next()
            .or_else(|| self.tokens.iter().next())
            .map(|(_, member)| member.as_str())
    }

    /// The member that owns `value` (a uid): the owner of its FNV-1a hash, as the member's
    /// `shardSelector` ranges select it.
    #[must_use]
    pub fn owner_of(&self, value: &str) -> Option<&str> {
        self.owner(uid_point(value))
    }

    /// The member that owns the namespace `name`: the owner of its mixed hash, so namespaces
    /// with similar names still spread over the members (see the module docs).
    #[must_use]
    pub fn namespace_owner(&self, name: &str) -> Option<&str> {
        self.owner(namespace_point(name))
    }

    /// The half-open ranges `member` owns, sorted and merged where they touch; empty for a
    /// member not on the ring. On a one-member ring, the whole space.
    #[must_use]
    pub fn ranges(&self, member: &str) -> Vec<ShardRange> {
        let mut arcs: Vec<ShardRange> = Vec::new();
        let mut previous: Option<u64> = self.tokens.keys().next_back().copied();
        for (&token, holder) in &self.tokens {
            // The arc (previous, token] belongs to this token's holder: [previous + 1, token + 1).
            let start = previous.and_then(|p| p.checked_add(1));
            let end = u128::from(token) + 1;
            let wraps = previous.is_some_and(|p| p >= token);
            previous = Some(token);
            if holder != member {
                continue;
            }
            if wraps {
                // The first token's arc wraps: (last, 2^64) and [0, token].
                arcs.extend(ShardRange::new(0, end));
                arcs.extend(start.and_then(|s| ShardRange::new(s, HASH_SPACE_END)));
            } else {
                arcs.extend(ShardRange::new(start.unwrap_or(0), end));
            }
        }
        RangeSet::from_ranges(arcs).ranges()
    }

    /// `member`'s share of the hash space, from 0 to 1.
    #[must_use]
    pub fn share(&self, member: &str) -> f64 {
        #[expect(
            clippy::cast_precision_loss,
            reason = "a fraction for humans and tests"
        )]
        let owned = self
            .ranges(member)
            .iter()
            .map(|r| r.len() as f64)
            .sum::<f64>();
        #[expect(
            clippy::cast_precision_loss,
            reason = "a fraction for humans and tests"
        )]
        let space = HASH_SPACE_END as f64;
        owned / space
    }

    /// The selector that lists and watches `member`'s share on `key`, or `None` for a member
    /// not on the ring.
    #[must_use]
    pub fn selector(&self, member: &str, key: ShardKey) -> Option<ShardSelector> {
        ShardSelector::new(key, self.ranges(member)).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::fnv1a_64;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("informant-{i}_uid-{i}")).collect()
    }

    /// UUIDv4-shaped uids from a fixed seed, as the API server generates them.
    fn sample() -> Vec<String> {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5866);
        (0..100_000)
            .map(|_| {
                let b: u128 = rng.random();
                format!(
                    "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
                    b >> 96,
                    (b >> 80) & 0xffff,
                    (b >> 68) & 0xfff,
                    0x8000 | ((b >> 52) & 0x3fff),
                    b & 0xffff_ffff_ffff
                )
            })
            .collect()
    }

    #[test]
    fn every_hash_has_exactly_one_owner_and_the_ranges_partition_the_space() {
        for n in 1..=5 {
            let members = names(n);
            let ring = Ring::new(members.iter().map(String::as_str));
            let mut all: Vec<ShardRange> = members.iter().flat_map(|m| ring.ranges(m)).collect();
            all.sort();
            assert_eq!(all.first().map(|r| r.start), Some(0), "{n} members");
            assert_eq!(
                all.last().map(|r| r.end),
                Some(HASH_SPACE_END),
                "{n} members"
            );
            for pair in all.windows(2) {
                assert_eq!(
                    u128::from(pair[1].start),
                    pair[0].end,
                    "{n}: gap or overlap"
                );
            }
            for value in sample().iter().take(2_000) {
                let owner = ring.owner_of(value).unwrap();
                let hash = fnv1a_64(value.as_bytes());
                for m in &members {
                    let holds = ring.ranges(m).iter().any(|r| r.contains(hash));
                    assert_eq!(holds, m == owner, "{value} with {n} members");
                }
            }
        }
    }

    #[test]
    fn the_ring_depends_on_the_set_of_members_not_their_order() {
        let members = names(4);
        let forward = Ring::new(members.iter().map(String::as_str));
        let backward = Ring::new(members.iter().rev().map(String::as_str));
        assert_eq!(forward, backward);
    }

    #[test]
    fn one_member_owns_everything_and_an_empty_ring_owns_nothing() {
        let ring = Ring::new(["solo"]);
        assert_eq!(ring.ranges("solo"), vec![ShardRange::all()]);
        assert!(ring.ranges("other").is_empty());
        assert!(ring.selector("other", ShardKey::Uid).is_none());
        let empty = Ring::new([]);
        assert!(empty.is_empty() && empty.owner(7).is_none());
    }

    #[test]
    fn shares_stay_near_one_over_n() {
        for n in 2..=4 {
            let members = names(n);
            let ring = Ring::new(members.iter().map(String::as_str));
            #[expect(clippy::cast_precision_loss, reason = "a small count")]
            let fair = 1.0 / n as f64;
            for m in &members {
                let share = ring.share(m);
                assert!(
                    share < 1.3 * fair && share > 0.7 * fair,
                    "{m} holds {share:.3} of {n}"
                );
            }
        }
    }

    #[test]
    fn a_fourth_member_moves_about_a_quarter_of_the_objects_all_to_itself() {
        let members = names(4);
        let three = Ring::new(members[..3].iter().map(String::as_str));
        let four = Ring::new(members.iter().map(String::as_str));
        let objects = sample();
        let mut moved = 0usize;
        for value in &objects {
            let before = three.owner_of(value).unwrap();
            let after = four.owner_of(value).unwrap();
            if before != after {
                moved += 1;
                assert_eq!(after, members[3], "{value} moved between old members");
            }
        }
        #[expect(clippy::cast_precision_loss, reason = "a fraction")]
        let fraction = moved as f64 / objects.len() as f64;
        assert!(fraction < 0.25 + 0.10, "{fraction:.3} moved");
        assert!(fraction > 0.25 - 0.10, "{fraction:.3} moved");
    }

    #[test]
    fn namespaces_with_sequential_names_spread_over_the_members() {
        let members = names(3);
        let ring = Ring::new(members.iter().map(String::as_str));
        let mut counts = std::collections::BTreeMap::new();
        for i in 0..300 {
            *counts
                .entry(ring.namespace_owner(&format!("ns-{i}")).unwrap())
                .or_insert(0) += 1;
        }
        assert_eq!(counts.len(), 3, "{counts:?}");
        assert!(counts.values().all(|c| *c > 70 && *c < 130), "{counts:?}");
        // Plain FNV-1a ranges would not: `ns-0` … `ns-29` hash into one quarter.
        let quarters: std::collections::BTreeSet<u64> = (0..30)
            .map(|i| fnv1a_64(format!("ns-{i}").as_bytes()) >> 62)
            .collect();
        assert_eq!(quarters.len(), 1, "{quarters:?}");
    }

    #[test]
    fn a_member_selector_selects_exactly_what_it_owns() {
        let members = names(3);
        let ring = Ring::new(members.iter().map(String::as_str));
        let selector = ring.selector(&members[1], ShardKey::Uid).unwrap();
        let parsed: ShardSelector = selector.to_string().parse().unwrap();
        assert_eq!(parsed, selector, "the wire form round-trips");
        for value in sample().iter().take(5_000) {
            assert_eq!(
                selector.matches_value(value),
                ring.owner_of(value) == Some(members[1].as_str()),
                "{value}"
            );
        }
    }
}
