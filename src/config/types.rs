//! The `CacheConfig` wire format: the custom resource's spec as users write it (serde camelCase,
//! unknown fields rejected, a JSON schema for the CRD).
//!
//! Every field is optional: an absent field takes controller-runtime's or client-go's default,
//! so an empty spec behaves exactly like them. The doc comment of each field is its description
//! in the CRD (what `kubectl explain cacheconfig.spec` shows).

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::status::CacheConfigStatus;

/// Declares what the manager's cache holds and how its event recorder behaves.
///
/// The cache caches every object of every kind a controller reads, in every namespace, unless
/// told otherwise: on a big cluster that is a lot of memory. The `default*` fields, and
/// `byObject` for single kinds, scope it. Precedence, most specific first (a more specific
/// selector replaces a less specific one, it is never combined with it):
/// `byObject[].namespaces[ns]` → `byObject[]` → `defaultNamespaces[ns]` → `default*`.
#[allow(
    clippy::duplicated_attributes,
    reason = "each printcolumn of the kube derive repeats type_"
)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "informant.dev",
    version = "v1alpha1",
    kind = "CacheConfig",
    namespaced,
    status = "CacheConfigStatus",
    shortname = "cc",
    derive = "PartialEq",
    doc = "A CacheConfig: declares what an informant manager caches and how it records events.",
    category = "informant",
    printcolumn(
        name = "Valid",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status",
        description = "whether the spec passed validation"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "whether every informer of the cache tree has synced"
    ),
    printcolumn(
        name = "Informers",
        type_ = "integer",
        json_path = ".status.informerCount",
        description = "number of informers the cache tree runs"
    ),
    printcolumn(
        name = "Memory",
        type_ = "string",
        json_path = ".status.memory",
        description = "bytes the cache's objects hold"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::config::paragraphs)]
pub struct CacheConfigSpec {
    /// How often every controller (Rust or hook) reconciles each cached object of its kind
    /// again, even if nothing changed (a Go duration such as `10h`, `30m`, `1h30m`). Default
    /// `10h` (controller-runtime), each object's period jittered in [0.9, 1.1), so the objects
    /// come back spread out rather than all at once. Shorter periods re-run reconcilers more
    /// often: more CPU and API writes, no extra memory. It does not re-list from the API
    /// server, and changing it starts no informer. Change it only if a controller needs a
    /// periodic safety net; prefer requeueing from the reconciler. `0` turns resync off. Reads
    /// never depend on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_period: Option<String>,

    /// When true, reading a kind the cache has no informer for fails with a distinct
    /// "kind not cached" error instead of starting an informer on the spot. Default `false`
    /// (an informer starts on first read, and its memory stays until the cache stops). Set it
    /// to make memory predictable: only kinds that are explicitly watched are ever cached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader_fail_on_missing_informer: Option<bool>,

    /// Namespaces to cache, each with optional settings that replace the `default*` ones.
    /// Absent or empty (the default): every namespace, one cluster-wide informer per kind.
    /// When set, only the listed namespaces are cached (one informer per namespace and kind,
    /// plus one for cluster-scoped kinds); the key `""` means every namespace not listed,
    /// and is given the field selector `metadata.namespace!=<each listed namespace>` so no
    /// object is cached twice. Set it to cut memory on shared clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_namespaces: Option<BTreeMap<String, NamespaceConfig>>,

    /// Label selector on Namespaces (same syntax as `defaultLabelSelector`, e.g.
    /// `team=shop,env!=dev`): every namespace whose labels match is cached, with the
    /// `default*` settings, as if it were listed in `defaultNamespaces`. The set follows the
    /// cluster while the manager runs: a namespace that is created or labelled to match gets
    /// its informers (one LIST per cached kind in it, nothing else is listed), one that stops
    /// matching or is deleted has them stopped and its objects leave the cache (they are not
    /// reported as deleted). Entries of `defaultNamespaces` keep their own settings and are
    /// cached whether they match or not; the selector adds the other namespaces it matches.
    /// It cannot be combined with the `""` entry (which already means every other
    /// namespace), and must select something. Default: none. Needs list and watch on
    /// namespaces, and the cached kinds in every namespace (a `ClusterRole`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<String>,

