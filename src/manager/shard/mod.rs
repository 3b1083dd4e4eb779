//! Sharding a cache and its controllers over the members of a ring: who the members are
//! ([`Member`], one Lease each), which part of the hash space each owns ([`Ring`]), and which
//! part each may act on while ownership moves ([`may_act`]).

mod claims;
mod membership;
mod ring;

pub use claims::{CLAIMS_ANNOTATION, RangeSet, may_act};
pub use membership::{Fence, Member, MemberView, Membership, RING_LABEL};
pub use ring::Ring;
