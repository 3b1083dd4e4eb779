//! What a reload cannot change: the settings a running manager keeps until it restarts, checked
//! by both config sources before they publish a config, so a rejected edit is rejected as
//! every invalid one is (the last good config keeps running, `Valid=False`, a Warning Event, a
//! log line) and never reaches the caches.
//!
//! `spec.sharding` is one: every replica of a ring must agree on the ring and the key, and a
//! replica cannot leave one ring and join another, or move from one key to the other, without
//! a moment where two replicas both own an object (or none does). Stopping every replica, then
//! starting them (`kubectl scale --replicas=0`, then back) applies the new sharding from a
//! clean start; a rolling restart would not (old and new replicas would run side by side).

use super::error::{Error, FieldError, FieldPath, Origin};
use super::load::Validated;
use crate::selector::ShardKey;
use crate::selector::Sharding;

/// The problems that keep `next` from replacing `running` by a reload (empty: it may).
#[must_use]
pub fn restart_needed(running: &Validated, next: &Validated) -> Vec<FieldError> {
    let (was, now) = (&running.cache.sharding, &next.cache.sharding);
    if was == now {
        return Vec::new();
    }
    vec![FieldError::new(
        &FieldPath::root("spec").field("sharding"),
        format!(
            "changing sharding needs a restart of every replica; the replicas run with {}, \
             this config asks for {}: revert the edit, or keep it and stop every replica before \
             any starts again with it (kubectl scale deployment/<name> --replicas=0, then \
             back; a rolling restart would run both shardings at once, two owners per object)",
            describe(was.as_ref()),
            describe(now.as_ref()),
        ),
    )]
}

/// `next` if a reload may apply it over `running`, else [`Error::Invalid`] from `origin` with
/// every problem.
///
/// # Errors
///
/// [`Error::Invalid`] naming each setting that needs a restart.
pub fn reloadable(
    running: &Validated,
    next: Validated,
    origin: Origin,
) -> Result<Validated, Error> {
    let errors = restart_needed(running, &next);
    if errors.is_empty() {
        Ok(next)
    } else {
        Err(Error::Invalid { origin, errors })
    }
}

/// `sharding {ring: shop, key: namespace}`, or `no sharding`.
pub(super) fn describe(sharding: Option<&Sharding>) -> String {
    match sharding {
        None => "no sharding".to_owned(),
        Some(Sharding { ring, key }) => {
            let key = match key {
                ShardKey::Namespace => "namespace",
                ShardKey::Uid => "uid",
            };
            format!("sharding {{ring: {ring}, key: {key}}}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_str;

    fn config(spec: &str) -> Validated {
        let doc = format!(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: c}}\nspec: {spec}\n"
        );
        load_str(&doc).unwrap()
    }

    #[test]
    fn any_change_of_the_validated_sharding_needs_a_restart_and_nothing_else_does() {
        let none = config("{}");
        let shop = config("{sharding: {ring: shop}}");
        assert!(restart_needed(&none, &config("{syncPeriod: 1h}")).is_empty());
        assert!(
            restart_needed(&shop, &config("{sharding: {ring: shop, key: namespace}}")).is_empty(),
            "the default key written out is the same sharding"
        );
        for (running, next, said) in [
            (
                &none,
                &shop,
                "with no sharding, this config asks for sharding {ring: shop, key: namespace}",
            ),
            (
                &shop,
                &none,
                "with sharding {ring: shop, key: namespace}, this config asks for no sharding",
            ),
            (
                &shop,
                &config("{sharding: {ring: cart}}"),
                "this config asks for sharding {ring: cart, key: namespace}",
            ),
            (
                &shop,
                &config("{sharding: {ring: shop, key: uid}}"),
                "this config asks for sharding {ring: shop, key: uid}",
            ),
        ] {
            let errors = restart_needed(running, next);
            assert_eq!(errors.len(), 1);
            let text = errors[0].to_string();
            assert!(
                text.starts_with(
                    "spec.sharding: changing sharding needs a restart of every replica; "
                ),
                "{text}"
            );
            assert!(text.contains(said), "{text}");
        }
    }

    #[test]
    fn a_config_that_needs_a_restart_is_invalid_from_its_origin() {
        let error = reloadable(
            &config("{}"),
            config("{sharding: {ring: shop}}"),
            Origin::Text,
        )
        .unwrap_err();
        assert_eq!(error.field_errors().len(), 1);
        assert!(
            error
                .to_string()
                .starts_with("<string>: invalid cacheconfig (1 error):\n  spec.sharding: "),
            "{error}"
        );
        assert!(reloadable(&config("{}"), config("{syncPeriod: 2h}"), Origin::Text).is_ok());
    }
}