    /// Label selector (Kubernetes syntax, e.g. `app.kubernetes.io/part-of=shop,tier!=db`) for
    /// every kind and namespace that does not set its own. Default: none (every object).
    /// Objects that do not match are not cached and are invisible to reads: a `get` returns
    /// not found. Set it to cache only the objects your controller owns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_label_selector: Option<String>,

    /// Field selector (e.g. `status.phase=Running`) for every kind and namespace that does not
    /// set its own. Default: none. Only fields the API server can select on for a kind are
    /// allowed (`metadata.name`, `metadata.namespace`, plus per-kind fields); other fields are
    /// rejected by the API server when the informer starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_field_selector: Option<String>,

    /// How objects are trimmed before they enter the cache, for every kind and namespace that
    /// does not set its own. Default: none (objects are cached whole). Stripping managed
    /// fields typically saves a third of a cache's memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_transform: Option<TransformSpec>,

    /// When true, reads return the cached object itself instead of a deep copy. Default
    /// `false`. Saves allocation on large lists, but a caller that mutates a returned object
    /// corrupts the cache. Only for read-only controllers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_unsafe_disable_deep_copy: Option<bool>,

    /// Whether watches ask the API server for BOOKMARK events. Default `true`
    /// (controller-runtime). Bookmarks let a watch resume after a disconnect without a full
    /// re-list; turn them off only for API servers that mishandle them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_enable_watch_bookmarks: Option<bool>,

    /// Settings for single kinds, keyed by `apiVersion` + `kind` (each kind at most once).
    /// Each entry replaces the `default*` settings for its kind. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["apiVersion", "kind"]
    ))]
    pub by_object: Option<Vec<ByObjectSpec>>,

    /// Shares the cache and the controllers among every replica that names the same ring:
    /// each replica holds a Lease labelled `informant.dev/ring=<ring>` and caches and
    /// reconciles only its share of the objects of namespaced kinds; cluster-scoped kinds are
    /// cached whole on every replica. Default: none (every replica caches everything and only
    /// the leader reconciles, as controller-runtime's manager does). Set it when one replica
    /// no longer has the memory or the reconcile throughput for the whole cluster. Changing
    /// it needs a restart: a reload that changes it is rejected and the running config kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharding: Option<ShardingSpec>,

    /// The event recorder (client-go's broadcaster → correlator → sink). Default: client-go's
    /// settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder: Option<RecorderSpec>,
}

/// How the replicas of one ring share the objects (`spec.sharding`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShardingSpec {
    /// The ring's name: the replicas whose Leases carry the label `informant.dev/ring=<ring>`
    /// share the objects. It is a label value and names each replica's Lease
    /// (`<ring>-<16 hex digits>`), so: at most 63 lowercase letters, digits, `-` and `.`,
    /// starting and ending with a letter or digit. Required.
    #[serde(default)]
    pub ring: String,

    /// What decides an object's replica. `namespace` (the default): each namespace is
    /// assigned whole to one replica, which caches and reconciles every object of the
    /// namespaced kinds in it, so a controller finds the children and related objects of
    /// what it reconciles in its own cache. `uid`: the objects of namespaced kinds are spread
    /// one by one by the hash of their uid (the most even spread, listed and watched with a
    /// server-side `shardSelector` where the API server supports it), for controllers that
    /// own and watch nothing: a hook `Controller` with `owns` or `watches` does not start
    /// (`Ready=False`, reason `NeedsShardKeyNamespace`). Either way cluster-scoped kinds are
    /// cached whole on every replica, and each of their objects is reconciled by one replica,
    /// the owner of the hash of its uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// Cache settings of one namespace. Absent fields are taken from the enclosing `byObject`
/// entry, then from `defaultNamespaces`, then from the `default*` fields.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceConfig {
    /// Label selector for this namespace; replaces the less specific one. `""` selects every
    /// object and stops defaulting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,

    /// Field selector for this namespace; replaces the less specific one. `""` selects every
    /// object and stops defaulting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<String>,

    /// How objects of this namespace are trimmed before caching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<TransformSpec>,

    /// Return cached objects without a deep copy (see `defaultUnsafeDisableDeepCopy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsafe_disable_deep_copy: Option<bool>,

    /// Ask for watch bookmarks (see `defaultEnableWatchBookmarks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_watch_bookmarks: Option<bool>,

    /// Resync period of the objects in this namespace (see `syncPeriod`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_period: Option<String>,
}

