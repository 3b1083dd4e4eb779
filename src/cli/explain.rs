//! `informant explain`: the cache tree a config plans, and which cache would serve an object.
//! Pure: no client, no API server; kinds' scopes come from the built-in kind table. With
//! `--kubeconfig`, namespace selectors are resolved against the cluster's namespaces (one
//! metadata LIST), so the tree shows the namespaces they match now, and each custom kind (of
//! `byObject`, and of the file's `Controller`s) is looked up by discovery, so a kind the
//! cluster does not serve shows as `WaitingForKind`, and so does each controller that would
//! wait for it. A sharded config also shows which kinds are sharded and by which key, which
//! are cached whole, and how a member finds its share; with `--kubeconfig`, the ring's members
//! now (one LIST of its Leases).

use std::fmt::Write as _;
use std::path::PathBuf;

use informant::cache::{
    BuiltinKinds, ClusterScope, Discovery, Plan, Resolver as _, list_namespace_labels,
};
use informant::config::ShardingDescription;
use informant::hooks::{ControllerError, ControllerSettings, ValidatedController};
use informant::manager::{Ring, RingMember, ring_members};
use kube::core::GroupVersionKind;

use super::exit::{self, Failure};
use super::out::{out, outln};
use super::{check_kind_offline, parse_gvk};

mod admission;
mod estimate;

/// Output formats of `informant explain`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// One line per layer, indented.
    Text,
    /// `{"tree": ..., "object": ..., "servedBy": [...] | "error": ..., "admission": [...]}`.
    Json,
    /// The same document as `json`, in YAML.
    Yaml,
}

/// Arguments of `informant explain`.
#[derive(clap::Args, Debug)]
#[command(after_help = exit::EXIT_CODES_HELP)]
pub struct Args {
    /// The `CacheConfig` YAML file.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: PathBuf,
    /// Which cache serves this object: `APIVERSION/KIND/NAMESPACE/NAME` (`v1/Pod/team-a/web`,
    /// `apps/v1/Deployment/shop/cart`, `v1/Node//node01` for cluster-scoped kinds).
    /// The file's `Controller`s whose admission hooks apply to it are listed too, each called,
    /// not called (why), or called depending on what is not known offline.
    #[arg(long, value_name = "APIVERSION/KIND/NAMESPACE/NAME")]
    pub object: Option<String>,
    /// With `--object`: the object's labels, for the admission hooks' `objectSelector`s
    /// (without it, a hook with one is said to depend on the object's labels; for a
    /// `Namespace`, also its `namespaceSelector`).
    #[arg(long, value_name = "KEY=VALUE,...", requires = "object")]
    pub object_labels: Option<String>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    pub output: Output,
    /// Resolve namespace selectors against this cluster: the tree then lists the namespaces
    /// each selector matches now. Without it nothing is asked of any cluster.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// With `--kubeconfig` and a sharded config, where the ring's member Leases are (as
    /// `informant run --lease-namespace`; default: the config's namespace, else the
    /// kubeconfig's).
    #[arg(long, value_name = "NAMESPACE", env = "INFORMANT_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// With `--kubeconfig`: estimate what the cache would hold on that cluster, for every
    /// informer of a `byObject` kind: its object count (a `limit` LIST's `remainingItemCount`,
    /// or a count LIST) and the bytes of a sample encoded as the cache holds it, after the
    /// config's transforms; beside it, what client-go's informer would hold. Only lists (RBAC:
    /// `list` on those kinds).
    #[arg(long, requires = "kubeconfig")]
    pub estimate: bool,
    /// With `--estimate`: objects sampled per informer for their size.
    #[arg(long, value_name = "N", default_value_t = 200, requires = "estimate")]
    pub sample: u32,
}

/// A parsed `--object`.
#[derive(Debug, PartialEq, Eq)]
struct ObjectRef {
    gvk: GroupVersionKind,
    namespace: Option<String>,
    name: String,
}

/// Parses `APIVERSION/KIND/NAMESPACE/NAME` (apiVersion may contain one `/`).
fn parse_object(text: &str) -> exit::Result<ObjectRef> {
    let bad = || {
        Failure::message(
            exit::USAGE,
            format!("--object {text:?}: expected APIVERSION/KIND/NAMESPACE/NAME"),
        )
    };
    let parts: Vec<&str> = text.rsplitn(4, '/').collect();
    let [name, namespace, kind, api_version] = parts[..] else {
        return Err(bad());
    };
    if name.is_empty() || kind.is_empty() || api_version.is_empty() {
        return Err(bad());
    }
    Ok(ObjectRef {
        gvk: parse_gvk(api_version, kind),
        namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
        name: name.to_string(),
    })
}

