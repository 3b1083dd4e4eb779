//! Every request to a secure endpoint authenticated and authorized by the API server, as
//! controller-runtime's `pkg/metrics/filters` `WithAuthenticationAndAuthorization` does it
//! (kube-rbac-proxy's job, built in):
//!
//! 1. the bearer token (`Authorization: Bearer <token>`) goes to a `TokenReview`
//!    (`authentication.k8s.io/v1`); no token, or one the API server does not authenticate, is
//!    `401 Unauthorized`;
//! 2. the user it names (with its uid, groups and extra) goes to a `SubjectAccessReview`
//!    (`authorization.k8s.io/v1`) for the request's non-resource URL (`/metrics`,
//!    `/debug/status`) and its verb (the lowercased HTTP method, as kube-apiserver names the
//!    verbs of non-resource requests: `get`); a denial is `403 Forbidden`;
//! 3. a review that cannot be made (the API server unreachable, or refusing the review
//!    because the manager's account lacks the grant) is `500`, and logged at warn naming
//!    which review and why.
//!
//! Answers are cached as controller-runtime's filter caches them (its
//! `DelegatingAuthenticatorConfig` and `DelegatingAuthorizerConfig`): a token's answer,
//! authenticated or not, for [`TOKEN_CACHE_TTL`]; an allowed access for [`ALLOW_CACHE_TTL`], a
//! denied one for [`DENY_CACHE_TTL`]; failures are not cached. Tokens are cached by their
//! SHA-256 and never logged. Each cache is bounded, least recently used out first
//! ([`TOKEN_CACHE_SIZE`], [`ACCESS_CACHE_SIZE`]), and tokens that authenticate no one have
//! their own smaller one ([`NEGATIVE_TOKEN_CACHE_SIZE`]), so a flood of unique garbage tokens
//! costs a fixed amount of memory and pushes out no scraper's answer; at most
//! [`MAX_REVIEWS_IN_FLIGHT`] reviews are asked at once.
//!
//! ## RBAC
//!
//! The manager's account: `create` on `tokenreviews` (`authentication.k8s.io`) and
//! `subjectaccessreviews` (`authorization.k8s.io`), cluster-wide (`informant rbac
//! --metrics-secure`, the chart's `ClusterRole`). A client: `get` on the non-resource URL, for
//! Prometheus `/metrics` (the chart's `metrics-reader` `ClusterRole`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use tokio::time::Instant;

mod answers;

pub use answers::{ACCESS_CACHE_SIZE, NEGATIVE_TOKEN_CACHE_SIZE, TOKEN_CACHE_SIZE};
use answers::{AccessKey, Answers, TokenAnswer, token_key};

/// How long a token's answer (authenticated or not) is reused: controller-runtime's
/// `CacheTTL` (1 minute).
pub const TOKEN_CACHE_TTL: Duration = Duration::from_mins(1);
/// How long an allowed access is reused: controller-runtime's `AllowCacheTTL` (5 minutes).
pub const ALLOW_CACHE_TTL: Duration = Duration::from_mins(5);
/// How long a denied access is reused: controller-runtime's `DenyCacheTTL` (30 seconds).
pub const DENY_CACHE_TTL: Duration = Duration::from_secs(30);
/// How long one review may take: controller-runtime's `TokenAccessReviewTimeout` (10 s).
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// The retries of a review the API server did not answer: the first after 500 ms, each next
/// 1.5 times longer, 5 attempts in all (controller-runtime's `WebhookRetryBackoff`, without
/// its jitter).
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_ATTEMPTS: u32 = 5;
/// The most reviews (`TokenReview`s and `SubjectAccessReview`s, retries included) in flight at
/// once: a request needing another waits up to [`REVIEW_TIMEOUT`], then fails (500) without
/// asking the API server.
pub const MAX_REVIEWS_IN_FLIGHT: usize = 8;

/// The group every authenticated user has; added when a review leaves it out, as
/// kube-apiserver's `AuthenticatedGroupAdder` does.
const AUTHENTICATED: &str = "system:authenticated";

/// Who a token authenticates, as the `TokenReview` said.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct User {
    /// The user name (`system:serviceaccount:monitoring:prometheus`).
    pub name: String,
    /// The uid, "" when none.
    pub uid: String,
    /// The groups, `system:authenticated` among them.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    fn from_info(info: UserInfo) -> Self {
        let mut groups = info.groups.unwrap_or_default();
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_owned());
        }
        User {
            name: info.username.unwrap_or_default(),
            uid: info.uid.unwrap_or_default(),
            groups,
            extra: info.extra.unwrap_or_default(),
        }
    }
}

