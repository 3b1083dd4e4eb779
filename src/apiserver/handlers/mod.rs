//! Request dispatch: path → route → verb, with counters and injected faults applied before the
//! verb's handler runs.

mod admitted;
mod apply;
mod host;
mod managed;
mod patch;
mod read;
mod strategic;
mod watch;
pub(crate) mod write;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use super::auth::User;
use super::faults::Verb;
use super::query::Query;
use super::registry::ResourceType;
use super::request::Ctx;
use super::route::{self, ResourcePath, Route};
use super::state::App;
use super::status::{ApiError, ApiResult};
use super::{aggregated, auth, debug, discovery, openapi, openapi_v2, protobuf};

async fn read_body(body: Body, limit: usize) -> ApiResult<Bytes> {
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| ApiError::too_large(limit))
}

/// The refusal of a request a web page made: one carrying an `Origin` the server was not
/// started to allow (`--allow-origin`). Kubernetes clients send no `Origin`; browsers send it
/// on every cross-origin request and on every `POST`, so a page cannot create objects.
fn foreign_origin(allowed: &[String], headers: &axum::http::HeaderMap) -> Option<ApiError> {
    let origin = headers.get(axum::http::header::ORIGIN)?;
    let shown = String::from_utf8_lossy(origin.as_bytes());
    if allowed.iter().any(|a| a.as_bytes() == origin.as_bytes()) {
        return None;
    }
    tracing::warn!(origin = %shown, "refused a request from a browser page");
    Some(ApiError::new_forbidden(
        "",
        "",
        "",
        &format!(
            "requests from browser pages (Origin {shown:?}) are refused; start the server with \
             --allow-origin {shown} to serve them"
        ),
    ))
}

/// Answer one request.
pub async fn dispatch(app: Arc<App>, req: Request<Body>) -> Response {
    let (parts, body) = req.into_parts();
    if let Some(refused) = host::foreign_host(&app.config.allowed_hosts, &parts.uri, &parts.headers)
    {
        return refused.into_response();
    }
    if let Some(refused) = foreign_origin(&app.config.allowed_origins, &parts.headers) {
        return refused.into_response();
    }
    let user = match app.auth.admit(
        &app.store,
        &parts.method,
        parts.uri.path(),
        parts.uri.query(),
        &parts.headers,
    ) {
        Ok(user) => user,
        Err(refused) => return refused.into_response(),
    };
    let route = route::parse(parts.uri.path());
    if matches!(
        route,
        Route::CoreVersions | Route::Groups | Route::Group(_) | Route::Resources { .. }
    ) {
        app.counters.record_discovery();
    }
    match route {
        Route::Version => discovery::version(),
        Route::CoreVersions if aggregated::wanted(&parts.headers) => {
            aggregated::document(&app, true)
        }
        Route::Groups if aggregated::wanted(&parts.headers) => aggregated::document(&app, false),
        Route::CoreVersions => discovery::core_versions(&app),
        Route::Groups => discovery::groups(&app),
        Route::Group(g) => discovery::group(&app, &g),
        Route::Resources { group, version } => discovery::resources(&app, &group, &version),
        Route::OpenApiV2 => openapi_v2::serve(&app, &parts.headers),
        Route::OpenApiV3 => openapi::v3_index(&app),
        Route::OpenApiV3Group { group, version } => openapi::v3_group(&app, &group, &version),
        Route::Health => (StatusCode::OK, "ok").into_response(),
        Route::DebugRequests => debug::requests(&app),
        Route::DebugFaults => match read_body(body, app.config.max_body).await {
            Ok(bytes) => debug::faults(&app, &parts.method, &bytes),
            Err(e) => e.into_response(),
        },
        Route::Resource(path) => resource(
            app,
            parts.method,
            parts.uri.query(),
            parts.headers,
            body,
            path,
            user,
        )
        .await
        .unwrap_or_else(IntoResponse::into_response),
        Route::Unknown => ApiError::no_route(parts.uri.path()).into_response(),
    }
}

fn verb_of(method: &Method, named: bool, watch: bool) -> Option<Verb> {
    Some(match (method.as_str(), named) {
        ("GET" | "HEAD", _) if watch => Verb::Watch,
        ("GET" | "HEAD", true) => Verb::Get,
        ("GET" | "HEAD", false) => Verb::List,
        ("POST", false) => Verb::Create,
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        _ => return None,
    })
}

/// A request body as JSON: JSON and YAML bodies are understood everywhere; protobuf only for
/// the kinds kubectl's `create <kind>` generators and typed clients send; anything else is 415.
fn json_body(
    mut headers: HeaderMap,
    body: Bytes,
    verb: Verb,
    rt: &ResourceType,
    token_request: bool,
) -> ApiResult<(HeaderMap, Bytes)> {
    let proto = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .filter(|ct| ct.contains("protobuf") || ct.contains("cbor"))
        .map(str::to_string);
    let Some(ct) = proto.filter(|_| !body.is_empty()) else {
        return Ok((headers, body));
    };
    if ct.contains("cbor") || verb != Verb::Create {
        return Err(ApiError::unsupported_media_type(&ct));
    }
    let json = if token_request {
        protobuf::decode_auth(&body, "authentication.k8s.io", "TokenRequest", &ct)?
    } else if rt.review {
        protobuf::decode_auth(&body, &rt.group, &rt.kind, &ct)?
    } else {
        protobuf::decode(&body, rt, &ct)?
    };
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    Ok((
        headers,
        Bytes::from(serde_json::to_vec(&json).unwrap_or_default()),
    ))
}

