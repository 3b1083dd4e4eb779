//! `informant apiserver`: flags, seed loading, kubeconfig output, and serving until cancelled.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use informant::apiserver::Limits;
use informant::apiserver::parse_yaml;
use informant::apiserver::{Authorization, Config, FeatureGates, Server};
use informant::apiserver::{FailRule, Verb};
use informant::apiserver::{KubeconfigWriteError, write_kubeconfig};
use tokio_util::sync::CancellationToken;

use super::exit::{self, Failure};
use super::out::outln;

/// Flags of `informant apiserver`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Write a kubeconfig for the server to this path.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig_out: Option<PathBuf>,
    /// YAML files of objects to create at start (multi-document; repeatable).
    #[arg(long = "seed", value_name = "FILE.yaml")]
    pub seeds: Vec<PathBuf>,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 60)]
    pub bookmark_interval_seconds: u64,
    /// Changes kept for watch resumption; older resumes get 410 Gone.
    #[arg(long, default_value_t = Limits::default().history)]
    pub history: usize,
    /// Latency added to every resource request, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub latency_ms: u64,
    /// Fail requests: `VERB:RESOURCE:COUNT:CODE` (`*` for any verb or resource); repeatable.
    #[arg(long = "fail", value_name = "VERB:RESOURCE:COUNT:CODE")]
    pub fail: Vec<String>,
    /// Answer the first requests with 429: `COUNT:RETRY_AFTER_SECONDS`.
    #[arg(long, value_name = "COUNT:SECONDS")]
    pub throttle: Option<String>,
    /// How requests are authorized: `always-allow` (every request), or `rbac` (bearer tokens
    /// from token requests, kube-apiserver's RBAC, HTTPS; the kubeconfig written is an
    /// administrator's).
    #[arg(long, value_name = "MODE", default_value = "always-allow", value_parser = authorization)]
    pub authorization: Authorization,
    /// kube-apiserver feature gates, `Name=true|false[,…]`. Known: `ShardedListAndWatch`
    /// (on here; `=false` serves lists and watches that ignore `shardSelector`).
    #[arg(long, value_name = "NAME=BOOL,...")]
    pub feature_gates: Option<String>,
    /// Serve a `--listen` address other than loopback without `--authorization rbac`: every
    /// request from anyone who reaches the address is then allowed, with no credentials.
    #[arg(long)]
    pub insecure_allow_any: bool,
    /// Serve requests from web pages of this origin (a browser's `Origin` header, exactly:
    /// `http://localhost:3000`). Repeatable. Without it, a request carrying an `Origin` is
    /// refused with 403, so a page the user visits cannot reach the server.
    #[arg(long, value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// Serve requests naming this host (the `Host` header's name: `api.test`; `*`: any).
    /// Repeatable. Without it, only IP addresses, `localhost` and names under it are served,
    /// and a request for another name is refused with 403, so a web page that points its own
    /// name at the server's address (DNS rebinding) cannot reach it.
    #[arg(long, value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// The shortest lifetime a token request may ask for (kube-apiserver's, 10m). For tests
    /// that watch a token expire: a container harness asks for a 20 s token.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = duration, hide = true)]
    pub token_min_expiration: Duration,
}

fn duration(input: &str) -> Result<Duration, String> {
    informant::config::parse_duration(input).map_err(|e| e.to_string())
}

/// Refuses a `--listen` address other than loopback unless requests are authenticated
/// (`--authorization rbac`) or the user insists (`--insecure-allow-any`): without RBAC every
/// request is allowed, so anyone on the network could do anything the administrator can.
fn check_exposure(args: &Args) -> exit::Result<()> {
    let ip = args.listen.ip();
    if ip.is_loopback() || args.authorization == Authorization::Rbac || args.insecure_allow_any {
        return Ok(());
    }
    Err(Failure::message(
        exit::USAGE,
        format!(
            "refusing to listen on {} without --authorization rbac: every request would be \
             allowed, with no credentials, to anyone who can reach that address; listen on \
             loopback (127.0.0.1), add --authorization rbac, or pass --insecure-allow-any to \
             serve it anyway",
            args.listen
        ),
    ))
}

