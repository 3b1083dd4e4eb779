//! The `--hook-*` flags of `informant run`: the hook policy, set by whoever runs the manager
//! (docs/hooks.md, "Trust model"), parsed before anything reaches the cluster.

use informant::hooks::{self, Policy};

use super::super::exit::{self, Failure};

/// The `--hook-*` flags of `informant run`: the hook policy.
// Reason: these doc comments are the `--help` text, where Markdown backticks would show as-is.
#[allow(clippy::doc_markdown)]
#[derive(clap::Args, Debug)]
pub struct HookArgs {
    /// What Controllers may make the manager run and call: "restricted" (only what
    /// --hook-allow-* lists) or "open" (any command, any URL but link-local addresses and the
    /// API server's, plain HTTP). Default: restricted if --hook-allow-exec, --hook-allow-url or
    /// --hook-allow-http is given, else open, with a warning.
    #[arg(
        long = "hook-policy",
        value_enum,
        value_name = "POLICY",
        env = "INFORMANT_HOOK_POLICY",
        help_heading = "Hooks"
    )]
    pub mode: Option<HookPolicy>,

    /// A program exec hooks may run: an absolute path, or a directory ending in "/" for every
    /// program under it. Repeatable (comma-separated in the environment variable).
    #[arg(
        long = "hook-allow-exec",
        value_name = "PATH",
        env = "INFORMANT_HOOK_ALLOW_EXEC",
        value_delimiter = ',',
        help_heading = "Hooks"
    )]
    pub allow_exec: Vec<String>,

    /// A host webhooks may call: HOST, HOST:PORT, an IP address, or a CIDR block (URLs naming
    /// an address in it). The only way to let webhooks reach a link-local address or the API
    /// server's (name it; 0.0.0.0/0 does not). Repeatable (comma-separated in the environment
    /// variable).
    #[arg(
        long = "hook-allow-url",
        value_name = "HOST|HOST:PORT|CIDR",
        env = "INFORMANT_HOOK_ALLOW_URL",
        value_delimiter = ',',
        help_heading = "Hooks"
    )]
    pub allow_url: Vec<String>,

    /// Allow plain http:// webhooks (to the allowed hosts); otherwise only https:// with a
    /// caBundle.
    #[arg(
        long = "hook-allow-http",
        env = "INFORMANT_HOOK_ALLOW_HTTP",
        help_heading = "Hooks"
    )]
    pub allow_http: bool,

    /// Allow Controllers whose for, owns or watches kinds include Secret: their objects, data
    /// included, are sent to the hook. Off: such a Controller does not run (HookNotAllowed).
    #[arg(
        long = "hook-allow-secrets",
        env = "INFORMANT_HOOK_ALLOW_SECRETS",
        help_heading = "Hooks"
    )]
    pub allow_secrets: bool,

    /// The largest hook answer read (an exec hook's standard output, a webhook's body), in
    /// bytes; a larger one fails the call (an exec hook is killed).
    #[arg(long = "hook-max-response-bytes", value_name = "BYTES", default_value_t = hooks::DEFAULT_MAX_RESPONSE_BYTES, env = "INFORMANT_HOOK_MAX_RESPONSE_BYTES", help_heading = "Hooks")]
    pub max_response_bytes: usize,

    /// The most hook calls at once a Controller may ask for (spec.concurrency), 1 to 64 (the
    /// most validation allows); a Controller asking for more is not started (HookNotAllowed).
    #[arg(long = "hook-max-concurrency", value_name = "CALLS", default_value_t = hooks::MAX_CONCURRENCY, value_parser = clap::value_parser!(u16).range(1..=i64::from(hooks::MAX_CONCURRENCY)), env = "INFORMANT_HOOK_MAX_CONCURRENCY", help_heading = "Hooks")]
    pub max_concurrency: u16,
}

/// `--hook-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HookPolicy {
    /// Only what --hook-allow-exec, --hook-allow-url and --hook-allow-http list.
    Restricted,
    /// Any command, any URL but link-local addresses and the API server's, plain HTTP.
    Open,
}

impl HookArgs {
    /// The hook policy from the `--hook-*` flags, and whether it is open without having been
    /// asked for (no `--hook-*` flag: the caller warns). See [`with_api_server`] for the API
    /// server's address.
    ///
    /// # Errors
    /// A usage failure (64) naming every malformed or contradictory flag.
    pub fn policy(&self) -> exit::Result<(Policy, bool)> {
        let mut problems = Vec::new();
        let exec: Vec<hooks::ExecRule> = self
            .allow_exec
            .iter()
            .filter_map(|e| e.parse().map_err(|e| problems.push(format!("{e}"))).ok())
            .collect();
        let urls: Vec<hooks::UrlRule> = self
            .allow_url
            .iter()
            .filter_map(|e| e.parse().map_err(|e| problems.push(format!("{e}"))).ok())
            .collect();
        let listed = !self.allow_exec.is_empty() || !self.allow_url.is_empty() || self.allow_http;
        let mode = self.mode.unwrap_or(if listed {
            HookPolicy::Restricted
        } else {
            HookPolicy::Open
        });
        let mut policy = match mode {
            HookPolicy::Restricted => Policy::restricted().allow_http(self.allow_http),
            HookPolicy::Open => {
                if !self.allow_exec.is_empty() || self.allow_http {
                    problems.push(
                        "--hook-allow-exec and --hook-allow-http have no effect with \
                         --hook-policy=open, which allows every command and plain HTTP; remove \
                         them or use --hook-policy=restricted"
                            .to_owned(),
                    );
                }
                Policy::open()
            }
        };
        if self.max_response_bytes == 0 {
            problems.push("invalid --hook-max-response-bytes: must be at least 1".to_owned());
        }
        if !problems.is_empty() {
            return Err(Failure::message(exit::USAGE, problems.join("\n")));
        }
        policy = exec.into_iter().fold(policy, Policy::allow_exec);
        policy = urls.into_iter().fold(policy, Policy::allow_url);
        policy = policy
            .allow_secrets(self.allow_secrets)
            .max_response_bytes(self.max_response_bytes);
        Ok((policy, self.mode.is_none() && !listed))
    }
}

/// `policy`, refusing webhooks the address of the API server at `url` (the client's).
pub(super) fn with_api_server(policy: Policy, url: &http::Uri) -> Policy {
    let Some(host) = url.host() else {
        return policy;
    };
    let port = url
        .port_u16()
        .unwrap_or(if url.scheme_str() == Some("http") {
            80
        } else {
            443
        });
    policy.api_server(host, port)
}
