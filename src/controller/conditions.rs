//! Status conditions (`metav1.Condition`) kept as Kubernetes' API conventions ask:
//! [`set`] changes `lastTransitionTime` only when a condition's `status` changes, as
//! apimachinery's `meta.SetStatusCondition` does
//! (`k8s.io/apimachinery/pkg/api/meta/conditions.go`), so a reconcile that writes the same
//! `Ready=True` at every pass does not move its transition time (nor write a new status).
//!
//! ```
//! use informant::controller::conditions;
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
//!
//! let mut conditions: Vec<Condition> = Vec::new();
//! let ready = |status: &str| Condition {
//!     type_: "Ready".into(),
//!     status: status.into(),
//!     reason: "Synced".into(),
//!     message: "children applied".into(),
//!     observed_generation: Some(3),
//!     last_transition_time: conditions::now(),
//! };
//! assert!(conditions::set(&mut conditions, ready("True")));
//! let since = conditions[0].last_transition_time.clone();
//! assert!(!conditions::set(&mut conditions, ready("True")), "nothing changed");
//! assert_eq!(conditions[0].last_transition_time, since);
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// Now, as a condition's `lastTransitionTime`.
#[must_use]
pub fn now() -> Time {
    Time(Timestamp::now())
}

/// Sets `condition` in `conditions` (by its `type`); returns whether anything changed.
///
/// `condition.last_transition_time` is when the condition is observed (usually
/// [`now()`]); it is stored only where the condition transitions:
/// - a new type is appended as given;
/// - an existing one takes `condition`'s `reason`, `message` and `observedGeneration`, and its
///   `status` and `lastTransitionTime` only when the `status` differs; a condition observed
///   again with the same `status` keeps the time it first had it.
pub fn set(conditions: &mut Vec<Condition>, condition: Condition) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == condition.type_) else {
        conditions.push(condition);
        return true;
    };
    let mut changed = false;
    if existing.status != condition.status {
        existing.status = condition.status;
        existing.last_transition_time = condition.last_transition_time;
        changed = true;
    }
    changed |= existing.reason != condition.reason
        || existing.message != condition.message
        || existing.observed_generation != condition.observed_generation;
    existing.reason = condition.reason;
    existing.message = condition.message;
    existing.observed_generation = condition.observed_generation;
    changed
}

/// The condition of `type_` in `conditions`, if any.
#[must_use]
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is present with `status` (`"True"`, `"False"`,
/// `"Unknown"`).
#[must_use]
pub fn is_status(conditions: &[Condition], type_: &str, status: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(status: &str, reason: &str, seconds: i64) -> Condition {
        Condition {
            type_: "Ready".into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: at(seconds),
        }
    }

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let mut conditions = Vec::new();
        assert!(set(&mut conditions, ready("False", "Pending", 10)));
        assert_eq!(conditions[0].last_transition_time, at(10));

        // Same status, new reason and generation: updated, the time kept.
        let mut again = ready("False", "StillPending", 20);
        again.observed_generation = Some(2);
        assert!(set(&mut conditions, again.clone()));
        assert_eq!(conditions[0].last_transition_time, at(10));
        assert_eq!(conditions[0].reason, "StillPending");
        assert_eq!(conditions[0].observed_generation, Some(2));

        // Nothing new: no change reported, the time kept.
        again.last_transition_time = at(30);
        assert!(!set(&mut conditions, again));
        assert_eq!(conditions[0].last_transition_time, at(10));

        // The status changes: the time moves.
        assert!(set(&mut conditions, ready("True", "Synced", 40)));
        assert_eq!(conditions[0].last_transition_time, at(40));
        assert_eq!(conditions.len(), 1, "one condition per type");
        assert!(is_status(&conditions, "Ready", "True"));
        assert!(!is_status(&conditions, "Available", "True"));
    }
}
