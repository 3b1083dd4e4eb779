//! Who may act on which part of the ring's space: the handover rule that keeps at most one
//! owner per object while members come and go.
//!
//! A member *desires* the ranges the [`Ring`](super::Ring) gives it and *claims* (publishes on
//! its Lease, annotation [`CLAIMS_ANNOTATION`]) the ranges it acts on or is still finishing. It
//! may act on what it desires minus what any other live member claims
//! ([`may_act`]). So a range moves only after its previous owner let it go: the old owner stops
//! taking new work in a range it no longer desires, finishes what runs, and drops the range
//! from its claims; or its Lease expires, and a fenced member has stopped before that
//! ([`Fence`](super::Fence)). Two members never act on one point at once, whatever order they
//! learn of a membership change in.

use std::fmt;

use crate::selector::{HASH_SPACE_END, ShardRange};

/// The Lease annotation holding a member's claims: `start-end` pairs of 16 (or 17, for 2^64)
/// hex digits, comma-separated, sorted; empty for none.
pub const CLAIMS_ANNOTATION: &str = "informant.dev/claims";

/// A set of points of the hash space: sorted, disjoint, non-adjacent half-open ranges.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RangeSet(Vec<(u128, u128)>);

impl RangeSet {
    /// The empty set.
    #[must_use]
    pub fn empty() -> Self {
        Self(Vec::new())
    }

    /// The whole space.
    #[must_use]
    pub fn all() -> Self {
        Self(vec![(0, HASH_SPACE_END)])
    }

    /// The union of `ranges`.
    #[must_use]
    pub fn from_ranges(ranges: impl IntoIterator<Item = ShardRange>) -> Self {
        Self::normalized(
            ranges
                .into_iter()
                .map(|r| (u128::from(r.start), r.end))
                .collect(),
        )
    }

    fn normalized(mut spans: Vec<(u128, u128)>) -> Self {
        spans.retain(|(s, e)| s < e);
        spans.sort_unstable();
        let mut out: Vec<(u128, u128)> = Vec::with_capacity(spans.len());
        for (s, e) in spans {
            match out.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => out.push((s, e)),
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
        let h = u128::from(hash);
        let i = self.0.partition_point(|(s, _)| *s <= h);
        i > 0 && h < self.0[i - 1].1
    }

    /// The ranges, for a shard selector.
    #[must_use]
    pub fn ranges(&self) -> Vec<ShardRange> {
        self.0
            .iter()
            .filter_map(|&(s, e)| ShardRange::new(u64::try_from(s).ok()?, e))
            .collect()
    }

    /// `self ∪ other`.
    #[must_use]
    pub fn union(&self, other: &Self) -> Self {
        Self::normalized(self.0.iter().chain(&other.0).copied().collect())
    }

    /// `self ∖ other`.
    #[must_use]
    pub fn subtract(&self, other: &Self) -> Self {
        let mut out = Vec::new();
        for &(mut start, end) in &self.0 {
            for &(os, oe) in &other.0 {
                if oe <= start || os >= end {
                    continue;
                }
                if os > start {
                    out.push((start, os));
                }
                start = start.max(oe);
                if start >= end {
                    break;
                }
            }
            if start < end {
                out.push((start, end));
            }
        }
        Self(out)
    }

    /// `self ∩ other`.
    #[must_use]
    pub fn intersect(&self, other: &Self) -> Self {
        self.subtract(&self.subtract(other))
    }

    /// Reads the annotation form.
    ///
    /// # Errors
    ///
    /// A pair that is not `start-end` in hex with `start < end <= 2^64`.
    pub fn decode(text: &str) -> Result<Self, String> {
        let mut spans = Vec::new();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (s, e) = pair
                .split_once('-')
                .ok_or_else(|| format!("{pair:?} is not start-end"))?;
            let parse = |h: &str| {
                u128::from_str_radix(h, 16).map_err(|e| format!("{h:?} in {pair:?}: {e}"))
            };
            let (s, e) = (parse(s)?, parse(e)?);
            if s >= e || e > HASH_SPACE_END {
                return Err(format!("{pair:?} is not a range of the hash space"));
            }
            spans.push((s, e));
        }
        Ok(Self::normalized(spans))
    }
}

