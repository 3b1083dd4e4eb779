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
    /// The manager serves admission webhooks behind this Service (informant run
    /// --webhook-service, the chart's webhook.enabled): add the rights on the webhook
    /// configurations it owns and on its certificates.
    #[arg(long, value_name = "NAME", help_heading = "Webhooks")]
    pub webhook_service: Option<String>,
    /// The Service's namespace, where the managed certificates' Secret is (default:
    /// --namespace).
    #[arg(
        long,
        value_name = "NS",
        requires = "webhook_service",
        help_heading = "Webhooks"
    )]
    pub webhook_service_namespace: Option<String>,
    /// The manager serves a mounted certificate from DIR (cert-manager's): no Secret rights,
    /// no caBundle written by the manager.
    #[arg(
        long,
        value_name = "DIR",
        requires = "webhook_service",
        help_heading = "Webhooks"
    )]
    pub webhook_cert_dir: Option<PathBuf>,
    /// The Secret of the managed certificates (default: SERVICE-cert).
    #[arg(
        long,
        value_name = "NAME",
        requires = "webhook_service",
        conflicts_with = "webhook_cert_dir",
        help_heading = "Webhooks"
    )]
    pub webhook_cert_secret: Option<String>,
    /// The name of the ValidatingWebhookConfiguration and MutatingWebhookConfiguration the
    /// manager owns (default: the Service's name).
    #[arg(
        long,
        value_name = "NAME",
        requires = "webhook_service",
        help_heading = "Webhooks"
    )]
    pub webhook_configuration: Option<String>,
    /// Another object whose caBundle the manager writes (managed certificates only): KIND is
    /// validatingwebhookconfiguration, mutatingwebhookconfiguration or
    /// customresourcedefinition. Repeatable.
    #[arg(
        long,
        value_name = "KIND/NAME",
        requires = "webhook_service",
        conflicts_with = "webhook_cert_dir",
        help_heading = "Webhooks"
    )]
    pub webhook_inject: Vec<String>,
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
        let webhook = self.webhook(&namespace)?;
        Ok(rbac::Options {
            namespace,
            lease: self.leader_elect.then(|| self.lease_name.clone()),
            kinds,
            extra_rules,
            metrics_secure: self.metrics_secure,
            webhook,
        })
    }

    /// The webhook endpoint of the `--webhook-*` flags, `None` without `--webhook-service`;
    /// every bad name at once (exit 64).
    fn webhook(&self, namespace: &str) -> exit::Result<Option<rbac::Webhook>> {
        let Some(service) = &self.webhook_service else {
            return Ok(None);
        };
        let mut errors = Vec::new();
        let mut check = |flag: &str, name: &str, problem: Option<&str>| {
            if let Some(problem) = problem {
                errors.push(format!("--{flag} {name:?}: {problem}"));
            }
        };
        let namespace = self
            .webhook_service_namespace
            .clone()
            .unwrap_or_else(|| namespace.to_owned());
        let configuration = self
            .webhook_configuration
            .clone()
            .unwrap_or_else(|| service.clone());
        check("webhook-service", service, label_problem(service));
        check(
            "webhook-service-namespace",
            &namespace,
            label_problem(&namespace),
        );
        check(
            "webhook-configuration",
            &configuration,
            subdomain_problem(&configuration),
        );
        let certificates = if self.webhook_cert_dir.is_some() {
            rbac::Certificates::Mounted
        } else {
            let secret = self
                .webhook_cert_secret
                .clone()
                .unwrap_or_else(|| format!("{service}-cert"));
            check("webhook-cert-secret", &secret, subdomain_problem(&secret));
            let mut inject = rbac::InjectNames::default();
            for text in &self.webhook_inject {
                let (kind, name) = text.split_once('/').unwrap_or((text, ""));
                let names = match kind.to_ascii_lowercase().as_str() {
                    "validatingwebhookconfiguration" => &mut inject.validating,
                    "mutatingwebhookconfiguration" => &mut inject.mutating,
                    "customresourcedefinition" => &mut inject.crds,
                    _ => {
                        check(
                            "webhook-inject",
                            text,
                            Some(
                                "expected KIND/NAME, KIND one of validatingwebhookconfiguration, \
                                 mutatingwebhookconfiguration, customresourcedefinition",
                            ),
                        );
                        continue;
                    }
                };
                check("webhook-inject", text, subdomain_problem(name));
                names.push(name.to_owned());
            }
            rbac::Certificates::Managed { secret, inject }
        };
        if !errors.is_empty() {
            return Err(Failure::message(exit::USAGE, errors.join("\n")));
        }
        Ok(Some(rbac::Webhook {
            namespace,
            configuration,
            certificates,
        }))
    }
}

/// Why `name` is not a DNS-1123 label (a Service's or a namespace's name), if it is not.
fn label_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > 63 {
        return Some("must be 1 to 63 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Some("must consist of lowercase letters, digits and '-'");
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Some("must start and end with a letter or digit");
    }
    None
}

/// Why `name` is not a DNS-1123 subdomain (an object's name), if it is not.
fn subdomain_problem(name: &str) -> Option<&'static str> {
    if name.len() > 253 {
        return Some("must be 253 characters or less");
    }
    name.split('.').find_map(label_problem)
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