/// Prints the plan (and the route of `--object`); a refused route is printed as part of the
/// answer and exits with the code the read would fail with.
pub async fn run(args: &Args) -> exit::Result {
    let config = informant::config::load(&args.config)?;
    let options = config.cache;
    let sharding = ShardingDescription::of(&options);
    let controllers = controllers_of(&args.config);
    let (scope, ring_now) = match &args.kubeconfig {
        None => (ClusterScope::default(), None),
        Some(kubeconfig) => {
            let config_namespace = config.resource.metadata.namespace.as_deref();
            let custom = custom_kinds(&options, &controllers);
            from_cluster(
                args,
                kubeconfig,
                config_namespace,
                sharding.as_ref(),
                &custom,
            )
            .await?
        }
    };
    let plan = Plan::for_cluster(&options, &scope).map_err(|e| Failure::new(exit::USAGE, &e))?;
    let description = plan.describe();
    let (route, applied) = about_object(args, &plan, &controllers, &options, &scope)?;
    let controllers = controller_routes(controllers, &plan);
    let estimate = match (&args.kubeconfig, args.estimate) {
        (Some(kubeconfig), true) => {
            let client = super::cache::client(Some(kubeconfig)).await?;
            Some(estimate::run(&plan, &client, args.sample).await?)
        }
        _ => None,
    };
    if args.output == Output::Text {
        print_text(
            &description,
            sharding.as_ref(),
            ring_now.as_ref(),
            &controllers,
            estimate.as_ref(),
            route.as_ref(),
            &applied,
        )?;
    } else {
        let mut doc = serde_json::json!({"tree": description});
        if let Some(sharding) = &sharding {
            doc["sharding"] = RingNow::json(sharding, ring_now.as_ref());
        }
        if !controllers.is_empty() {
            doc["controllers"] = controllers.iter().map(controller_json).collect();
        }
        if let Some(estimate) = &estimate {
            doc["estimate"] =
                serde_json::to_value(estimate).map_err(|e| Failure::new(exit::SOFTWARE, &e))?;
        }
        if let Some((object, route)) = &route {
            doc["object"] = serde_json::json!(object);
            match route {
                Ok(path) => doc["servedBy"] = serde_json::json!(path),
                Err(e) => doc["error"] = serde_json::json!(e.to_string()),
            }
            doc["admission"] = applied
                .iter()
                .map(|a| admission::json(a, a.hook.failure_policy.as_str()))
                .collect();
        }
        let text = if args.output == Output::Json {
            serde_json::to_string_pretty(&doc)
                .map(|s| s + "\n")
                .map_err(|e| Failure::new(exit::SOFTWARE, &e))?
        } else {
            informant::yaml::to_string(&doc).map_err(|e| Failure::new(exit::SOFTWARE, &e))?
        };
        out!("{text}")?;
    }
    match route {
        Some((_, Err(e))) => Err(Failure::silent(exit::cache_code(&e))),
        _ => Ok(()),
    }
}

/// What a read of `--object` would fail with or which caches would serve it, through `plan`,
/// and which admission hooks of `controllers` apply to it (`options` being the
/// `CacheConfig`'s scope, `scope` what the cluster said).
type AboutObject<'a> = (
    Option<(&'a String, Result<Vec<String>, informant::cache::Error>)>,
    Vec<admission::Applied>,
);

/// See [`AboutObject`].
fn about_object<'a>(
    args: &'a Args,
    plan: &Plan,
    controllers: &Controllers,
    options: &informant::cache::Options,
    scope: &ClusterScope,
) -> exit::Result<AboutObject<'a>> {
    let Some(text) = &args.object else {
        return Ok((None, Vec::new()));
    };
    let labels = match &args.object_labels {
        Some(text) => Some(admission::parse_labels(text)?),
        None => None,
    };
    let object = parse_object(text)?;
    let namespaced = check_kind_offline(&object.gvk, object.namespace.as_deref())?.namespaced;
    let route = plan.route(
        &object.gvk,
        namespaced,
        object.namespace.as_deref(),
        Some(&object.name),
    );
    let about = admission::Object {
        gvk: &object.gvk,
        namespaced,
        namespace: object.namespace.as_deref(),
        labels: labels.as_ref(),
        namespaces: scope.namespaces.as_ref(),
    };
    let applied = admission::for_object(controllers, options, &about);
    Ok((Some((text, route)), applied))
}

