//! The hook policy: which commands and webhook URLs a `Controller` may name, whether objects
//! of kind `Secret` may be sent to a hook, and how large an answer may be. Whoever runs the
//! manager sets it (`informant run --hook-*`), never a cluster resource: it bounds what the
//! people who may write `Controller`s can make the manager do.
//!
//! A `Controller` that breaks it does not run: the supervisor keeps it back with the reason
//! [`REASON_HOOK_NOT_ALLOWED`] and the rule it broke. Link-local addresses (the cloud metadata
//! service) and the API server's own address are refused to webhooks under any policy unless
//! a `--hook-allow-url` entry names them, both when the `Controller` is checked (an address in
//! its URL) and at each connection (the addresses a name resolves to).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use kube::core::GroupVersionKind;

use super::resource::{ControllerSettings, Hook};

/// The `Ready` reason of a `Controller` the hook policy refuses.
pub const REASON_HOOK_NOT_ALLOWED: &str = "HookNotAllowed";

/// The default of [`Policy::max_response_bytes`]: 4 MiB. metacontroller sets no bound;
/// 4 MiB is far more than a reconcile's answer (the API server refuses objects over 1.5 MiB)
/// and little for the manager to hold per running call.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 4 << 20;

/// Either anything, or only what is listed (an empty list allows nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Allowed<T> {
    /// Anything (`--hook-policy=open`).
    Any,
    /// Only these.
    Only(Vec<T>),
}

/// A program an exec hook may run: one path, or every program under a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecRule {
    /// This absolute path exactly.
    Path(String),
    /// Any absolute path under this directory (written with a trailing `/`).
    Under(String),
}

impl ExecRule {
    fn allows(&self, program: &str) -> bool {
        match self {
            ExecRule::Path(path) => program == path,
            ExecRule::Under(dir) => program.len() > dir.len() && program.starts_with(dir.as_str()),
        }
    }
}

impl FromStr for ExecRule {
    type Err = PolicyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| PolicyError::Exec {
            entry: text.to_owned(),
            why: why.to_owned(),
        };
        if !normal_absolute(text.trim_end_matches('/')) {
            return Err(bad(
                "not an absolute path without `.` or `..`; write /hooks/sync.py, or /hooks/ for \
                 every program under /hooks",
            ));
        }
        Ok(if text.ends_with('/') {
            ExecRule::Under(text.to_owned())
        } else {
            ExecRule::Path(text.to_owned())
        })
    }
}

/// Whether `path` is absolute, with no `.`, `..` or empty component: the program it names
/// is the one a prefix match sees.
fn normal_absolute(path: &str) -> bool {
    // By hand: `Path::components` drops the `.` in `/a/./b`.
    path.strip_prefix('/').is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..")
    })
}

/// A webhook destination: a host (any port, or one), or a block of addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UrlRule {
    /// A DNS name or an IP address as the URL writes it, on any port or on `port`.
    Host {
        /// Lowercase name, or an IP address.
        host: String,
        /// The only port allowed, if any.
        port: Option<u16>,
    },
    /// Every IP address in a CIDR block (a URL naming an address; names are not resolved
    /// to be matched).
    Cidr(Cidr),
}

impl FromStr for UrlRule {
    type Err = PolicyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| PolicyError::Url {
            entry: text.to_owned(),
            why: why.to_owned(),
        };
        if text.contains('/') {
            return text.parse::<Cidr>().map(UrlRule::Cidr).map_err(|()| {
                bad("not a CIDR block; write an address and a prefix length, e.g. 10.0.0.0/8")
            });
        }
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(UrlRule::Host {
                host: ip.to_string(),
                port: None,
            });
        }
        let (host, port) = match text.rsplit_once(':') {
            Some((host, port)) => {
                let port = port
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| bad("the port is not a number from 1 to 65535"))?;
                (
                    host.trim_start_matches('[').trim_end_matches(']'),
                    Some(port),
                )
            }
            None => (text, None),
        };
        let host = match host.parse::<IpAddr>() {
            Ok(ip) => ip.to_string(),
            Err(_) if valid_name(host) => host.to_ascii_lowercase(),
            Err(_) => {
                return Err(bad(
                    "not a host, HOST:PORT or CIDR; write hooks.ops.svc, hooks.ops.svc:8443, \
                     10.1.2.3 or 10.0.0.0/8",
                ));
            }
        };
        Ok(UrlRule::Host { host, port })
    }
}

/// Whether `name` is a DNS name (letters, digits, `-` and `.`).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
}