async fn resource(
    app: Arc<App>,
    method: Method,
    raw_query: Option<&str>,
    headers: HeaderMap,
    body: Body,
    path: ResourcePath,
    user: User,
) -> ApiResult<Response> {
    let describe = || {
        format!(
            "{}/{}",
            if path.group.is_empty() {
                "api".to_string()
            } else {
                format!("apis/{}", path.group)
            },
            path.plural
        )
    };
    let rt = app
        .registry
        .lookup(&path.group, &path.version, &path.plural)
        .ok_or_else(|| ApiError::no_route(&describe()))?;
    if !rt.namespaced && path.namespace.is_some() {
        return Err(ApiError::no_route(&describe()));
    }
    let mut query = Query::parse(raw_query)?;
    if !app.config.feature_gates.sharded_list_and_watch {
        // A server without the gate ignores the unknown parameter and lists everything, so a
        // client sees no `shardInfo` and knows to filter itself (KEP-5866, version skew).
        query.shard_selector = None;
    }
    // A token request and the reviews are creates of objects that are never stored.
    let token_request =
        super::discovery::is_service_accounts(&rt) && path.subresource.as_deref() == Some("token");
    let verb = if token_request && method == Method::POST {
        Some(Verb::Create)
    } else if rt.review && !(method == Method::POST && path.name.is_none()) {
        None
    } else {
        verb_of(&method, path.name.is_some(), query.watch)
    }
    .ok_or_else(|| ApiError::method_not_allowed(method.as_str(), &describe()))?;
    let namespaced_write = matches!(
        verb,
        Verb::Create | Verb::Update | Verb::Patch | Verb::Delete
    );
    if rt.namespaced
        && path.namespace.is_none()
        && (namespaced_write || verb == Verb::Get || verb == Verb::DeleteCollection)
    {
        return Err(ApiError::no_route(&describe()));
    }
    match path.subresource.as_deref() {
        None => {}
        Some("status")
            if rt.status_subresource && matches!(verb, Verb::Get | Verb::Update | Verb::Patch) => {}
        Some("finalize") if super::meta::is_namespaces(&rt) && verb == Verb::Update => {}
        Some("token") if token_request => {}
        Some(other) => {
            return Err(ApiError::no_route(&format!("{}/{other}", describe())));
        }
    }
    app.counters.record(verb, &rt.group, &rt.plural);
    let (latency, failure) = app.faults.check(verb, &rt.plural);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if let Some(err) = failure {
        return Err(err);
    }
    let body = match verb {
        Verb::Get | Verb::List | Verb::Watch => Bytes::new(),
        _ => read_body(body, app.config.max_body).await?,
    };
    let (headers, body) = json_body(headers, body, verb, &rt, token_request)?;
    let ctx = Ctx {
        app,
        rt,
        path,
        query,
        headers,
        user,
        warnings: std::sync::Mutex::default(),
    };
    let result = match verb {
        Verb::Create if token_request => auth::reviews::token_request(&ctx, &body),
        Verb::Create if ctx.rt.review => auth::reviews::review(&ctx, &body),
        Verb::Get => read::get(&ctx).await,
        Verb::List => read::list(&ctx).await,
        Verb::Watch => watch::watch(&ctx),
        Verb::Create => write::create(&ctx, &body).await,
        Verb::Update => write::update(&ctx, &body).await,
        Verb::Patch => patch::patch(&ctx, &body).await,
        Verb::Delete => write::delete(&ctx, &body).await,
        Verb::DeleteCollection => write::delete_collection(&ctx, &body).await,
    };
    finish(&ctx, verb, result).await
}

/// The answer of a resource request: corrupted when a fault says so, with the warnings
/// admission gave (on a refusal too, as kube-apiserver's recorder adds them).
async fn finish(ctx: &Ctx, verb: Verb, result: ApiResult<Response>) -> ApiResult<Response> {
    let warnings = std::mem::take(
        &mut *ctx
            .warnings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let mut response = match result {
        Ok(response) => match ctx.app.faults.corruption(verb, &ctx.rt.plural) {
            Some(corruption) => super::faults::corrupt_response(corruption, response).await,
            None => response,
        },
        Err(e) if !warnings.is_empty() => e.into_response(),
        Err(e) => return Err(e),
    };
    for warning in warnings {
        if let Ok(value) = header::HeaderValue::from_str(&warning_header(&warning)) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    Ok(response)
}

/// A `Warning` header as kube-apiserver writes one: code 299, no agent, the text quoted as Go's
/// `strconv.Quote` does (control characters escaped; other characters not printable in a
/// header become `?`).
fn warning_header(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            c if c.is_ascii_graphic() || c == ' ' => quoted.push(c),
            _ => quoted.push('?'),
        }
    }
    quoted.push('"');
    format!("299 - {quoted}")
}
