//! Which objects a list or watch selects: namespace, label selector and field selector, with
//! kube-apiserver's rejection of field selectors on unsupported fields.

use std::sync::Arc;

use serde_json::Value;

use super::query::Query;
use super::registry::ResourceType;
use super::status::{ApiError, ApiResult};
use crate::selector::{FieldSelector, LabelSelector, ShardSelector};

/// The message apimachinery's `fields.ParseSelector` gives for an invalid field selector,
/// which kube-apiserver answers verbatim (`pkg/fields/selector.go`, `parseSelector`): terms are
/// split on unescaped commas and checked in sorted order; the first without an operator is
/// "can't understand", the first whose value has a bad escape or an unescaped `,` / `=` gets
/// `UnescapeValue`'s error (its rune printed as a number, as Go's `%v` does). `None` when
/// upstream would accept the selector.
fn upstream_field_error(selector: &str) -> Option<String> {
    let mut terms = Vec::new();
    let (mut start, mut escaped) = (0, false);
    for (i, c) in selector.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms.sort_unstable();
    for term in terms.into_iter().filter(|t| !t.is_empty()) {
        let split = term.char_indices().find_map(|(i, _)| {
            ["!=", "==", "="]
                .iter()
                .find(|op| term[i..].starts_with(**op))
                .map(|op| &term[i + op.len()..])
        });
        let Some(value) = split else {
            return Some(format!(
                "invalid selector: '{selector}'; can't understand '{term}'"
            ));
        };
        let mut chars = value.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('\\' | ',' | '=') => {}
                    Some(other) => {
                        return Some(format!(
                            "invalid field selector: invalid escape sequence: \\{other}"
                        ));
                    }
                    None => {
                        return Some(
                            "invalid field selector: invalid escape sequence: \\".to_string(),
                        );
                    }
                },
                ',' | '=' => {
                    return Some(format!(
                        "invalid field selector: unescaped character in value: {}",
                        u32::from(c)
                    ));
                }
                _ => {}
            }
        }
    }
    None
}

/// A compiled selection for one request.
#[derive(Debug, Clone)]
pub struct Filter {
    rt: Arc<ResourceType>,
    namespace: Option<String>,
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
    /// The shard selector and the string it was sent as (echoed in `ListMeta.shardInfo`).
    shard: Option<(ShardSelector, String)>,
}

impl Filter {
    /// Compile the request's selectors.
    ///
    /// # Errors
    ///
    /// 400 for a malformed selector or a field the resource does not support.
    pub fn new(rt: Arc<ResourceType>, namespace: Option<String>, query: &Query) -> ApiResult<Self> {
        let labels = match query.label_selector.as_deref() {
            None => None,
            Some(s) => Some(LabelSelector::parse(s).map_err(|e| {
                // apimachinery's words, as kube-apiserver answers (this crate's only if a
                // message of upstream's is missing).
                ApiError::bad_request(
                    LabelSelector::apimachinery_error(s)
                        .unwrap_or_else(|| format!("unable to parse requirement: {e}")),
                )
            })?),
        };
        let fields = match query.field_selector.as_deref() {
            None => None,
            Some(s) => {
                let sel = FieldSelector::parse(s).map_err(|e| {
                    ApiError::bad_request(
                        upstream_field_error(s)
                            .unwrap_or_else(|| format!("invalid field selector: {e}")),
                    )
                })?;
                if let Some(bad) = sel
                    .requirements()
                    .iter()
                    .find(|r| !rt.supports_field(&r.field))
                {
                    return Err(ApiError::bad_request(format!(
                        "field label not supported: {}",
                        bad.field
                    )));
                }
                Some(sel)
            }
        };
        // apimachinery's ListOptions conversion: "invalid shard selector: <parser's words>",
        // answered 400 BadRequest by the list and watch handlers.
        let shard = match query.shard_selector.as_deref() {
            None => None,
            Some(s) => Some((
                ShardSelector::parse(s)
                    .map_err(|e| ApiError::bad_request(format!("invalid shard selector: {e}")))?,
                s.to_string(),
            )),
        };
        Ok(Self {
            rt,
            namespace: namespace.filter(|n| !n.is_empty()),
            labels: labels.filter(|l| !l.is_empty()),
            fields: fields.filter(|f| !f.is_empty()),
            shard,
        })
    }

