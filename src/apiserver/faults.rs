//! Fault injection (failed requests, latency, throttling, malformed answers) and per-verb,
//! per-resource request counters, for reliability tests of the clients built on this server.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::status::ApiError;

/// A Kubernetes API verb, as RBAC and audit logs name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    /// Read one object.
    Get,
    /// Read a collection.
    List,
    /// Stream changes.
    Watch,
    /// Create an object.
    Create,
    /// Replace an object.
    Update,
    /// Patch an object.
    Patch,
    /// Delete an object.
    Delete,
    /// Delete a collection.
    #[serde(rename = "deletecollection")]
    DeleteCollection,
}

impl Verb {
    /// The lowercase verb name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no verb.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown verb {0:?}: expected get, list, watch, create, update, patch, delete or deletecollection"
)]
pub struct UnknownVerb(pub String);

impl FromStr for Verb {
    type Err = UnknownVerb;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "get" => Self::Get,
            "list" => Self::List,
            "watch" => Self::Watch,
            "create" => Self::Create,
            "update" => Self::Update,
            "patch" => Self::Patch,
            "delete" => Self::Delete,
            "deletecollection" => Self::DeleteCollection,
            other => return Err(UnknownVerb(other.to_string())),
        })
    }
}

/// "Fail the next `count` requests matching verb + resource with `code`".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailRule {
    /// The verb to match; `None` matches every verb.
    pub verb: Option<Verb>,
    /// The resource (plural) to match; `None` matches every resource.
    pub resource: Option<String>,
    /// How many more requests fail.
    pub count: u32,
    /// The HTTP status code to answer.
    pub code: u16,
}

/// A malformed answer, as a broken proxy or a buggy server would send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Corruption {
    /// The JSON body cut in half (status 200, `application/json`).
    Truncated,
    /// Every item of a list (or the object of a get) claims to be a `v1` `Namespace`, and the
    /// list a `NamespaceList`.
    WrongKind,
    /// The first item of a list (or the object of a get) carries an annotation of
    /// [`HUGE_ANNOTATION_BYTES`], past kube-apiserver's 1.5 MiB object limit.
    Huge,
}

/// The size of the annotation [`Corruption::Huge`] adds: 4 MiB, well past etcd's default
/// 1.5 MiB request limit (`--max-request-bytes`), so no real server would ever send it.
pub const HUGE_ANNOTATION_BYTES: usize = 4 * 1024 * 1024;

/// "Corrupt the next `count` successful answers to verb + resource with `corruption`". Only
/// `get` and `list` answers are corrupted (a watch is a stream; its events stay intact).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CorruptRule {
    /// The verb to match (`get` or `list`); `None` matches both.
    pub verb: Option<Verb>,
    /// The resource (plural) to match; `None` matches every resource.
    pub resource: Option<String>,
    /// How many more answers are corrupted.
    pub count: u32,
    /// What is done to them.
    pub corruption: Corruption,
}

#[derive(Debug, Default)]
struct State {
    rules: Vec<FailRule>,
    corruptions: Vec<CorruptRule>,
    latency: Duration,
    throttle: Option<(u32, u32)>,
    /// Failures and corruptions answered since start (not reset by `clear`).
    injected: u64,
}

/// The faults to inject into resource requests.
#[derive(Debug, Default)]
pub struct Faults {
    state: Mutex<State>,
}

impl Faults {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Fail the next `rule.count` requests matching the rule with `rule.code`.
    pub fn fail_next(&self, rule: FailRule) {
        self.lock().rules.push(rule);
    }

    /// Corrupt the next `rule.count` successful `get`/`list` answers matching the rule.
    pub fn corrupt_next(&self, rule: CorruptRule) {
        self.lock().corruptions.push(rule);
    }

    /// The corruption to apply to a successful answer to `verb` on `resource`, if any (one
    /// count of the matching rule is used up).
    pub(crate) fn corruption(&self, verb: Verb, resource: &str) -> Option<Corruption> {
        if !matches!(verb, Verb::Get | Verb::List) {
            return None;
        }
        let mut st = self.lock();
        let i = st.corruptions.iter().position(|r| {
            r.count > 0
                && r.verb.is_none_or(|v| v == verb)
                && r.resource.as_deref().is_none_or(|x| x == resource)
        })?;
        let corruption = st.corruptions[i].corruption;
        st.corruptions[i].count -= 1;
        if st.corruptions[i].count == 0 {
            st.corruptions.remove(i);
        }
        st.injected += 1;
        Some(corruption)
    }

