//! WATCH: a newline-delimited stream of events, driven by an explicit state machine: resume
//! backlog or synthetic ADDED events first, then live changes filtered by selectors (an object
//! that stops matching is DELETED), bookmarks (periodic, and 2 s before the timeout, once the
//! resource has changed since the watch started), timeout, and 410 Expired when the
//! client falls behind the history.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::{Instant, Interval, Sleep};
use tokio_util::sync::CancellationToken;

use crate::apiserver::crd_conversion;
use crate::apiserver::filter::Filter;
use crate::apiserver::query::Query;
use crate::apiserver::registry::{ResourceKey, ResourceType};
use crate::apiserver::request::{Ctx, partial_metadata};
use crate::apiserver::state::App;
use crate::apiserver::status::{ApiError, ApiResult, FieldError};
use crate::apiserver::store::{Change, ChangeType, Stored};
use crate::apiserver::table;

/// How long before a watch's deadline it gets its last bookmark: kube-apiserver's cacher
/// schedules one 2 s before (`k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go`,
/// `nextBookmarkTime`), so a client resuming after `timeoutSeconds` starts from a recent
/// resourceVersion instead of relisting.
const PRE_TIMEOUT_BOOKMARK: Duration = Duration::from_secs(2);

/// How long a watch without `timeoutSeconds` lasts: kube-apiserver's `--min-request-timeout`
/// default of 1800 s (`k8s.io/apiserver/pkg/server/options/serving.go`).
const DEFAULT_TIMEOUT: Duration = Duration::from_mins(30);

/// How events are rendered.
#[derive(Debug, Clone)]
enum Encoding {
    /// The object as stored.
    Object,
    /// Its `PartialObjectMetadata` (metadata-only watches).
    Metadata,
    /// A one-row `meta.k8s.io/v1` Table (kubectl get -w).
    Table(Option<String>),
}

/// An event ready to send, or one whose object must first be converted to the watched
/// version (a custom resource stored at another version of its CRD).
enum Pending {
    Ready(Bytes),
    Convert(&'static str, Arc<Stored>),
}

struct Watch {
    pending: VecDeque<Pending>,
    /// The state, for conversions.
    app: Arc<App>,
    /// The version watched.
    version: String,
    receiver: broadcast::Receiver<Arc<Change>>,
    filter: Filter,
    resource: ResourceKey,
    rt: Arc<ResourceType>,
    encoding: Encoding,
    last_rv: u64,
    /// The resourceVersion the watch started at: bookmarks are sent only once the resource has
    /// changed after it (the cacher's watchers skip bookmarks not newer than their start).
    start_rv: u64,
    /// The resourceVersion of the last change to this resource, filtered out or not.
    resource_rv: u64,
    bookmarks: Option<Interval>,
    /// When the pre-timeout bookmark is due (`None` when not asked for or already sent).
    pre_timeout: Option<Pin<Box<Sleep>>>,
    deadline: Pin<Box<Sleep>>,
    shutdown: CancellationToken,
    dropped: CancellationToken,
    done: bool,
}

fn line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

fn error_line(err: &ApiError) -> Bytes {
    line(
        "ERROR",
        &serde_json::to_vec(&err.to_status()).unwrap_or_default(),
    )
}

impl Watch {
    fn event(&mut self, kind: &'static str, obj: &Arc<Stored>) {
        let want = self.rt.api_version(&self.version);
        if self.rt.custom
            && self.rt.versions.len() > 1
            && obj.value["apiVersion"].as_str() != Some(want.as_str())
        {
            self.pending
                .push_back(Pending::Convert(kind, Arc::clone(obj)));
            return;
        }
        let bytes = self.encode(kind, obj);
        self.pending.push_back(Pending::Ready(bytes));
    }

    fn encode(&self, kind: &str, obj: &Stored) -> Bytes {
        match &self.encoding {
            Encoding::Object => line(kind, &self.rt.view_bytes(obj)),
            Encoding::Metadata => line(
                kind,
                &serde_json::to_vec(&partial_metadata(&obj.value)).unwrap_or_default(),
            ),
            Encoding::Table(include) => {
                let t = table::build(
                    &self.rt,
                    &[obj],
                    &obj.rv.to_string(),
                    None,
                    include.as_deref(),
                );
                line(kind, &serde_json::to_vec(&t).unwrap_or_default())
            }
        }
    }