/// An IP address block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` is in the block.
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                prefix_eq(&net.octets(), &ip.octets(), self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_eq(&net.octets(), &ip.octets(), self.prefix)
            }
            _ => false,
        }
    }

    /// Whether every address of the block is in `outer`.
    fn within(&self, outer: &Cidr) -> bool {
        self.prefix >= outer.prefix && outer.contains(self.addr)
    }
}

impl FromStr for Cidr {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        let (addr, prefix) = text.split_once('/').ok_or(())?;
        let addr = canonical(addr.parse::<IpAddr>().map_err(drop)?);
        let prefix: u8 = prefix.parse().map_err(drop)?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(());
        }
        Ok(Cidr { addr, prefix })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Whether the first `prefix` bits of `a` and `b` are equal.
fn prefix_eq(a: &[u8], b: &[u8], prefix: u8) -> bool {
    let bits = usize::from(prefix);
    let (bytes, rest) = (bits / 8, bits % 8);
    if a[..bytes] != b[..bytes] {
        return false;
    }
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    a[bytes] & mask == b[bytes] & mask
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 @ IpAddr::V4(_) => v4,
    }
}

/// The link-local blocks: `169.254.0.0/16` (the cloud metadata service at `169.254.169.254`)
/// and `fe80::/10`.
fn link_local() -> [Cidr; 2] {
    [
        Cidr {
            addr: IpAddr::V4(Ipv4Addr::new(169, 254, 0, 0)),
            prefix: 16,
        },
        Cidr {
            addr: IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0)),
            prefix: 10,
        },
    ]
}

/// A malformed policy entry (a usage error of `informant run`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A `--hook-allow-exec` entry.
    #[error("invalid --hook-allow-exec {entry:?}: {why}")]
    Exec {
        /// The entry.
        entry: String,
        /// What is wrong.
        why: String,
    },
    /// A `--hook-allow-url` entry.
    #[error("invalid --hook-allow-url {entry:?}: {why}")]
    Url {
        /// The entry.
        entry: String,
        /// What is wrong.
        why: String,
    },
}

/// What hooks may make the manager do: which programs it runs, which hosts it posts objects
/// to and how (plain HTTP or not), whether `Secret`s may be sent at all, and how large an
/// answer it reads.
///
/// [`Policy::open`] is the manager's behaviour before the policy existed (any command, any
/// URL but link-local addresses and the API server, plain HTTP, Secrets sent);
/// [`Policy::restricted`] allows nothing until told.
///
/// ```
/// use informant::hooks::Policy;
///
/// let policy = Policy::restricted()
///     .allow_exec("/hooks/".parse()?)
///     .allow_url("hooks.ops.svc:8443".parse()?);
/// assert!(policy.check_exec(&["/hooks/sync.py".into()]).is_ok());
/// assert!(policy.check_exec(&["/usr/bin/curl".into()]).is_err());
/// assert!(policy.check_url("https://hooks.ops.svc:8443/sync").is_ok());
/// assert!(policy.check_url("http://hooks.ops.svc:8443/sync").is_err()); // no --hook-allow-http
/// # Ok::<(), informant::hooks::PolicyError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    exec: Allowed<ExecRule>,
    /// Any URL (the rules then only name exceptions to the refusals).
    any_url: bool,
    urls: Vec<UrlRule>,
    http: bool,
    secrets: bool,
    api_server: Option<(String, u16)>,
    max_response_bytes: usize,
}

impl Default for Policy {
    /// [`Policy::open`].
    fn default() -> Self {
        Self::open()
    }
}

