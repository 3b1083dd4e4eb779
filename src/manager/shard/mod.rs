//! Sharding a cache and its controllers over the members of a ring: who the members are
//! ([`Member`], one Lease each) and which part of the hash space each owns ([`Ring`]).

mod membership;
mod ring;

pub use membership::{Fence, Member, MemberView, Membership, RING_LABEL};
pub use ring::Ring;
