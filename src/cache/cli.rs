//! `informant explain` and `informant cache get|list`: the cache tree a config builds, which
//! layer serves an object, and reads through the tree, with one exit code per error class.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::core::{DynamicObject, GroupVersionKind};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::api::ListOptions;
use super::build::{build_with, resolve_scopes};
use super::error::Error;
use super::informer_cache::Context;
use super::resolver::{BuiltinKinds, Discovery};
use super::selector::{FieldSelector, LabelSelector};
use crate::exit_code;
use crate::report::error_chain;

/// Exit codes of `informant cache` and `informant explain --object`, one per error class.
pub mod codes {
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
}

/// The text appended to `--help` of both subcommands.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0   success
  1   failure at run time (API server unreachable, bad kubeconfig)
  3   not found: the object is not in the cache
  4   kind not cached: readerFailOnMissingInformer is set and no informer exists
  5   unknown namespace: the namespace is not in defaultNamespaces and there is no \"\" entry
  6   the cache is not started
  7   timeout waiting for the informer to sync
  8   informer failed: the API server refuses to list/watch the kind (RBAC, 403)
  9   unsupported list option (continue token, non-exact field selector)
  10  unknown kind: the API server does not serve it
  64  invalid arguments or invalid config
  66  the config file can not be read";

/// The exit code of a cache error.
#[must_use]
pub fn exit_code_of(error: &Error) -> u8 {
    match error {
        Error::NotFound { .. } => codes::NOT_FOUND,
        Error::KindNotCached { .. } => codes::KIND_NOT_CACHED,
        Error::UnknownNamespaceGet { .. } | Error::UnknownNamespaceList { .. } => {
            codes::UNKNOWN_NAMESPACE
        }
        Error::NotStarted => codes::NOT_STARTED,
        Error::Timeout { .. } => codes::TIMEOUT,
        Error::InformerFailed { .. } => codes::INFORMER_FAILED,
        Error::ContinueNotSupported | Error::NonExactFieldSelector => codes::UNSUPPORTED,
        Error::UnknownKind { .. } => codes::UNKNOWN_KIND,
        Error::ClusterScopedNotCached { .. } => codes::UNKNOWN_NAMESPACE,
        Error::Convert { .. } | Error::Decode { .. } => exit_code::SOFTWARE,
    }
}

/// Output formats.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Human-readable text (explain) or `namespace/name` lines (cache).
    Text,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
    /// `namespace/name` per object.
    Name,
}

/// Arguments of `informant explain`.
#[derive(clap::Args, Debug)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct ExplainArgs {
    /// The `CacheConfig` YAML file.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: PathBuf,
    /// Which cache serves this object: `APIVERSION/KIND/NAMESPACE/NAME` (`v1/Pod/team-a/web`,
    /// `apps/v1/Deployment/shop/cart`, `v1/Node//node01` for cluster-scoped kinds).
    #[arg(long, value_name = "APIVERSION/KIND/NAMESPACE/NAME")]
    pub object: Option<String>,
    /// Output format (text or json).
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    pub output: Output,
}

/// Arguments of `informant cache`.
#[derive(clap::Args, Debug)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct CacheArgs {
    /// `get` one object or `list` objects.
    #[arg(value_enum)]
    pub verb: Verb,
    /// The object's name (`get` only).
    pub name: Option<String>,
    /// The `CacheConfig` YAML file.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: PathBuf,
    /// The kubeconfig to connect with (default: $KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kind's apiVersion (`v1`, `apps/v1`).
    #[arg(long, value_name = "V")]
    pub api_version: String,
    /// The kind (`Pod`).
    #[arg(long, value_name = "K")]
    pub kind: String,
    /// The namespace (omit for cluster-scoped kinds, or to list every namespace).
    #[arg(long, short = 'n', value_name = "NS")]
    pub namespace: Option<String>,
    /// Label selector for `list`.
    #[arg(long, short = 'l', value_name = "SEL")]
    pub selector: Option<String>,
    /// Field selector for `list` (exact matches only, as the cache supports).
    #[arg(long, value_name = "SEL")]
    pub field_selector: Option<String>,
    /// At most this many objects (`list`).
    #[arg(long)]
    pub limit: Option<usize>,
    /// A continue token (`list`): always rejected by the cache, as in controller-runtime.
    #[arg(long = "continue", value_name = "TOKEN")]
    pub continue_token: Option<String>,
    /// Call `ensure_informer` first (what a controller watching the kind does), so a config with
    /// readerFailOnMissingInformer can be read.
    #[arg(long)]
    pub ensure_informer: bool,
    /// Give up waiting for the informer to sync after this many seconds.
    #[arg(long, default_value = "30", value_name = "SECONDS")]
    pub timeout: u64,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "yaml")]
    pub output: Output,
}

