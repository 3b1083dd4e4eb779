//! The `Host` a request names: a server on the user's loopback answers only requests meant
//! for it. A web page the user visits can make its own name resolve to `127.0.0.1` (DNS
//! rebinding) and then post to the server as if it were its own origin: the browser sends no
//! `Origin` for a same-origin request, but the `Host` header still names the page's host.
//! Kubernetes clients name the server by the address or name in their kubeconfig.

use axum::http::{HeaderMap, Uri, header};

use crate::apiserver::status::ApiError;

/// Whether `host` (a `Host` header or `:authority`, port and IPv6 brackets allowed) is one the
/// server answers: an IP address (a name rebinding turns into `127.0.0.1` is never one:
/// a page loaded from an address is answered by whoever has it), `localhost` and the names
/// under it (browsers resolve them to loopback themselves, RFC 6761), or a name of `allowed`
/// (case-insensitive; `*` allows every host).
fn served(allowed: &[String], host: &str) -> bool {
    let name = match host.parse::<axum::http::uri::Authority>() {
        Ok(authority) => authority.host().to_owned(),
        Err(_) => return false,
    };
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || allowed
            .iter()
            .any(|a| a == "*" || a.trim_end_matches('.').eq_ignore_ascii_case(&name))
}

/// The refusal of a request naming a host the server does not serve (see the module's doc),
/// if it does: 403, naming the flag that serves it. A request that names none (HTTP/1.0) is
/// not a browser's.
pub(super) fn foreign_host(allowed: &[String], uri: &Uri, headers: &HeaderMap) -> Option<ApiError> {
    let host = match uri.authority() {
        Some(authority) => authority.as_str().to_owned(),
        None => String::from_utf8_lossy(headers.get(header::HOST)?.as_bytes()).into_owned(),
    };
    if served(allowed, &host) {
        return None;
    }
    let name = host
        .parse::<axum::http::uri::Authority>()
        .map_or_else(|_| host.clone(), |a| a.host().to_owned());
    tracing::warn!(host = %host, "refused a request for a host this server does not serve");
    Some(ApiError::new_forbidden(
        "",
        "",
        "",
        &format!(
            "requests for host {host:?} are refused: this server answers its addresses and \
             localhost (a web page can point its own name at a loopback server); start it \
             with --allow-host {name} to serve that name"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_localhost_are_served_other_names_only_when_allowed() {
        let none: &[String] = &[];
        for host in [
            "127.0.0.1",
            "127.0.0.1:6443",
            "[::1]:6443",
            "[::1]",
            "10.88.0.4:6443",
            "localhost",
            "LOCALHOST:8080",
            "localhost.",
            "api.localhost:80",
        ] {
            assert!(served(none, host), "{host} refused");
        }
        for host in [
            "evil.example",
            "evil.example:6443",
            "127.0.0.1.nip.io",
            "localhost.evil.example",
            "notlocalhost",
            "",
            "a b",
        ] {
            assert!(!served(none, host), "{host} served");
        }
        let named = ["api.test".to_owned()];
        assert!(served(&named, "API.test:6443") && served(&named, "api.test."));
        assert!(!served(&named, "evil.example"));
        assert!(served(&["*".to_owned()], "evil.example:1"));
    }
}