/// The text form of `informant explain`: the tree, the ring, the controllers' routes, the
/// estimate and the route of `--object`.
fn print_text(
    description: &informant::cache::Description,
    sharding: Option<&ShardingDescription>,
    ring_now: Option<&RingNow>,
    controllers: &ControllerRoutes,
    estimate: Option<&informant::cache::estimate::Estimate>,
    route: Option<&(&String, Result<Vec<String>, informant::cache::Error>)>,
    applied: &[admission::Applied],
) -> exit::Result {
    out!("{}", description.to_text())?;
    if let Some(sharding) = sharding {
        out!("\n{}", sharding.to_text())?;
    }
    if let Some(now) = ring_now {
        out!("{}", now.to_text())?;
    }
    for (name, kinds, waiting, schedule, admission) in controllers {
        match waiting {
            Some(reason) => outln!("\ncontroller {name}: WaitingForKind: {reason}")?,
            None => outln!("\ncontroller {name}:")?,
        }
        if let Some(schedule) = schedule {
            match schedule.next_after(jiff::Timestamp::now()) {
                Some(next) => outln!("  schedule: {schedule}: next tick {next}")?,
                None => outln!("  schedule: {schedule}: no tick to come")?,
            }
        }
        for (kind, route) in kinds {
            match route {
                Ok(path) => outln!("  {kind}: {}", path.join(" -> "))?,
                Err(e) => outln!("  {kind}: error: {e}")?,
            }
        }
        for hook in admission {
            outln!("{}", admission_line(name, hook))?;
        }
    }
    if let Some(estimate) = estimate {
        out!("{}", estimate::to_text(estimate))?;
    }
    if let Some((object, route)) = route {
        outln!("\n{object}:")?;
        match route {
            Ok(path) => {
                for step in path {
                    outln!("  {step}")?;
                }
            }
            Err(e) => outln!("  error: {e}")?,
        }
        if applied.is_empty() {
            outln!("  admission hooks: none of this file's Controllers is for its kind")?;
        } else {
            outln!("  admission hooks (mutating first, as the API server calls them):")?;
        }
        for a in applied {
            outln!("{}", admission::line(a, a.hook.failure_policy.as_str()))?;
        }
    }
    Ok(())
}

/// What the cluster of `kubeconfig` says: its namespaces (for namespace selectors), which of
/// the `custom` kinds discovery does not serve (they would wait, as the manager has them wait
/// for their CRD), and, for a sharded config, the ring's members now (their Leases in
/// `--lease-namespace`, else the config's namespace, else the kubeconfig's).
async fn from_cluster(
    args: &Args,
    kubeconfig: &PathBuf,
    config_namespace: Option<&str>,
    sharding: Option<&ShardingDescription>,
    custom: &[GroupVersionKind],
) -> exit::Result<(ClusterScope, Option<RingNow>)> {
    let client = &super::cache::client(Some(kubeconfig)).await?;
    let lease_namespace = args
        .lease_namespace
        .as_deref()
        .or(config_namespace)
        .unwrap_or_else(|| client.default_namespace())
        .to_owned();
    let labels = list_namespace_labels(client).await.map_err(|e| {
        Failure::message(
            exit::FAILURE,
            format!("cannot list namespaces: {}", exit::error_chain(&e)),
        )
    })?;
    let ring_now = match sharding {
        None => None,
        Some(sharding) => {
            let members = ring_members(
                client,
                &lease_namespace,
                &sharding.ring,
                jiff::Timestamp::now(),
            )
            .await
            .map_err(|e| {
                Failure::message(
                    exit::FAILURE,
                    format!(
                        "cannot list the leases of ring {} in namespace {lease_namespace}: {}",
                        sharding.ring,
                        exit::error_chain(&e)
                    ),
                )
            })?;
            let namespaces: Vec<&String> = labels.keys().collect();
            Some(RingNow::new(
                lease_namespace,
                &members,
                sharding,
                &namespaces,
            ))
        }
    };
    let mut scope = ClusterScope::default().with_namespaces(labels);
    let discovery = Discovery::new(client.clone());
    for gvk in custom {
        if let Err(error) = discovery.resolve(gvk).await {
            scope = scope.with_waiting(gvk.clone(), error.to_string());
        }
    }
    Ok((scope, ring_now))
}

