//! Where the manager's listeners bind: controller-runtime's bind-address flag syntax.
//!
//! The defaults `informant run` gives: metrics on `:8080`, controller-runtime
//! pkg/metrics/server/server.go `DefaultBindAddress` (used when `BindAddress` is empty).
//! kubebuilder's v4 scaffold (`cmd/main.go`) defaults `--metrics-bind-address` to "0" (off) and
//! names ":8080" for plain HTTP and ":8443" for its authenticated HTTPS server. `informant run`
//! keeps metrics on and plain by default (a laptop has no API server to review tokens for it),
//! so ":8080"; with `--metrics-secure` the address is still the one `--metrics-addr` gives, and
//! the chart, secure by default, passes ":8443". Health probes on `:8081`, kubebuilder's
//! scaffold `--health-probe-bind-address=:8081` (controller-runtime itself leaves probes off
//! unless `HealthProbeBindAddress` is set).

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

/// A bind address the flags could not parse.
#[derive(Debug, thiserror::Error)]
#[error(
    "invalid bind address {input:?}: expected \":port\", \"ip:port\", \"[ipv6]:port\", or \"0\" to disable"
)]
pub struct BindAddressError {
    /// The text given.
    pub input: String,
}

/// Parses a bind address in controller-runtime's flag syntax: `"0"` or `""` disables the
/// listener (`None`), `":8080"` is every interface, `"127.0.0.1:8080"` and `"[::1]:8080"` one
/// address. Host names are not resolved.
///
/// # Errors
///
/// [`BindAddressError`] for anything else.
///
/// ```
/// use informant::manager::parse_bind_address;
///
/// assert_eq!(parse_bind_address(":8080").unwrap(), Some("0.0.0.0:8080".parse().unwrap()));
/// assert_eq!(parse_bind_address("0").unwrap(), None);
/// assert!(parse_bind_address("localhost:8080").is_err());
/// ```
pub fn parse_bind_address(input: &str) -> Result<Option<SocketAddr>, BindAddressError> {
    let error = || BindAddressError {
        input: input.to_owned(),
    };
    match input.trim() {
        "" | "0" => Ok(None),
        s => {
            if let Some(port) = s.strip_prefix(':') {
                let port = port.parse::<u16>().map_err(|_| error())?;
                Ok(Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::UNSPECIFIED,
                    port,
                ))))
            } else {
                s.parse::<SocketAddr>().map(Some).map_err(|_| error())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses_follow_controller_runtime_flag_syntax() {
        assert_eq!(parse_bind_address("0").unwrap(), None);
        assert_eq!(parse_bind_address("").unwrap(), None);
        assert_eq!(
            parse_bind_address(":8081").unwrap(),
            Some("0.0.0.0:8081".parse().unwrap())
        );
        assert_eq!(
            parse_bind_address("127.0.0.1:9000").unwrap(),
            Some("127.0.0.1:9000".parse().unwrap())
        );
        assert_eq!(
            parse_bind_address("[::1]:9000").unwrap(),
            Some("[::1]:9000".parse().unwrap())
        );
        for bad in [":http", ":70000", "8080", "localhost:8080"] {
            let err = parse_bind_address(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }
}
