//! Kubernetes label, field and shard selectors: parsed, printed back canonically, matched on
//! objects; and the hash space shards are cut from.
//!
//! Both follow apimachinery (`pkg/labels/selector.go`, `pkg/fields/selector.go`): the same
//! inputs are accepted and rejected, they match the same objects, and they print the same
//! canonical string (what the API server receives as `labelSelector` / `fieldSelector`). Parse
//! errors carry the character position of the offending input so the config validator can point
//! at it.
//!
//! ```
//! use informant::selector::{FieldSelector, LabelSelector};
//!
//! let labels: LabelSelector = "app=web,tier in (api,web)".parse()?;
//! let fields = FieldSelector::parse("status.phase=Running")?
//!     .and(&"metadata.namespace!=kube-system".parse()?);
//! let pod = serde_json::json!({
//!     "metadata": {"namespace": "shop", "labels": {"app": "web", "tier": "api"}},
//!     "status": {"phase": "Running"},
//! });
//! assert!(labels.matches_object(&pod) && fields.matches_object(&pod));
//!
//! let err = LabelSelector::parse("app=web,=x").unwrap_err();
//! assert_eq!(err.to_string(), r#"unexpected "=" at position 8, expected a label key or "!" after ",""#);
//! # Ok::<(), informant::selector::ParseError>(())
//! ```
//!
//! Deliberate differences from upstream, all on inputs nobody writes on purpose:
//!
//! - A NUL character ends a label selector upstream (the rest is ignored); here it is an
//!   ordinary character and so rejected by key/value validation.
//! - Label requirements on the same key keep their written order (stable sort); upstream's sort
//!   is unstable past 12 requirements.
//! - Field terms are ordered by their printed form; upstream orders the raw terms, which differs
//!   only when `==` is written (`a==x,a=b`).
//! - There is no "nothing" selector (apimachinery `labels.Nothing()`); hold an `Option` instead.
//!
//! # The hash space
//!
//! Shard selectors (KEP-5866's `shardSelector`) select ranges of a 64-bit hash space. The same
//! space is what a shard ring (`spec.sharding`) hands out, so everything that decides where an
//! object belongs is here, and used by the API server, the cache and the manager alike:
//! [`fnv1a_64`] (the hash KEP-5866 shards by), [`fmix64`] and [`mixed_hash`] (FNV-1a mixed, so
//! similar names spread), the [`point`] of an object for a [`ShardKey`] ([`point_of`] from its
//! metadata, built from [`uid_point`] and [`namespace_point`]), one range ([`ShardRange`]) and
//! one set of ranges ([`RangeSet`]). A `shardSelector` hashes its field with plain FNV-1a; the
//! point of an object agrees with it for `key: uid`, the only key a member sends as a selector
//! (by namespace, a member is given whole namespaces by their mixed point instead).

/// Implements the string form both selectors share: `Display` (the requirements joined by `,`,
/// each printed canonically), `FromStr`, and serde as that string (deserializing parses and
/// fails on invalid syntax).
macro_rules! string_form {
    ($selector:ty, $upstream:literal) => {
        #[doc = concat!("The canonical form, as apimachinery's `", $upstream, "`.")]
        impl std::fmt::Display for $selector {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                for (i, requirement) in self.requirements.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{requirement}")?;
                }
                Ok(())
            }
        }

        impl std::str::FromStr for $selector {
            type Err = $crate::selector::ParseError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s)
            }
        }

        /// Serializes as the canonical string.
        impl serde::Serialize for $selector {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        /// Deserializes from a selector string, failing on invalid syntax.
        impl<'de> serde::Deserialize<'de> for $selector {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                Self::parse(&text).map_err(serde::de::Error::custom)
            }
        }
    };
}

mod error;
mod field;
mod label;
#[cfg(any(feature = "hooks", feature = "apiserver"))]
pub(crate) use label::qualified_name_problem;
mod schema;
mod shard;
mod space;

pub use error::{Detail, ParseError};
pub use field::{FieldOperator, FieldRequirement, FieldSelector, escape_value};
pub use label::{
    ConvertError, LABEL_NAME_MAX_LENGTH, LABEL_PREFIX_MAX_LENGTH, LabelSelector, Operator,
    Requirement, RequirementError, label_value_problems,
};
pub use shard::{ShardSelector, ShardSelectorError};
pub use space::{
    HASH_SPACE_END, RangeSet, ShardKey, ShardRange, Sharding, fmix64, fnv1a_64, mixed_hash,
    namespace_point, point, point_of, uid_point,
};
