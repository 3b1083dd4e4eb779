//! `informant_informers{state}`, `informant_cache_objects{group,version,kind,namespace}` and
//! `informant_cache_bytes{group,version,kind,namespace}`, computed at scrape time from a snapshot of the cache tree's informers.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeLabelValue, LabelValueEncoder,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::{gauge_value, write_label};
use crate::cache::InformerStatus;

/// A snapshot of every informer of the current cache tree, taken at each scrape.
pub(crate) type InformerSource = Arc<dyn Fn() -> Vec<InformerStatus> + Send + Sync>;

/// An informer's state: the `state` label of `informant_informers`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum InformerState {
    /// The initial list has been stored.
    Synced,
    /// Listing, with no error so far.
    Syncing,
    /// Not synced, and the last list or watch failed (RBAC, an unknown kind, the network).
    Failed,
    /// A `byObject` kind the API server does not serve yet: no informer runs for it.
    WaitingForKind,
}

impl InformerState {
    /// Every state, in label order.
    pub const ALL: [InformerState; 4] = [
        InformerState::Synced,
        InformerState::Syncing,
        InformerState::Failed,
        InformerState::WaitingForKind,
    ];

    /// The state of `informer`. An error after the initial sync leaves it `Synced`: it
    /// still serves reads, and the watcher retries.
    #[must_use]
    pub fn of(informer: &InformerStatus) -> Self {
        if informer.is_waiting_for_kind() {
            return InformerState::WaitingForKind;
        }
        match (informer.synced, &informer.error) {
            (true, _) => InformerState::Synced,
            (false, None) => InformerState::Syncing,
            (false, Some(_)) => InformerState::Failed,
        }
    }

    /// The label value: `synced`, `syncing`, `failed` or `waiting_for_kind`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            InformerState::Synced => "synced",
            InformerState::Syncing => "syncing",
            InformerState::Failed => "failed",
            InformerState::WaitingForKind => "waiting_for_kind",
        }
    }
}

impl EncodeLabelValue for InformerState {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), fmt::Error> {
        write_label(encoder, self.as_str())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: InformerState,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct ObjectLabels {
    group: String,
    version: String,
    kind: String,
    namespace: String,
}

impl ObjectLabels {
    fn of(informer: &InformerStatus) -> Self {
        let (group, version) = match informer.api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", informer.api_version.as_str()),
        };
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: informer.kind.clone(),
            namespace: informer.namespace.clone().unwrap_or_default(),
        }
    }
}

/// Registers `informant_informers{state}` and
/// `informant_cache_objects{group,version,kind,namespace}`, both computed from `source` at each
/// scrape.
///
/// - `informant_informers`: informers of the current tree per [`InformerState`]; every state's
///   series is present, at 0 when none.
/// - `informant_cache_objects`: objects held, summed over the informers with the same labels
///   (two selectors over one kind and namespace add up); `namespace` is `""` for an informer
///   over every namespace, `group` is `""` for the core group.
/// - `informant_cache_bytes`: bytes those objects hold, with the same labels and sums; only
///   informers that count their bytes (compact stores) have a series.
/// - `informant_cache_transform_saved_bytes`: bytes the informers' transforms saved on those
///   objects, with the same labels and sums; only informers with a transform have a series.
///
/// `source` runs on the scraping task, once per scrape: it should copy counters, not list.
pub(crate) fn register_informers(registry: &mut Registry, source: InformerSource) {
    registry.register_collector(Box::new(InformerCollector { source }));
}

/// The [`Collector`] behind [`register_informers`].
struct InformerCollector {
    source: InformerSource,
}

impl fmt::Debug for InformerCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerCollector").finish_non_exhaustive()
    }
}