/// The ring's members now, with the namespaces each owns under `key: namespace`.
struct RingNow {
    namespace: String,
    members: Vec<(RingMember, Option<Vec<String>>)>,
}

impl RingNow {
    fn new(
        namespace: String,
        members: &[RingMember],
        sharding: &ShardingDescription,
        namespaces: &[&String],
    ) -> Self {
        let ring = Ring::new(members.iter().map(|m| m.identity.as_str()));
        let owned = |identity: &str| {
            (sharding.key == "namespace").then(|| {
                namespaces
                    .iter()
                    .filter(|ns| ring.namespace_owner(ns) == Some(identity))
                    .map(|ns| (*ns).clone())
                    .collect()
            })
        };
        let members = members
            .iter()
            .map(|m| (m.clone(), owned(&m.identity)))
            .collect();
        Self { namespace, members }
    }

    fn to_text(&self) -> String {
        let mut out = format!(
            "  members now (Leases in namespace {}): {}\n",
            self.namespace,
            if self.members.is_empty() {
                "none: no replica of this ring holds a live Lease".to_owned()
            } else {
                self.members.len().to_string()
            }
        );
        for (member, namespaces) in &self.members {
            let _ = write!(
                out,
                "    {} (lease {}, renewed {}): {:.1}% of the hash space",
                member.identity,
                member.lease,
                member.renewed,
                member.share * 100.0
            );
            if let Some(namespaces) = namespaces {
                let _ = write!(out, ", namespaces [{}]", namespaces.join(", "));
            }
            out.push('\n');
        }
        out
    }

    /// `sharding` as JSON, with the members now under `now` when they were asked for.
    fn json(sharding: &ShardingDescription, now: Option<&Self>) -> serde_json::Value {
        // A struct of strings and lists of strings always serializes.
        let mut doc = serde_json::to_value(sharding).unwrap_or_default();
        if let Some(now) = now {
            doc["now"] = now.to_json();
        }
        doc
    }

    fn to_json(&self) -> serde_json::Value {
        let members: Vec<serde_json::Value> = self
            .members
            .iter()
            .map(|(m, namespaces)| {
                let mut v = serde_json::json!({
                    "identity": m.identity,
                    "lease": m.lease,
                    "renewTime": m.renewed.to_string(),
                    "leaseDurationSeconds": m.lease_duration.as_secs(),
                    "share": m.share,
                });
                if let Some(namespaces) = namespaces {
                    v["namespaces"] = serde_json::json!(namespaces);
                }
                v
            })
            .collect();
        serde_json::json!({"leaseNamespace": self.namespace, "members": members})
    }
}

/// Each `Controller` of a multi-document config file, with the route of each of its kinds
/// (`for`, `owns`, `watches`) through `plan`, or why it has none, and why it would wait, when
/// one of its kinds waits for its CRD.
type ControllerRoutes = Vec<ControllerRoute>;

/// One controller of [`ControllerRoutes`]: its name, each kind's route, why it would wait,
/// its schedule, its admission hooks.
type ControllerRoute = (
    String,
    Vec<(String, Result<Vec<String>, String>)>,
    Option<String>,
    Option<informant::hooks::Schedule>,
    Vec<informant::hooks::AdmissionHook>,
);

/// The `Controller` documents of the config file, validated (none when it has none or is not
/// YAML: the config itself was read already).
type Controllers = Vec<Result<ValidatedController, ControllerError>>;

fn controllers_of(path: &std::path::Path) -> Controllers {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let origin = informant::config::Origin::File(path.to_owned());
    informant::hooks::controllers_in(&text, &origin, None).unwrap_or_default()
}

/// The kinds of a controller: `for`, `owns`, `watches`.
fn kinds_of(settings: &ControllerSettings) -> impl Iterator<Item = &GroupVersionKind> {
    std::iter::once(&settings.for_kind)
        .chain(&settings.owns)
        .chain(&settings.watches)
}

/// The custom kinds (not built in) of `byObject` and of the valid `controllers`, once each:
/// those the manager follows, and that may wait for their CRD.
fn custom_kinds(
    options: &informant::cache::Options,
    controllers: &Controllers,
) -> Vec<GroupVersionKind> {
    let mut custom: Vec<GroupVersionKind> = Vec::new();
    let kinds = options.by_object.iter().map(|by| &by.gvk).chain(
        controllers
            .iter()
            .filter_map(|c| c.as_ref().ok())
            .flat_map(|c| kinds_of(&c.settings)),
    );
    for gvk in kinds {
        let builtin = informant::kinds::builtin(&gvk.group, &gvk.version, &gvk.kind);
        if builtin.is_none() && !custom.contains(gvk) {
            custom.push(gvk.clone());
        }
    }
    custom
}