impl fmt::Display for RangeSet {
    /// The annotation form (see [`CLAIMS_ANNOTATION`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (s, e)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{s:016x}-{e:016x}")?;
        }
        Ok(())
    }
}

/// What a member may act on now: what it `desires` minus what the other live members claim.
#[must_use]
pub fn may_act<'a>(desires: &RangeSet, others: impl IntoIterator<Item = &'a RangeSet>) -> RangeSet {
    others
        .into_iter()
        .fold(desires.clone(), |free, claimed| free.subtract(claimed))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::manager::shard::Ring;

    fn set(spans: &[(u128, u128)]) -> RangeSet {
        RangeSet::normalized(spans.to_vec())
    }

    #[test]
    fn set_algebra_and_the_annotation_round_trip() {
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
    }

    /// A simulated ring: each member learns of membership changes at its own step, takes what
    /// `may_act` allows (or, with `skip_handover`, everything it desires), and lets go of what
    /// it no longer desires one step later (its in-flight work finishing). The checker fails on
    /// any point two members act on at once.
    fn simulate(skip_handover: bool) -> Result<(), String> {
        let names = ["m0", "m1", "m2", "m3"];
        // Who is in the ring at each step: three, a fourth joins, one leaves.
        let epochs: [&[&str]; 4] = [
            &["m0", "m1", "m2"],
            &["m0", "m1", "m2", "m3"],
            &["m0", "m2", "m3"],
            &["m0", "m1", "m2", "m3"],
        ];
        let mut acting: BTreeMap<&str, RangeSet> = BTreeMap::new();
        let mut claims: BTreeMap<&str, RangeSet> = BTreeMap::new();
        for (epoch, live) in epochs.iter().enumerate() {
            let ring = Ring::new(live.iter().copied());
            // Members learn of the change one at a time, in an order that differs per epoch.
            let mut order: Vec<&str> = names.to_vec();
            order.rotate_left(epoch);
            for step in 0..3 {
                for &me in &order {
                    if !live.contains(&me) {
                        acting.remove(me);
                        claims.remove(me);
                        continue;
                    }
                    let desires = RangeSet::from_ranges(ring.ranges(me));
                    let now = if skip_handover {
                        desires.clone()
                    } else {
                        may_act(
                            &desires,
                            claims.iter().filter(|(m, _)| **m != me).map(|(_, c)| c),
                        )
                    };
                    // Claims keep what was acted on until the next step (work finishing).
                    let finishing = if step == 0 {
                        acting.get(me).cloned().unwrap_or_default()
                    } else {
                        RangeSet::empty()
                    };
                    claims.insert(me, now.union(&finishing));
                    acting.insert(me, now);
                    let held: Vec<(&&str, &RangeSet)> = claims.iter().collect();
                    for (i, (a, ca)) in held.iter().enumerate() {
                        for (b, cb) in &held[i + 1..] {
                            let both = ca.intersect(cb);
                            if !both.is_empty() {
                                return Err(format!(
                                    "epoch {epoch}: {a} and {b} both act on {both}"
                                ));
                            }
                        }
                    }
                }
            }
            let covered = claims.values().fold(RangeSet::empty(), |u, c| u.union(c));
            if !skip_handover && covered != RangeSet::all() {
                return Err(format!(
                    "epoch {epoch}: unowned {}",
                    RangeSet::all().subtract(&covered)
                ));
            }
        }
        Ok(())
    }

    #[test]
    fn the_handover_rule_never_lets_two_members_act_on_one_point_and_leaves_nothing_unowned() {
        assert_eq!(simulate(false), Ok(()));
    }

    #[test]
    fn the_checker_catches_overlaps_when_the_handover_wait_is_skipped() {
        let report = simulate(true).unwrap_err();
        assert!(report.contains("both act on"), "{report}");
    }
}
