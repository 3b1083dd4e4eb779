//! `SyncPeriods`: the effective `syncPeriod` of each scope one kind is cached in, as the cache
//! tree routes it (per `byObject` kind, then per namespace, then the default), so a controller
//! can tell how often each of its objects is due again ([`super::Cache::sync_periods`]).

use std::collections::BTreeMap;
use std::time::Duration;

/// The resync period of every scope of one kind: a named namespace, every other namespace, and
/// cluster-scoped objects. A zero period turns resync off for its scope; a scope the tree does
/// not cache has none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncPeriods {
    namespaces: BTreeMap<String, Duration>,
    others: Option<Duration>,
    cluster: Option<Duration>,
}

impl SyncPeriods {
    /// One period for every namespace and for cluster-scoped objects (a cache over all
    /// namespaces).
    #[must_use]
    pub(crate) fn everywhere(period: Duration) -> Self {
        Self {
            namespaces: BTreeMap::new(),
            others: Some(period),
            cluster: Some(period),
        }
    }

    /// `period` for objects in `namespace`.
    #[must_use]
    pub(crate) fn with_namespace(mut self, namespace: &str, period: Duration) -> Self {
        self.namespaces.insert(namespace.to_owned(), period);
        self
    }

    /// `period` for objects in every namespace not named.
    #[must_use]
    pub(crate) fn with_others(mut self, period: Duration) -> Self {
        self.others = Some(period);
        self
    }

    /// `period` for cluster-scoped objects.
    #[must_use]
    pub(crate) fn with_cluster(mut self, period: Duration) -> Self {
        self.cluster = Some(period);
        self
    }

    /// The period of the cache serving an object in `namespace` (`None`: a cluster-scoped
    /// object), or `None` when no cache of the tree serves it.
    #[must_use]
    pub fn of(&self, namespace: Option<&str>) -> Option<Duration> {
        match namespace {
            Some(namespace) => self.namespaces.get(namespace).copied().or(self.others),
            None => self.cluster.or(self.others),
        }
    }

    /// The shortest period that is not zero (resync on), if any.
    #[must_use]
    pub fn shortest(&self) -> Option<Duration> {
        self.namespaces
            .values()
            .chain(&self.others)
            .chain(&self.cluster)
            .copied()
            .filter(|p| !p.is_zero())
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_namespace_wins_over_the_others_and_cluster_scoped_objects_have_their_own() {
        let minute = Duration::from_mins(1);
        let hour = Duration::from_hours(1);
        let periods = SyncPeriods::default()
            .with_namespace("fast", minute)
            .with_others(hour)
            .with_cluster(Duration::ZERO);
        assert_eq!(periods.of(Some("fast")), Some(minute));
        assert_eq!(periods.of(Some("slow")), Some(hour));
        assert_eq!(periods.of(None), Some(Duration::ZERO));
        assert_eq!(
            periods.shortest(),
            Some(minute),
            "zero is off, not shortest"
        );

        let listed = SyncPeriods::default().with_namespace("a", hour);
        assert_eq!(listed.of(Some("b")), None, "b is not cached");
        assert_eq!(listed.of(None), None);
        assert_eq!(SyncPeriods::everywhere(hour).of(None), Some(hour));
    }
}
