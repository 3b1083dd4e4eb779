//! The answers of secure metrics' reviews, kept for reuse: bounded caches, least recently used
//! out first, with the tokens that authenticate no one apart from the users.

use std::num::NonZeroUsize;

use lru::LruCache;
use tokio::time::Instant;

use super::{ALLOW_CACHE_TTL, DENY_CACHE_TTL, TOKEN_CACHE_TTL, User};

/// The most tokens whose user is kept: least recently used first out. Each is a few hundred
/// bytes (a user, its groups); a manager is scraped by a handful of accounts.
pub const TOKEN_CACHE_SIZE: usize = 4096;
/// The most tokens kept as authenticating no one, apart from the users: a flood of unique
/// garbage tokens evicts only these, never a scraper's answer.
pub const NEGATIVE_TOKEN_CACHE_SIZE: usize = 1024;
/// The most access answers kept (user, path, verb), least recently used first out.
pub const ACCESS_CACHE_SIZE: usize = 4096;
/// What a `TokenReview` said of a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum TokenAnswer {
    /// It authenticates this user.
    User(User),
    /// It authenticates no one.
    Unauthenticated,
}

impl TokenAnswer {
    pub(super) fn user(self) -> Option<User> {
        match self {
            TokenAnswer::User(user) => Some(user),
            TokenAnswer::Unauthenticated => None,
        }
    }
}

/// The key of a cached access answer: everything the `SubjectAccessReview` asks.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct AccessKey {
    pub(super) user: User,
    pub(super) path: String,
    pub(super) verb: String,
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
pub(super) struct Answers {
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
    pub(super) fn token(&mut self, key: &[u8; 32], now: Instant) -> Option<TokenAnswer> {
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

    pub(super) fn remember_token(&mut self, key: [u8; 32], answer: TokenAnswer, now: Instant) {
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

    pub(super) fn access(&mut self, key: &AccessKey, now: Instant) -> Option<(bool, String)> {
        fresh(&mut self.access, key, now)
    }

    pub(super) fn remember_access(
        &mut self,
        key: AccessKey,
        allowed: bool,
        reason: String,
        now: Instant,
    ) {
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
pub(super) fn token_key(token: &str) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut key = [0u8; 32];
    key.copy_from_slice(digest.as_ref());
    key
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;

    fn user(name: &str) -> User {
        User {
            name: name.to_owned(),
            uid: String::new(),
            groups: vec!["system:authenticated".to_owned()],
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
}