    fn bookmark(&mut self, rv: u64, initial_end: bool) {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({
            "kind": self.rt.kind,
            "apiVersion": self.rt.api_version(self.rt.preferred_version()),
            "metadata": meta,
        });
        self.pending.push_back(Pending::Ready(line(
            "BOOKMARK",
            &serde_json::to_vec(&obj).unwrap_or_default(),
        )));
    }

    /// A periodic or pre-timeout bookmark at the latest resourceVersion, when this resource
    /// has changed since the watch started (a bookmark that cannot move the client forward is
    /// not sent).
    fn bookmark_if_changed(&mut self) {
        if self.resource_rv > self.start_rv {
            let rv = self.last_rv;
            self.bookmark(rv, false);
        }
    }

    /// Turn one change into 0 or 1 events for this watch.
    fn apply(&mut self, change: &Change) {
        self.last_rv = self.last_rv.max(change.rv);
        if change.resource != self.resource {
            return;
        }
        self.resource_rv = self.resource_rv.max(change.rv);
        let ns = &change.key.namespace;
        let was = change
            .previous
            .as_ref()
            .is_some_and(|p| self.filter.matches(ns, &p.value));
        let is = self.filter.matches(ns, &change.object.value);
        let kind = match (change.kind, was, is) {
            (ChangeType::Added, _, true) | (ChangeType::Modified, false, true) => "ADDED",
            (ChangeType::Modified, true, true) => "MODIFIED",
            (ChangeType::Modified, true, false) | (ChangeType::Deleted, true, _) => "DELETED",
            _ => return,
        };
        self.event(kind, &change.object);
    }

