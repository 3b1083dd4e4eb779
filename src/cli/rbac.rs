//! `informant rbac`: the least-privilege `Role`s / `ClusterRole` (and their bindings) a
//! `CacheConfig` needs, derived offline ([`informant::config::rbac`]); the Helm chart renders
//! the same rules from the same values.

use std::path::PathBuf;

use std::fmt::Write as _;

use informant::config::{self, access, rbac};
use k8s_openapi::api::rbac::v1::PolicyRule;

use super::exit::{self, Failure};
use super::out::out;
use super::{check_kind_offline, parse_gvk};
use informant::manager::DEFAULT_LEASE_NAME;

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
    /// The manager runs with --metrics-secure (the chart's metrics.secure): add the rights to
    /// create TokenReviews and SubjectAccessReviews, and a NAME-metrics-reader ClusterRole
    /// (get /metrics) to bind Prometheus's account to.
    #[arg(long)]
    pub metrics_secure: bool,
    /// YAML file with a list of PolicyRules added in the default scope (the chart's
    /// rbac.extraRules).
    #[arg(long, value_name = "FILE")]
    pub extra_rules: Option<PathBuf>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "yaml")]
    pub output: Output,
    /// Ask the cluster instead (a SelfSubjectAccessReview per permission of the derived rules):
    /// print the Role/ClusterRole and bindings of what is missing, and exit 11 when something
    /// is.
    #[arg(long)]
    pub check: bool,
    /// With --check: the kubeconfig (default: $KUBECONFIG, ~/.kube/config, or the pod's service
    /// account).
    #[arg(long, value_name = "PATH", requires = "check")]
    pub kubeconfig: Option<PathBuf>,
    /// With --check: ask as this ServiceAccount (impersonated; the kubeconfig's user needs
    /// `impersonate` on it): NAME in --namespace, NAMESPACE:NAME, or
    /// system:serviceaccount:NAMESPACE:NAME.
    #[arg(long = "as", value_name = "SA", requires = "check")]
    pub as_account: Option<String>,
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
            metrics_secure: self.metrics_secure,
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

/// The `ServiceAccount` `--as` names, as (namespace, name).
fn account(text: &str, namespace: &str) -> exit::Result<(String, String)> {
    let parts: Vec<&str> = text
        .strip_prefix("system:serviceaccount:")
        .unwrap_or(text)
        .split(':')
        .collect();
    match parts.as_slice() {
        [name] if !name.is_empty() => Ok((namespace.to_owned(), (*name).to_owned())),
        [ns, name] if !ns.is_empty() && !name.is_empty() => {
            Ok(((*ns).to_owned(), (*name).to_owned()))
        }
        _ => Err(Failure::message(
            exit::USAGE,
            format!(
                "--as {text:?}: expected a ServiceAccount: NAME, NAMESPACE:NAME or \
                 system:serviceaccount:NAMESPACE:NAME"
            ),
        )),
    }
}

/// Prints the objects, or exits 64 with every error of an invalid config; with `--check`, the
/// objects of what the cluster does not grant (exit 11), or a comment that all is granted.
pub async fn run(args: &Args) -> exit::Result {
    let valid = config::load(&args.config)?;
    let namespace = args
        .namespace
        .clone()
        .or_else(|| valid.resource.metadata.namespace.clone())
        .unwrap_or_else(|| "default".to_owned());
    let options = args.options(namespace.clone())?;
    let rules = rbac::Rules::derive(&valid, &options);
    if args.check {
        return check(args, &rules, &namespace).await;
    }
    let service_account = args.service_account.as_deref().unwrap_or(&args.name);
    print(
        &rules.objects(&args.name, service_account, &namespace),
        args.output,
        "",
        &rules.notes,
    )
}

/// `--check`: asks the cluster for every permission of `rules`.
async fn check(args: &Args, rules: &rbac::Rules, namespace: &str) -> exit::Result {
    let impersonated = args
        .as_account
        .as_deref()
        .map(|text| account(text, namespace))
        .transpose()?;
    let mut config = super::cache::config(args.kubeconfig.as_ref()).await?;
    if let Some((ns, name)) = &impersonated {
        config.auth_info.impersonate = Some(format!("system:serviceaccount:{ns}:{name}"));
    }
    let failed = |e: &(dyn std::error::Error + 'static)| Failure::new(exit::FAILURE, e);
    let client = kube::Client::try_from(config).map_err(|e| failed(&e))?;
    let missing = access::missing(&client, rules)
        .await
        .map_err(|e| failed(&e))?;
    let total = access::permissions(rules).len();
    // Who was asked about: the impersonated account, else the kubeconfig's user as the
    // server says (a ServiceAccount's token names its account).
    let user = match &impersonated {
        Some((ns, name)) => Some(format!("system:serviceaccount:{ns}:{name}")),
        None => whoami(&client).await,
    };
    // The bindings name that account when it is one, else the manager's (--service-account).
    let (account_namespace, account_name) = user
        .as_deref()
        .and_then(|u| u.strip_prefix("system:serviceaccount:"))
        .and_then(|rest| rest.split_once(':'))
        .map_or_else(
            || {
                (
                    namespace.to_owned(),
                    args.service_account
                        .clone()
                        .unwrap_or_else(|| args.name.clone()),
                )
            },
            |(ns, name)| (ns.to_owned(), name.to_owned()),
        );
    let who = user.unwrap_or_else(|| "the kubeconfig's user".to_owned());
    if missing.is_empty() {
        let header = format!("# all {total} permissions the config needs are granted to {who}\n");
        return print(&rbac::Objects::default(), args.output, &header, &[]);
    }
    let mut header = format!(
        "# {} of {total} permissions the config needs are not granted to {who}:\n",
        missing.len()
    );
    for permission in &missing {
        let _ = writeln!(header, "#   {permission}");
    }
    let objects = access::rules_of(&missing).objects(
        &format!("{}-missing", args.name),
        &account_name,
        &account_namespace,
    );
    print(&objects, args.output, &header, &[])?;
    Err(Failure::message(
        exit::PERMISSION_MISSING,
        format!(
            "{} of {total} permissions missing (the objects granting them are on standard output)",
            missing.len()
        ),
    ))
}

/// The user the client authenticates as (`kubectl auth whoami`), when the server says.
async fn whoami(client: &kube::Client) -> Option<String> {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let api: kube::Api<SelfSubjectReview> = kube::Api::all(client.clone());
    let review = api
        .create(
            &kube::api::PostParams::default(),
            &SelfSubjectReview::default(),
        )
        .await
        .ok()?;
    review.status?.user_info?.username
}

/// Prints `objects` as YAML or JSON, after `header` (YAML comments), with `notes` as comments
/// above the `ClusterRole` (why it holds what it holds).
fn print(objects: &rbac::Objects, output: Output, header: &str, notes: &[String]) -> exit::Result {
    let values = objects
        .to_values()
        .map_err(|e| Failure::new(exit::SOFTWARE, &e))?;
    let text = match output {
        Output::Json => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": values});
            serde_json::to_string_pretty(&list).map(|s| s + "\n")
        }
        Output::Yaml => {
            let mut out = header.to_owned();
            let mut notes_printed = false;
            for value in &values {
                out.push_str("---\n");
                if value["kind"] == "ClusterRole" && !std::mem::replace(&mut notes_printed, true) {
                    for note in notes {
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
