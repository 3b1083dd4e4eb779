//! Who a request is: the bearer token it carries (the administrator's, or one the server issued
//! to a `ServiceAccount` through `TokenRequest`), else anonymous; then whom it impersonates
//! (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`, `Impersonate-Extra-*`, as
//! `k8s.io/apiserver/pkg/endpoints/filters/impersonation.go` reads them).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use axum::http::{HeaderMap, header};
use subtle::ConstantTimeEq;

use super::attributes::RequestInfo;
use super::user::{
    ANONYMOUS, AUTHENTICATED, UNAUTHENTICATED, User, service_account_groups, split_service_account,
};
use crate::apiserver::registry::ResourceKey;
use crate::apiserver::status::ApiError;
use crate::apiserver::store::{ObjKey, Store};

/// A token issued to a `ServiceAccount`.
#[derive(Debug, Clone)]
struct Issued {
    namespace: String,
    name: String,
    /// The `ServiceAccount`'s uid when the token was issued: a token outlives neither its
    /// account nor a recreated account of the same name.
    uid: String,
    expires: jiff::Timestamp,
    /// Whom the token is for (`TokenRequest`'s `spec.audiences`), checked by `TokenReview`.
    audiences: Vec<String>,
}

/// The SHA-256 digest of a token: what the issued tokens are kept and looked up by.
type Digest = [u8; 32];

fn digest(token: &str) -> Digest {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    d.as_ref().try_into().unwrap_or([0; 32])
}

/// The tokens the server accepts.
///
/// Tokens are compared in constant time, so how long a refusal takes tells nothing about how
/// much of a guess was right: the administrator's with `subtle`'s `ConstantTimeEq`; the issued
/// ones are kept by their SHA-256 digest, never in clear, so looking a token up hashes it first
/// and then compares digests. A lookup's timing can at most tell how many leading bytes of the
/// guess's digest match an issued token's digest, which says nothing about the token itself
/// (finding a token from a digest prefix is a preimage search), so a `HashMap` lookup is
/// acceptable where a linear scan of constant-time comparisons would cost a pass over every
/// token on every request.
#[derive(Debug)]
pub struct Tokens {
    admin: String,
    issued: Mutex<HashMap<Digest, Issued>>,
}

/// 32 random bytes as hex: a token no one guesses.
fn random_token() -> String {
    let a: u128 = rand::random();
    let b: u128 = rand::random();
    format!("{a:032x}{b:032x}")
}

impl Default for Tokens {
    fn default() -> Self {
        Self::new()
    }
}

impl Tokens {
    /// A fresh administrator token, and no `ServiceAccount` token yet.
    #[must_use]
    pub fn new() -> Self {
        Self {
            admin: random_token(),
            issued: Mutex::new(HashMap::new()),
        }
    }

    /// The administrator's token (in the server's kubeconfig).
    #[must_use]
    pub fn admin(&self) -> &str {
        &self.admin
    }

    /// A new token for `ServiceAccount` `namespace/name` (uid `uid`), valid until `expires`,
    /// for `audiences` (checked by `TokenReview`). Tokens expired at `now` are forgotten first,
    /// so the issued tokens kept are only the ones still valid (plus those that expired since
    /// the last issue, until the next).
    pub fn issue(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        expires: jiff::Timestamp,
        audiences: Vec<String>,
        now: jiff::Timestamp,
    ) -> String {
        let token = random_token();
        let mut issued = self.issued.lock().unwrap_or_else(PoisonError::into_inner);
        issued.retain(|_, t| now < t.expires);
        issued.insert(
            digest(&token),
            Issued {
                namespace: namespace.to_string(),
                name: name.to_string(),
                uid: uid.to_string(),
                expires,
                audiences,
            },
        );
        token
    }

    /// How many issued tokens are kept.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.issued
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The user a token authenticates if it is valid at `now`: the administrator, or a
    /// `ServiceAccount` that still exists with the uid it had when the token was issued. An
    /// expired token is forgotten.
    #[must_use]
    pub fn user(&self, token: &str, store: &Store, now: jiff::Timestamp) -> Option<User> {
        if bool::from(token.as_bytes().ct_eq(self.admin.as_bytes())) {
            return Some(User::admin());
        }
        let key = digest(token);
        let issued = {
            let mut issued = self.issued.lock().unwrap_or_else(PoisonError::into_inner);
            let found = issued.get(&key)?;
            if now >= found.expires {
                issued.remove(&key);
                return None;
            }
            found.clone()
        };
        let account = store.get(
            &ResourceKey::new("", "serviceaccounts"),
            &ObjKey::new(&issued.namespace, &issued.name),
        )?;
        let uid = account.value["metadata"]["uid"]
            .as_str()
            .unwrap_or_default();
        (uid == issued.uid).then(|| User::service_account(&issued.namespace, &issued.name, uid))
    }
}