/// The verbs of `informant cache`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Read one object.
    Get,
    /// List objects.
    List,
}

/// Splits `apps/v1` into a GVK with `kind`.
#[must_use]
pub fn parse_gvk(api_version: &str, kind: &str) -> GroupVersionKind {
    match api_version.split_once('/') {
        Some((group, version)) => GroupVersionKind::gvk(group, version, kind),
        None => GroupVersionKind::gvk("", api_version, kind),
    }
}

/// Parses `APIVERSION/KIND/NAMESPACE/NAME` (apiVersion may contain one `/`).
///
/// # Errors
/// A message when there are too few parts.
pub fn parse_object(text: &str) -> Result<(GroupVersionKind, Option<String>, String), String> {
    let parts: Vec<&str> = text.rsplitn(4, '/').collect();
    let [name, namespace, kind, api_version] = parts[..] else {
        return Err(format!(
            "--object {text:?}: expected APIVERSION/KIND/NAMESPACE/NAME"
        ));
    };
    if name.is_empty() || kind.is_empty() || api_version.is_empty() {
        return Err(format!(
            "--object {text:?}: expected APIVERSION/KIND/NAMESPACE/NAME"
        ));
    }
    let namespace = (!namespace.is_empty()).then(|| namespace.to_string());
    Ok((parse_gvk(api_version, kind), namespace, name.to_string()))
}

fn load(path: &PathBuf, command: &str) -> Result<crate::config::Validated, u8> {
    crate::config::load(path).map_err(|e| {
        eprintln!("informant {command}: {}", error_chain(&e));
        if matches!(e, crate::config::Error::Read { .. }) {
            exit_code::NO_INPUT
        } else {
            exit_code::USAGE
        }
    })
}

fn runtime(command: &str) -> Result<tokio::runtime::Runtime, u8> {
    tokio::runtime::Runtime::new().map_err(|e| {
        eprintln!("informant {command}: can not start the async runtime: {e}");
        exit_code::FAILURE
    })
}

/// `informant explain`: prints the tree (and the route of `--object`); returns the exit code.
#[must_use]
pub fn explain(args: &ExplainArgs) -> u8 {
    let valid = match load(&args.config, "explain") {
        Ok(v) => v,
        Err(code) => return code,
    };
    let rt = match runtime("explain") {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async {
        // Offline: a client that is never used and the built-in kind table.
        let offline = "http://127.0.0.1:9".parse().map(kube::Config::new);
        let Ok(client) = offline
            .map_err(|_| ())
            .and_then(|c| kube::Client::try_from(c).map_err(|_| ()))
        else {
            eprintln!("informant explain: can not create an offline client");
            return exit_code::SOFTWARE;
        };
        let context = Context {
            client,
            resolver: Arc::new(BuiltinKinds),
            reader_fail_on_missing_informer: valid.cache.reader_fail_on_missing_informer,
            sync_timeout: None,
        };
        let tree = match build_with(&valid.cache, &context) {
            Ok(tree) => tree,
            Err(e) => {
                eprintln!("informant explain: {}", error_chain(&e));
                return exit_code::USAGE;
            }
        };
        let description = tree.describe("root");
        let route = match &args.object {
            None => None,
            Some(text) => match parse_object(text) {
                Ok((gvk, ns, name)) => {
                    Some((text, tree.route(&gvk, ns.as_deref(), Some(&name)).await))
                }
                Err(message) => {
                    eprintln!("informant explain: {message}");
                    return exit_code::USAGE;
                }
            },
        };
        if args.output == Output::Json {
            let mut doc = serde_json::json!({"tree": description});
            if let Some((object, route)) = &route {
                doc["object"] = serde_json::json!(object);
                match route {
                    Ok(path) => doc["servedBy"] = serde_json::json!(path),
                    Err(e) => doc["error"] = serde_json::json!(e.to_string()),
                }
            }
            println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        } else {
            print!("{}", description.to_text());
            if let Some((object, route)) = &route {
                println!("\n{object}:");
                match route {
                    Ok(path) => path.iter().for_each(|step| println!("  {step}")),
                    Err(e) => println!("  error: {e}"),
                }
            }
        }
        match route {
            Some((_, Err(e))) => exit_code_of(&e),
            _ => exit_code::OK,
        }
    })
}

async fn client_for(args: &CacheArgs) -> Result<kube::Client, String> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig =
                kube::config::Kubeconfig::read_from(path).map_err(|e| error_chain(&e))?;
            kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|e| error_chain(&e))?
        }
        None => kube::Config::infer().await.map_err(|e| error_chain(&e))?,
    };
    kube::Client::try_from(config).map_err(|e| error_chain(&e))
}

