//! Why a controller could not start or stopped early.

use kube::core::GroupVersionKind;

use crate::cache;

/// Why [`super::Controller::run`] failed. A failed reconcile is not one of these: it goes to
/// the error policy and is retried; these end the controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The informers of a kind the controller reconciles, owns or watches could not start or
    /// sync (an unknown kind, RBAC, a kind the cache config does not cache).
    #[error("controller {controller}: cannot start the informers of {}", gvk_string(.gvk))]
    Informer {
        /// The controller.
        controller: String,
        /// The kind.
        gvk: GroupVersionKind,
        /// Why.
        #[source]
        source: cache::Error,
    },
    /// The controller owns or watches another kind on a cache sharded by `key: uid`, which
    /// spreads an object and its children or related objects over different members: the
    /// controller would not see them. It does not start; shard by `key: namespace`.
    #[error(
        "controller {controller}: it owns or watches {}, and with spec.sharding.key: uid an object's children and related objects live on other members, where this member cannot see them; shard by key: namespace (every object of a namespace on one member), or reconcile only objects that own and watch nothing",
        gvk_string(.related)
    )]
    NeedsShardKeyNamespace {
        /// The controller.
        controller: String,
        /// The first kind it owns or watches.
        related: GroupVersionKind,
    },
    /// kube-runtime's runner stopped: the controller's store was never filled because the
    /// informer pool went away before the first list.
    #[error("controller {controller}: the reconcile runner stopped")]
    Runner {
        /// The controller.
        controller: String,
        /// Why.
        #[source]
        source: kube::runtime::controller::RunnerError,
    },
}

/// A controller's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `<group>/<version>, Kind=<Kind>`, apimachinery's `GroupVersionKind.String()`.
fn gvk_string(gvk: &GroupVersionKind) -> String {
    format!("{}/{}, Kind={}", gvk.group, gvk.version, gvk.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_can_leave_a_runnable() {
        fn is_send_sync<T: Send + Sync + 'static>() {}
        is_send_sync::<Error>();
    }

    #[test]
    fn an_informer_error_names_the_controller_and_the_kind() {
        let gvk = GroupVersionKind::gvk("batch", "v1", "Job");
        let error = Error::Informer {
            controller: "cronjob".into(),
            gvk: gvk.clone(),
            source: cache::Error::KindNotCached { gvk },
        };
        assert_eq!(
            error.to_string(),
            "controller cronjob: cannot start the informers of batch/v1, Kind=Job"
        );
    }
}
