//! Sharding a cache and its controllers over the members of a ring: which part of the hash
//! space each member owns ([`Ring`]).

mod ring;

pub use ring::Ring;
