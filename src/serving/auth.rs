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
use std::num::NonZeroUsize;
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
use lru::LruCache;
use tokio::time::Instant;

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
/// The most tokens whose user is kept: least recently used first out. Each is a few hundred
/// bytes (a user, its groups); a manager is scraped by a handful of accounts.
pub const TOKEN_CACHE_SIZE: usize = 4096;
/// The most tokens kept as authenticating no one, apart from the users: a flood of unique
/// garbage tokens evicts only these, never a scraper's answer.
pub const NEGATIVE_TOKEN_CACHE_SIZE: usize = 1024;
/// The most access answers kept (user, path, verb), least recently used first out.
pub const ACCESS_CACHE_SIZE: usize = 4096;
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

/// What a `TokenReview` said of a token.
#[derive(Clone, Debug, PartialEq, Eq)]
enum TokenAnswer {
    /// It authenticates this user.
    User(User),
    /// It authenticates no one.
    Unauthenticated,
}

impl TokenAnswer {
    fn user(self) -> Option<User> {
        match self {
            TokenAnswer::User(user) => Some(user),
            TokenAnswer::Unauthenticated => None,
        }
    }
}

/// The key of a cached access answer: everything the `SubjectAccessReview` asks.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct AccessKey {
    user: User,
    path: String,
    verb: String,
}

/// An answer and when it stops being reused.
#[derive(Clone, Debug)]
struct Cached<T> {
    value: T,
    expires: Instant,
}

/// The cached answers of both reviews, read and written with the instant passed in (the
/// clock is the caller's: tokio's, paused in tests). Each cache is bounded and evicts the
/// least recently used answer in O(1); tokens that authenticate no one have a cache of their
/// own, so garbage cannot push out a user.
#[derive(Debug)]
struct Answers {
    users: LruCache<[u8; 32], Cached<User>>,
    unauthenticated: LruCache<[u8; 32], Instant>,
    access: LruCache<AccessKey, Cached<(bool, String)>>,
}

impl Default for Answers {
    fn default() -> Self {
        let size = |n: usize| NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN);
        Self {
            users: LruCache::new(size(TOKEN_CACHE_SIZE)),
            unauthenticated: LruCache::new(size(NEGATIVE_TOKEN_CACHE_SIZE)),
            access: LruCache::new(size(ACCESS_CACHE_SIZE)),
        }
    }
}

/// A fresh answer of `cache` for `key`; an expired one is dropped.
fn fresh<K: std::hash::Hash + Eq, T: Clone>(
    cache: &mut LruCache<K, Cached<T>>,
    key: &K,
    now: Instant,
) -> Option<T> {
    match cache.get(key) {
        Some(c) if now < c.expires => Some(c.value.clone()),
        Some(_) => {
            cache.pop(key);
            None
        }
        None => None,
    }
}

impl Answers {
    fn token(&mut self, key: &[u8; 32], now: Instant) -> Option<TokenAnswer> {
        if let Some(user) = fresh(&mut self.users, key, now) {
            return Some(TokenAnswer::User(user));
        }
        match self.unauthenticated.get(key) {
            Some(expires) if now < *expires => Some(TokenAnswer::Unauthenticated),
            Some(_) => {
                self.unauthenticated.pop(key);
                None
            }
            None => None,
        }
    }

    fn remember_token(&mut self, key: [u8; 32], answer: TokenAnswer, now: Instant) {
        let expires = now + TOKEN_CACHE_TTL;
        match answer {
            TokenAnswer::User(value) => {
                self.unauthenticated.pop(&key);
                self.users.put(key, Cached { value, expires });
            }
            TokenAnswer::Unauthenticated => {
                self.users.pop(&key);
                self.unauthenticated.put(key, expires);
            }
        }
    }

    fn access(&mut self, key: &AccessKey, now: Instant) -> Option<(bool, String)> {
        fresh(&mut self.access, key, now)
    }

    fn remember_access(&mut self, key: AccessKey, allowed: bool, reason: String, now: Instant) {
        let ttl = if allowed {
            ALLOW_CACHE_TTL
        } else {
            DENY_CACHE_TTL
        };
        self.access.put(
            key,
            Cached {
                value: (allowed, reason),
                expires: now + ttl,
            },
        );
    }
}