fn print_objects(objects: &[Arc<DynamicObject>], output: Output, single: bool) -> u8 {
    let objects: Vec<&DynamicObject> = objects.iter().map(|o| &**o).collect();
    let rendered = match output {
        Output::Name | Output::Text => Ok(objects
            .iter()
            .map(|o| match &o.metadata.namespace {
                Some(ns) => format!("{ns}/{}\n", o.metadata.name.as_deref().unwrap_or_default()),
                None => format!("{}\n", o.metadata.name.as_deref().unwrap_or_default()),
            })
            .collect::<String>()),
        Output::Json if single => serde_json::to_string_pretty(&objects[0])
            .map(|s| s + "\n")
            .map_err(|e| e.to_string()),
        Output::Json => serde_json::to_string_pretty(&objects)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string()),
        Output::Yaml if single => serde_yaml::to_string(&objects[0]).map_err(|e| e.to_string()),
        Output::Yaml => serde_yaml::to_string(&objects).map_err(|e| e.to_string()),
    };
    match rendered {
        Ok(text) => {
            print!("{text}");
            exit_code::OK
        }
        Err(e) => {
            eprintln!("informant cache: can not print: {e}");
            exit_code::SOFTWARE
        }
    }
}

/// `informant cache get|list`: builds the tree, reads through it, prints what a controller
/// would see, or the error; returns the exit code.
#[must_use]
pub fn cache(args: &CacheArgs) -> u8 {
    let valid = match load(&args.config, "cache") {
        Ok(v) => v,
        Err(code) => return code,
    };
    if args.verb == Verb::Get && args.name.is_none() {
        eprintln!("informant cache: get needs a NAME");
        return exit_code::USAGE;
    }
    let label_selector = match args
        .selector
        .as_deref()
        .map(LabelSelector::parse)
        .transpose()
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("informant cache: --selector: {}", error_chain(&e));
            return exit_code::USAGE;
        }
    };
    let field_selector = match args
        .field_selector
        .as_deref()
        .map(FieldSelector::parse)
        .transpose()
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("informant cache: --field-selector: {}", error_chain(&e));
            return exit_code::USAGE;
        }
    };
    let rt = match runtime("cache") {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async {
        let client = match client_for(args).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("informant cache: {e}");
                return exit_code::FAILURE;
            }
        };
        let resolver = Arc::new(Discovery::new(client.clone()));
        let mut options = valid.cache;
        resolve_scopes(&mut options, resolver.as_ref()).await;
        let context = Context {
            resolver,
            client,
            reader_fail_on_missing_informer: options.reader_fail_on_missing_informer,
            sync_timeout: Some(Duration::from_secs(args.timeout)),
        };
        let tree = match build_with(&options, &context) {
            Ok(tree) => tree,
            Err(e) => {
                eprintln!("informant cache: {}", error_chain(&e));
                return exit_code::USAGE;
            }
        };
        let tracker = TaskTracker::new();
        let shutdown = CancellationToken::new();
        tree.start(&tracker, &shutdown);
        let gvk = parse_gvk(&args.api_version, &args.kind);
        let result = async {
            if args.ensure_informer {
                tree.ensure_informer(&gvk).await?;
            }
            if let (Verb::Get, Some(name)) = (args.verb, &args.name) {
                let object = tree.get(&gvk, args.namespace.as_deref(), name).await?;
                return Ok((vec![object], true));
            }
            let options = ListOptions {
                namespace: args.namespace.clone(),
                label_selector: label_selector.clone(),
                field_selector: field_selector.clone(),
                limit: args.limit,
                continue_token: args.continue_token.clone(),
            };
            Ok::<_, Error>((tree.list(&gvk, &options).await?, false))
        }
        .await;
        shutdown.cancel();
        tracker.close();
        tracker.wait().await;
        match result {
            Ok((objects, single)) => print_objects(&objects, args.output, single),
            Err(e) => {
                eprintln!("informant cache: {}", error_chain(&e));
                exit_code_of(&e)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_references_split_from_the_right() {
        let (gvk, ns, name) = parse_object("apps/v1/Deployment/shop/cart").unwrap();
        assert_eq!(
            (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()),
            ("apps", "v1", "Deployment")
        );
        assert_eq!((ns.as_deref(), name.as_str()), (Some("shop"), "cart"));
        let (gvk, ns, _) = parse_object("v1/Node//n1").unwrap();
        assert_eq!((gvk.group.as_str(), ns), ("", None));
        assert!(parse_object("Pod/x").is_err());
    }
}