impl Collector for InformerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let informers = (self.source)();
        let mut states = [0_usize; InformerState::ALL.len()];
        // A BTreeMap so the exposition is in a stable order.
        let mut objects = BTreeMap::<ObjectLabels, i64>::new();
        let mut bytes = BTreeMap::<ObjectLabels, i64>::new();
        let mut saved = BTreeMap::<ObjectLabels, i64>::new();
        for informer in &informers {
            states[InformerState::of(informer) as usize] += 1;
            *objects.entry(ObjectLabels::of(informer)).or_default() += informer.objects.max(0);
            if let Some(held) = informer.bytes {
                *bytes.entry(ObjectLabels::of(informer)).or_default() += held.max(0);
            }
            if let Some(n) = informer.saved_bytes {
                *saved.entry(ObjectLabels::of(informer)).or_default() += n.max(0);
            }
        }
        {
            let mut metric = encoder.encode_descriptor(
                "informant_informers",
                "Informers of the current cache tree by state: synced, syncing, failed (not synced and the last list or watch failed), waiting_for_kind (a byObject kind the API server does not serve yet).",
                None,
                MetricType::Gauge,
            )?;
            for state in InformerState::ALL {
                metric
                    .encode_family(&StateLabels { state })?
                    .encode_gauge(&gauge_value(states[state as usize]))?;
            }
        }
        {
            let mut metric = encoder.encode_descriptor(
                "informant_cache_objects",
                "Objects held by the cache, by kind and namespace (\"\" for informers over every namespace).",
                None,
                MetricType::Gauge,
            )?;
            for (labels, n) in &objects {
                metric.encode_family(labels)?.encode_gauge(n)?;
            }
        }
        {
            let mut metric = encoder.encode_descriptor(
                "informant_cache_bytes",
                "Bytes held by the cache's objects (each object's allocations and store key), by kind and namespace; informers with unsafeDisableDeepCopy are not counted.",
                None,
                MetricType::Gauge,
            )?;
            for (labels, n) in &bytes {
                metric.encode_family(labels)?.encode_gauge(n)?;
            }
        }
        let mut metric = encoder.encode_descriptor(
            "informant_cache_transform_saved_bytes",
            "Bytes the transforms saved on the cache's objects (what they would hold as served less what they hold), by kind and namespace; only informers with a transform have a series.",
            None,
            MetricType::Gauge,
        )?;
        for (labels, n) in &saved {
            metric.encode_family(labels)?.encode_gauge(n)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::metrics::testing::{encode, lines_without_buckets};

    fn informer(api_version: &str, kind: &str, namespace: Option<&str>) -> InformerStatus {
        InformerStatus {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(Into::into),
            label_selector: None,
            field_selector: None,
            metadata_only: false,
            synced: true,
            objects: 0,
            error: None,
            ..InformerStatus::default()
        }
    }

    #[test]
    fn informer_gauges_are_computed_from_the_snapshot_at_each_scrape() {
        let snapshot = Arc::new(std::sync::Mutex::new(Vec::new()));
        let source = {
            let snapshot = Arc::clone(&snapshot);
            Arc::new(move || snapshot.lock().unwrap().clone())
        };
        let mut registry = Registry::default();
        register_informers(&mut registry, source);

        let empty = encode(&registry);
        assert!(
            empty.contains("informant_informers{state=\"synced\"} 0\n"),
            "{empty}"
        );
        assert!(!empty.contains("informant_cache_objects{"), "{empty}");

        let mut pods_a = informer("v1", "Pod", Some("team-a"));
        pods_a.objects = 3;
        pods_a.bytes = Some(3000);
        let mut pods_a_web = informer("v1", "Pod", Some("team-a"));
        pods_a_web.label_selector = Some("tier=web".into());
        pods_a_web.objects = 2;
        pods_a_web.bytes = Some(1500);
        pods_a_web.saved_bytes = Some(6000);
        let mut deployments = informer("apps/v1", "Deployment", None);
        deployments.synced = false;
        deployments.objects = 7;
        let mut secrets = informer("v1", "Secret", Some("team-b"));
        secrets.synced = false;
        secrets.error = Some("secrets is forbidden".into());
        let widgets = InformerStatus::waiting_for_kind(
            &kube::core::GroupVersionKind::gvk("example.com", "v1", "Widget"),
            "no CustomResourceDefinition serves it",
        );
        *snapshot.lock().unwrap() = vec![pods_a, pods_a_web, deployments, secrets, widgets];

        let text = encode(&registry);
        let expected = [
            "# EOF",
            "# HELP informant_cache_bytes Bytes held by the cache's objects (each object's allocations and store key), by kind and namespace; informers with unsafeDisableDeepCopy are not counted.",
            "# HELP informant_cache_objects Objects held by the cache, by kind and namespace (\"\" for informers over every namespace).",
            "# HELP informant_cache_transform_saved_bytes Bytes the transforms saved on the cache's objects (what they would hold as served less what they hold), by kind and namespace; only informers with a transform have a series.",
            "# HELP informant_informers Informers of the current cache tree by state: synced, syncing, failed (not synced and the last list or watch failed), waiting_for_kind (a byObject kind the API server does not serve yet).",
            "# TYPE informant_cache_bytes gauge",
            "# TYPE informant_cache_objects gauge",
            "# TYPE informant_cache_transform_saved_bytes gauge",
            "# TYPE informant_informers gauge",
            "informant_cache_bytes{group=\"\",version=\"v1\",kind=\"Pod\",namespace=\"team-a\"} 4500",
            "informant_cache_objects{group=\"\",version=\"v1\",kind=\"Pod\",namespace=\"team-a\"} 5",
            "informant_cache_objects{group=\"\",version=\"v1\",kind=\"Secret\",namespace=\"team-b\"} 0",
            "informant_cache_objects{group=\"apps\",version=\"v1\",kind=\"Deployment\",namespace=\"\"} 7",
            "informant_cache_objects{group=\"example.com\",version=\"v1\",kind=\"Widget\",namespace=\"\"} 0",
            "informant_cache_transform_saved_bytes{group=\"\",version=\"v1\",kind=\"Pod\",namespace=\"team-a\"} 6000",
            "informant_informers{state=\"failed\"} 1",
            "informant_informers{state=\"synced\"} 2",
            "informant_informers{state=\"syncing\"} 1",
            "informant_informers{state=\"waiting_for_kind\"} 1",
        ];
        assert_eq!(lines_without_buckets(&text), expected, "{text}");
    }

    #[test]
    fn a_watch_error_after_sync_leaves_an_informer_synced() {
        let mut i = informer("v1", "Pod", None);
        i.error = Some("connection reset".into());
        assert_eq!(InformerState::of(&i), InformerState::Synced);
        i.synced = false;
        assert_eq!(InformerState::of(&i), InformerState::Failed);
        i.error = None;
        assert_eq!(InformerState::of(&i), InformerState::Syncing);
    }
}
