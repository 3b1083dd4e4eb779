//! `informant validate`: checks a config file, the `CacheConfig` and every `Controller` of a
//! multi-document file; every error at once, with its field path.

use std::fmt::Write as _;
use std::path::PathBuf;

use informant::config::{self, Origin};
use informant::hooks::{
    ControllerError, ControllerKey, Hook, ValidatedController, controllers_key,
    validate_controller_value,
};
use informant::yaml::{document_kind, documents};

use super::exit::{self, Failure};
use super::out::{out, outln};
use super::run::HookArgs;

/// Arguments of `informant validate`.
// Reason: these doc comments are the `--help` text, where Markdown backticks would show as-is.
#[allow(clippy::doc_markdown)]
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The config YAML file (the document you would `kubectl apply`): a CacheConfig, or one
    /// CacheConfig and any number of Controllers separated by `---`.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: PathBuf,

    /// The manager's hook policy: given any `--hook-*` flag, each Controller is also checked
    /// against the policy those flags make, as `informant run` with the same flags would.
    #[command(flatten)]
    pub hooks: HookArgs,
}

/// The summary on standard output, or every error on standard error and exit 64 (invalid) or
/// 66 (unreadable). Each `Controller` is checked against the file's `CacheConfig` (its kinds
/// must be cached); its errors are prefixed with `controllers[<name>]`. Given any `--hook-*`
/// flag, a valid Controller the policy of those flags refuses is an error too (`informant run`
/// would keep it back, `HookNotAllowed`); without one, the policy is not checked.
pub fn run(args: &Args) -> exit::Result {
    let (policy, unasked) = args.hooks.policy()?;
    let loaded = config::load(&args.config);
    if let Err(e @ config::Error::Read { .. }) = loaded {
        return Err(e.into());
    }
    let text = std::fs::read_to_string(&args.config).map_err(|e| {
        Failure::from(config::Error::Read {
            path: args.config.clone(),
            source: e,
        })
    })?;
    let origin = Origin::File(args.config.clone());
    let cache = loaded.as_ref().ok().map(|v| &v.cache);
    let controllers = match documents(&text) {
        Ok(documents) => documents
            .into_iter()
            .filter(|d| document_kind(d) == Some("Controller"))
            .enumerate()
            .map(|(i, d)| {
                let name = d["metadata"]["name"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .map_or_else(|| i.to_string(), str::to_owned);
                let key = controllers_key(&d);
                (name, key, validate_controller_value(d, &origin, cache))
            })
            .collect(),
        // The CacheConfig's load reports the syntax error.
        Err(_) => Vec::new(),
    };
    let mut problems: Vec<String> = Vec::new();
    if let Err(e) = &loaded {
        problems.push(exit::error_chain(e));
    }
    for (name, key, result) in &controllers {
        match result {
            Err(e) => problems.push(controller_problem(name, key, e)),
            Ok(valid) if !unasked => {
                if let Some(rules) = policy.refusal(&valid.settings) {
                    problems.push(format!(
                        "{}: controller {key} is refused by the hook policy of the --hook-* \
                         flags (informant run would keep it back, HookNotAllowed):\n  \
                         controllers[{name}]: {rules}",
                        args.config.display()
                    ));
                }
            }
            Ok(_) => {}
        }
    }
    match loaded {
        Ok(valid) if problems.is_empty() => {
            out!("{}", valid.summary())?;
            let valid: Vec<&ValidatedController> = controllers
                .iter()
                .filter_map(|(_, _, r)| r.as_ref().ok())
                .collect();
            if !valid.is_empty() {
                outln!("controllers:")?;
                for controller in valid {
                    outln!("  {}", describe(controller))?;
                }
            }
            Ok(())
        }
        Err(e) if problems.len() == 1 => Err(e.into()),
        _ => Err(Failure::message(exit::USAGE, problems.join("\n"))),
    }
}

/// `<file>: invalid controller <namespace>/<name> (<n> errors):` and one line per error, its
/// path prefixed with `controllers[<name>]`.
fn controller_problem(name: &str, key: &ControllerKey, error: &ControllerError) -> String {
    let n = error.errors.len();
    let mut out = format!(
        "{}: invalid controller {key} ({n} error{}):",
        error.origin,
        if n == 1 { "" } else { "s" }
    );
    for e in &error.errors {
        let path = e.path.to_string();
        let path = if path == "<document>" {
            format!("controllers[{name}]")
        } else {
            format!("controllers[{name}].{path}")
        };
        let _ = write!(out, "\n  {path}: {}", e.message);
    }
    out
}

/// One line per valid controller: its name, kind and hook.
fn describe(controller: &ValidatedController) -> String {
    let s = &controller.settings;
    let api_version = s.for_kind.api_version();
    let hook = match &s.hook {
        Hook::Exec { command, .. } => format!("exec {}", command.join(" ")),
        Hook::Persistent { command, .. } => format!("exec (persistent) {}", command.join(" ")),
        Hook::Webhook { url, .. } => format!("webhook {url}"),
    };
    format!(
        "{}: for {api_version} {}, owns {}, watches {}; {hook}",
        s.key,
        s.for_kind.kind,
        s.owns.len(),
        s.watches.len()
    )
}
