//! Which objects a list or watch selects: namespace, label selector and field selector, with
//! kube-apiserver's rejection of field selectors on unsupported fields.

use std::sync::Arc;

use serde_json::Value;

use super::query::Query;
use super::registry::ResourceType;
use super::status::{ApiError, ApiResult};
use crate::selector::{FieldSelector, LabelSelector};

/// A compiled selection for one request.
#[derive(Debug, Clone)]
pub struct Filter {
    rt: Arc<ResourceType>,
    namespace: Option<String>,
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
}

impl Filter {
    /// Compile the request's selectors.
    ///
    /// # Errors
    ///
    /// 400 for a malformed selector or a field the resource does not support.
    pub fn new(rt: Arc<ResourceType>, namespace: Option<String>, query: &Query) -> ApiResult<Self> {
        let labels =
            match query.label_selector.as_deref() {
                None => None,
                Some(s) => Some(LabelSelector::parse(s).map_err(|e| {
                    ApiError::bad_request(format!("unable to parse requirement: {e}"))
                })?),
            };
        let fields = match query.field_selector.as_deref() {
            None => None,
            Some(s) => {
                let sel = FieldSelector::parse(s)
                    .map_err(|e| ApiError::bad_request(format!("invalid field selector: {e}")))?;
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
        Ok(Self {
            rt,
            namespace: namespace.filter(|n| !n.is_empty()),
            labels: labels.filter(|l| !l.is_empty()),
            fields: fields.filter(|f| !f.is_empty()),
        })
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
