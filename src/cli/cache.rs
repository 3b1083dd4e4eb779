//! `informant cache get|list`: reads through the cache tree a config builds, against a real
//! API server, and prints exactly what a controller would see (or the error it would get).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use informant::cache::Discovery;
use informant::cache::{
    Cache, ClusterScope, Context, ListOptions, Plan, Resolver, list_namespace_labels,
    resolve_scopes,
};
use informant::selector::{FieldSelector, LabelSelector};
use kube::core::DynamicObject;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::exit::{self, Failure};
use super::out::out;
use super::{check_kind, parse_gvk};

/// Output formats of `informant cache`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// The object (`get`) or a list of objects (`list`) as YAML.
    Yaml,
    /// The same, as JSON.
    Json,
    /// `namespace/name` (or `name`) per object.
    Name,
}

/// The verbs of `informant cache`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Read one object.
    Get,
    /// List objects.
    List,
}

/// Arguments of `informant cache`.
#[derive(clap::Args, Debug)]
#[command(after_help = exit::EXIT_CODES_HELP)]
pub struct Args {
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
    /// `list` in every namespace, as kubectl's -A (the same as no --namespace).
    #[arg(long, short = 'A', conflicts_with = "namespace")]
    pub all_namespaces: bool,
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

/// A client from `--kubeconfig`, or kube's inference ($KUBECONFIG, ~/.kube/config, in-cluster).
/// A `--kubeconfig` that can not be read exits 66, one that is not a kubeconfig 64, any other
/// failure 1.
pub async fn client(kubeconfig: Option<&PathBuf>) -> exit::Result<kube::Client> {
    let failed = |e: &(dyn std::error::Error + 'static)| Failure::new(exit::FAILURE, e);
    kube::Client::try_from(config(kubeconfig).await?).map_err(|e| failed(&e))
}

/// The client configuration of [`client`], with the same exit codes.
pub async fn config(kubeconfig: Option<&PathBuf>) -> exit::Result<kube::Config> {
    let failed = |e: &(dyn std::error::Error + 'static)| Failure::new(exit::FAILURE, e);
    Ok(match kubeconfig {
        Some(path) => {
            // Read here rather than by kube's `Kubeconfig::read_from`, whose message quotes the
            // path twice ('"/x"') and whose missing file would be a failure (1), not 66.
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure::message(
                    exit::NO_INPUT,
                    format!("cannot read kubeconfig {}: {e}", path.display()),
                )
            })?;
            let kubeconfig = kube::config::Kubeconfig::from_yaml(&text).map_err(|e| {
                Failure::message(
                    exit::USAGE,
                    format!(
                        "invalid kubeconfig {}: {}",
                        path.display(),
                        exit::error_chain(&e)
                    ),
                )
            })?;
            kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|e| failed(&e))?
        }
        None => kube::Config::infer().await.map_err(|e| failed(&e))?,
    })
}

fn render(objects: &[Arc<DynamicObject>], output: Output, single: bool) -> exit::Result<String> {
    let software = |e: &(dyn std::error::Error + 'static)| Failure::new(exit::SOFTWARE, e);
    let objects: Vec<&DynamicObject> = objects.iter().map(|o| &**o).collect();
    match (output, single, objects.first()) {
        (Output::Name, ..) => Ok(objects
            .iter()
            .map(|o| {
                let name = o.metadata.name.as_deref().unwrap_or_default();
                match &o.metadata.namespace {
                    Some(ns) => format!("{ns}/{name}\n"),
                    None => format!("{name}\n"),
                }
            })
            .collect()),
        (Output::Json, true, Some(one)) => serde_json::to_string_pretty(one)
            .map(|s| s + "\n")
            .map_err(|e| software(&e)),
        (Output::Json, ..) => serde_json::to_string_pretty(&objects)
            .map(|s| s + "\n")
            .map_err(|e| software(&e)),
        (Output::Yaml, true, Some(one)) => {
            informant::yaml::to_string(one).map_err(|e| software(&e))
        }
        (Output::Yaml, ..) => informant::yaml::to_string(&objects).map_err(|e| software(&e)),
    }
}

/// Builds the tree, starts it, reads through it, prints what a controller would see; the
/// tree's informers are stopped before returning.
pub async fn run(args: &Args) -> exit::Result {
    let mut options = informant::config::load(&args.config)?.cache;
    if args.verb == Verb::Get && args.name.is_none() {
        return Err(Failure::message(exit::USAGE, "get needs a NAME"));
    }
    if args.verb == Verb::Get && args.all_namespaces {
        // kubectl's words for `kubectl get pod x -A` (k8s.io/cli-runtime pkg/resource/builder.go,
        // visitByName).
        return Err(Failure::message(
            exit::USAGE,
            "a resource cannot be retrieved by name across all namespaces",
        ));
    }
    let usage = |flag: &str, e: &(dyn std::error::Error + 'static)| {
        Failure::message(exit::USAGE, format!("{flag}: {}", exit::error_chain(e)))
    };
    let label_selector = (args.selector.as_deref())
        .map(LabelSelector::parse)
        .transpose()
        .map_err(|e| usage("--selector", &e))?;
    let field_selector = (args.field_selector.as_deref())
        .map(FieldSelector::parse_served)
        .transpose()
        .map_err(|e| usage("--field-selector", &e))?;
    let client = client(args.kubeconfig.as_ref()).await?;
    let resolver = Arc::new(Discovery::new(client.clone()));
    let gvk = parse_gvk(&args.api_version, &args.kind);
    check_kind(
        &gvk,
        args.namespace.as_deref(),
        resolver.resolve(&gvk).await,
    )?;
    resolve_scopes(&mut options, resolver.as_ref()).await;
    let mut scope = ClusterScope::default();
    if options.uses_namespace_selector() {
        // The namespaces a selector matches now, as the manager would follow them.
        let labels = list_namespace_labels(&client).await.map_err(|e| {
            Failure::message(
                exit::FAILURE,
                format!(
                    "cannot list namespaces for the namespaceSelector: {}",
                    exit::error_chain(&e)
                ),
            )
        })?;
        scope = scope.with_namespaces(labels);
    }
    let plan = Plan::for_cluster(&options, &scope).map_err(|e| Failure::new(exit::USAGE, &e))?;
    let context = Context {
        reader_fail_on_missing_informer: plan.reader_fail_on_missing_informer(),
        sync_timeout: Some(Duration::from_secs(args.timeout)),
        ..Context::new(client, resolver)
    };
    let tree = plan.instantiate(&context);
    let tracker = TaskTracker::new();
    let shutdown = CancellationToken::new();
    tree.start(&tracker, &shutdown);
    let list = ListOptions {
        namespace: args.namespace.clone(),
        label_selector,
        field_selector,
        limit: args.limit,
        continue_token: args.continue_token.clone(),
    };
    let result = read(tree.as_ref(), args, &list).await;
    shutdown.cancel();
    tracker.close();
    tracker.wait().await;
    let (objects, single) = result?;
    out!("{}", render(&objects, args.output, single)?)
}

async fn read(
    tree: &dyn Cache,
    args: &Args,
    list: &ListOptions,
) -> informant::cache::Result<(Vec<Arc<DynamicObject>>, bool)> {
    let gvk = parse_gvk(&args.api_version, &args.kind);
    if args.ensure_informer {
        tree.ensure_informer(&gvk).await?;
    }
    if let (Verb::Get, Some(name)) = (args.verb, &args.name) {
        let object = tree.get(&gvk, args.namespace.as_deref(), name).await?;
        return Ok((vec![object], true));
    }
    Ok((tree.list(&gvk, list).await?, false))
}
