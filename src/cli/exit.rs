//! Exit codes and error printing: the one place that decides what a failure looks like to the
//! user and to a script. Codes from BSD `sysexits.h` (as linkerd2-proxy uses them: 64 for bad
//! configuration, 1 for a failure at run time), plus one code per cache error class.

#[cfg(feature = "apiserver")]
use informant::apiserver;
use informant::{cache, config, recorder};

/// Success.
pub const OK: u8 = 0;
/// A failure at run time (startup failed, the server went away, ...).
pub const FAILURE: u8 = 1;
/// The object is not in the cache (`Pod "x" not found`).
pub const NOT_FOUND: u8 = 3;
/// `readerFailOnMissingInformer` is set and the kind has no informer.
pub const KIND_NOT_CACHED: u8 = 4;
/// The namespace is not served by the tree (no `""` entry).
pub const UNKNOWN_NAMESPACE: u8 = 5;
/// The cache was read before it was started.
pub const NOT_STARTED: u8 = 6;
/// The informer did not sync in time.
pub const TIMEOUT: u8 = 7;
/// The informer can not list or watch the kind (403, 401, 404 from the API server).
pub const INFORMER_FAILED: u8 = 8;
/// The list options are not supported by the cache (continue, non-exact field selector).
pub const UNSUPPORTED: u8 = 9;
/// The API server does not serve the kind.
pub const UNKNOWN_KIND: u8 = 10;
/// `rbac --check`: the cluster does not grant a permission the config needs.
pub const PERMISSION_MISSING: u8 = 11;
/// The input is invalid: a bad config, a bad flag value (`EX_USAGE`).
pub const USAGE: u8 = 64;
/// An input file is missing or unreadable (`EX_NOINPUT`).
pub const NO_INPUT: u8 = 66;
/// A service the command needs is unavailable: an address to listen on is taken
/// (`EX_UNAVAILABLE`).
pub const UNAVAILABLE: u8 = 69;
/// The command is not implemented yet, or an internal error (`EX_SOFTWARE`).
pub const SOFTWARE: u8 = 70;

/// Every exit code and what it means: the one table `--help` prints (at the top level and
/// under `cache` and `explain`, the commands with one code per cache error class).
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0   success (also when the reader of standard output left early, as in `| head -1`)
  1   failure at run time (API server unreachable, manager failed)
  2   the command line does not parse (unknown flag, missing argument)
  3   not found: the object is not in the cache
  4   kind not cached: readerFailOnMissingInformer is set and no informer exists
  5   unknown namespace: not in defaultNamespaces, no namespaceSelector match, no \"\" entry
  6   the cache is not started
  7   timeout waiting for the informer to sync
  8   informer failed: the API server refuses to list/watch the kind (RBAC, 403)
  9   unsupported list option (continue token, non-exact field selector)
  10  unknown kind: the API server (offline: the built-in kinds) does not serve it (yet)
  11  rbac --check: a permission the config needs is not granted (the YAML to grant it is printed)
  64  invalid config, kubeconfig or argument values (a namespace on a cluster-scoped kind)
  66  an input file (config, kubeconfig, seed) can not be read
  69  an address to listen on is taken
  70  internal error";

/// Why a command failed: the exit code and what to print on standard error (nothing when
/// the command already printed its answer, as `explain --object` does for a refused read).
#[derive(Debug)]
pub struct Failure {
    /// The process exit code.
    pub code: u8,
    /// The message, without the `informant <command>: ` prefix.
    pub message: Option<String>,
}

impl Failure {
    /// A failure with `code`, printing `error` and its whole `source()` chain.
    pub fn new(code: u8, error: &(dyn std::error::Error + 'static)) -> Self {
        Self {
            code,
            message: Some(error_chain(error)),
        }
    }

    /// A failure with `code`, printing `message`.
    pub fn message(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: Some(message.into()),
        }
    }

    /// A failure whose explanation the command already printed.
    pub fn silent(code: u8) -> Self {
        Self {
            code,
            message: None,
        }
    }

    /// Prints the message as `informant <command>: <message>` and returns the exit code.
    pub fn report(self, command: &str) -> u8 {
        if let Some(message) = &self.message {
            eprintln!("informant {command}: {message}");
        }
        self.code
    }
}

