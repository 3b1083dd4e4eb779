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

use crate::selector::RangeSet;

/// The Lease annotation holding a member's claims: a [`RangeSet`] in its text form, `start-end`
/// pairs of 16 (or 17, for 2^64) hex digits, comma-separated, sorted; empty for none.
pub const CLAIMS_ANNOTATION: &str = "informant.dev/claims";

/// What a member may act on now: what it `desires` minus what the other live members claim.
#[must_use]
pub(crate) fn may_act<'a>(
    desires: &RangeSet,
    others: impl IntoIterator<Item = &'a RangeSet>,
) -> RangeSet {
    others
        .into_iter()
        .fold(desires.clone(), |free, claimed| free.subtract(claimed))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::manager::shard::Ring;

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