/// Which review could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Review {
    /// The `TokenReview`.
    Token,
    /// The `SubjectAccessReview`.
    Access,
}

impl Review {
    /// The permission the manager's account needs for it, as `informant rbac --check` names
    /// permissions.
    #[must_use]
    pub fn permission(self) -> &'static str {
        match self {
            Review::Token => "create tokenreviews.authentication.k8s.io cluster-wide",
            Review::Access => "create subjectaccessreviews.authorization.k8s.io cluster-wide",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Review::Token => "TokenReview",
            Review::Access => "SubjectAccessReview",
        }
    }
}

/// What happens to a request: it is served, or refused with a 401, 403 or 500.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Authenticated and authorized: served.
    Allowed(User),
    /// No bearer token: 401.
    NoToken,
    /// The API server does not authenticate the token (its error is logged at debug): 401.
    Unauthenticated,
    /// The user may not: 403, with the authorizer's reason.
    Denied {
        /// Who asked.
        user: User,
        /// Why not, as the `SubjectAccessReview` said ("" when it said nothing).
        reason: String,
    },
    /// A review could not be made: 500.
    Failed {
        /// Which one.
        review: Review,
        /// Whether the API server answered and refused it (403: the manager's account lacks
        /// the grant), rather than not answering.
        refused: bool,
        /// The error chain.
        error: String,
    },
}

/// The bearer token of a request, if it carries a non-empty one.
#[must_use]
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Authenticates and authorizes requests with the API server's reviews, through a client
/// (the manager's own); cheap to clone, the cache shared.
///
/// ```no_run
/// # fn demo(client: kube::Client, router: axum::Router) -> axum::Router {
/// use informant::serving::Authenticator;
///
/// // Every route of the router (and its 404s) now needs a token allowed `get` on the path.
/// Authenticator::new(client).protect(router)
/// # }
/// ```
#[derive(Clone)]
pub struct Authenticator {
    client: kube::Client,
    answers: Arc<Mutex<Answers>>,
    reviews: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").finish_non_exhaustive()
    }
}

/// Why one review attempt failed: the server's refusal (its HTTP code) or no answer.
fn describe(error: &kube::Error) -> (bool, String) {
    let refused = matches!(error, kube::Error::Api(status) if status.code == 403);
    (refused, crate::telemetry::error_chain(error))
}

/// Whether a failed review is worth another attempt: no answer, or one of the API server's
/// answers that say "later" (429, 5xx).
fn retryable(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        _ => true,
    }
}

