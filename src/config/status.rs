//! The `CacheConfig` status: what the manager made of the spec (validity, readiness, the
//! informers it runs).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Condition type: the spec passed validation (`True`) or not (`False`, with every error in
/// the message).
pub const CONDITION_VALID: &str = "Valid";

/// Condition type: every informer of the cache tree built from the spec has synced.
pub const CONDITION_READY: &str = "Ready";

/// Observed state of a `CacheConfig`, written by the manager.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
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

    /// When the manager last applied a changed spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reload_time: Option<Time>,
}

/// One running informer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InformerStatus {
    /// API version of the watched kind.
    pub api_version: String,

    /// The watched kind.
    pub kind: String,

    /// The watched namespace; absent for a cluster-wide informer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,

    /// The label selector of the list/watch, in canonical form; absent when it selects
    /// everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,

    /// The field selector of the list/watch, in canonical form; absent when it selects
    /// everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<String>,

    /// Whether the initial list has been stored.
    pub synced: bool,

    /// Objects currently cached by this informer.
    pub objects: i64,
}