fn controller_routes(controllers: Controllers, plan: &Plan) -> ControllerRoutes {
    controllers
        .into_iter()
        .map(|controller| match controller {
            Err(e) => (
                e.origin.to_string(),
                vec![("invalid".to_owned(), Err(e.to_string()))],
                None,
                None,
                Vec::new(),
            ),
            Ok(c) => {
                let mut waiting = None;
                let kinds = kinds_of(&c.settings)
                    .map(|gvk| {
                        let namespaced = BuiltinKinds::resolve_now(gvk).namespaced;
                        let label = format!("{}/{}", gvk.api_version(), gvk.kind);
                        let route = plan.route(gvk, namespaced, None, None);
                        if let Err(informant::cache::Error::WaitingForKind { reason, .. }) = &route
                        {
                            waiting.get_or_insert_with(|| format!("{label}: {reason}"));
                        }
                        (label, route.map_err(|e| e.to_string()))
                    })
                    .collect();
                (
                    c.settings.key.to_string(),
                    kinds,
                    waiting,
                    c.settings.schedule,
                    c.settings.admission,
                )
            }
        })
        .collect()
}

/// One controller of [`ControllerRoutes`] as JSON: its name, each kind's route or error, and
/// `waitingForKind` when it would wait.
fn controller_json(
    (name, kinds, waiting, schedule, admission): &ControllerRoute,
) -> serde_json::Value {
    let kinds: Vec<serde_json::Value> = kinds
        .iter()
        .map(|(kind, route)| match route {
            Ok(path) => serde_json::json!({"kind": kind, "servedBy": path}),
            Err(e) => serde_json::json!({"kind": kind, "error": e}),
        })
        .collect();
    let mut controller = serde_json::json!({"name": name, "kinds": kinds});
    if let Some(reason) = waiting {
        controller["waitingForKind"] = serde_json::json!(reason);
    }
    if let Some(schedule) = schedule {
        controller["schedule"] = serde_json::json!({
            "schedule": schedule.text(),
            "timeZone": schedule.time_zone(),
            "mode": schedule.mode().as_str(),
            "nextTick": schedule.next_after(jiff::Timestamp::now()).map(|t| t.to_string()),
        });
    }
    if !admission.is_empty() {
        controller["admission"] = admission
            .iter()
            .map(|hook| {
                serde_json::json!({
                    "name": hook.name,
                    "type": hook.type_.as_str(),
                    "operations": hook.operations,
                    "failurePolicy": hook.failure_policy.as_str(),
                    "timeoutSeconds": hook.timeout.as_secs(),
                    // Served there by a manager with a webhook endpoint; one without keeps
                    // the controller back (the reason).
                    "path": format!("/admission/{name}/{}", hook.name),
                    "withoutEndpoint": informant::hooks::REASON_ADMISSION_NOT_SERVED,
                })
            })
            .collect();
    }
    controller
}

/// One admission hook of controller `key`, as `informant explain` prints it.
fn admission_line(key: &str, hook: &informant::hooks::AdmissionHook) -> String {
    format!(
        "  admission {}: {} on {}, failurePolicy {}, timeoutSeconds {}: served at \
         /admission/{key}/{} by a manager with --webhook-service (without it: {})",
        hook.name,
        hook.type_.as_str(),
        hook.operations.join(","),
        hook.failure_policy.as_str(),
        hook.timeout.as_secs(),
        hook.name,
        informant::hooks::REASON_ADMISSION_NOT_SERVED
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_references_split_from_the_right() {
        let object = parse_object("apps/v1/Deployment/shop/cart").unwrap();
        assert_eq!(
            object,
            ObjectRef {
                gvk: GroupVersionKind::gvk("apps", "v1", "Deployment"),
                namespace: Some("shop".into()),
                name: "cart".into()
            }
        );
        let node = parse_object("v1/Node//n1").unwrap();
        assert_eq!((node.gvk.group.as_str(), node.namespace), ("", None));
        assert_eq!(parse_object("Pod/x").unwrap_err().code, exit::USAGE);
    }
}