    /// The shard selector as the request sent it, when one applies: a list answers it in
    /// `metadata.shardInfo.selector`, so a client knows its list holds only its shard.
    #[must_use]
    pub fn shard_info(&self) -> Option<&str> {
        self.shard.as_ref().map(|(_, raw)| raw.as_str())
    }

    /// The namespace the request is limited to, if any.
    #[must_use]
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// Whether `obj` (in namespace `namespace`) is selected.
    #[must_use]
    pub fn matches(&self, namespace: &str, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && ns != namespace
        {
            return false;
        }
        if let Some(l) = &self.labels
            && !l.matches_object(obj)
        {
            return false;
        }
        if let Some((shard, _)) = &self.shard
            && !shard.matches_object(obj)
        {
            return false;
        }
        if let Some(f) = &self.fields {
            return f.matches(&|field| self.rt.field_value(obj, field));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::Registry;
    use serde_json::json;

    fn q(label: Option<&str>, field: Option<&str>) -> Query {
        Query {
            label_selector: label.map(String::from),
            field_selector: field.map(String::from),
            ..Query::default()
        }
    }

    #[test]
    fn unsupported_field_selector_fields_are_rejected_like_kube_apiserver() {
        let pods = Registry::new().lookup("", "v1", "pods").unwrap();
        let err = Filter::new(pods.clone(), None, &q(None, Some("spec.bogus=x"))).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(err.message, "field label not supported: spec.bogus");
        assert!(Filter::new(pods, None, &q(None, Some("spec.nodeName=n1"))).is_ok());
    }

    #[test]
    fn jobs_select_on_status_successful_as_kube_apiserver_computes_it() {
        let jobs = Registry::new().lookup("batch", "v1", "jobs").unwrap();
        let done = Filter::new(jobs.clone(), None, &q(None, Some("status.successful=1"))).unwrap();
        let none = Filter::new(jobs, None, &q(None, Some("status.successful=0"))).unwrap();
        let completed = json!({"metadata": {}, "status": {"succeeded": 1}});
        let running = json!({"metadata": {}, "status": {}});
        assert!(done.matches("a", &completed));
        assert!(!done.matches("a", &running));
        assert!(none.matches("a", &running), "an absent count reads 0");
    }

    #[test]
    fn labels_fields_and_namespace_all_have_to_match() {
        let pods = Registry::new().lookup("", "v1", "pods").unwrap();
        let f = Filter::new(
            pods,
            Some("a".into()),
            &q(Some("app=web"), Some("status.phase!=Failed")),
        )
        .unwrap();
        let pod = json!({"metadata": {"labels": {"app": "web"}}, "status": {"phase": "Running"}});
        assert!(f.matches("a", &pod));
        assert!(!f.matches("b", &pod));
        let failed = json!({"metadata": {"labels": {"app": "web"}}, "status": {"phase": "Failed"}});
        assert!(!f.matches("a", &failed));
    }

    #[test]
    fn field_selector_errors_read_as_apimachinery_writes_them() {
        // The bad strings of apimachinery's `TestSelectorParse` (pkg/fields/selector_test.go).
        let cases = [
            (
                "x=a||y=b",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "x==a==b",
                "invalid field selector: unescaped character in value: 61",
            ),
            ("x=a,b", "invalid selector: 'x=a,b'; can't understand 'b'"),
            (
                "x in (a)",
                "invalid selector: 'x in (a)'; can't understand 'x in (a)'",
            ),
            (
                "x in (a,b,c)",
                "invalid selector: 'x in (a,b,c)'; can't understand 'b'",
            ),
            ("x", "invalid selector: 'x'; can't understand 'x'"),
            (
                r"x=a\b",
                r"invalid field selector: invalid escape sequence: \b",
            ),
            (
                r"x=a\",
                r"invalid field selector: invalid escape sequence: \",
            ),
        ];
        for (selector, message) in cases {
            assert_eq!(
                upstream_field_error(selector).as_deref(),
                Some(message),
                "{selector}"
            );
            assert!(FieldSelector::parse(selector).is_err(), "{selector}");
        }
        for good in ["x=a,y=b,z=c", "", "x!=a,y=b", r"x=a||y\=b", r"x=a\=\=b"] {
            assert_eq!(upstream_field_error(good), None, "{good}");
            assert!(FieldSelector::parse(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn malformed_label_selectors_are_bad_requests() {
        let pods = Registry::new().lookup("", "v1", "pods").unwrap();
        assert_eq!(
            Filter::new(pods, None, &q(Some("a in (b"), None))
                .unwrap_err()
                .code,
            400
        );
    }
}
