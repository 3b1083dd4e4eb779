//! Query parameters of resource requests (list, watch, write options), parsed strictly.

use super::status::{ApiError, ApiResult};

/// The query parameters the server understands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "they are the API's own boolean query parameters"
)]
pub struct Query {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `shardSelector` (KEP-5866), as sent; dropped before filtering while the
    /// `ShardedListAndWatch` gate is off, as a server without the feature ignores it.
    pub shard_selector: Option<String>,
    /// `limit` (0 means unlimited).
    pub limit: Option<usize>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
    /// `watch=true`.
    pub watch: bool,
    /// `allowWatchBookmarks=true`.
    pub allow_watch_bookmarks: bool,
    /// `sendInitialEvents=true`.
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<u64>,
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// `force` (server-side apply).
    pub force: bool,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `includeObject` for Table output (`None`, `Metadata`, `Object`).
    pub include_object: Option<String>,
}

fn flag(key: &str, value: &str) -> ApiResult<bool> {
    match value {
        "true" | "1" | "True" => Ok(true),
        "false" | "0" | "False" | "" => Ok(false),
        other => Err(ApiError::bad_request(format!(
            "invalid value for {key}: {other:?} is not a boolean"
        ))),
    }
}

fn number(key: &str, value: &str) -> ApiResult<u64> {
    value.parse::<u64>().map_err(|_| {
        ApiError::bad_request(format!(
            "invalid value for {key}: {value:?} is not a non-negative integer"
        ))
    })
}

impl Query {
    /// Parse a raw query string.
    ///
    /// # Errors
    ///
    /// 400 `BadRequest` for a malformed value.
    pub fn parse(raw: Option<&str>) -> ApiResult<Self> {
        let mut q = Self::default();
        let Some(raw) = raw else { return Ok(q) };
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw)
            .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?;
        for (key, value) in pairs {
            let non_empty = (!value.is_empty()).then(|| value.clone());
            match key.as_str() {
                "labelSelector" => q.label_selector = non_empty,
                "fieldSelector" => q.field_selector = non_empty,
                // An empty value is kept: kube-apiserver refuses it ("omit the parameter").
                "shardSelector" => q.shard_selector = Some(value.clone()),
                "limit" => {
                    q.limit = Some(usize::try_from(number(&key, &value)?).unwrap_or(usize::MAX));
                }
                "continue" => q.continue_token = non_empty,
                "resourceVersion" => q.resource_version = non_empty,
                "resourceVersionMatch" => q.resource_version_match = non_empty,
                "watch" => q.watch = flag(&key, &value)?,
                "allowWatchBookmarks" => q.allow_watch_bookmarks = flag(&key, &value)?,
                "sendInitialEvents" => q.send_initial_events = Some(flag(&key, &value)?),
                "timeoutSeconds" => q.timeout_seconds = Some(number(&key, &value)?),
                "fieldManager" => q.field_manager = non_empty,
                "force" => q.force = flag(&key, &value)?,
                "dryRun" => q.dry_run = !value.is_empty(),
                "includeObject" => q.include_object = non_empty,
                _ => {}
            }
        }
        Ok(q)
    }

    /// `resourceVersion` as a number; "" and absent are `None`.
    ///
    /// # Errors
    ///
    /// 400 when it is not a number.
    pub fn rv(&self) -> ApiResult<Option<u64>> {
        match self.resource_version.as_deref() {
            None => Ok(None),
            Some(v) => v
                .parse::<u64>()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {v:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_rs_watch_parameters_parse() {
        let q = Query::parse(Some(
            "&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&resourceVersion=12&labelSelector=a%3Db",
        ))
        .unwrap();
        assert!(q.watch);
        assert!(q.allow_watch_bookmarks);
        assert_eq!(q.timeout_seconds, Some(290));
        assert_eq!(q.rv().unwrap(), Some(12));
        assert_eq!(q.label_selector.as_deref(), Some("a=b"));
    }

    #[test]
    fn malformed_numbers_are_bad_requests() {
        assert_eq!(Query::parse(Some("limit=x")).unwrap_err().code, 400);
        let q = Query::parse(Some("resourceVersion=abc")).unwrap();
        assert_eq!(q.rv().unwrap_err().code, 400);
    }
}
