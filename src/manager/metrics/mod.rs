//! The manager's Prometheus metrics: config reloads, informers and cached objects, and the
//! controller runtime's series under controller-runtime's names.
//!
//! Three groups, one file each, each registered by its owner:
//!
//! - [`ManagerMetrics`] holds `informant_config_reloads_total{result}`,
//!   `informant_informer_restarts_total` and `informant_config_reload_duration_seconds`,
//!   updated by the reload loop.
//! - [`register_informers`] adds `informant_informers{state}` and
//!   `informant_cache_objects{group,version,kind,namespace}`, computed at scrape time from a
//!   snapshot of the current cache tree, so they can never disagree with `/debug/cache`;
//!   [`register_scope`] adds `informant_scope_namespaces{selector}` the same way, and
//!   [`register_shard`] a shard member's `informant_shard_members`,
//!   `informant_shard_objects{group,version,kind}` and `informant_shard_handovers_total`.
//! - [`ControllerMetrics`] holds controller-runtime's `controller_runtime_*` and `workqueue_*`
//!   series, with its names, labels and buckets, so existing controller-runtime dashboards
//!   work unchanged.
//!
//! Names are registered without the `_total` suffix: the `OpenMetrics` text encoder adds it to
//! counter samples (`# TYPE informant_config_reloads counter`, then
//! `informant_config_reloads_total{result="applied"} 1`). prometheus-client ends every
//! registered help text with a period.

mod informers;
mod registry;
mod reload;
mod scope;
mod shard;

use std::fmt;

use prometheus_client::encoding::LabelValueEncoder;

pub(crate) use informers::register_informers;
pub use registry::MetricsRegistry;
pub use reload::{ManagerMetrics, RELOAD_DURATION_BUCKETS, ReloadResult};
pub(crate) use scope::{ScopeSource, register_scope};
pub(crate) use shard::{ShardSource, register_shard};

/// Writes a label value.
pub(crate) fn write_label(
    encoder: &mut LabelValueEncoder<'_>,
    value: &str,
) -> Result<(), fmt::Error> {
    fmt::Write::write_str(encoder, value)
}

/// Converts a count to a gauge value, saturating (counts never reach `i64::MAX`).
pub(crate) fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
pub(crate) mod testing {
    use prometheus_client::registry::Registry;

    pub(crate) fn encode(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    /// The exposition's lines without histogram buckets, sorted (families are hash maps, so
    /// series come in any order).
    pub(crate) fn lines_without_buckets(text: &str) -> Vec<&str> {
        let mut lines: Vec<&str> = text.lines().filter(|l| !l.contains("_bucket{")).collect();
        lines.sort_unstable();
        lines
    }
}