impl Tokens {
    /// The user a token authenticates for a request to this server: [`Tokens::user`], if the
    /// token is for the server's own audience
    /// ([`API_AUDIENCE`](super::token_review::API_AUDIENCE); a token issued for none is). A
    /// token for another audience (`kubectl create token robot --audience vault`) is for
    /// whoever checks it with a `TokenReview` of that audience, and authenticates no one here,
    /// as kube-apiserver's authenticator checks tokens against its `--api-audiences`.
    #[must_use]
    pub fn api_user(&self, token: &str, store: &Store, now: jiff::Timestamp) -> Option<User> {
        let audiences = self.audiences(token)?;
        let ours = audiences.is_empty()
            || audiences
                .iter()
                .any(|a| a == super::token_review::API_AUDIENCE);
        if ours {
            self.user(token, store, now)
        } else {
            None
        }
    }

    /// The audiences of a token the server knows (the administrator's: the server's own),
    /// valid or not; `None` for any other.
    #[must_use]
    pub fn audiences(&self, token: &str) -> Option<Vec<String>> {
        if bool::from(token.as_bytes().ct_eq(self.admin.as_bytes())) {
            return Some(vec![super::token_review::API_AUDIENCE.to_owned()]);
        }
        self.issued
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&digest(token))
            .map(|issued| issued.audiences.clone())
    }
}

/// The bearer token of a request, if it carries one (an empty one counts as none, as
/// kube-apiserver's bearer token authenticator has it).
#[must_use]
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whom a request asks to act as.
#[derive(Debug, Default)]
pub struct Impersonation {
    user: Option<String>,
    groups: Vec<String>,
    uid: Option<String>,
    extra: BTreeMap<String, Vec<String>>,
}

impl Impersonation {
    /// The `Impersonate-*` headers of a request; `None` when it has none.
    ///
    /// # Errors
    ///
    /// kube-apiserver's 500 for groups, a uid or extras without a user.
    pub fn of(headers: &HeaderMap) -> Result<Option<Self>, ApiError> {
        let mut found = Self::default();
        let mut any = false;
        for (name, value) in headers {
            let Ok(value) = value.to_str() else { continue };
            let name = name.as_str();
            if name == "impersonate-user" {
                found.user = Some(value.to_string());
            } else if name == "impersonate-group" {
                found.groups.push(value.to_string());
            } else if name == "impersonate-uid" {
                found.uid = Some(value.to_string());
            } else if let Some(key) = name.strip_prefix("impersonate-extra-") {
                let key = percent_encoding::percent_decode_str(key)
                    .decode_utf8_lossy()
                    .into_owned();
                found.extra.entry(key).or_default().push(value.to_string());
            } else {
                continue;
            }
            any = true;
        }
        if !any {
            return Ok(None);
        }
        if found.user.is_none() {
            return Err(ApiError::internal(
                "requested impersonation of groups, a uid or extra fields without impersonating a user",
            ));
        }
        Ok(Some(found))
    }

