//! The hash space shards are cut from: the 64-bit hashes, the point of an object for a shard key,
//! and the ranges and sets of ranges a member owns, caches, claims and acts on.
//!
//! Everything that decides where an object belongs uses this module: the `shardSelector` an
//! informer sends or applies in the process ([`super::ShardSelector`]), the share a cache holds,
//! the ring that hands out the ranges and the gate every reconcile of a sharded manager asks
//! first. So they cannot disagree on an object.
//!
//! - [`fnv1a_64`] is the hash KEP-5866 shards by: a `shardSelector` compares the FNV-1a hash of
//!   the field's value with its ranges.
//! - [`mixed_hash`] is FNV-1a finished by `MurmurHash3`'s [`fmix64`]: FNV-1a alone keeps strings
//!   that differ only in their last characters close (`ns-0` … `ns-29` all hash into one
//!   quarter of the space; `a#1` and `a#2` differ by about 2^40 of 2^64), so what must spread
//!   (namespace names, the ring's tokens) is mixed.
//! - [`point`] is where an object lies: with `key: uid` (and for a cluster-scoped object), the
//!   FNV-1a hash of its uid ([`uid_point`], as a `shardSelector` on `object.metadata.uid`
//!   selects it); with `key: namespace`, the mixed hash of its namespace ([`namespace_point`]),
//!   every object of a namespace at one point.
//! - [`ShardRange`] is one half-open range `[start, end)`, [`RangeSet`] a set of them.
//!
//! ```
//! use informant::selector::{RangeSet, ShardKey, ShardRange, point, uid_point};
//!
//! let lower_half = RangeSet::from_ranges([ShardRange::new(0, 1 << 63).unwrap()]);
//! let uid = "7d0c1f5e-2b8a-4c3e-9f61-0a1b2c3d4e5f";
//! assert_eq!(point(ShardKey::Uid, "shop", uid), uid_point(uid));
//! assert_eq!(lower_half.contains(uid_point(uid)), uid_point(uid) < 1 << 63);
//! assert_eq!(RangeSet::all().subtract(&lower_half).to_string(), "8000000000000000-10000000000000000");
//! ```

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

/// The exclusive end of the hash space: 2^64, written `0x10000000000000000`.
pub const HASH_SPACE_END: u128 = 1 << 64;

/// The 64-bit FNV-1a hash of `bytes` (Go's `hash/fnv` `New64a`, as apimachinery's
/// `sharding.HashField` computes it over the field's string value).
#[must_use]
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    // FNV-1a 64-bit offset basis and prime (Go `hash/fnv`: offset64, prime64).
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    })
}

/// `MurmurHash3`'s 64-bit finalizer: every input bit flips about half of the output bits.
#[must_use]
pub fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// FNV-1a of `text` finished by [`fmix64`]: a hash that spreads strings differing only in
/// their last characters (see the module docs).
#[must_use]
pub fn mixed_hash(text: &str) -> u64 {
    fmix64(fnv1a_64(text.as_bytes()))
}

/// The object field a shard selector hashes, and what places an object on a shard ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShardKey {
    /// `object.metadata.uid`: objects spread evenly, one object at a time.
    Uid,
    /// `object.metadata.namespace`: every object of a namespace lands in the same range.
    Namespace,
}

impl ShardKey {
    /// The CEL field path (`object.metadata.uid`, `object.metadata.namespace`).
    #[must_use]
    pub fn path(self) -> &'static str {
        match self {
            Self::Uid => "object.metadata.uid",
            Self::Namespace => "object.metadata.namespace",
        }
    }

    /// The value this key hashes in `object` (a JSON object); "" when absent, as a
    /// cluster-scoped object's namespace is.
    #[must_use]
    pub fn value_of(self, object: &Value) -> &str {
        let field = match self {
            Self::Uid => "uid",
            Self::Namespace => "namespace",
        };
        object
            .get("metadata")
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// The point of the namespace `name`: its [`mixed_hash`], so similar names spread.
#[must_use]
pub fn namespace_point(name: &str) -> u64 {
    mixed_hash(name)
}

/// The point of an object with uid `uid`: its FNV-1a hash, as KEP-5866 hashes
/// `object.metadata.uid`.
#[must_use]
pub fn uid_point(uid: &str) -> u64 {
    fnv1a_64(uid.as_bytes())
}

/// The point of an object in `namespace` ("" when cluster-scoped) with uid `uid`, sharded by
/// `key`: by namespace, its namespace's point; by uid, and for a cluster-scoped object (cached
/// whole on every member, acted on by one), its uid's point.
#[must_use]
pub fn point(key: ShardKey, namespace: &str, uid: &str) -> u64 {
    match key {
        ShardKey::Namespace if !namespace.is_empty() => namespace_point(namespace),
        ShardKey::Namespace | ShardKey::Uid => uid_point(uid),
    }
}

/// The [`point`] of the object `meta` describes; a missing namespace or uid counts as "".
#[must_use]
pub fn point_of(key: ShardKey, meta: &ObjectMeta) -> u64 {
    point(
        key,
        meta.namespace.as_deref().unwrap_or_default(),
        meta.uid.as_deref().unwrap_or_default(),
    )
}

/// One half-open hash range `[start, end)`; `end` may be 2^64 ([`HASH_SPACE_END`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardRange {
    /// The first hash in the range.
    pub start: u64,
    /// The first hash past the range, at most [`HASH_SPACE_END`].
    pub end: u128,
}

