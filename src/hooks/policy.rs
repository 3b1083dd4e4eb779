//! The hook policy: which commands and webhook URLs a `Controller` may name, whether objects
//! of kind `Secret` may be sent to a hook, and how large an answer may be. Whoever runs the
//! manager sets it (`informant run --hook-*`), never a cluster resource: it bounds what the
//! people who may write `Controller`s can make the manager do.
//!
//! A `Controller` that breaks it does not run: the supervisor keeps it back with the reason
//! [`REASON_HOOK_NOT_ALLOWED`] and the rule it broke. Loopback, unspecified and link-local
//! addresses, the cloud metadata services' (`169.254.169.254`, `fd00:ec2::254`, …), IPv6
//! addresses embedding one of them (NAT64, 6to4, IPv4-compatible) and the API server's own
//! address are refused to webhooks under any policy unless a `--hook-allow-url` entry names
//! them, both when the `Controller` is checked (an address in its URL) and at each connection
//! (the addresses a name resolves to).

use std::net::{IpAddr, SocketAddr};

use kube::core::GroupVersionKind;

use super::resource::{ControllerSettings, Hook};

mod rules;

pub use rules::{Allowed, Cidr, ExecRule, PolicyError, UrlRule};
use rules::{canonical, embedded_ipv4, normal_absolute, refused};

/// The `Ready` reason of a `Controller` the hook policy refuses.
pub const REASON_HOOK_NOT_ALLOWED: &str = "HookNotAllowed";

/// The default of [`Policy::max_response_bytes`]: 4 MiB. metacontroller sets no bound;
/// 4 MiB is far more than a reconcile's answer (the API server refuses objects over 1.5 MiB)
/// and little for the manager to hold per running call.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 4 << 20;

/// What hooks may make the manager do: which programs it runs, which hosts it posts objects
/// to and how (plain HTTP or not), whether `Secret`s may be sent at all, and how large an
/// answer it reads.
///
/// [`Policy::open`] is the manager's behaviour before the policy existed (any command, any
/// URL but the always-refused addresses and the API server, plain HTTP, Secrets sent);
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
    /// Any command, any URL but the always-refused addresses (see [`Policy::check_address`])
    /// and the API server's, plain HTTP allowed, `Secret`s sent: what a manager did before it
    /// had a policy.
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
    /// only lifts the refusal of the always-refused addresses or the API server's it names.
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
            Hook::Exec { command, .. } | Hook::Persistent { command, .. } => {
                broken.extend(self.check_exec(command).err());
            }
            Hook::Webhook { url, .. } => broken.extend(self.check_url(url).err()),
        }
        let own_hooks = settings
            .admission
            .iter()
            .enumerate()
            .map(|(i, a)| (format!("spec.admission[{i}].hook"), &a.hook))
            .chain(
                settings
                    .conversion
                    .iter()
                    .map(|c| ("spec.conversion.hook".to_owned(), &c.hook)),
            );
        for (field, hook) in own_hooks {
            if *hook == settings.hook {
                continue;
            }
            let checked = match hook {
                Hook::Exec { command, .. } | Hook::Persistent { command, .. } => {
                    self.check_exec(command)
                }
                Hook::Webhook { url, .. } => self.check_url(url),
            };
            broken.extend(checked.err().map(|e| match e.strip_prefix("spec.hook") {
                Some(rest) => format!("{field}{rest}"),
                None => format!("{field}: {e}"),
            }));
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
        if !self.secrets
            && let Some((field, secret)) = secret_ref(settings)
        {
            broken.push(format!(
                "{field}.tls.clientCertSecretRef names Secret {secret:?}, which the manager \
                 reads only with --hook-allow-secrets"
            ));
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

    /// Whether a webhook of host `host` may connect to `address` (one it resolved to): the
    /// always-refused addresses (loopback, unspecified, link-local, the cloud metadata
    /// services', and an IPv6 address embedding one of them) and the API server's are
    /// refused unless a `--hook-allow-url` entry names them.
    ///
    /// # Errors
    /// Why the address is refused.
    pub fn check_address(&self, host: &str, address: SocketAddr) -> Result<(), String> {
        self.check_resolved(host, address, &[])
    }

    /// [`Policy::check_address`], with `api_server`, the addresses the API server's host
    /// resolved to (a name's are only known at connection).
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
        if let Some(r) = refused(ip)
            && !self.names(&ip.to_string(), Some(address.port()), Some(&r.block))
        {
            return Err(format!(
                "webhook address {shown} is {} ({}); refused unless --hook-allow-url names it",
                r.what, r.block
            ));
        }
        if let IpAddr::V6(v6) = ip
            && let Some((v4, how)) = embedded_ipv4(v6)
            && let Some(r) = refused(IpAddr::V4(v4))
            && !self.names(&ip.to_string(), Some(address.port()), None)
            && !self.names(&v4.to_string(), Some(address.port()), Some(&r.block))
        {
            return Err(format!(
                "webhook address {shown} embeds {v4} ({how}), which is {} ({}); refused \
                 unless --hook-allow-url names it",
                r.what, r.block
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
    /// equal to it, a single-address CIDR entry of it, or (for an address in the refused
    /// `block`) a CIDR entry inside `block` that holds it. `0.0.0.0/0` and `::/0` name none
    /// of the refused addresses.
    fn names(&self, host: &str, port: Option<u16>, block: Option<&Cidr>) -> bool {
        let ip = host.parse::<IpAddr>().ok().map(canonical);
        self.urls.iter().any(|rule| match rule {
            UrlRule::Host { host: h, port: p } => {
                (*h == host
                    || ip.is_some_and(|ip| h.parse::<IpAddr>().ok().map(canonical) == Some(ip)))
                    && (p.is_none() || *p == port)
            }
            UrlRule::Cidr(cidr) => match (ip, block) {
                (Some(ip), Some(block)) => cidr.within(block) && cidr.contains(ip),
                (Some(ip), None) => {
                    cidr.prefix() == if ip.is_ipv4() { 32 } else { 128 } && cidr.contains(ip)
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
                    || ip.is_some_and(|ip| host.parse::<IpAddr>().ok().map(canonical) == Some(ip)))
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

/// The first webhook hook of `settings` naming a client certificate Secret: its field and
/// the Secret's name.
pub(super) fn secret_ref(settings: &ControllerSettings) -> Option<(String, &str)> {
    let own = std::iter::once(("spec.hook".to_owned(), &settings.hook));
    let admission = settings
        .admission
        .iter()
        .enumerate()
        .map(|(i, a)| (format!("spec.admission[{i}].hook"), &a.hook));
    let conversion = settings
        .conversion
        .iter()
        .map(|c| ("spec.conversion.hook".to_owned(), &c.hook));
    own.chain(admission)
        .chain(conversion)
        .find_map(|(field, hook)| match hook {
            Hook::Webhook { tls: Some(tls), .. } => tls
                .client_cert_secret
                .as_deref()
                .map(|secret| (format!("{field}.webhook"), secret)),
            _ => None,
        })
}

#[cfg(test)]
mod tests;
