//! `informant_shard_members`, `informant_shard_objects{group,version,kind}` and
//! `informant_shard_handovers_total`: a member of a shard ring, computed at scrape time from
//! its view of the ring.

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::gauge_value;
use crate::config::ShardingStatus;

/// This member's view of its ring, taken at each scrape.
pub(crate) type ShardSource = Arc<dyn Fn() -> ShardingStatus + Send + Sync>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    group: String,
    version: String,
    kind: String,
}

/// Registers the shard series, computed from `source` at each scrape: how many members the
/// ring has live, how many objects this member caches of each sharded kind, and how many times
/// it took a part of the ring over.
pub(crate) fn register_shard(registry: &mut Registry, source: ShardSource) {
    registry.register_collector(Box::new(ShardCollector { source }));
}

struct ShardCollector {
    source: ShardSource,
}

impl fmt::Debug for ShardCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardCollector").finish_non_exhaustive()
    }
}

impl Collector for ShardCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let status = (self.source)();
        let members = encoder.encode_descriptor(
            "informant_shard_members",
            "Members of this manager's shard ring whose Leases are live.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(gauge_value(status.members.len())).encode(members)?;
        let mut objects = encoder.encode_descriptor(
            "informant_shard_objects",
            "Objects of each sharded kind this member caches.",
            None,
            MetricType::Gauge,
        )?;
        for row in &status.objects {
            let (group, version) = match row.api_version.split_once('/') {
                Some((group, version)) => (group.to_owned(), version.to_owned()),
                None => (String::new(), row.api_version.clone()),
            };
            let labels = KindLabels {
                group,
                version,
                kind: row.kind.clone(),
            };
            objects.encode_family(&labels)?.encode_gauge(&row.objects)?;
        }
        let handovers = encoder.encode_descriptor(
            "informant_shard_handovers",
            "Times this member started acting on a part of the ring it did not act on.",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(u64::try_from(status.handovers).unwrap_or(0)).encode(handovers)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ShardObjects;
    use crate::manager::metrics::testing::{encode, lines_without_buckets};

    #[test]
    fn members_objects_per_kind_and_handovers() {
        let mut registry = Registry::default();
        register_shard(
            &mut registry,
            Arc::new(|| ShardingStatus {
                members: vec!["a".into(), "b".into()],
                objects: vec![
                    ShardObjects {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                        objects: 7,
                    },
                    ShardObjects {
                        api_version: "apps/v1".into(),
                        kind: "Deployment".into(),
                        objects: 2,
                    },
                ],
                handovers: 3,
                ..ShardingStatus::default()
            }),
        );
        let text = encode(&registry);
        assert_eq!(
            lines_without_buckets(&text),
            [
                "# EOF",
                "# HELP informant_shard_handovers Times this member started acting on a part of the ring it did not act on.",
                "# HELP informant_shard_members Members of this manager's shard ring whose Leases are live.",
                "# HELP informant_shard_objects Objects of each sharded kind this member caches.",
                "# TYPE informant_shard_handovers counter",
                "# TYPE informant_shard_members gauge",
                "# TYPE informant_shard_objects gauge",
                "informant_shard_handovers_total 3",
                "informant_shard_members 2",
                "informant_shard_objects{group=\"\",version=\"v1\",kind=\"ConfigMap\"} 7",
                "informant_shard_objects{group=\"apps\",version=\"v1\",kind=\"Deployment\"} 2",
            ],
            "{text}"
        );
    }
}