fn authorization(input: &str) -> Result<Authorization, String> {
    input
        .parse()
        .map_err(|e: informant::apiserver::UnknownAuthorization| e.to_string())
}

/// A flag value that is malformed.
fn bad_flag(flag: &str, reason: &str) -> Failure {
    Failure::message(exit::USAGE, format!("invalid flag {flag}: {reason}"))
}

fn parse_fail(s: &str) -> exit::Result<FailRule> {
    let bad = |reason: String| bad_flag("--fail", &reason);
    let parts: Vec<&str> = s.split(':').collect();
    let [verb, resource, count, code] = parts.as_slice() else {
        return Err(bad(format!("{s:?} is not VERB:RESOURCE:COUNT:CODE")));
    };
    Ok(FailRule {
        verb: match *verb {
            "*" => None,
            v => Some(v.parse::<Verb>().map_err(|e| bad(e.to_string()))?),
        },
        resource: (*resource != "*").then(|| (*resource).to_string()),
        count: count
            .parse()
            .map_err(|_| bad(format!("count {count:?} is not a number")))?,
        code: code
            .parse()
            .ok()
            .filter(|c| (100..600).contains(c))
            .ok_or_else(|| bad(format!("code {code:?} is not an HTTP status code")))?,
    })
}

fn parse_throttle(s: &str) -> exit::Result<(u32, u32)> {
    let bad = || bad_flag("--throttle", &format!("{s:?} is not COUNT:SECONDS"));
    let (count, secs) = s.split_once(':').ok_or_else(bad)?;
    Ok((
        count.parse().map_err(|_| bad())?,
        secs.parse().map_err(|_| bad())?,
    ))
}