    /// What the acting user must be allowed to do (`impersonate` on `users`,
    /// `serviceaccounts`, `groups`, `uids`, `userextras/<key>`), then the impersonated user:
    /// a `ServiceAccount` without groups gets its account's groups, and everyone but
    /// `system:anonymous` gets `system:authenticated`.
    #[must_use]
    pub fn checks_and_user(&self) -> (Vec<RequestInfo>, User) {
        let name = self.user.clone().unwrap_or_default();
        let mut checks = Vec::new();
        let mut groups = self.groups.clone();
        if let Some((namespace, account)) = split_service_account(&name) {
            checks.push(RequestInfo::resource(
                "impersonate",
                "",
                "serviceaccounts",
                "",
                namespace,
                account,
            ));
            if groups.is_empty() {
                groups = service_account_groups(namespace);
            }
        } else {
            checks.push(RequestInfo::resource(
                "impersonate",
                "",
                "users",
                "",
                "",
                &name,
            ));
        }
        for group in &self.groups {
            checks.push(RequestInfo::resource(
                "impersonate",
                "",
                "groups",
                "",
                "",
                group,
            ));
        }
        if let Some(uid) = &self.uid {
            checks.push(RequestInfo::resource(
                "impersonate",
                "authentication.k8s.io",
                "uids",
                "",
                "",
                uid,
            ));
        }
        for (key, values) in &self.extra {
            for value in values {
                checks.push(RequestInfo::resource(
                    "impersonate",
                    "authentication.k8s.io",
                    "userextras",
                    key,
                    "",
                    value,
                ));
            }
        }
        let implied = if name == ANONYMOUS {
            UNAUTHENTICATED
        } else {
            AUTHENTICATED
        };
        if !groups.iter().any(|g| g == implied) {
            groups.push(implied.to_string());
        }
        let user = User {
            name,
            uid: self.uid.clone().unwrap_or_default(),
            groups,
            extra: self.extra.clone(),
        };
        (checks, user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn at(second: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + second).unwrap()
    }

    #[test]
    fn expired_tokens_are_pruned_when_a_token_is_issued() {
        let tokens = Tokens::new();
        tokens.issue("ops", "a", "u1", at(10), vec![], at(0));
        tokens.issue("ops", "b", "u2", at(100), vec![], at(0));
        assert_eq!(tokens.kept(), 2);
        tokens.issue("ops", "c", "u3", at(200), vec![], at(10));
        assert_eq!(tokens.kept(), 2, "the token that expired at 10 is gone");
        tokens.issue("ops", "d", "u4", at(300), vec![], at(250));
        assert_eq!(tokens.kept(), 1);
    }

    #[test]
    fn an_expired_token_names_no_one_and_is_forgotten() {
        let store = Store::new(crate::apiserver::Limits::default());
        let tokens = Tokens::new();
        let token = tokens.issue("ops", "a", "u1", at(10), vec![], at(0));
        assert!(tokens.user(&token, &store, at(10)).is_none());
        assert_eq!(tokens.kept(), 0);
        assert!(
            tokens.user(&token, &store, at(5)).is_none(),
            "forgotten for good"
        );
    }

    #[test]
    fn the_administrator_token_matches_only_itself() {
        let store = Store::new(crate::apiserver::Limits::default());
        let tokens = Tokens::new();
        let admin = tokens.admin().to_string();
        assert_eq!(tokens.user(&admin, &store, at(0)), Some(User::admin()));
        let mut wrong = admin.clone();
        wrong.pop();
        assert_eq!(tokens.user(&wrong, &store, at(0)), None);
        assert_eq!(tokens.user(&format!("{admin}0"), &store, at(0)), None);
        assert_eq!(tokens.user("", &store, at(0)), None);
    }

    #[test]
    fn only_a_non_empty_bearer_token_counts() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), None);
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer abc"),
        );
        assert_eq!(bearer(&headers), Some("abc"));
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer  abc "),
        );
        assert_eq!(bearer(&headers), Some("abc"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer "));
        assert_eq!(bearer(&headers), None);
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic YTpi"),
        );
        assert_eq!(bearer(&headers), None);
    }

    #[test]
    fn impersonating_a_service_account_gives_its_groups_and_checks_the_account() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "impersonate-user",
            HeaderValue::from_static("system:serviceaccount:ops:inf"),
        );
        let (checks, user) = Impersonation::of(&headers)
            .unwrap()
            .unwrap()
            .checks_and_user();
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ops",
                "system:authenticated"
            ]
        );
        assert_eq!(checks.len(), 1);
        assert_eq!(
            (
                checks[0].resource.as_str(),
                checks[0].namespace.as_str(),
                checks[0].name.as_str()
            ),
            ("serviceaccounts", "ops", "inf")
        );
    }

    #[test]
    fn impersonating_a_user_with_groups_checks_each_and_adds_authenticated() {
        let mut headers = HeaderMap::new();
        headers.insert("impersonate-user", HeaderValue::from_static("jane"));
        headers.append("impersonate-group", HeaderValue::from_static("devs"));
        let (checks, user) = Impersonation::of(&headers)
            .unwrap()
            .unwrap()
            .checks_and_user();
        assert_eq!(user.groups, ["devs", "system:authenticated"]);
        let resources: Vec<&str> = checks.iter().map(|c| c.resource.as_str()).collect();
        assert_eq!(resources, ["users", "groups"]);
        let mut groups_only = HeaderMap::new();
        groups_only.insert("impersonate-group", HeaderValue::from_static("devs"));
        assert_eq!(Impersonation::of(&groups_only).unwrap_err().code, 500);
        assert!(Impersonation::of(&HeaderMap::new()).unwrap().is_none());
    }
}
