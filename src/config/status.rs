//! The `CacheConfig` status: what the manager made of the spec (validity, readiness, the
//! informers it runs).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cache::InformerStatus;

/// Condition type: the spec passed validation (`True`) or not (`False`, with every error in
/// the message).
pub const CONDITION_VALID: &str = "Valid";

/// Condition type: every informer of the cache tree built from the spec has synced.
pub const CONDITION_READY: &str = "Ready";

/// Observed state of a `CacheConfig`, written by the manager.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::config::paragraphs)]
pub struct CacheConfigStatus {
    /// The `metadata.generation` the rest of this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Valid` and `Ready` conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// The informers the cache tree runs, one per kind, namespace and selector.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub informers: Vec<InformerStatus>,

    /// Number of entries in `informers` (shown by `kubectl get cacheconfigs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub informer_count: Option<i32>,

    /// Bytes the cache's objects hold, in total: the sum of `informers[].bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_bytes: Option<i64>,

    /// `cacheBytes` for people (`12.4MiB`; the `Memory` column of `kubectl get cacheconfigs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,

    /// Bytes and objects per kind (one row per `byObject` entry, and per kind the defaults
    /// cache), largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_by_kind: Vec<KindMemory>,

    /// Bytes per namespace scope (`""`: informers over every namespace), largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_by_namespace: Vec<NamespaceMemory>,

    /// When the manager last applied a changed spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reload_time: Option<Time>,

    /// Each namespace selector of the spec (`namespaceSelector`, `byObject[].namespaceSelector`),
    /// once, with the namespaces it matches now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespace_selectors: Vec<NamespaceSelectorStatus>,

    /// The controllers this manager runs (Rust controllers and hook `Controller`s), each
    /// ready or why not: one whose kinds the API server does not serve yet waits
    /// (`WaitingForKind`) and starts when they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub controllers: Vec<ControllerReady>,

    /// With `spec.sharding`: the ring as the member writing this status (the leader) sees
    /// it, and that member's share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharding: Option<ShardingStatus>,
}

/// The bytes the cache holds for one kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KindMemory {
    /// API version of the kind (`v1`, `apps/v1`).
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// Objects held.
    pub objects: i64,
    /// Bytes those objects hold.
    pub bytes: i64,
}

/// The bytes the cache holds for one namespace scope.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceMemory {
    /// The namespace; `""` for informers over every namespace.
    pub namespace: String,
    /// Bytes the objects of this scope hold.
    pub bytes: i64,
}

/// Whether one controller the manager runs is ready.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControllerReady {
    /// The controller's name (a hook `Controller` as `hook namespace/name`).
    pub name: String,

    /// Whether it runs.
    pub ready: bool,

    /// `Running`; `WaitingForKind` while one of its kinds is not served; `NeedsShardKeyNamespace`
    /// for a hook controller that owns or watches kinds while the cache is sharded by uid (it
    /// does not start until the config or the controller changes).
    pub reason: String,

    /// Why it is not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One member's view of its shard ring and its share of the objects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShardingStatus {
    /// The ring (`spec.sharding.ring`).
    pub ring: String,

    /// What assigns objects to members: `namespace` or `uid`.
    pub key: String,

    /// This member's identity (`--shard-identity`).
    pub identity: String,

    /// The members whose Leases are live, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,

    /// Whether this member renewed its Lease within its renew deadline; while false it
    /// reconciles nothing.
    pub active: bool,

    /// How the share is selected: `namespaces` (informers in the owned namespaces only),
    /// `server-side` (the API server filters lists and watches by `shardSelector`) or
    /// `in-process` (every object is listed, the others dropped before they are stored).
    pub selection: String,

    /// This member's ranges of the 64-bit hash space, `start-end` in hex (end exclusive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<String>,

    /// With `key: namespace`, the namespaces this member caches, sorted; at most the first
    /// [`MAX_LISTED_NAMESPACES`], `namespaceCount` says how many there are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,

    /// With `key: namespace`, how many namespaces this member caches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_count: Option<i32>,

    /// The objects this member caches of each sharded (namespaced) kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<ShardObjects>,

    /// How many times this member started acting on a part of the space it did not act on
    /// (at start, after a member left, after one let go).
    pub handovers: i64,
}

/// How many objects of one sharded kind a member caches.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShardObjects {
    /// API version of the kind.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// Objects cached.
    pub objects: i64,
}

/// The namespaces one namespace selector matches now.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceSelectorStatus {
    /// The selector, in canonical form.
    pub selector: String,

    /// The namespaces it matches, sorted by name; at most the first
    /// [`MAX_LISTED_NAMESPACES`], `count` says how many there are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,

    /// How many namespaces it matches.
    pub count: i32,
}

/// The most namespaces `status.namespaceSelectors[].namespaces` lists, so a selector matching
/// thousands keeps the object small.
pub const MAX_LISTED_NAMESPACES: usize = 500;

impl NamespaceSelectorStatus {
    /// The status of `selector`, which matches `namespaces` (sorted).
    #[must_use]
    pub fn new<'a>(selector: &str, namespaces: impl ExactSizeIterator<Item = &'a String>) -> Self {
        let count = i32::try_from(namespaces.len()).unwrap_or(i32::MAX);
        Self {
            selector: selector.to_owned(),
            namespaces: namespaces.take(MAX_LISTED_NAMESPACES).cloned().collect(),
            count,
        }
    }
}
