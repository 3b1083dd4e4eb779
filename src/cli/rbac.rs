//! `informant rbac`: the least-privilege `Role`s / `ClusterRole` (and their bindings) a
//! `CacheConfig` needs, derived offline ([`informant::config::rbac`]); the Helm chart renders
//! the same rules from the same values.

use std::path::PathBuf;

use informant::config::{self, rbac};
use k8s_openapi::api::rbac::v1::PolicyRule;

use super::exit::{self, Failure};
use super::out::out;
use super::run::DEFAULT_LEASE_NAME;
use super::{check_kind_offline, parse_gvk};

/// Output formats of `informant rbac`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// A YAML stream, one document per object (for kubectl apply -f -).
    Yaml,
    /// A `v1` `List` of the objects.
    Json,
}

/// Arguments of `informant rbac`.
// Reason: these doc comments are the `--help` text, where Markdown backticks would show as-is.
#[allow(clippy::doc_markdown)]
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The CacheConfig YAML file; its metadata.name is the CacheConfig the manager watches.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: PathBuf,
    /// The manager's namespace (its CacheConfig and Lease; the service account's). Default:
    /// the config's metadata.namespace, else "default".
    #[arg(long, short = 'n', value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Name of every Role, ClusterRole and binding printed.
    #[arg(long, value_name = "NAME", default_value = "informant")]
    pub name: String,
    /// The manager's service account (default: --name).
    #[arg(long, value_name = "NAME")]
    pub service_account: Option<String>,
    /// The manager runs with --leader-elect: add rights on its Lease.
    #[arg(long)]
    pub leader_elect: bool,
    /// Name of the Lease (as informant run --lease-name).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_LEASE_NAME)]
    pub lease_name: String,
    /// A kind the default cache serves at run time (a controller reads it), which the config
    /// does not list: APIVERSION/KIND (v1/ConfigMap, apps/v1/Deployment). Repeatable.
    #[arg(long = "kind", value_name = "APIVERSION/KIND")]
    pub kinds: Vec<String>,
    /// YAML file with a list of PolicyRules added in the default scope (the chart's
    /// rbac.extraRules).
    #[arg(long, value_name = "FILE")]
    pub extra_rules: Option<PathBuf>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "yaml")]
    pub output: Output,
}

impl Args {
    /// The deployment options from the flags.
    fn options(&self, namespace: String) -> exit::Result<rbac::Options> {
        let mut kinds = Vec::new();
        for text in &self.kinds {
            let Some((api_version, kind)) = text.rsplit_once('/') else {
                return Err(bad_kind(text));
            };
            if api_version.is_empty() || kind.is_empty() || api_version.matches('/').count() > 1 {
                return Err(bad_kind(text));
            }
            let gvk = parse_gvk(api_version, kind);
            check_kind_offline(&gvk, None)?;
            kinds.push(gvk);
        }
        let extra_rules = match &self.extra_rules {
            None => Vec::new(),
            Some(path) => read_rules(path)?,
        };
        Ok(rbac::Options {
            namespace,
            lease: self.leader_elect.then(|| self.lease_name.clone()),
            kinds,
            extra_rules,
        })
    }
}

fn bad_kind(text: &str) -> Failure {
    Failure::message(
        exit::USAGE,
        format!("--kind {text:?}: expected APIVERSION/KIND (v1/ConfigMap, apps/v1/Deployment)"),
    )
}

/// The rules of an `--extra-rules` file: 66 when unreadable, 64 when not a list of rules.
fn read_rules(path: &PathBuf) -> exit::Result<Vec<PolicyRule>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::message(
            exit::NO_INPUT,
            format!("--extra-rules {}: {e}", path.display()),
        )
    })?;
    let rules: Option<Vec<PolicyRule>> = informant::yaml::from_str(&text).map_err(|e| {
        Failure::message(
            exit::USAGE,
            format!(
                "--extra-rules {}: not a list of PolicyRules: {e}",
                path.display()
            ),
        )
    })?;
    Ok(rules.unwrap_or_default())
}

/// Prints the objects, or exits 64 with every error of an invalid config.
pub fn run(args: &Args) -> exit::Result {
    let valid = config::load(&args.config)?;
    let namespace = args
        .namespace
        .clone()
        .or_else(|| valid.resource.metadata.namespace.clone())
        .unwrap_or_else(|| "default".to_owned());
    let options = args.options(namespace.clone())?;
    let rules = rbac::Rules::derive(&valid, &options);
    let service_account = args.service_account.as_deref().unwrap_or(&args.name);
    let values = rules
        .objects(&args.name, service_account, &namespace)
        .to_values()
        .map_err(|e| Failure::new(exit::SOFTWARE, &e))?;
    let text = match args.output {
        Output::Json => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": values});
            serde_json::to_string_pretty(&list).map(|s| s + "\n")
        }
        Output::Yaml => {
            let mut out = String::new();
            for value in &values {
                out.push_str("---\n");
                if value["kind"] == "ClusterRole" {
                    for note in &rules.notes {
                        out.push_str("# ");
                        out.push_str(note);
                        out.push('\n');
                    }
                }
                out.push_str(
                    &informant::yaml::to_string(value)
                        .map_err(|e| Failure::new(exit::SOFTWARE, &e))?,
                );
            }
            Ok(out)
        }
    }
    .map_err(|e| Failure::new(exit::SOFTWARE, &e))?;
    out!("{text}")
}