/// A declarative transform, applied to every object before it is stored in the cache.
/// Cached objects are what reads return, so removed data is invisible to controllers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransformSpec {
    /// Remove `metadata.managedFields` (controller-runtime's `TransformStripManagedFields`).
    /// Default `false`. Managed fields are often the largest part of small objects; strip
    /// them unless a controller does server-side-apply conflict analysis from the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strip_managed_fields: Option<bool>,

    /// Annotation keys to remove (e.g. `kubectl.kubernetes.io/last-applied-configuration`,
    /// which holds a full copy of the object). Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_annotations: Option<Vec<String>>,

    /// Label keys to remove. Default: none. Selectors still match on the server side, so
    /// dropping a label the cache's selector uses is safe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_labels: Option<Vec<String>>,

    /// Paths of the fields to keep; everything else is dropped, except `apiVersion`, `kind`
    /// and the metadata the cache needs (name, namespace, uid, resourceVersion, labels,
    /// ownerReferences, deletionTimestamp, finalizers, generation). Paths are dot-separated
    /// field names, `[*]` for every element of a list or value of a map, and `["key"]` for a
    /// key with dots or slashes: `spec.containers[*].image`, `data["config.yaml"]`,
    /// `metadata.annotations["example.com/owner"]`. Default: keep everything. A field projected
    /// away reads as absent (its default) from the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_fields: Option<Vec<String>>,

    /// Paths of the fields to drop, in the syntax of `keepFields`; applied after it. The
    /// metadata the cache needs cannot be dropped. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_fields: Option<Vec<String>>,
}

/// Cache settings of one kind (controller-runtime's `ByObject`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ByObjectSpec {
    /// API version of the kind, e.g. `v1` or `apps/v1`.
    pub api_version: String,

    /// The kind, e.g. `Pod` (case-sensitive, as in the object's `kind`).
    pub kind: String,

    /// Namespaces to cache for this kind, each with optional settings. Absent: inherit
    /// `defaultNamespaces`. Empty (`{}`): every namespace, whatever `defaultNamespaces` says.
    /// The key `""` means every namespace not listed. Must be absent for cluster-scoped kinds
    /// (`Node`, `Namespace`, `ClusterRole`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<BTreeMap<String, NamespaceConfig>>,

    /// Label selector on Namespaces choosing where this kind is cached, as
    /// `spec.namespaceSelector` does for every kind: each matching namespace gets this
    /// entry's settings, the namespaces listed in `namespaces` keep their own. Setting
    /// `namespaces` or `namespaceSelector` replaces both of the spec's (neither is
    /// inherited). Cannot be combined with `namespaces: {}` or its `""` key, and must be
    /// absent for cluster-scoped kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<String>,

    /// Label selector for this kind; replaces `defaultLabelSelector` (`""` selects everything).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,

    /// Field selector for this kind, e.g. `spec.nodeName=node01` for Pods; replaces
    /// `defaultFieldSelector` (`""` selects everything).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<String>,

    /// How objects of this kind are trimmed; replaces `defaultTransform`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<TransformSpec>,

    /// Return cached objects without a deep copy; replaces `defaultUnsafeDisableDeepCopy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsafe_disable_deep_copy: Option<bool>,

    /// Ask for watch bookmarks; replaces `defaultEnableWatchBookmarks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_watch_bookmarks: Option<bool>,

    /// Resync period of the objects of this kind; replaces `syncPeriod`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_period: Option<String>,

    /// Cache only `PartialObjectMetadata` (apiVersion, kind, metadata) for this kind. Default
    /// `false`. Cuts memory for kinds whose spec and status a controller never reads
    /// (`Secrets`, `ConfigMaps`); reads then return metadata only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_only: Option<bool>,
}