/// What a command returns.
pub type Result<T = ()> = std::result::Result<T, Failure>;

/// A config that can not be used: 66 when the file can not be read, 64 when it is invalid.
impl From<config::Error> for Failure {
    fn from(error: config::Error) -> Self {
        let code = match error {
            config::Error::Read { .. } => NO_INPUT,
            _ => USAGE,
        };
        Self::new(code, &error)
    }
}

/// A read through the cache tree that failed: one code per error class.
impl From<cache::Error> for Failure {
    fn from(error: cache::Error) -> Self {
        Self::new(cache_code(&error), &error)
    }
}

/// A simulation that failed: the input's fault (64, 66) unless the output could not be written.
impl From<recorder::simulate::Error> for Failure {
    fn from(error: recorder::simulate::Error) -> Self {
        use recorder::simulate::Error;
        let code = match error {
            // A closed pipe, `simulate | head -1`, as every subcommand's standard output.
            Error::Write(e) => return super::out::failed(&e),
            Error::Open { .. } | Error::Read { .. } => NO_INPUT,
            Error::Parse { .. } | Error::BadTime { .. } | Error::BadOption { .. } => USAGE,
        };
        Self::new(code, &error)
    }
}

/// The embedded API server could not start or failed.
#[cfg(feature = "apiserver")]
impl From<apiserver::Error> for Failure {
    fn from(error: apiserver::Error) -> Self {
        let code = match error {
            apiserver::Error::Seed { .. } => USAGE,
            apiserver::Error::Bind { .. } => UNAVAILABLE,
            apiserver::Error::Serve(_) | apiserver::Error::Tls(_) => FAILURE,
        };
        Self::new(code, &error)
    }
}

/// The exit code of a cache error.
pub fn cache_code(error: &cache::Error) -> u8 {
    use cache::Error;
    match error {
        Error::NotFound { .. } => NOT_FOUND,
        Error::KindNotCached { .. } => KIND_NOT_CACHED,
        Error::UnknownNamespaceGet { .. }
        | Error::UnknownNamespaceList { .. }
        | Error::ClusterScopedNotCached { .. } => UNKNOWN_NAMESPACE,
        Error::NotStarted => NOT_STARTED,
        Error::Timeout { .. } => TIMEOUT,
        Error::InformerFailed { .. } => INFORMER_FAILED,
        Error::ContinueNotSupported | Error::NonExactFieldSelector => UNSUPPORTED,
        Error::UnknownKind { .. } | Error::WaitingForKind { .. } => UNKNOWN_KIND,
        Error::Discovery { .. } => FAILURE,
        Error::Convert { .. } | Error::Decode { .. } => SOFTWARE,
    }
}

pub use informant::telemetry::error_chain;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read config.yaml")]
    struct ReadConfig(#[source] std::io::Error);

    #[test]
    fn the_chain_joins_every_layer_once() {
        let error = ReadConfig(std::io::Error::other("permission denied"));
        assert_eq!(
            error_chain(&error),
            "cannot read config.yaml: permission denied"
        );
    }

    #[test]
    fn the_help_table_lists_every_exit_code_once() {
        let codes = [
            OK,
            FAILURE,
            2, // clap's, for a command line that does not parse
            NOT_FOUND,
            KIND_NOT_CACHED,
            UNKNOWN_NAMESPACE,
            NOT_STARTED,
            TIMEOUT,
            INFORMER_FAILED,
            UNSUPPORTED,
            UNKNOWN_KIND,
            PERMISSION_MISSING,
            USAGE,
            NO_INPUT,
            UNAVAILABLE,
            SOFTWARE,
        ];
        let listed: Vec<u8> = EXIT_CODES_HELP
            .lines()
            .skip(1)
            .map(|line| line.split_whitespace().next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(listed, codes);
    }

    #[test]
    fn unreadable_configs_exit_66_and_invalid_ones_64() {
        let unreadable = config::load("/nonexistent/informant.yaml").unwrap_err();
        assert_eq!(Failure::from(unreadable).code, NO_INPUT);
        let invalid = config::load_str("kind: Nope\n").unwrap_err();
        assert_eq!(Failure::from(invalid).code, USAGE);
    }
}