/// The SHA-256 of a token: its cache key (the token itself is kept nowhere).
fn token_key(token: &str) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut key = [0u8; 32];
    key.copy_from_slice(digest.as_ref());
    key
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

    fn user(name: &str) -> User {
        User {
            name: name.to_owned(),
            uid: String::new(),
            groups: vec![AUTHENTICATED.to_owned()],
            extra: BTreeMap::new(),
        }
    }

    #[test]
    fn a_tokens_answer_is_reused_for_a_minute_whether_authenticated_or_not() {
        let mut answers = Answers::default();
        let start = Instant::now();
        let (good, bad) = (token_key("good"), token_key("bad"));
        assert_ne!(good, bad);
        answers.remember_token(good, TokenAnswer::User(user("u")), start);
        answers.remember_token(bad, TokenAnswer::Unauthenticated, start);
        let almost = start + TOKEN_CACHE_TTL - Duration::from_millis(1);
        assert_eq!(
            answers.token(&good, almost),
            Some(TokenAnswer::User(user("u")))
        );
        assert_eq!(
            answers.token(&bad, almost),
            Some(TokenAnswer::Unauthenticated)
        );
        let after = start + TOKEN_CACHE_TTL;
        assert_eq!(answers.token(&good, after), None);
        assert_eq!(answers.token(&bad, after), None);
        assert_eq!(answers.token(&token_key("other"), start), None);
    }

    #[test]
    fn an_allowed_access_is_reused_five_minutes_a_denied_one_thirty_seconds() {
        let mut answers = Answers::default();
        let start = Instant::now();
        let key = |name: &str, path: &str| AccessKey {
            user: user(name),
            path: path.to_owned(),
            verb: "get".to_owned(),
        };
        answers.remember_access(key("reader", "/metrics"), true, String::new(), start);
        answers.remember_access(key("nobody", "/metrics"), false, "no".to_owned(), start);
        let at = |d: Duration| start + d;
        assert_eq!(
            answers.access(&key("nobody", "/metrics"), at(Duration::from_secs(29))),
            Some((false, "no".to_owned()))
        );
        assert_eq!(
            answers.access(&key("nobody", "/metrics"), at(DENY_CACHE_TTL)),
            None
        );
        assert_eq!(
            answers.access(&key("reader", "/metrics"), at(Duration::from_secs(299))),
            Some((true, String::new()))
        );
        assert_eq!(
            answers.access(&key("reader", "/metrics"), at(ALLOW_CACHE_TTL)),
            None
        );
        assert_eq!(
            answers.access(&key("reader", "/debug/status"), start),
            None,
            "another path is another question"
        );
    }

    /// Issue 45, item 10: the cache dropped only expired entries past 1,024, on every insert,
    /// so a flood of unique garbage tokens cost O(n) per request and unbounded memory.
    #[test]
    fn a_flood_of_unique_garbage_tokens_keeps_the_cache_bounded_and_the_users_answers() {
        let mut answers = Answers::default();
        let start = Instant::now();
        let scraper = token_key("prometheus");
        answers.remember_token(scraper, TokenAnswer::User(user("prometheus")), start);
        let flood = 100_000;
        for n in 0..flood {
            let key = token_key(&format!("garbage-{n}"));
            assert_eq!(answers.token(&key, start), None);
            answers.remember_token(key, TokenAnswer::Unauthenticated, start);
        }
        assert_eq!(answers.unauthenticated.len(), NEGATIVE_TOKEN_CACHE_SIZE);
        assert_eq!(answers.users.len(), 1);
        assert_eq!(
            answers.token(&scraper, start),
            Some(TokenAnswer::User(user("prometheus"))),
            "garbage does not push out a user"
        );
        let last = token_key(&format!("garbage-{}", flood - 1));
        assert_eq!(
            answers.token(&last, start),
            Some(TokenAnswer::Unauthenticated)
        );
        // Users are bounded too, the least recently used out first.
        for n in 0..TOKEN_CACHE_SIZE {
            let key = token_key(&format!("user-{n}"));
            answers.remember_token(key, TokenAnswer::User(user("u")), start);
        }
        assert_eq!(answers.users.len(), TOKEN_CACHE_SIZE);
        assert_eq!(answers.token(&scraper, start), None);
        // An expired answer is dropped when read.
        let key = token_key("user-0");
        assert_eq!(answers.token(&key, start + TOKEN_CACHE_TTL), None);
        assert!(answers.users.peek(&key).is_none());
    }

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
