//! `spec.sharding`: the ring's name and the key that assigns objects to its members.

use super::{FieldPath, Validator};
use crate::config::dns1123_subdomain_problem;
use crate::config::types::ShardingSpec;
use crate::selector::Sharding;
use crate::selector::{ShardKey, label_value_problems};
use crate::suggest::closest;

/// The values `spec.sharding.key` accepts, as written.
const KEYS: [&str; 2] = ["namespace", "uid"];

impl Validator {
    /// `spec.sharding`: a ring named by a label value, and a known key (`namespace` when
    /// absent).
    pub(super) fn sharding(&mut self, spec: &ShardingSpec, path: &FieldPath) -> Option<Sharding> {
        let ring_path = path.field("ring");
        let ring_ok = if spec.ring.is_empty() {
            self.error(
                &ring_path,
                "Required value: name the ring, e.g. `ring: shop`; the replicas whose Leases \
                 carry informant.dev/ring=<ring> share the objects",
            );
            false
        } else {
            let problems = label_value_problems(&spec.ring);
            for problem in &problems {
                self.error(
                    &ring_path,
                    format!(
                        "{problem}; the ring is the value of the label informant.dev/ring, \
                         e.g. `shop`"
                    ),
                );
            }
            // Each member's Lease is named `<ring>-<16 hex digits>`, an object name (a
            // DNS-1123 subdomain): a label value may hold what a name may not.
            let lease_problem = problems
                .is_empty()
                .then(|| dns1123_subdomain_problem(&format!("{}-{:016x}", spec.ring, 0)))
                .flatten();
            if let Some(problem) = lease_problem {
                self.error(
                    &ring_path,
                    format!(
                        "{problem} (the ring names the members' Leases, <ring>-<16 hex \
                         digits>); e.g. `shop` or `shop-eu`"
                    ),
                );
            }
            problems.is_empty() && lease_problem.is_none()
        };
        let key = match spec.key.as_deref() {
            None | Some("namespace") => Some(ShardKey::Namespace),
            Some("uid") => Some(ShardKey::Uid),
            Some(other) => {
                let known: Vec<String> = KEYS.iter().map(|k| (*k).to_owned()).collect();
                let hint = closest(other, known.iter())
                    .map(|k| format!("did you mean {k:?}? "))
                    .unwrap_or_default();
                self.error(
                    &path.field("key"),
                    format!(
                        "unknown key {other:?}; {hint}use one of: namespace (every object of a \
                         namespace on one replica), uid (objects spread one by one)"
                    ),
                );
                None
            }
        };
        match (ring_ok, key) {
            (true, Some(key)) => Some(Sharding {
                ring: spec.ring.clone(),
                key,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::load_str;
    use crate::selector::ShardKey;
    use crate::selector::Sharding;

    fn sharding(spec: &str) -> Option<Sharding> {
        let doc = format!(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: c}}\nspec:\n  {spec}\n"
        );
        match load_str(&doc) {
            Ok(valid) => valid.cache.sharding,
            Err(e) => panic!("{spec} should be valid: {e}"),
        }
    }

    #[test]
    fn the_key_defaults_to_namespace_and_uid_is_accepted() {
        let ring = |key| {
            Some(Sharding {
                ring: "shop".to_owned(),
                key,
            })
        };
        assert_eq!(
            sharding("sharding: {ring: shop}"),
            ring(ShardKey::Namespace)
        );
        assert_eq!(
            sharding("sharding: {ring: shop, key: namespace}"),
            ring(ShardKey::Namespace)
        );
        assert_eq!(
            sharding("sharding: {ring: shop, key: uid}"),
            ring(ShardKey::Uid)
        );
        assert_eq!(sharding("syncPeriod: 1h"), None);
    }
}