impl ShardRange {
    /// The range `[start, end)`, or `None` unless `start < end <= 2^64`.
    #[must_use]
    pub fn new(start: u64, end: u128) -> Option<Self> {
        (u128::from(start) < end && end <= HASH_SPACE_END).then_some(Self { start, end })
    }

    /// The whole hash space.
    #[must_use]
    pub fn all() -> Self {
        Self {
            start: 0,
            end: HASH_SPACE_END,
        }
    }

    /// Whether `hash` lies in the range.
    #[must_use]
    pub fn contains(self, hash: u64) -> bool {
        self.start <= hash && u128::from(hash) < self.end
    }

    /// How many hashes the range holds.
    #[must_use]
    pub fn len(self) -> u128 {
        self.end - u128::from(self.start)
    }

    /// Never true: a range holds at least one hash.
    #[must_use]
    pub fn is_empty(self) -> bool {
        false
    }

    /// The range `[start, end)` of two wide bounds; `None` unless `start < end <= 2^64`.
    fn spanning(start: u128, end: u128) -> Option<Self> {
        Self::new(u64::try_from(start).ok()?, end)
    }

    /// The first hash as a wide bound, to compare with ends.
    fn first(self) -> u128 {
        u128::from(self.start)
    }
}

/// A set of points of the hash space: sorted, disjoint, non-adjacent [`ShardRange`]s.
///
/// Its text form (`Display`, [`RangeSet::decode`]) is `start-end` pairs of 16 (or 17, for 2^64)
/// lowercase hex digits, comma-separated, sorted; empty for none: how a shard member publishes
/// its claims on its Lease.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RangeSet(Vec<ShardRange>);

impl RangeSet {
    /// The empty set.
    #[must_use]
    pub fn empty() -> Self {
        Self(Vec::new())
    }

    /// The whole space.
    #[must_use]
    pub fn all() -> Self {
        Self(vec![ShardRange::all()])
    }

    /// The union of `ranges`.
    #[must_use]
    pub fn from_ranges(ranges: impl IntoIterator<Item = ShardRange>) -> Self {
        let mut ranges: Vec<ShardRange> = ranges.into_iter().collect();
        ranges.sort_unstable();
        let mut out: Vec<ShardRange> = Vec::with_capacity(ranges.len());
        for range in ranges {
            match out.last_mut() {
                Some(last) if range.first() <= last.end => last.end = last.end.max(range.end),
                _ => out.push(range),
            }
        }
        Self(out)
    }

    /// Whether the set holds nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `hash` is in the set.
    #[must_use]
    pub fn contains(&self, hash: u64) -> bool {
        let i = self.0.partition_point(|r| r.start <= hash);
        i > 0 && self.0[i - 1].contains(hash)
    }

    /// The ranges, sorted, for a shard selector.
    #[must_use]
    pub fn ranges(&self) -> Vec<ShardRange> {
        self.0.clone()
    }

    /// `self ∪ other`.
    #[must_use]
    pub fn union(&self, other: &Self) -> Self {
        Self::from_ranges(self.0.iter().chain(&other.0).copied())
    }

    /// `self ∖ other`.
    #[must_use]
    pub fn subtract(&self, other: &Self) -> Self {
        let mut out = Vec::new();
        for range in &self.0 {
            let (mut start, end) = (range.first(), range.end);
            for taken in &other.0 {
                if taken.end <= start || taken.first() >= end {
                    continue;
                }
                if taken.first() > start {
                    out.extend(ShardRange::spanning(start, taken.first()));
                }
                start = start.max(taken.end);
                if start >= end {
                    break;
                }
            }
            out.extend(ShardRange::spanning(start, end));
        }
        Self(out)
    }