    /// Delay every resource request by `latency` (zero turns it off).
    pub fn set_latency(&self, latency: Duration) {
        self.lock().latency = latency;
    }

    /// Answer the next `count` resource requests with 429 and `Retry-After: retry_after_secs`.
    pub fn throttle_next(&self, count: u32, retry_after_secs: u32) {
        self.lock().throttle = Some((count, retry_after_secs));
    }

    /// Remove every injected fault (failures, corruptions, latency, throttling).
    pub fn clear(&self) {
        let mut st = self.lock();
        let injected = st.injected;
        *st = State {
            injected,
            ..State::default()
        };
    }

    /// How many requests were answered with an injected failure, throttling or corruption
    /// since start.
    #[must_use]
    pub fn injected(&self) -> u64 {
        self.lock().injected
    }

    /// The latency to add to this request and the failure to answer, if any.
    pub(crate) fn check(&self, verb: Verb, resource: &str) -> (Duration, Option<ApiError>) {
        let mut st = self.lock();
        let latency = st.latency;
        if let Some((count, secs)) = st.throttle {
            st.throttle = (count > 1).then(|| (count - 1, secs));
            if count > 0 {
                st.injected += 1;
                return (latency, Some(ApiError::too_many_requests(secs)));
            }
        }
        let hit = st.rules.iter().position(|r| {
            r.count > 0
                && r.verb.is_none_or(|v| v == verb)
                && r.resource.as_deref().is_none_or(|x| x == resource)
        });
        let err = hit.map(|i| {
            let code = st.rules[i].code;
            st.rules[i].count -= 1;
            if st.rules[i].count == 0 {
                st.rules.remove(i);
            }
            st.injected += 1;
            ApiError::injected(code)
        });
        (latency, err)
    }
}

/// `body` (a JSON object or list) with `corruption` applied.
#[must_use]
pub fn corrupt_body(corruption: Corruption, body: &[u8]) -> Vec<u8> {
    if corruption == Corruption::Truncated {
        return body[..body.len() / 2].to_vec();
    }
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return body.to_vec();
    };
    let is_list = value.get("items").is_some_and(serde_json::Value::is_array);
    match corruption {
        Corruption::WrongKind => {
            if is_list {
                value["kind"] = "NamespaceList".into();
                value["apiVersion"] = "v1".into();
                for item in value["items"].as_array_mut().into_iter().flatten() {
                    item["kind"] = "Namespace".into();
                    item["apiVersion"] = "v1".into();
                }
            } else {
                value["kind"] = "Namespace".into();
                value["apiVersion"] = "v1".into();
            }
        }
        Corruption::Huge => {
            let target = if is_list {
                value["items"].get_mut(0)
            } else {
                Some(&mut value)
            };
            if let Some(serde_json::Value::Object(object)) = target {
                let metadata = object
                    .entry("metadata")
                    .or_insert_with(|| serde_json::json!({}));
                if let serde_json::Value::Object(metadata) = metadata {
                    let annotations = metadata
                        .entry("annotations")
                        .or_insert_with(|| serde_json::json!({}));
                    if let serde_json::Value::Object(annotations) = annotations {
                        annotations.insert(
                            "informant.dev/huge".into(),
                            "x".repeat(HUGE_ANNOTATION_BYTES).into(),
                        );
                    }
                }
            }
        }
        Corruption::Truncated => {}
    }
    serde_json::to_vec(&value).unwrap_or_else(|_| body.to_vec())
}

/// `response` with its body corrupted (the status and content type stay; the length is
/// recomputed).
pub(crate) async fn corrupt_response(
    corruption: Corruption,
    response: axum::response::Response,
) -> axum::response::Response {
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return axum::response::Response::from_parts(parts, axum::body::Body::empty());
    };
    parts.headers.remove(http::header::CONTENT_LENGTH);
    let corrupted = corrupt_body(corruption, &bytes);
    axum::response::Response::from_parts(parts, axum::body::Body::from(corrupted))
}

/// How many requests one verb on one resource has received.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestCount {
    /// The verb.
    pub verb: Verb,
    /// API group ("" for core).
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Requests received since start.
    pub count: u64,
}

