//! The entries of a hook policy: the programs (`--hook-allow-exec`) and webhook destinations
//! (`--hook-allow-url`) it allows, parsed and matched, and the address blocks it refuses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

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
    pub(super) fn allows(&self, program: &str) -> bool {
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
pub(super) fn normal_absolute(path: &str) -> bool {
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
pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
}

/// An IP address block: an [`IpNet`] whose address is kept as written (host bits and all,
/// as `--hook-allow-url` entries are shown back), an IPv4-mapped address as its IPv4 one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr(IpNet);

impl Cidr {
    /// Whether `ip` is in the block.
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.contains(&canonical(ip))
    }

    /// Whether every address of the block is in `outer`.
    pub(super) fn within(&self, outer: &Cidr) -> bool {
        outer.0.contains(&self.0)
    }

    /// The prefix length.
    pub(super) fn prefix(&self) -> u8 {
        self.0.prefix_len()
    }
}

impl FromStr for Cidr {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        let net: IpNet = text.parse().map_err(drop)?;
        Ok(Cidr(match net {
            IpNet::V6(v6) => match v6.addr().to_ipv4_mapped() {
                // `::ffff:10.0.0.0/104` is `10.0.0.0/8`; a mapped prefix shorter than 96 spans
                // more than the mapped block and stays IPv6.
                Some(v4) if v6.prefix_len() >= 96 => {
                    IpNet::V4(Ipv4Net::new(v4, v6.prefix_len() - 96).map_err(drop)?)
                }
                _ => IpNet::V6(v6),
            },
            v4 @ IpNet::V4(_) => v4,
        }))
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
pub(super) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 @ IpAddr::V4(_) => v4,
    }
}

/// A block of addresses refused to webhooks under every policy unless a `--hook-allow-url`
/// entry names it, and what it is (for the message).
#[derive(Clone, Copy, Debug)]
pub(super) struct Refused {
    /// What the block is: `loopback`, `link-local`, …
    pub(super) what: &'static str,
    pub(super) block: Cidr,
}

const fn v4(a: u8, b: u8, c: u8, d: u8, prefix: u8) -> Cidr {
    Cidr(IpNet::V4(Ipv4Net::new_assert(
        Ipv4Addr::new(a, b, c, d),
        prefix,
    )))
}

const fn v6(s: [u16; 8], prefix: u8) -> Cidr {
    Cidr(IpNet::V6(Ipv6Net::new_assert(
        Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]),
        prefix,
    )))
}

/// The blocks refused under every policy unless named: what reaches the node itself or a
/// sidecar of the manager's pod (loopback, and the unspecified address, which Linux connects
/// to the host), and what serves a cloud's instance metadata and credentials (link-local,
/// and the providers' addresses outside it). An IPv6 address that embeds an IPv4 address
/// is judged by that address too ([`embedded_ipv4`]).
pub(super) const REFUSED: [Refused; 10] = [
    Refused {
        what: "loopback",
        block: v4(127, 0, 0, 0, 8),
    },
    // RFC 1122 3.2.1.3: "this host on this network"; `connect(0.0.0.0:p)` reaches the host's
    // own listeners on Linux.
    Refused {
        what: "unspecified (this host)",
        block: v4(0, 0, 0, 0, 8),
    },
    // AWS, GCP, Azure, OpenStack and Oracle serve instance metadata at 169.254.169.254, ECS
    // task credentials at 169.254.170.2.
    Refused {
        what: "link-local",
        block: v4(169, 254, 0, 0, 16),
    },
    // Alibaba Cloud's metadata service (its ECS docs, "Obtain instance metadata").
    Refused {
        what: "a cloud metadata service",
        block: v4(100, 100, 100, 200, 32),
    },
    Refused {
        what: "loopback",
        block: v6([0, 0, 0, 0, 0, 0, 0, 1], 128),
    },
    Refused {
        what: "unspecified (this host)",
        block: v6([0; 8], 128),
    },
    Refused {
        what: "link-local",
        block: v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),
    },
    // AWS's instance metadata service over IPv6 (EC2 docs, "Instance metadata service
    // endpoint": `http://[fd00:ec2::254]`).
    Refused {
        what: "a cloud metadata service",
        block: v6([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254], 128),
    },
    // GCP's metadata server over IPv6 (Compute Engine docs, "About VM metadata":
    // `fd20:ce::254`).
    Refused {
        what: "a cloud metadata service",
        block: v6([0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254], 128),
    },
    // RFC 8215: NAT64 prefixes a network chooses inside 64:ff9b:1::/48, with the IPv4
    // address at a position (RFC 6052 2.2: after a /48, /56, /64 or /96 prefix) the manager
    // cannot know, so the block is refused as a whole.
    Refused {
        what: "a NAT64 local-use prefix (its IPv4 address where the network put it)",
        block: v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48),
    },
];

/// The refused block holding `ip` (compared in its own family), if any.
pub(super) fn refused(ip: IpAddr) -> Option<Refused> {
    let ip = canonical(ip);
    REFUSED.iter().copied().find(|r| r.block.contains(ip))
}

/// The IPv4 address an IPv6 address carries, and how: IPv4-compatible (`::a.b.c.d`,
/// RFC 4291 2.5.5.1; not `::` or `::1`), NAT64's well-known prefix (`64:ff9b::/96`,
/// RFC 6052 2.1), 6to4 (`2002:AABB:CCDD::/48`, RFC 3056 2) and Teredo (`2001::/32`, the
/// client's address inverted in the last 32 bits, RFC 4380 4). IPv4-mapped addresses
/// (`::ffff:a.b.c.d`) are IPv4 already ([`canonical`]). A packet to any of them may reach the
/// IPv4 address (a NAT64 gateway, a 6to4 relay, a dual stack), so it is judged as that
/// address. NAT64 local-use prefixes (`64:ff9b:1::/48`) are refused as a block ([`REFUSED`]).
pub(super) fn embedded_ipv4(ip: Ipv6Addr) -> Option<(Ipv4Addr, &'static str)> {
    let o = ip.octets();
    let low = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    let s = ip.segments();
    if s[..6] == [0; 6] && !(s[6] == 0 && s[7] <= 1) {
        Some((low, "IPv4-compatible"))
    } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        Some((low, "NAT64"))
    } else if s[0] == 0x2002 {
        Some((Ipv4Addr::new(o[2], o[3], o[4], o[5]), "6to4"))
    } else if s[..2] == [0x2001, 0] {
        // Teredo (RFC 4380 4): the client's IPv4 address, every bit inverted, in the last 32.
        Some((!low, "Teredo"))
    } else {
        None
    }
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
