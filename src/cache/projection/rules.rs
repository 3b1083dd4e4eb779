//! Which paths a projection may name: the metadata the cache needs is always kept, and
//! `metadata` is addressed by whole fields or by one annotation or label key.

use super::path::{ObjectPath, Step};

/// The `metadata` fields every projection keeps: what lists, selectors, owner lookups,
/// finalizers and deletion read from a cached object.
pub(crate) const ALWAYS_KEPT: [&str; 9] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "labels",
    "ownerReferences",
    "deletionTimestamp",
    "finalizers",
    "generation",
];

/// The `metadata` fields a projection may keep or drop (the rest of `ObjectMeta`).
pub(super) const PROJECTABLE_META: [&str; 6] = [
    "annotations",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "generateName",
    "managedFields",
    "selfLink",
];

/// Which part of a projection a path belongs to, for [`check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// A `keepFields` path.
    Keep,
    /// A `dropFields` path.
    Drop,
}

/// Whether `path` may appear on `side`; the message says why not.
///
/// # Errors
///
/// A sentence for the user when the path names a field the cache always keeps (on the drop
/// side), or a part of `metadata` that is not addressable.
pub fn check(path: &ObjectPath, side: Side) -> Result<(), String> {
    let steps = path.steps();
    let Some(Step::Field(root)) = steps.first() else {
        return Err("a path starts with a field name".into());
    };
    match root.as_str() {
        "apiVersion" | "kind" => {
            if side == Side::Drop {
                return Err(format!("{root} is always kept"));
            }
            if steps.len() > 1 {
                return Err(format!("{root} is a string; it has no fields"));
            }
            Ok(())
        }
        "metadata" => check_meta(&steps[1..], side),
        _ => Ok(()),
    }
}

fn check_meta(steps: &[Step], side: Side) -> Result<(), String> {
    let Some(first) = steps.first() else {
        return match side {
            Side::Keep => Ok(()),
            Side::Drop => Err("metadata cannot be dropped; name the fields to drop".into()),
        };
    };
    let Step::Field(field) = first else {
        return Err("metadata is addressed by field name, not [*]".into());
    };
    let always = ALWAYS_KEPT.contains(&field.as_str());
    if !always && !PROJECTABLE_META.contains(&field.as_str()) {
        let mut known: Vec<&str> = ALWAYS_KEPT
            .iter()
            .chain(&PROJECTABLE_META)
            .copied()
            .collect();
        known.sort_unstable();
        return Err(format!(
            "metadata has no field {field:?} (its fields: {})",
            known.join(", ")
        ));
    }
    match &steps[1..] {
        [] if always && side == Side::Drop => Err(format!(
            "metadata.{field} is always kept (the cache needs {})",
            ALWAYS_KEPT.join(", ")
        )),
        [] => Ok(()),
        [Step::Field(_)] if field == "annotations" || field == "labels" => Ok(()),
        _ => Err(format!(
            "metadata.{field} is addressed whole{}",
            if field == "annotations" || field == "labels" {
                " or by one key (metadata.annotations[\"key\"])"
            } else {
                ""
            }
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> ObjectPath {
        ObjectPath::parse(text).unwrap()
    }

    #[test]
    fn checks_refuse_dropping_what_the_cache_needs() {
        for (text, side, message) in [
            (
                "metadata.labels",
                Side::Drop,
                "metadata.labels is always kept",
            ),
            ("metadata", Side::Drop, "metadata cannot be dropped"),
            ("kind", Side::Drop, "kind is always kept"),
            (
                "metadata.nope",
                Side::Keep,
                "metadata has no field \"nope\"",
            ),
            (
                "metadata[*]",
                Side::Keep,
                "metadata is addressed by field name",
            ),
            (
                "metadata.managedFields[*].manager",
                Side::Drop,
                "metadata.managedFields is addressed whole",
            ),
        ] {
            let error = check(&path(text), side).unwrap_err();
            assert!(error.starts_with(message), "{text}: {error}");
        }
        for (text, side) in [
            ("metadata.labels", Side::Keep),
            ("metadata.labels[\"app\"]", Side::Drop),
            ("metadata.annotations[\"x\"]", Side::Keep),
            ("spec.containers[*].image", Side::Drop),
        ] {
            assert_eq!(check(&path(text), side), Ok(()), "{text}");
        }
    }
}