    async fn next(mut self) -> Option<(Result<Bytes, std::convert::Infallible>, Self)> {
        loop {
            match self.pending.pop_front() {
                Some(Pending::Ready(bytes)) => return Some((Ok(bytes), self)),
                Some(Pending::Convert(kind, obj)) => {
                    let converted = crd_conversion::at_version(
                        &self.app,
                        &self.rt,
                        &self.version,
                        vec![obj],
                        false,
                    )
                    .await;
                    let bytes = match converted.as_deref() {
                        Ok([obj]) => self.encode(kind, obj),
                        Ok(_) => error_line(&ApiError::internal("conversion returned no object")),
                        // As kube-apiserver, a watch that cannot convert an object ends with
                        // the error.
                        Err(e) => {
                            self.done = true;
                            error_line(e)
                        }
                    };
                    return Some((Ok(bytes), self));
                }
                None => {}
            }
            if self.done {
                return None;
            }
            let tick = async {
                match self.bookmarks.as_mut() {
                    Some(i) => {
                        i.tick().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let pre_timeout = async {
                match self.pre_timeout.as_mut() {
                    Some(sleep) => sleep.await,
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => self.done = true,
                () = self.dropped.cancelled() => self.done = true,
                () = &mut self.deadline => self.done = true,
                received = self.receiver.recv() => match received {
                    Ok(change) => self.apply(&change),
                    Err(RecvError::Lagged(_)) => {
                        self.pending.push_back(Pending::Ready(error_line(&ApiError::expired(
                            "the watch fell too far behind the event history; relist",
                        ))));
                        self.done = true;
                    }
                    Err(RecvError::Closed) => self.done = true,
                },
                () = tick => self.bookmark_if_changed(),
                () = pre_timeout => {
                    self.pre_timeout = None;
                    self.bookmark_if_changed();
                }
            }
        }
    }
}

fn stream_response(body: Body) -> Response {
    let mut resp = (StatusCode::OK, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    resp
}

/// Start a watch.
pub(super) fn watch(ctx: &Ctx) -> ApiResult<Response> {
    let mut query = ctx.query.clone();
    if let Some(name) = &ctx.path.name {
        let by_name = format!("metadata.name={name}");
        query.field_selector = Some(match query.field_selector.take() {
            Some(f) => format!("{f},{by_name}"),
            None => by_name,
        });
    }
    let filter = Filter::new(ctx.rt.clone(), ctx.path.namespace.clone(), &query)?;
    let rv = query.rv()?;
    let send_initial = query.send_initial_events;
    validate_watch_options(&query)?;
    // Legacy watches from "" or "0" start with synthetic ADDED events for the current state.
    let from = match (send_initial, rv) {
        (Some(true), _) | (None, None | Some(0)) => None,
        (Some(false), None | Some(0)) => Some(ctx.app.store.current_rv()),
        (_, Some(r)) => Some(r),
    };
    let start = match ctx.app.store.watch(&ctx.rt.storage_key(), from) {
        Ok(start) => start,
        // Like the watch cache: 200, then one ERROR event with 410, so clients relist.
        Err(err) => return Ok(stream_response(Body::from(error_line(&err)))),
    };
    let timeout = query
        .timeout_seconds
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let bookmarks = query.allow_watch_bookmarks.then(|| {
        let period = ctx
            .app
            .config
            .bookmark_interval
            .max(Duration::from_millis(1));
        tokio::time::interval_at(Instant::now() + period, period)
    });
    let pre_timeout = timeout
        .checked_sub(PRE_TIMEOUT_BOOKMARK)
        .filter(|at| query.allow_watch_bookmarks && !at.is_zero())
        .map(|at| Box::pin(tokio::time::sleep(at)));
    let encoding = if ctx.wants_table() {
        Encoding::Table(query.include_object.clone())
    } else if ctx.wants_metadata() {
        Encoding::Metadata
    } else {
        Encoding::Object
    };
    let mut w = Watch {
        pending: VecDeque::new(),
        app: ctx.app.clone(),
        version: ctx.version().to_string(),
        receiver: start.receiver,
        filter,
        resource: ctx.rt.storage_key(),
        rt: ctx.rt.clone(),
        encoding,
        last_rv: start.rv,
        start_rv: from.unwrap_or(start.rv),
        resource_rv: 0,
        bookmarks,
        pre_timeout,
        deadline: Box::pin(tokio::time::sleep(timeout)),
        shutdown: ctx.app.shutdown.clone(),
        dropped: ctx.app.store.watch_epoch(),
        done: false,
    };
    if let Some(initial) = &start.initial {
        for (key, obj) in initial {
            if w.filter.matches(&key.namespace, &obj.value) {
                w.event("ADDED", obj);
            }
        }
        if send_initial == Some(true) {
            w.bookmark(start.rv, true);
        }
    }
    for change in &start.backlog {
        w.apply(change);
    }
    Ok(stream_response(Body::from_stream(futures::stream::unfold(
        w,
        Watch::next,
    ))))
}

/// apimachinery's `validateWatchOptions` (`pkg/apis/meta/internalversion/validation`), with the
/// `WatchList` feature on as in kube-apiserver 1.37: `sendInitialEvents` (true or false) needs
/// `resourceVersionMatch=NotOlderThan`; `resourceVersionMatch` needs `sendInitialEvents`, takes
/// only `NotOlderThan` and no `continue`. Every error at once, as one 422.
fn validate_watch_options(query: &Query) -> ApiResult<()> {
    const NOT_OLDER_THAN: &str = "NotOlderThan";
    let matching = query.resource_version_match.as_deref().unwrap_or_default();
    let mut errors = Vec::new();
    if query.send_initial_events.is_some() && matching != NOT_OLDER_THAN {
        errors.push(FieldError::forbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if !matching.is_empty() {
        if query.send_initial_events.is_none() {
            errors.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if matching != NOT_OLDER_THAN {
            errors.push(FieldError::not_supported(
                "resourceVersionMatch",
                matching,
                &[NOT_OLDER_THAN],
            ));
        }
        if query.continue_token.is_some() {
            errors.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_fields(
            "ListOptions",
            "meta.k8s.io",
            "",
            &errors,
        ))
    }
}