/// Builds the server from flags, prints its address, writes the kubeconfig (mode 0600), serves
/// until `shutdown` is cancelled. Bad flags and seeds exit 64, and so does an address beyond
/// loopback without `--authorization rbac` or `--insecure-allow-any`; unreadable seeds 66, an
/// unwritable kubeconfig or a server failure 1.
pub async fn run(args: Args, shutdown: CancellationToken) -> exit::Result {
    check_exposure(&args)?;
    let fails = args
        .fail
        .iter()
        .map(|f| parse_fail(f))
        .collect::<Result<Vec<_>, _>>()?;
    let throttle = args.throttle.as_deref().map(parse_throttle).transpose()?;
    let mut feature_gates = FeatureGates::default();
    if let Some(spec) = &args.feature_gates {
        feature_gates
            .set(spec)
            .map_err(|reason| bad_flag("--feature-gates", &reason))?;
    }
    let mut seeds = Vec::new();
    for path in &args.seeds {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Failure::message(
                exit::NO_INPUT,
                format!("cannot read seed file {}: {e}", path.display()),
            )
        })?;
        seeds.extend(parse_yaml(&text).map_err(|e| {
            Failure::message(
                exit::USAGE,
                format!("cannot parse seed file {}: {e}", path.display()),
            )
        })?);
    }
    seeds.insert(0, serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}));
    let config = Config {
        listen: args.listen,
        bookmark_interval: Duration::from_secs(args.bookmark_interval_seconds.max(1)),
        limits: Limits {
            history: args.history,
            ..Limits::default()
        },
        seeds,
        authorization: args.authorization,
        feature_gates,
        token_min_expiration: args.token_min_expiration,
        allowed_origins: args.allow_origin.clone(),
        allowed_hosts: args.allow_host.clone(),
        ..Config::default()
    };
    let server = Server::bind(config).await?;
    let handle = server.handle();
    for rule in fails {
        handle.fail_next(rule.verb, rule.resource.as_deref(), rule.count, rule.code);
    }
    if let Some((count, secs)) = throttle {
        handle.throttle_next(count, secs);
    }
    handle.set_latency(Duration::from_millis(args.latency_ms));
    let addr = server.local_addr();
    if let Some(path) = &args.kubeconfig_out {
        write_kubeconfig(path, &handle.kubeconfig()).map_err(|e| {
            let code = match e {
                KubeconfigWriteError::Render(_) => exit::SOFTWARE,
                KubeconfigWriteError::Write { .. } => exit::FAILURE,
            };
            Failure::new(code, &e)
        })?;
    }
    let exposed = !addr.ip().is_loopback() && args.authorization != Authorization::Rbac;
    if exposed {
        // Before the address line, so whoever reads that line has been warned.
        tracing::warn!(
            listen.addr = %addr,
            "serving every request without credentials beyond loopback (--insecure-allow-any): \
             anyone who reaches this address may do anything"
        );
    }
    // The address is the contract with scripts: one line, flushed before serving.
    let scheme = match args.authorization {
        Authorization::Rbac => "https",
        Authorization::AlwaysAllow => "http",
    };
    outln!("{scheme}://{addr}")?;
    tracing::info!(listen.addr = %addr, authorization = %args.authorization, "apiserver listening");
    Ok(server.run(shutdown).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_flags_parse_wildcards_and_reject_garbage() {
        let r = parse_fail("list:pods:3:500").unwrap();
        assert_eq!(
            (r.verb, r.resource.as_deref(), r.count, r.code),
            (Some(Verb::List), Some("pods"), 3, 500)
        );
        let any = parse_fail("*:*:1:503").unwrap();
        assert_eq!((any.verb, any.resource), (None, None));
        assert!(parse_fail("list:pods:x:500").is_err());
        assert!(parse_fail("fly:pods:1:500").is_err());
        assert!(parse_fail("list:pods:1:99").is_err());
    }

    #[test]
    fn feature_gates_parse_as_kube_apiserver_reads_them() {
        let mut gates = FeatureGates::default();
        assert!(gates.sharded_list_and_watch, "on in the embedded server");
        gates.set("ShardedListAndWatch=false").unwrap();
        assert!(!gates.sharded_list_and_watch);
        gates.set(" ShardedListAndWatch = true ,").unwrap();
        assert!(gates.sharded_list_and_watch);
        assert_eq!(
            gates.set("Bogus=true").unwrap_err(),
            "unrecognized feature gate: Bogus"
        );
        assert_eq!(
            gates.set("ShardedListAndWatch").unwrap_err(),
            "missing bool value for ShardedListAndWatch"
        );
        assert!(
            gates
                .set("ShardedListAndWatch=maybe")
                .unwrap_err()
                .starts_with("invalid value of ShardedListAndWatch=maybe, err: ")
        );
    }

    fn args(listen: &str, extra: &[&str]) -> Args {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: Args,
        }
        let mut argv = vec!["apiserver", "--listen", listen];
        argv.extend_from_slice(extra);
        Cli::parse_from(argv).args
    }

    #[test]
    fn only_loopback_is_served_without_rbac_unless_insisted() {
        assert!(check_exposure(&args("127.0.0.1:0", &[])).is_ok());
        assert!(check_exposure(&args("[::1]:0", &[])).is_ok());
        let refused = check_exposure(&args("0.0.0.0:6443", &[])).unwrap_err();
        assert_eq!(refused.code, exit::USAGE);
        let message = refused.message.unwrap();
        assert!(message.contains("--insecure-allow-any"), "{message}");
        assert!(message.contains("--authorization rbac"), "{message}");
        assert!(check_exposure(&args("192.0.2.1:0", &[])).is_err());
        assert!(check_exposure(&args("0.0.0.0:0", &["--authorization", "rbac"])).is_ok());
        assert!(check_exposure(&args("0.0.0.0:0", &["--insecure-allow-any"])).is_ok());
    }

    #[test]
    fn the_token_minimum_is_ten_minutes_unless_lowered() {
        assert_eq!(
            args("127.0.0.1:0", &[]).token_min_expiration,
            Duration::from_mins(10)
        );
        let lowered = args("127.0.0.1:0", &["--token-min-expiration", "20s"]);
        assert_eq!(lowered.token_min_expiration, Duration::from_secs(20));
    }

    #[test]
    fn throttle_flags_parse() {
        assert_eq!(parse_throttle("3:2").unwrap(), (3, 2));
        assert!(parse_throttle("3").is_err());
    }
}