impl Policy {
    /// Any command, any URL but link-local addresses and the API server's, plain HTTP
    /// allowed, `Secret`s sent: what a manager did before it had a policy.
    #[must_use]
    pub fn open() -> Self {
        Self {
            exec: Allowed::Any,
            any_url: true,
            urls: Vec::new(),
            http: true,
            secrets: true,
            api_server: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// Nothing allowed: no command, no URL, no plain HTTP, no `Secret`s.
    #[must_use]
    pub fn restricted() -> Self {
        Self {
            exec: Allowed::Only(Vec::new()),
            any_url: false,
            urls: Vec::new(),
            http: false,
            secrets: false,
            api_server: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// Allows the programs of `rule` too (a policy that allows any keeps allowing any).
    #[must_use]
    pub fn allow_exec(mut self, rule: ExecRule) -> Self {
        if let Allowed::Only(rules) = &mut self.exec {
            rules.push(rule);
        }
        self
    }

    /// Allows the webhook destinations of `rule` too. Under a policy that allows any URL, it
    /// only lifts the refusal of link-local addresses or the API server's it names.
    #[must_use]
    pub fn allow_url(mut self, rule: UrlRule) -> Self {
        self.urls.push(rule);
        self
    }

    /// Whether plain `http://` webhooks are allowed (to the hosts that are).
    #[must_use]
    pub fn allow_http(mut self, allow: bool) -> Self {
        self.http = allow;
        self
    }

    /// Whether objects of kind `Secret` (core `v1`) may be sent to a hook: a `Controller`
    /// whose `for`, `owns` or `watches` names that kind is refused unless they may.
    #[must_use]
    pub fn allow_secrets(mut self, allow: bool) -> Self {
        self.secrets = allow;
        self
    }

    /// The API server's host and port (as the manager's client reaches it): refused to
    /// webhooks unless a `--hook-allow-url` entry names them.
    #[must_use]
    pub fn api_server(mut self, host: &str, port: u16) -> Self {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host = host.parse::<IpAddr>().map_or_else(
            |_| host.to_ascii_lowercase(),
            |ip| canonical(ip).to_string(),
        );
        self.api_server = Some((host, port));
        self
    }

    /// The largest answer (an exec hook's standard output, a webhook's body) read, in bytes;
    /// a larger one fails the call. Default [`DEFAULT_MAX_RESPONSE_BYTES`].
    #[must_use]
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes.max(1);
        self
    }

    /// The largest answer read, in bytes.
    #[must_use]
    pub fn response_limit(&self) -> usize {
        self.max_response_bytes
    }

    /// Whether this policy allows any command and any URL (`--hook-policy=open`).
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.exec == Allowed::Any && self.any_url
    }

    /// Why the hook policy refuses the controller of `settings`, every rule it breaks, or
    /// `None`.
    #[must_use]
    pub fn refusal(&self, settings: &ControllerSettings) -> Option<String> {
        let mut broken = Vec::new();
        match &settings.hook {
            Hook::Exec { command, .. } => broken.extend(self.check_exec(command).err()),
            Hook::Webhook { url, .. } => broken.extend(self.check_url(url).err()),
        }
        if !self.secrets {
            let kinds = std::iter::once(("for", None, &settings.for_kind))
                .chain(
                    settings
                        .owns
                        .iter()
                        .enumerate()
                        .map(|(i, k)| ("owns", Some(i), k)),
                )
                .chain(
                    settings
                        .watches
                        .iter()
                        .enumerate()
                        .map(|(i, k)| ("watches", Some(i), k)),
                );
            for (field, index, gvk) in kinds {
                if is_secret(gvk) {
                    let path = index
                        .map_or_else(|| format!("spec.{field}"), |i| format!("spec.{field}[{i}]"));
                    broken.push(format!(
                        "{path}: v1 Secret objects are not sent to hooks unless the manager runs \
                         with --hook-allow-secrets"
                    ));
                }
            }
        }
        (!broken.is_empty()).then(|| broken.join("; "))
    }

    /// Whether an exec hook may run `command`, or the rule it breaks.
    ///
    /// # Errors
    /// The rule `command` breaks, with the field it is in.
    pub fn check_exec(&self, command: &[String]) -> Result<(), String> {
        let Allowed::Only(rules) = &self.exec else {
            return Ok(());
        };
        let program = command.first().map(String::as_str).unwrap_or_default();
        if !normal_absolute(program) {
            return Err(format!(
                "spec.hook.exec.command {program:?} is not an absolute path: with \
                 --hook-allow-exec, a program is named by its absolute path"
            ));
        }
        if rules.iter().any(|r| r.allows(program)) {
            Ok(())
        } else {
            Err(format!(
                "spec.hook.exec.command {program:?} is not in --hook-allow-exec"
            ))
        }
    }

    /// Whether a webhook may be called at `url` (its scheme, host and port; the addresses a
    /// name resolves to are checked at each connection, see [`Policy::check_address`]).
    ///
    /// # Errors
    /// The rule `url` breaks, with the field it is in.
    pub fn check_url(&self, url: &str) -> Result<(), String> {
        let Some(target) = Target::of(url) else {
            return Err(format!(
                "spec.hook.webhook.url {url:?} is not an http(s) URL"
            ));
        };
        if !target.https && !self.http {
            return Err(format!(
                "spec.hook.webhook.url {url:?}: plain http:// is not allowed without \
                 --hook-allow-http; use https:// with caBundle"
            ));
        }
        if !self.any_url && !self.listed(&target) {
            return Err(format!(
                "spec.hook.webhook.url host {:?} is not in --hook-allow-url",
                target.authority()
            ));
        }
        if let Ok(ip) = target.host.parse::<IpAddr>() {
            self.check_address(&target.host, SocketAddr::new(ip, target.port))?;
        }
        if self
            .api_server
            .as_ref()
            .is_some_and(|(host, port)| *host == target.host && *port == target.port)
            && !self.names(&target.host, Some(target.port), None)
        {
            return Err(refused_api_server(&target.authority()));
        }
        Ok(())
    }

    /// Whether a webhook of host `host` may connect to `address` (one it resolved to):
    /// link-local addresses and the API server's are refused unless a `--hook-allow-url`
    /// entry names them. `api_server` holds the addresses the API server's host resolved to.
    ///
    /// # Errors
    /// Why the address is refused.
    pub fn check_address(&self, host: &str, address: SocketAddr) -> Result<(), String> {
        self.check_resolved(host, address, &[])
    }

    /// [`Policy::check_address`], with the addresses the API server's host resolved to.
    pub(super) fn check_resolved(
        &self,
        host: &str,
        address: SocketAddr,
        api_server: &[SocketAddr],
    ) -> Result<(), String> {
        let ip = canonical(address.ip());
        let shown = if host == ip.to_string() {
            format!("{address}")
        } else {
            format!("{address} (of {host})")
        };
        if let Some(block) = link_local().iter().find(|b| b.contains(ip))
            && !self.names(&ip.to_string(), Some(address.port()), Some(block))
        {
            return Err(format!(
                "webhook address {shown} is link-local ({block}); refused unless \
                 --hook-allow-url names it"
            ));
        }
        let is_api_server = api_server
            .iter()
            .any(|a| canonical(a.ip()) == ip && a.port() == address.port())
            || self
                .api_server
                .as_ref()
                .is_some_and(|(h, p)| *h == ip.to_string() && *p == address.port());
        if is_api_server && !self.names(&ip.to_string(), Some(address.port()), None) {
            return Err(refused_api_server(&shown));
        }
        Ok(())
    }

    /// The API server's host and port, if known.
    pub(super) fn api_server_address(&self) -> Option<(&str, u16)> {
        self.api_server.as_ref().map(|(h, p)| (h.as_str(), *p))
    }

    /// Whether a `--hook-allow-url` entry names `host` (on `port`) explicitly: a host entry
    /// equal to it, or (for an address in `block`) a CIDR entry inside `block` that holds it.
    /// `0.0.0.0/0` does not name the metadata service.
    fn names(&self, host: &str, port: Option<u16>, block: Option<&Cidr>) -> bool {
        let ip = host.parse::<IpAddr>().ok().map(canonical);
        self.urls.iter().any(|rule| match rule {
            UrlRule::Host { host: h, port: p } => {
                (*h == host || ip.is_some_and(|ip| h.parse::<IpAddr>().ok() == Some(ip)))
                    && (p.is_none() || *p == port)
            }
            UrlRule::Cidr(cidr) => match (ip, block) {
                (Some(ip), Some(block)) => cidr.within(block) && cidr.contains(ip),
                (Some(ip), None) => {
                    cidr.prefix == if ip.is_ipv4() { 32 } else { 128 } && cidr.contains(ip)
                }
                (None, _) => false,
            },
        })
    }

    /// Whether `target` is allowed by a `--hook-allow-url` entry.
    fn listed(&self, target: &Target) -> bool {
        let ip = target.host.parse::<IpAddr>().ok().map(canonical);
        self.urls.iter().any(|rule| match rule {
            UrlRule::Host { host, port } => {
                (*host == target.host
                    || ip.is_some_and(|ip| host.parse::<IpAddr>().ok() == Some(ip)))
                    && port.is_none_or(|p| p == target.port)
            }
            UrlRule::Cidr(cidr) => ip.is_some_and(|ip| cidr.contains(ip)),
        })
    }
}

fn refused_api_server(shown: &str) -> String {
    format!("webhook address {shown} is the API server's; refused unless --hook-allow-url names it")
}

/// Whether `gvk` is core `v1` `Secret`.
fn is_secret(gvk: &GroupVersionKind) -> bool {
    gvk.group.is_empty() && gvk.kind == "Secret"
}

/// A webhook URL's scheme, host and port.
#[derive(Debug)]
pub(super) struct Target {
    pub(super) https: bool,
    /// Lowercase name, or an IP address (IPv6 without brackets).
    pub(super) host: String,
    pub(super) port: u16,
}

impl Target {
    /// The target of an `http://` or `https://` URL, or `None`.
    pub(super) fn of(url: &str) -> Option<Self> {
        let uri: http::Uri = url.parse().ok()?;
        let https = match uri.scheme_str()? {
            "https" => true,
            "http" => false,
            _ => return None,
        };
        let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return None;
        }
        let host = host.parse::<IpAddr>().map_or_else(
            |_| host.to_ascii_lowercase(),
            |ip| canonical(ip).to_string(),
        );
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        Some(Self { https, host, port })
    }

    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests;