impl Authenticator {
    /// An authenticator asking through `client`, with an empty cache.
    #[must_use]
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            answers: Arc::new(Mutex::new(Answers::default())),
            reviews: Arc::new(tokio::sync::Semaphore::new(MAX_REVIEWS_IN_FLIGHT)),
        }
    }

    /// `router` with every request (unknown paths too) passing through [`Authenticator::decide`]
    /// first.
    pub fn protect(self, router: axum::Router) -> axum::Router {
        router.layer(axum::middleware::from_fn_with_state(self, guard))
    }

    fn answers(&self) -> std::sync::MutexGuard<'_, Answers> {
        self.answers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What to do with a request to `path` with `method`, carrying `token`.
    pub async fn decide(&self, token: Option<&str>, method: &str, path: &str) -> Decision {
        let Some(token) = token else {
            return Decision::NoToken;
        };
        let user = match self.authenticate(token).await {
            Ok(Some(user)) => user,
            Ok(None) => return Decision::Unauthenticated,
            Err(decision) => return decision,
        };
        let key = AccessKey {
            user,
            path: path.to_owned(),
            verb: method.to_ascii_lowercase(),
        };
        let cached = self.answers().access(&key, Instant::now());
        let (allowed, reason) = match cached {
            Some(answer) => answer,
            None => match self.authorize(&key).await {
                Ok((allowed, reason)) => {
                    self.answers().remember_access(
                        key.clone(),
                        allowed,
                        reason.clone(),
                        Instant::now(),
                    );
                    (allowed, reason)
                }
                Err(decision) => return decision,
            },
        };
        if allowed {
            Decision::Allowed(key.user)
        } else {
            Decision::Denied {
                user: key.user,
                reason,
            }
        }
    }

    /// The user of `token` (`None`: not authenticated), from the cache or a `TokenReview`.
    async fn authenticate(&self, token: &str) -> Result<Option<User>, Decision> {
        let key = token_key(token);
        if let Some(answer) = self.answers().token(&key, Instant::now()) {
            return Ok(answer.user());
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let answer = self.create(Review::Token, &review).await?;
        let status = answer.status.unwrap_or_default();
        let answer = if let Some(info) = status.user.filter(|_| status.authenticated == Some(true))
        {
            TokenAnswer::User(User::from_info(info))
        } else {
            if let Some(error) = status.error.filter(|e| !e.is_empty()) {
                tracing::debug!(error = %error, "the API server did not authenticate a token");
            }
            TokenAnswer::Unauthenticated
        };
        self.answers()
            .remember_token(key, answer.clone(), Instant::now());
        Ok(answer.user())
    }

    /// Whether `key`'s user may do its verb on its path, and why, by a `SubjectAccessReview`.
    async fn authorize(&self, key: &AccessKey) -> Result<(bool, String), Decision> {
        let user = &key.user;
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(key.path.clone()),
                    verb: Some(key.verb.clone()),
                }),
                resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let answer = self.create(Review::Access, &review).await?;
        let status = answer.status.unwrap_or_default();
        Ok((status.allowed, status.reason.unwrap_or_default()))
    }

    /// Creates `object` (a review), each attempt within [`REVIEW_TIMEOUT`], retrying what is
    /// worth retrying; the [`Decision::Failed`] of the last failure.
    async fn create<K>(&self, review: Review, object: &K) -> Result<K, Decision>
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        // At most MAX_REVIEWS_IN_FLIGHT reviews (retries included) at once, whoever sends
        // tokens; the semaphore is never closed.
        let Ok(Ok(_permit)) =
            tokio::time::timeout(REVIEW_TIMEOUT, Arc::clone(&self.reviews).acquire_owned()).await
        else {
            return Err(Decision::Failed {
                review,
                refused: false,
                error: format!(
                    "{MAX_REVIEWS_IN_FLIGHT} reviews already in flight for over {}s",
                    REVIEW_TIMEOUT.as_secs()
                ),
            });
        };
        let api: Api<K> = Api::all(self.client.clone());
        let mut delay = RETRY_FIRST;
        let mut attempt = 1;
        loop {
            let outcome =
                tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), object))
                    .await;
            let (retry, refused, error) = match outcome {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(error)) => {
                    let (refused, text) = describe(&error);
                    (retryable(&error), refused, text)
                }
                Err(_) => (
                    true,
                    false,
                    format!("no answer within {}s", REVIEW_TIMEOUT.as_secs()),
                ),
            };
            if !retry || attempt >= RETRY_ATTEMPTS {
                return Err(Decision::Failed {
                    review,
                    refused,
                    error,
                });
            }
            tokio::time::sleep(delay).await;
            delay = delay.mul_f64(1.5);
            attempt += 1;
        }
    }
}

