//! Sharding a cache and its controllers over the members of a ring: who the members are
//! ([`Member`], one Lease each), which part of the hash space each owns ([`Ring`]), which part
//! each may act on while ownership moves (`claims`), and whether a reconcile may start
//! ([`ShardGate`]). The hash space itself (points, ranges, sets of ranges) is
//! [`crate::selector`]'s.

mod claims;
mod gate;
mod membership;
mod options;
mod ring;
mod runtime;
mod status;

pub use claims::CLAIMS_ANNOTATION;
pub use gate::{Admission, Gain, ShardGate};
pub use membership::{Fence, Member, MemberView, Membership, RING_LABEL};
pub use options::ShardOptions;
pub use ring::Ring;
pub(crate) use runtime::ShardRuntime;
pub(crate) use status::status_source;
