//! `informant_scope_namespaces{selector}`: how many namespaces each namespace selector of the
//! current cache tree matches, computed at scrape time from the published plan.

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::gauge_value;

/// Each namespace selector (canonical text) with how many namespaces it matches now, taken at
/// each scrape.
pub(crate) type ScopeSource = Arc<dyn Fn() -> Vec<(String, usize)> + Send + Sync>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SelectorLabels {
    selector: String,
}

/// Registers `informant_scope_namespaces{selector}`, computed from `source` at each scrape:
/// one series per namespace selector of the current tree, none without selectors.
pub(crate) fn register_scope(registry: &mut Registry, source: ScopeSource) {
    registry.register_collector(Box::new(ScopeCollector { source }));
}

struct ScopeCollector {
    source: ScopeSource,
}

impl fmt::Debug for ScopeCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopeCollector").finish_non_exhaustive()
    }
}

impl Collector for ScopeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let mut metric = encoder.encode_descriptor(
            "informant_scope_namespaces",
            "Namespaces each namespaceSelector of the current cache tree matches.",
            None,
            MetricType::Gauge,
        )?;
        for (selector, count) in (self.source)() {
            metric
                .encode_family(&SelectorLabels { selector })?
                .encode_gauge(&gauge_value(count))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::metrics::testing::{encode, lines_without_buckets};

    #[test]
    fn one_series_per_selector_with_its_count() {
        let mut registry = Registry::default();
        register_scope(
            &mut registry,
            Arc::new(|| vec![("team=shop".to_owned(), 3), ("env in (a,b)".to_owned(), 0)]),
        );
        let text = encode(&registry);
        assert_eq!(
            lines_without_buckets(&text),
            [
                "# EOF",
                "# HELP informant_scope_namespaces Namespaces each namespaceSelector of the current cache tree matches.",
                "# TYPE informant_scope_namespaces gauge",
                "informant_scope_namespaces{selector=\"env in (a,b)\"} 0",
                "informant_scope_namespaces{selector=\"team=shop\"} 3",
            ],
            "{text}"
        );
    }
}