/// The event recorder: client-go's `tools/record` pipeline (`api: v1`, the default) or its
/// `tools/events` one (`api: events.k8s.io/v1`). Absent fields take client-go's defaults.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecorderSpec {
    /// The Events API written: `v1` (default; core/v1 Events, client-go `tools/record`:
    /// aggregation, dedupe into `count`, the spam filter, configured by `correlator`) or
    /// `events.k8s.io/v1` (client-go `tools/events`: isomorphic events folded into an
    /// `EventSeries`, configured by `series`; what controller-runtime ≥ v0.23 and kube-rs
    /// write and `kubectl events` reads). Follows hot reload; needs `create` and `patch` on
    /// `events` in that API's group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["v1", "events.k8s.io/v1"]))]
    pub api: Option<String>,

    /// The series of `api: events.k8s.io/v1` (meaningless with `v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<SeriesSpec>,

    /// `source.component` and reporting controller of recorded events. Default `informant`.
    /// Part of the spam filter's and the aggregator's keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,

    /// Length of the broadcaster's incoming queue. Default 1000 (client-go
    /// `maxQueuedEvents`). When full, new events are dropped (`dropped_incoming_full`) rather
    /// than blocking the reconciler. Raise it for bursty controllers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub incoming_queue_length: Option<u32>,

    /// Length of each watcher's queue. Default 1000. When full, the event is dropped for that
    /// watcher (`dropped_watcher_full`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub watcher_queue_length: Option<u32>,

    /// Aggregation and spam filtering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlator: Option<CorrelatorSpec>,

    /// Writing events to the API server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<SinkSpec>,
}

/// client-go's `EventCorrelator`: aggregator, dedupe logger and spam filter.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CorrelatorSpec {
    /// Refill rate of each spam-filter token bucket, in events per second (> 0). Default
    /// `0.0033333334` (1/300 as a float32: one token every 5 minutes). Events over the rate
    /// are dropped (`spam_filtered`). Raise it if a chatty object's events go missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qps: Option<f64>,

    /// Size of each spam-filter token bucket (≥ 1). Default 25. An object can emit this many
    /// events at once before the rate applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub burst: Option<u32>,

    /// Similar events (same source, object, type and reason) with distinct messages within
    /// `maxIntervalSeconds` before they are aggregated into one "(combined from similar
    /// events)" event (≥ 1). Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_events: Option<u32>,

    /// Aggregation window in seconds (≥ 1). Default 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_interval_seconds: Option<u32>,

    /// Entries of each correlator LRU cache (spam buckets, aggregation, dedupe) (≥ 1).
    /// Default 4096. Each entry is small; when full, the least recently used key is forgotten
    /// and its next event starts a fresh bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub lru_cache_size: Option<u32>,

    /// Event fields that make up the spam filter's key; events with the same key share one
    /// token bucket. Any of `source`, `involvedObject`, `type`, `reason`, `message`. Default
    /// `[source, involvedObject, type]` (client-go ≥ 0.32). Add `reason` so that an object
    /// emitting several reasons (a `CronJob`'s `SuccessfulCreate`, `SawCompletedJob`,
    /// `SuccessfulDelete`) does not let one reason starve the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spam_key_fields: Option<Vec<String>>,
}

/// client-go `tools/events`' series: which events are one series, how often open series are
/// written again, when a quiet one is finished.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SeriesSpec {
    /// Event fields of the isomorphic key; events with one key make one series (the first is
    /// created, the second patched with `series.count: 2`, later ones only counted until a
    /// refresh or the finish). Any of `type`, `action`, `reason`, `reportingController`,
    /// `reportingInstance`, `regarding`, `related`, `note`. Default every one but `note`
    /// (client-go ≥ v0.27), so events with different notes merge into one series that shows
    /// the first note; add `note` to keep them apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_fields: Option<Vec<String>>,

    /// How often every open series is written again (a Go duration). Default `30m` (client-go
    /// `refreshTime`). Counts between two writes are only in memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh: Option<String>,

    /// Quiet time after which a series gets its last write and is forgotten, also the period
    /// of that check (a Go duration). Default `6m` (client-go `finishTime`), so a key lives
    /// 6–12 minutes after its last occurrence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<String>,
}

/// The sink that creates and patches Events on the API server.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SinkSpec {
    /// Tries per event before it is given up (`failed`) (≥ 1). Default 12 (client-go
    /// `maxTriesPerEvent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_retries: Option<u32>,

    /// Wait between tries (a Go duration, e.g. `10s`); the first wait is jittered. Default
    /// `10s` (client-go `defaultSleepDuration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_interval: Option<String>,
}