/// A plain-text answer.
fn text(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// A 401 with the `WWW-Authenticate` challenge of RFC 6750.
fn unauthorized(challenge: &'static str, body: &str) -> Response {
    let mut response = text(StatusCode::UNAUTHORIZED, format!("Unauthorized: {body}\n"));
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    response
}

/// The middleware of [`Authenticator::protect`].
async fn guard(State(auth): State<Authenticator>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    let method = request.method().as_str().to_owned();
    let decision = auth.decide(bearer(request.headers()), &method, &path).await;
    match decision {
        Decision::Allowed(_) => next.run(request).await,
        Decision::NoToken => {
            tracing::debug!(http.path = %path, "refused a request without a bearer token");
            unauthorized(
                "Bearer realm=\"informant\"",
                "send a token the API server authenticates: Authorization: Bearer <token>",
            )
        }
        Decision::Unauthenticated => {
            tracing::debug!(http.path = %path, "refused a request whose token the API server did not authenticate");
            unauthorized(
                "Bearer realm=\"informant\", error=\"invalid_token\"",
                "the API server did not authenticate the bearer token",
            )
        }
        Decision::Denied { user, reason } => {
            tracing::debug!(user = %user.name, http.path = %path, reason = %reason, "refused a request the API server did not authorize");
            text(
                StatusCode::FORBIDDEN,
                format!(
                    "Authorization denied for user {}: get {path} is not granted\n",
                    user.name
                ),
            )
        }
        Decision::Failed {
            review,
            refused,
            error,
        } => {
            if refused {
                tracing::warn!(
                    review = review.kind(),
                    missing = review.permission(),
                    error = %error,
                    "the API server refused the manager's review of a request to a secure endpoint: \
                     grant the manager's account the missing permission"
                );
            } else {
                tracing::warn!(
                    review = review.kind(),
                    error = %error,
                    "the API server did not answer the manager's review of a request to a secure endpoint"
                );
            }
            let what = match review {
                Review::Token => "Authentication failed",
                Review::Access => "Authorization failed",
            };
            let why = if refused {
                "the API server refused the manager's review"
            } else {
                "the API server did not answer the manager's review"
            };
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("{what}: {why} ({})\n", review.kind()),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An API server on loopback answering every `TokenReview` "not authenticated", once
    /// `release` says so; the reviews it holds now, and the most it ever held at once.
    async fn holding_api_server(
        release: tokio::sync::watch::Receiver<bool>,
    ) -> (
        std::net::SocketAddr,
        Arc<std::sync::atomic::AtomicUsize>,
        Arc<std::sync::atomic::AtomicUsize>,
    ) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (held, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (h, m) = (Arc::clone(&held), Arc::clone(&most));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (held, most, mut release) = (Arc::clone(&h), Arc::clone(&m), release.clone());
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buffer = [0u8; 4096];
                    loop {
                        // One request: its headers, then Content-Length bytes of body.
                        let head_end = loop {
                            if let Some(i) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                                break i + 4;
                            }
                            match stream.read(&mut buffer).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => seen.extend_from_slice(&buffer[..n]),
                            }
                        };
                        let request_head =
                            String::from_utf8_lossy(&seen[..head_end]).to_ascii_lowercase();
                        let length: usize = request_head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        while seen.len() < head_end + length {
                            match stream.read(&mut buffer).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => seen.extend_from_slice(&buffer[..n]),
                            }
                        }
                        seen.drain(..head_end + length);
                        let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        let _ = release.wait_for(|r| *r).await;
                        held.fetch_sub(1, Ordering::SeqCst);
                        let body = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","metadata":{},"spec":{},"status":{"authenticated":false}}"#;
                        let answer = format!(
                            "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if stream.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, held, most)
    }

    /// Issue 45, item 10: each unknown token started a `TokenReview` (with retries) with no
    /// cap on how many ran at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reviews_in_flight_are_bounded_however_many_unknown_tokens_arrive() {
        use std::sync::atomic::Ordering;
        let (release, released) = tokio::sync::watch::channel(false);
        let (addr, held, most) = holding_api_server(released).await;
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        let auth = Authenticator::new(kube::Client::try_from(config).unwrap());
        let callers = 40;
        let calls: Vec<_> = (0..callers)
            .map(|n| {
                let auth = auth.clone();
                tokio::spawn(async move {
                    auth.decide(Some(&format!("garbage-{n}")), "GET", "/metrics")
                        .await
                })
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(20);
        while held.load(Ordering::SeqCst) < MAX_REVIEWS_IN_FLIGHT {
            assert!(
                Instant::now() < deadline,
                "the reviews never reached the server"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        release.send_replace(true);
        for call in calls {
            assert_eq!(call.await.unwrap(), Decision::Unauthenticated);
        }
        let most = most.load(Ordering::SeqCst);
        assert!(
            most <= MAX_REVIEWS_IN_FLIGHT,
            "{most} reviews in flight at once, over {MAX_REVIEWS_IN_FLIGHT}"
        );
    }

    #[test]
    fn the_review_user_gets_system_authenticated_and_the_permissions_are_named() {
        let info = UserInfo {
            username: Some("system:serviceaccount:monitoring:prometheus".into()),
            uid: Some("u1".into()),
            groups: Some(vec!["system:serviceaccounts".into()]),
            extra: None,
        };
        let user = User::from_info(info);
        assert_eq!(user.groups, ["system:serviceaccounts", AUTHENTICATED]);
        assert_eq!(
            Review::Token.permission(),
            "create tokenreviews.authentication.k8s.io cluster-wide"
        );
    }

    #[test]
    fn only_a_non_empty_bearer_token_counts() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), None);
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer  t "),
        );
        assert_eq!(bearer(&headers), Some("t"));
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic YTpi"),
        );
        assert_eq!(bearer(&headers), None);
    }
}
