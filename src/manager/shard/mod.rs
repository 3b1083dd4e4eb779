//! Sharding a cache and its controllers over the members of a ring: who the members are
//! ([`Member`], one Lease each), which part of the hash space each owns ([`Ring`]), and which
//! part each may act on while ownership moves ([`may_act`]).

mod claims;
mod gate;
mod membership;
mod options;
mod ring;
mod runtime;
mod status;

pub use claims::{CLAIMS_ANNOTATION, RangeSet, may_act};
pub use gate::{Admission, Gain, ShardGate};
pub use membership::{Fence, Member, MemberView, Membership, RING_LABEL};
pub use options::ShardOptions;
pub use ring::Ring;
pub use runtime::{ShardRuntime, ShardView};
pub(crate) use status::status_source;
