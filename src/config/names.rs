//! Kubernetes name rules (apimachinery `pkg/util/validation`): DNS-1123 labels and
//! subdomains, as namespaces, object names and API groups must be.

/// Why `s` is not a DNS-1123 label (at most 63 characters of lowercase letters, digits and
/// `-`, starting and ending with a letter or digit), or `None` if it is one.
pub(crate) fn dns1123_label_problem(s: &str) -> Option<&'static str> {
    if s.is_empty() {
        return Some("must not be empty");
    }
    if s.len() > 63 {
        return Some("must be 63 characters or less");
    }
    if !s
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Some("must consist of lowercase letters, digits and '-'");
    }
    if s.starts_with('-') || s.ends_with('-') {
        return Some("must start and end with a letter or digit");
    }
    None
}

/// Why `s` is not a DNS-1123 subdomain (dot-separated labels, at most 253 characters), or
/// `None` if it is one.
pub(crate) fn dns1123_subdomain_problem(s: &str) -> Option<&'static str> {
    if s.is_empty() {
        return Some("must not be empty");
    }
    if s.len() > 253 {
        return Some("must be 253 characters or less");
    }
    s.split('.').find_map(|part| {
        if part.is_empty() {
            Some("must not have empty parts between dots")
        } else {
            dns1123_label_problem(part)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_dns_1123() {
        for ok in ["a", "team-a", "0abc", &"a".repeat(63)] {
            assert_eq!(dns1123_label_problem(ok), None, "{ok}");
        }
        for bad in ["", "Team", "team_a", "-a", "a-", "a.b", &"a".repeat(64)] {
            assert!(dns1123_label_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn subdomains_are_dot_separated_labels() {
        assert_eq!(dns1123_subdomain_problem("informant.dev"), None);
        assert!(dns1123_subdomain_problem("a..b").is_some());
        assert!(dns1123_subdomain_problem("Apps").is_some());
    }
}