    /// `self ∩ other`.
    #[must_use]
    pub fn intersect(&self, other: &Self) -> Self {
        self.subtract(&self.subtract(other))
    }

    /// Reads the text form (see the type's docs).
    ///
    /// # Errors
    ///
    /// A pair that is not `start-end` in hex with `start < end <= 2^64`.
    pub fn decode(text: &str) -> Result<Self, String> {
        let mut ranges = Vec::new();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (s, e) = pair
                .split_once('-')
                .ok_or_else(|| format!("{pair:?} is not start-end"))?;
            let parse = |h: &str| {
                u128::from_str_radix(h, 16).map_err(|e| format!("{h:?} in {pair:?}: {e}"))
            };
            let range = ShardRange::spanning(parse(s)?, parse(e)?)
                .ok_or_else(|| format!("{pair:?} is not a range of the hash space"))?;
            ranges.push(range);
        }
        Ok(Self::from_ranges(ranges))
    }
}

impl fmt::Display for RangeSet {
    /// The text form (see the type's docs).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, range) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{:016x}-{:016x}", range.start, range.end)?;
        }
        Ok(())
    }
}

/// The ring a sharded cache belongs to and the key that assigns objects to its members.
///
/// Which part of the objects this member holds is not an option: it follows the ring's
/// members while the manager runs, as the namespaces a selector matches do.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sharding {
    /// The ring's name, the value of the members' `informant.dev/ring` label.
    pub ring: String,
    /// The object field that decides an object's member.
    pub key: ShardKey,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(spans: &[(u64, u128)]) -> RangeSet {
        RangeSet::from_ranges(spans.iter().map(|&(s, e)| ShardRange::new(s, e).unwrap()))
    }

    #[test]
    fn fnv1a_64_matches_go_hash_fnv() {
        // Go: fnv.New64a() over "", "a" and "foobar" (the FNV reference vectors).
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fmix64_is_murmur3s_finalizer() {
        // MurmurHash3 fmix64: 0 stays 0, and one input bit reaches about half the output.
        assert_eq!(fmix64(0), 0);
        let flipped = (fmix64(1) ^ fmix64(0)).count_ones();
        assert!((16..=48).contains(&flipped), "{flipped}");
        assert_eq!(mixed_hash("ns-0"), fmix64(fnv1a_64(b"ns-0")));
    }

    #[test]
    fn an_object_lies_at_its_namespace_or_its_uid() {
        let meta = ObjectMeta {
            namespace: Some("shop".to_owned()),
            uid: Some("u-1".to_owned()),
            ..ObjectMeta::default()
        };
        let cluster = ObjectMeta {
            namespace: None,
            ..meta.clone()
        };
        assert_eq!(
            point_of(ShardKey::Namespace, &meta),
            namespace_point("shop")
        );
        assert_eq!(point_of(ShardKey::Uid, &meta), uid_point("u-1"));
        assert_eq!(point_of(ShardKey::Namespace, &cluster), uid_point("u-1"));
        assert_eq!(namespace_point("shop"), mixed_hash("shop"));
        assert_eq!(uid_point("u-1"), fnv1a_64(b"u-1"));
    }

    #[test]
    fn set_algebra_and_the_text_form_round_trip() {
        let a = set(&[(0, 10), (20, 30)]);
        let b = set(&[(5, 25)]);
        assert_eq!(a.union(&b), set(&[(0, 30)]));
        assert_eq!(a.subtract(&b), set(&[(0, 5), (25, 30)]));
        assert_eq!(a.intersect(&b), set(&[(5, 10), (20, 25)]));
        assert!(a.contains(0) && a.contains(9) && !a.contains(10) && a.contains(29));
        assert_eq!(
            set(&[(0, 5), (5, 9)]),
            set(&[(0, 9)]),
            "touching ranges merge"
        );
        let whole = RangeSet::all();
        assert_eq!(RangeSet::decode(&whole.to_string()).unwrap(), whole);
        assert_eq!(whole.to_string(), "0000000000000000-10000000000000000");
        assert_eq!(RangeSet::decode("").unwrap(), RangeSet::empty());
        assert!(RangeSet::decode("9-1").is_err());
        assert!(RangeSet::decode("0-20000000000000000").is_err());
        assert!(RangeSet::decode("x-1").is_err());
        let top = set(&[(u64::MAX, HASH_SPACE_END)]);
        assert!(top.contains(u64::MAX) && !top.contains(u64::MAX - 1));
        assert_eq!(
            RangeSet::all().subtract(&top),
            set(&[(0, u128::from(u64::MAX))])
        );
    }
}
