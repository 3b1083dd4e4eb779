//! The health and readiness checks of `/healthz` and `/readyz`: what the manager reports
//! ([`Probes`]) and how the answers are written, in controller-runtime's format
//! (pkg/healthz/healthz.go).

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::{not_found, text, text_nosniff};

/// The check every `/healthz` has, always passing: the process answers HTTP (controller-runtime
/// pkg/healthz/healthz.go `Ping`).
pub(crate) const PING: &str = "ping";

/// One named health or readiness check and its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// The check's name: its line in the aggregate (`[+]config ok`) and its path
    /// (`/readyz/config`).
    pub name: String,
    /// `Err(reason)` when it fails; the reason is shown only on the check's own path.
    pub result: Result<(), String>,
}

impl Check {
    /// A passing check.
    #[must_use]
    pub fn ok(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            result: Ok(()),
        }
    }

    /// A failing check.
    #[must_use]
    pub fn failed(name: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            result: Err(reason.into()),
        }
    }
}

/// What the endpoints report, asked at each request (so answers are always current). The
/// manager implements it over its state; each method should be cheap and must not block.
pub trait Probes: Send + Sync + 'static {
    /// The liveness checks of `/healthz`. A `ping` check is added when none is named so.
    fn health_checks(&self) -> Vec<Check>;

    /// The readiness checks of `/readyz` (for instance `config`: a valid config was loaded;
    /// `informers`: the current tree's informers have synced). With none, `/readyz` has a
    /// `ping` check, as controller-runtime's.
    fn ready_checks(&self) -> Vec<Check>;

    /// The JSON of `/debug/cache`: the cache tree and its informers.
    fn debug_cache(&self) -> serde_json::Value;

    /// The JSON of `/debug/status`, or `None` when status is written to a `CacheConfig`
    /// resource (then the path answers 404 and says where to look).
    fn debug_status(&self) -> Option<serde_json::Value>;
}

/// The `/healthz` checks: the probes' own, plus [`PING`] unless one is named so.
fn health_checks(probes: &dyn Probes) -> Vec<Check> {
    let mut checks = probes.health_checks();
    if !checks.iter().any(|c| c.name == PING) {
        checks.push(Check::ok(PING));
    }
    checks
}

/// The `/readyz` checks: the probes' own, or [`PING`] when there are none.
fn ready_checks(probes: &dyn Probes) -> Vec<Check> {
    let checks = probes.ready_checks();
    if checks.is_empty() {
        vec![Check::ok(PING)]
    } else {
        checks
    }
}

pub(super) async fn healthz(
    State(probes): State<Arc<dyn Probes>>,
    RawQuery(query): RawQuery,
) -> Response {
    aggregate(health_checks(probes.as_ref()), query.as_deref(), "healthz")
}

pub(super) async fn readyz(
    State(probes): State<Arc<dyn Probes>>,
    RawQuery(query): RawQuery,
) -> Response {
    aggregate(ready_checks(probes.as_ref()), query.as_deref(), "readyz")
}

pub(super) async fn healthz_one(
    State(probes): State<Arc<dyn Probes>>,
    Path(check): Path<String>,
) -> Response {
    one(health_checks(probes.as_ref()), &check)
}

pub(super) async fn readyz_one(
    State(probes): State<Arc<dyn Probes>>,
    Path(check): Path<String>,
) -> Response {
    one(ready_checks(probes.as_ref()), &check)
}

/// One check at its own path (controller-runtime `CheckHandler`): `ok`, or 500 with the
/// reason; 404 for an unknown name. A trailing slash is ignored, as `path.Clean` does.
fn one(checks: Vec<Check>, name: &str) -> Response {
    let name = name.trim_end_matches('/');
    match checks.into_iter().find(|c| c.name == name) {
        None => not_found(),
        Some(Check { result: Ok(()), .. }) => text(StatusCode::OK, "ok"),
        Some(Check {
            result: Err(reason),
            ..
        }) => text_nosniff(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        ),
    }
}

/// What the query asks of an aggregate: `?verbose` and `?exclude=<check>` (repeatable).
#[derive(Debug, Default)]
struct AggregateQuery {
    verbose: bool,
    exclude: Vec<String>,
}

impl AggregateQuery {
    fn parse(query: Option<&str>) -> Self {
        let pairs: Vec<(String, String)> = query
            .and_then(|q| serde_urlencoded::from_str(q).ok())
            .unwrap_or_default();
        let mut parsed = AggregateQuery::default();
        for (key, value) in pairs {
            match key.as_str() {
                "verbose" => parsed.verbose = true,
                "exclude" if !parsed.exclude.contains(&value) => parsed.exclude.push(value),
                _ => {}
            }
        }
        parsed
    }
}

/// Every check on one page, in controller-runtime's format (pkg/healthz/healthz.go
/// `serveAggregated`, `writeStatusesAsText`): sorted by name; `ok` alone when all pass and
/// `?verbose` is absent; otherwise one line per check, a warning naming excludes that matched
/// nothing, and `healthz check passed` or `healthz check failed` (that wording on `/readyz`
/// too). 200 when every check not excluded passes, else 500.
fn aggregate(mut checks: Vec<Check>, query: Option<&str>, endpoint: &'static str) -> Response {
    let AggregateQuery { verbose, exclude } = AggregateQuery::parse(query);
    checks.sort_by(|a, b| a.name.cmp(&b.name));
    let mut unmatched = exclude.clone();
    unmatched.retain(|name| !checks.iter().any(|c| &c.name == name));
    let is_excluded = |c: &Check| exclude.contains(&c.name);
    let failed = checks.iter().any(|c| c.result.is_err() && !is_excluded(c));
    for check in &checks {
        if let (Err(reason), false) = (&check.result, is_excluded(check)) {
            tracing::debug!(endpoint, check = %check.name, error = %reason, "check failed");
        }
    }

    let status = if failed {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    };
    if !failed && !verbose {
        return text_nosniff(status, "ok");
    }
    let mut body = String::new();
    for check in &checks {
        let line = if is_excluded(check) {
            format!("[+]{} excluded: ok\n", check.name)
        } else if check.result.is_ok() {
            format!("[+]{} ok\n", check.name)
        } else {
            format!("[-]{} failed: reason withheld\n", check.name)
        };
        body.push_str(&line);
    }
    if !unmatched.is_empty() {
        let quoted: Vec<String> = unmatched.iter().map(|n| format!("{n:?}")).collect();
        body.push_str("warn: some health checks cannot be excluded: no matches for ");
        body.push_str(&quoted.join(","));
        body.push('\n');
    }
    body.push_str(if failed {
        "healthz check failed\n"
    } else {
        "healthz check passed\n"
    });
    text_nosniff(status, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_takes_verbose_without_value_and_repeated_excludes() {
        let q = AggregateQuery::parse(Some("verbose&exclude=a&exclude=b%2Fc&exclude=a"));
        assert!(q.verbose);
        assert_eq!(q.exclude, ["a", "b/c"]);
        let q = AggregateQuery::parse(None);
        assert!(!q.verbose && q.exclude.is_empty());
    }
}
