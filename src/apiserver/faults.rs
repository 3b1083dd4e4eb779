//! Fault injection (failed requests, latency, throttling) and per-verb, per-resource request
//! counters, for reliability tests of the clients built on this server.

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

#[derive(Debug, Default)]
struct State {
    rules: Vec<FailRule>,
    latency: Duration,
    throttle: Option<(u32, u32)>,
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

    /// Delay every resource request by `latency` (zero turns it off).
    pub fn set_latency(&self, latency: Duration) {
        self.lock().latency = latency;
    }

    /// Answer the next `count` resource requests with 429 and `Retry-After: retry_after_secs`.
    pub fn throttle_next(&self, count: u32, retry_after_secs: u32) {
        self.lock().throttle = Some((count, retry_after_secs));
    }

    /// Remove every injected fault.
    pub fn clear(&self) {
        *self.lock() = State::default();
    }

    /// The latency to add to this request and the failure to answer, if any.
    pub(crate) fn check(&self, verb: Verb, resource: &str) -> (Duration, Option<ApiError>) {
        let mut st = self.lock();
        let latency = st.latency;
        if let Some((count, secs)) = st.throttle {
            st.throttle = (count > 1).then(|| (count - 1, secs));
            if count > 0 {
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
            ApiError::injected(code)
        });
        (latency, err)
    }
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

/// Request counters per verb and resource.
#[derive(Debug, Default)]
pub struct Counters {
    counts: Mutex<BTreeMap<(Verb, String, String), u64>>,
}

impl Counters {
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
    fn counters_sum_over_groups() {
        let c = Counters::default();
        c.record(Verb::List, "", "events");
        c.record(Verb::List, "events.k8s.io", "events");
        c.record(Verb::Watch, "", "events");
        assert_eq!(c.get(Verb::List, "events"), 2);
        assert_eq!(c.snapshot().len(), 3);
    }
}
