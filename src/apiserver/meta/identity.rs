//! What kube-apiserver gives a new object to identify it: a name from `generateName`, a uid and
//! a creation timestamp, and the DNS-1123 rule most names follow.

/// The current time as kube-apiserver writes it (RFC 3339, whole seconds, UTC).
#[must_use]
pub fn now() -> String {
    let ts = jiff::Timestamp::now();
    jiff::Timestamp::from_second(ts.as_second())
        .unwrap_or(ts)
        .to_string()
}

/// A random RFC 4122 version-4 uid, as kube-apiserver gives every object
/// (`k8s.io/apimachinery/pkg/util/uuid`, `NewUUID`).
#[must_use]
pub(super) fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The five random characters `generateName` gets (apimachinery's `SimpleNameGenerator`).
pub(super) fn random_suffix() -> String {
    // The alphabet of apimachinery's `util/rand.String` (no vowels, no confusable digits).
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| {
            let i = usize::from(rand::random::<u8>()) % ALPHABET.len();
            char::from(ALPHABET[i])
        })
        .collect()
}

/// Whether `name` is a DNS-1123 subdomain (the rule for most object names).
#[must_use]
pub(super) fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.')
        && name
            .bytes()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_random_version_4_uuids() {
        let (a, b) = (new_uid(), new_uid());
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122);
    }
}