/// Request counters per verb and resource, and of discovery requests.
#[derive(Debug, Default)]
pub struct Counters {
    counts: Mutex<BTreeMap<(Verb, String, String), u64>>,
    discovery: std::sync::atomic::AtomicU64,
}

impl Counters {
    /// Count one discovery request (`/api`, `/apis`, a group, a group version's resources).
    pub fn record_discovery(&self) {
        self.discovery
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Discovery requests since start.
    #[must_use]
    pub fn discovery(&self) -> u64 {
        self.discovery.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Count one request.
    pub fn record(&self, verb: Verb, group: &str, resource: &str) {
        *self
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((verb, group.to_string(), resource.to_string()))
            .or_insert(0) += 1;
    }

    /// Requests of `verb` on `resource` (plural, any group) since start.
    #[must_use]
    pub fn get(&self, verb: Verb, resource: &str) -> u64 {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|((v, _, r), _)| *v == verb && r == resource)
            .map(|(_, n)| n)
            .sum()
    }

    /// Every counter.
    #[must_use]
    pub fn snapshot(&self) -> Vec<RequestCount> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|((verb, group, resource), count)| RequestCount {
                verb: *verb,
                group: group.clone(),
                resource: resource.clone(),
                count: *count,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fail_rule_fails_exactly_count_matching_requests() {
        let f = Faults::default();
        f.fail_next(FailRule {
            verb: Some(Verb::List),
            resource: Some("pods".into()),
            count: 2,
            code: 503,
        });
        assert!(f.check(Verb::List, "configmaps").1.is_none());
        assert!(f.check(Verb::Watch, "pods").1.is_none());
        assert_eq!(f.check(Verb::List, "pods").1.unwrap().code, 503);
        assert_eq!(f.check(Verb::List, "pods").1.unwrap().code, 503);
        assert!(f.check(Verb::List, "pods").1.is_none());
    }

    #[test]
    fn throttling_answers_429_with_retry_after_then_stops() {
        let f = Faults::default();
        f.throttle_next(1, 7);
        let err = f.check(Verb::Get, "pods").1.unwrap();
        assert_eq!((err.code, err.retry_after), (429, Some(7)));
        assert!(f.check(Verb::Get, "pods").1.is_none());
    }

    #[test]
    fn a_corrupt_rule_corrupts_only_matching_gets_and_lists_count_times() {
        let f = Faults::default();
        f.corrupt_next(CorruptRule {
            verb: None,
            resource: Some("configmaps".into()),
            count: 2,
            corruption: Corruption::Truncated,
        });
        assert_eq!(f.corruption(Verb::Watch, "configmaps"), None);
        assert_eq!(f.corruption(Verb::List, "secrets"), None);
        assert_eq!(
            f.corruption(Verb::List, "configmaps"),
            Some(Corruption::Truncated)
        );
        assert_eq!(
            f.corruption(Verb::Get, "configmaps"),
            Some(Corruption::Truncated)
        );
        assert_eq!(f.corruption(Verb::List, "configmaps"), None);
        f.clear();
        assert_eq!(f.injected(), 2, "clearing keeps the tally");
    }

    #[test]
    fn corrupted_bodies_are_truncated_mislabelled_or_huge() {
        let list =
            br#"{"kind":"ConfigMapList","apiVersion":"v1","items":[{"metadata":{"name":"a"}}]}"#;
        let cut = corrupt_body(Corruption::Truncated, list);
        assert!(serde_json::from_slice::<serde_json::Value>(&cut).is_err());
        let wrong: serde_json::Value =
            serde_json::from_slice(&corrupt_body(Corruption::WrongKind, list)).unwrap();
        assert_eq!(wrong["kind"], "NamespaceList");
        assert_eq!(wrong["items"][0]["kind"], "Namespace");
        let huge: serde_json::Value =
            serde_json::from_slice(&corrupt_body(Corruption::Huge, list)).unwrap();
        let annotation = huge["items"][0]["metadata"]["annotations"]["informant.dev/huge"]
            .as_str()
            .unwrap();
        assert_eq!(annotation.len(), HUGE_ANNOTATION_BYTES);
    }

    #[test]
    fn counters_sum_over_groups() {
        let c = Counters::default();
        c.record(Verb::List, "", "events");
        c.record(Verb::List, "events.k8s.io", "events");
        c.record(Verb::Watch, "", "events");
        assert_eq!(c.get(Verb::List, "events"), 2);
        assert_eq!(c.snapshot().len(), 3);
    }
}
