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
//! SHA-256 and never logged.
//!
//! ## RBAC
//!
//! The manager's account: `create` on `tokenreviews` (`authentication.k8s.io`) and
//! `subjectaccessreviews` (`authorization.k8s.io`), cluster-wide (`informant rbac
//! --metrics-secure`, the chart's `ClusterRole`). A client: `get` on the non-resource URL, for
//! Prometheus `/metrics` (the chart's `metrics-reader` `ClusterRole`).

use std::collections::{BTreeMap, HashMap};
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
/// The cache is swept of expired answers when it grows past this many.
const SWEEP_AT: usize = 1024;

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
/// clock is the caller's: tokio's, paused in tests).
#[derive(Debug, Default)]
struct Answers {
    tokens: HashMap<[u8; 32], Cached<TokenAnswer>>,
    access: HashMap<AccessKey, Cached<(bool, String)>>,
}

fn fresh<K: std::hash::Hash + Eq, T: Clone>(
    map: &HashMap<K, Cached<T>>,
    key: &K,
    now: Instant,
) -> Option<T> {
    map.get(key)
        .filter(|c| now < c.expires)
        .map(|c| c.value.clone())
}

fn remember<K: std::hash::Hash + Eq, T>(
    map: &mut HashMap<K, Cached<T>>,
    key: K,
    value: T,
    expires: Instant,
    now: Instant,
) {
    if map.len() >= SWEEP_AT {
        map.retain(|_, c| now < c.expires);
    }
    map.insert(key, Cached { value, expires });
}

impl Answers {
    fn token(&self, key: &[u8; 32], now: Instant) -> Option<TokenAnswer> {
        fresh(&self.tokens, key, now)
    }

    fn remember_token(&mut self, key: [u8; 32], answer: TokenAnswer, now: Instant) {
        remember(&mut self.tokens, key, answer, now + TOKEN_CACHE_TTL, now);
    }

    fn access(&self, key: &AccessKey, now: Instant) -> Option<(bool, String)> {
        fresh(&self.access, key, now)
    }

    fn remember_access(&mut self, key: AccessKey, allowed: bool, reason: String, now: Instant) {
        let ttl = if allowed {
            ALLOW_CACHE_TTL
        } else {
            DENY_CACHE_TTL
        };
        remember(&mut self.access, key, (allowed, reason), now + ttl, now);
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

    #[test]
    fn the_cache_sweeps_expired_answers_when_it_grows() {
        let mut answers = Answers::default();
        let start = Instant::now();
        for n in 0..SWEEP_AT {
            answers.remember_token(
                token_key(&n.to_string()),
                TokenAnswer::Unauthenticated,
                start,
            );
        }
        let later = start + TOKEN_CACHE_TTL;
        answers.remember_token(token_key("new"), TokenAnswer::Unauthenticated, later);
        assert_eq!(answers.tokens.len(), 1);
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
