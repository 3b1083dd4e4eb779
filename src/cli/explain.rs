//! `informant explain`: the cache tree a config plans, and which cache would serve an object.
//! Pure: no client, no API server; kinds' scopes come from the built-in kind table. With
//! `--kubeconfig`, namespace selectors are resolved against the cluster's namespaces (one
//! metadata LIST), so the tree shows the namespaces they match now. A sharded config also
//! shows which kinds are sharded and by which key, which are cached whole, and how a member
//! finds its share; with `--kubeconfig`, the ring's members now (one LIST of its Leases).

use std::fmt::Write as _;
use std::path::PathBuf;

use informant::cache::{BuiltinKinds, ClusterScope, Plan, list_namespace_labels};
use informant::config::ShardingDescription;
use informant::manager::{Ring, RingMember, ring_members};
use kube::core::GroupVersionKind;

use super::exit::{self, Failure};
use super::out::{out, outln};
use super::{check_kind_offline, parse_gvk};

/// Output formats of `informant explain`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// One line per layer, indented.
    Text,
    /// `{"tree": ..., "object": ..., "servedBy": [...] | "error": ...}`.
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
    #[arg(long, value_name = "APIVERSION/KIND/NAMESPACE/NAME")]
    pub object: Option<String>,
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
    let (scope, ring_now) = match &args.kubeconfig {
        None => (ClusterScope::default(), None),
        Some(kubeconfig) => {
            let config_namespace = config.resource.metadata.namespace.as_deref();
            from_cluster(args, kubeconfig, config_namespace, sharding.as_ref()).await?
        }
    };
    let plan = Plan::for_cluster(&options, &scope).map_err(|e| Failure::new(exit::USAGE, &e))?;
    let description = plan.describe();
    let route = match &args.object {
        None => None,
        Some(text) => {
            let object = parse_object(text)?;
            let namespaced =
                check_kind_offline(&object.gvk, object.namespace.as_deref())?.namespaced;
            let route = plan.route(
                &object.gvk,
                namespaced,
                object.namespace.as_deref(),
                Some(&object.name),
            );
            Some((text, route))
        }
    };
    let controllers = controller_routes(&args.config, &plan);
    if args.output == Output::Text {
        out!("{}", description.to_text())?;
        if let Some(sharding) = &sharding {
            out!("\n{}", sharding.to_text())?;
        }
        if let Some(now) = &ring_now {
            out!("{}", now.to_text())?;
        }
        for (name, kinds) in &controllers {
            outln!("\ncontroller {name}:")?;
            for (kind, route) in kinds {
                match route {
                    Ok(path) => outln!("  {kind}: {}", path.join(" -> "))?,
                    Err(e) => outln!("  {kind}: error: {e}")?,
                }
            }
        }
        if let Some((object, route)) = &route {
            outln!("\n{object}:")?;
            match route {
                Ok(path) => {
                    for step in path {
                        outln!("  {step}")?;
                    }
                }
                Err(e) => outln!("  error: {e}")?,
            }
        }
    } else {
        let mut doc = serde_json::json!({"tree": description});
        if let Some(sharding) = &sharding {
            doc["sharding"] = RingNow::json(sharding, ring_now.as_ref());
        }
        if !controllers.is_empty() {
            doc["controllers"] = controllers
                .iter()
                .map(|(name, kinds)| {
                    let kinds: Vec<serde_json::Value> = kinds
                        .iter()
                        .map(|(kind, route)| match route {
                            Ok(path) => serde_json::json!({"kind": kind, "servedBy": path}),
                            Err(e) => serde_json::json!({"kind": kind, "error": e}),
                        })
                        .collect();
                    serde_json::json!({"name": name, "kinds": kinds})
                })
                .collect();
        }
        if let Some((object, route)) = &route {
            doc["object"] = serde_json::json!(object);
            match route {
                Ok(path) => doc["servedBy"] = serde_json::json!(path),
                Err(e) => doc["error"] = serde_json::json!(e.to_string()),
            }
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

/// What the cluster of `kubeconfig` says: its namespaces (for namespace selectors), and, for
/// a sharded config, the ring's members now (their Leases in `--lease-namespace`, else the
/// config's namespace, else the kubeconfig's).
async fn from_cluster(
    args: &Args,
    kubeconfig: &PathBuf,
    config_namespace: Option<&str>,
    sharding: Option<&ShardingDescription>,
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
    Ok((ClusterScope::default().with_namespaces(labels), ring_now))
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
/// (`for`, `owns`, `watches`) through `plan`, or why it has none.
type ControllerRoutes = Vec<(String, Vec<(String, Result<Vec<String>, String>)>)>;

fn controller_routes(path: &std::path::Path, plan: &Plan) -> ControllerRoutes {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let origin = informant::config::Origin::File(path.to_owned());
    let Ok(controllers) = informant::hooks::controllers_in(&text, &origin, None) else {
        return Vec::new();
    };
    controllers
        .into_iter()
        .map(|controller| match controller {
            Err(e) => (
                e.origin.to_string(),
                vec![("invalid".to_owned(), Err(e.to_string()))],
            ),
            Ok(c) => {
                let s = &c.settings;
                let kinds = std::iter::once(&s.for_kind)
                    .chain(&s.owns)
                    .chain(&s.watches)
                    .map(|gvk| {
                        let namespaced = BuiltinKinds::resolve_now(gvk).namespaced;
                        let label = format!("{}/{}", gvk.api_version(), gvk.kind);
                        let route = plan
                            .route(gvk, namespaced, None, None)
                            .map_err(|e| e.to_string());
                        (label, route)
                    })
                    .collect();
                (s.key.to_string(), kinds)
            }
        })
        .collect()
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
