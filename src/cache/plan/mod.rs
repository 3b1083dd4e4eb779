//! `Plan`: the cache tree a set of options builds, as plain data (controller-runtime's
//! `cache.New` in `pkg/cache/cache.go`, without I/O). Describing a tree (`informant explain`)
//! and diffing two trees (the manager's hot reload) need no client; [`Plan::instantiate`] turns
//! a plan into the caches that serve reads.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube::core::GroupVersionKind;

use super::api::Cache;
use super::by_kind::ByKindCache;
use super::describe::{Description, InformerScopeDescription};
use super::error::Error;
use super::informer_cache::{Context, InformerCache};
use super::matching::excluding_namespaces;
use super::multi_namespace::MultiNamespaceCache;
use super::options::{Config, NamespaceKey, Namespaces, Options, OptionsError, Scope};
use super::scope::ClusterScope;
use super::settings::InformerSettings;
use super::waiting::WaitingCache;
use crate::selector::{FieldRequirement, LabelSelector};

/// One `InformerCache`: the namespace its informers watch (`None`: all) and their settings.
/// Two scopes are equal exactly when their informers would list and store the same objects the
/// same way, which is what lets a reload keep an informer running.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InformerScope {
    /// The namespace watched; `None` watches every namespace.
    pub namespace: Option<String>,
    /// The settings of every informer started in this scope.
    pub settings: InformerSettings,
}

/// Which kinds the informers of a scope are started for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kinds {
    /// Only this kind (a `byObject` entry).
    Only(GroupVersionKind),
    /// Any kind read through this scope, started on first read (the default cache).
    Any,
}

/// One scope of informers in a plan: which kinds, which namespace, which settings.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct InformerSpec {
    /// The kinds started in this scope.
    pub kinds: Kinds,
    /// The namespace and settings.
    pub scope: InformerScope,
}

/// The namespaces a namespace selector chooses in a `MultiNamespace` layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The selector on the namespaces' labels.
    pub selector: LabelSelector,
    /// The settings of every namespace it adds (those not listed by name).
    pub settings: InformerSettings,
    /// Every namespace it matches now, listed or not; `None` when the plan was made without
    /// knowing the cluster's namespaces.
    pub matched: Option<BTreeSet<String>>,
    /// The namespaces it adds: those it matches that are not listed by name.
    pub added: BTreeSet<String>,
    /// Whether the added namespaces are served by one informer over every namespace whose
    /// reads are filtered in the process, instead of one informer per namespace: chosen when
    /// the selector matches nearly every namespace (`WIDE_MIN_NAMESPACES`,
    /// `WIDE_ENTER_PERCENT`), where one watch receives about the bytes of the per-namespace
    /// watches it replaces.
    pub wide: bool,
}

/// The fewest namespaces a selector must add before one cluster-wide informer may serve them.
pub(crate) const WIDE_MIN_NAMESPACES: usize = 100;

/// The share of all namespaces (per cent) a selector must match for one cluster-wide informer
/// to serve the namespaces it adds. `cargo bench --bench scope`: at 100% the two layouts
/// receive the same bytes, and one watch replaces a thousand; at 50% per-namespace informers
/// receive half the bytes.
pub(crate) const WIDE_ENTER_PERCENT: usize = 90;

/// Below this share (per cent) a selector served by one cluster-wide informer goes back to one
/// informer per namespace: the gap keeps a namespace relabelled at the threshold from
/// switching layouts (each switch lists every added namespace again) back and forth.
pub(crate) const WIDE_LEAVE_PERCENT: usize = 80;

impl Selection {
    /// The selection of `selector` beside the namespaces of `listed`, in the cluster `scope`.
    fn new(
        selector: &LabelSelector,
        settings: InformerSettings,
        listed: &BTreeMap<NamespaceKey, Config>,
        scope: &ClusterScope,
    ) -> Self {
        let matched = scope.matching(selector);
        let added: BTreeSet<String> = matched
            .iter()
            .flatten()
            .filter(|ns| !listed.contains_key(&NamespaceKey::named(ns)))
            .cloned()
            .collect();
        let total = scope.namespaces.as_ref().map_or(0, BTreeMap::len);
        let matching = matched.as_ref().map_or(0, BTreeSet::len);
        let threshold = if scope.wide.contains(&selector.to_string()) {
            WIDE_LEAVE_PERCENT
        } else {
            WIDE_ENTER_PERCENT
        };
        let wide = added.len() >= WIDE_MIN_NAMESPACES && matching * 100 >= total * threshold;
        Self {
            selector: selector.clone(),
            settings,
            matched,
            added,
            wide,
        }
    }

    /// The scope of the one informer serving the added namespaces, when wide.
    #[must_use]
    pub(crate) fn wide_scope(&self) -> Option<InformerScope> {
        self.wide.then(|| InformerScope {
            namespace: None,
            settings: self.settings.clone(),
        })
    }
}

/// One layer of a planned tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layer {
    /// An `InformerCache`: one informer per kind read, all in one scope.
    Informers(InformerScope),
    /// A `MultiNamespaceCache`: a scope per namespace key, and a cluster scope for
    /// cluster-scoped kinds when the tree has one (only for `defaultNamespaces`).
    MultiNamespace {
        /// The scope of each listed namespace, of each namespace the selector adds, and of
        /// every other namespace ([`NamespaceKey::AllOthers`]) when that entry exists.
        namespaces: BTreeMap<NamespaceKey, InformerScope>,
        /// The scope of cluster-scoped kinds; `None`: reading one is an error.
        cluster: Option<InformerScope>,
        /// The namespaces chosen by label, when a selector chooses some.
        selection: Option<Box<Selection>>,
    },
    /// A `ByKindCache`: a layer per `byObject` kind, and a default layer for every other kind.
    ByKind {
        /// The layer of each `byObject` kind, ordered by group, version and kind.
        kinds: Vec<(GroupVersionKind, Layer)>,
        /// The layer of every other kind.
        default: Box<Layer>,
    },
    /// A kind the API server does not serve yet, a `byObject` one or one a controller reads
    /// ([`super::WantedKinds`]): no informer, reads fail with [`Error::WaitingForKind`],
    /// until a plan made once it is served replaces this layer (a `byObject` kind's own
    /// layer, the default cache for another).
    Waiting {
        /// The kind.
        gvk: GroupVersionKind,
        /// Why it is not served.
        reason: String,
        /// Whether the kind is listed in `byObject` (otherwise a controller reads it).
        by_object: bool,
    },
}

/// The cache tree a set of [`Options`] builds, with no client and no I/O.
///
/// ```
/// use informant::cache::{Layer, Options, Plan};
///
/// let options = informant::config::load("config/samples/multi-namespace.yaml")?.cache;
/// let plan = Plan::new(&options)?;
/// assert!(matches!(plan.root(), Layer::MultiNamespace { .. }));
/// print!("{}", plan.describe().to_text());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    root: Layer,
    reader_fail_on_missing_informer: bool,
}

impl Plan {
    /// Plans the tree for `options` exactly as controller-runtime's `cache.New` composes it:
    ///
    /// - no `default_namespaces`, no `by_object`: one `InformerCache` over all namespaces with
    ///   the `default_*` settings;
    /// - `default_namespaces`: a `MultiNamespaceCache` with an `InformerCache` per namespace,
    ///   the `""` entry as fallback, and a cluster cache with the `default_*` settings;
    /// - `by_object`: a `ByKindCache` routing each listed kind to a `MultiNamespaceCache`
    ///   without cluster cache (when it has namespaces) or an `InformerCache` over all
    ///   namespaces, and every other kind to the default cache above.
    ///
    /// `by_object` kinds that are not built in are taken as namespaced unless their scope was
    /// resolved first (`resolve_scopes`).
    ///
    /// A namespace selector selects no namespace in this plan (the cluster's namespaces are
    /// not known): see [`Plan::for_cluster`].
    ///
    /// # Errors
    /// [`OptionsError`] when the options can not be defaulted (namespaces set for a
    /// cluster-scoped kind).
    pub fn new(options: &Options) -> Result<Self, OptionsError> {
        Self::for_cluster(options, &ClusterScope::default())
    }

    /// Plans the tree as [`Plan::new`] does, for the cluster `scope` describes: each namespace
    /// selector adds the namespaces it matches there (each with an `InformerCache`, as a
    /// listed namespace has), and each kind the cluster does not serve waits
    /// ([`Layer::Waiting`]): a `byObject` kind in its place, any other kind in a `ByKindCache`
    /// in front of the default cache (one is added when `byObject` is empty).
    ///
    /// # Errors
    /// As [`Plan::new`].
    pub fn for_cluster(options: &Options, scope: &ClusterScope) -> Result<Self, OptionsError> {
        let options = options.defaulted()?;
        let defaults = InformerSettings::from_config(&options.default_config(), false);
        let default_selection = options.default_namespace_selector.as_ref().map(|selector| {
            Selection::new(
                selector,
                defaults.clone(),
                &options.default_namespaces,
                scope,
            )
        });
        let default = if options.default_namespaces.is_empty() && default_selection.is_none() {
            Layer::Informers(InformerScope {
                namespace: None,
                settings: defaults,
            })
        } else {
            Layer::MultiNamespace {
                namespaces: namespace_scopes(
                    &options.default_namespaces,
                    false,
                    default_selection.as_ref(),
                ),
                cluster: Some(InformerScope {
                    namespace: None,
                    settings: defaults,
                }),
                selection: default_selection.map(Box::new),
            }
        };
        let default = shard::shard(default, scope, Serves::Any);
        let others_waiting = waiting_outside_by_object(&options, scope);
        let root = if options.by_object.is_empty() && others_waiting.is_empty() {
            default
        } else {
            let mut kinds: Vec<(GroupVersionKind, Layer)> = options
                .by_object
                .iter()
                .map(|by| {
                    let empty = BTreeMap::new();
                    let listed = match &by.namespaces {
                        Namespaces::Only(map) => map,
                        Namespaces::Inherit | Namespaces::All => &empty,
                    };
                    let selection = by.namespace_selector.as_ref().map(|selector| {
                        Selection::new(
                            selector,
                            InformerSettings::from_config(&by.config, by.metadata_only),
                            listed,
                            scope,
                        )
                    });
                    if let Some(reason) = scope.waiting_reason(&by.gvk) {
                        let waiting = Layer::Waiting {
                            gvk: by.gvk.clone(),
                            reason: reason.to_owned(),
                            by_object: true,
                        };
                        return (by.gvk.clone(), waiting);
                    }
                    let layer = match &by.namespaces {
                        Namespaces::Only(map) if !map.is_empty() || selection.is_some() => {
                            Layer::MultiNamespace {
                                namespaces: namespace_scopes(
                                    map,
                                    by.metadata_only,
                                    selection.as_ref(),
                                ),
                                cluster: None,
                                selection: selection.map(Box::new),
                            }
                        }
                        _ => Layer::Informers(InformerScope {
                            namespace: None,
                            settings: InformerSettings::from_config(&by.config, by.metadata_only),
                        }),
                    };
                    let serves = match by.scope {
                        Scope::Namespaced => Serves::Namespaced,
                        Scope::Cluster => Serves::ClusterScoped,
                    };
                    (by.gvk.clone(), shard::shard(layer, scope, serves))
                })
                .collect();
            kinds.extend(others_waiting);
            kinds.sort_by(|(a, _), (b, _)| {
                (&a.group, &a.version, &a.kind).cmp(&(&b.group, &b.version, &b.kind))
            });
            Layer::ByKind {
                kinds,
                default: Box::new(default),
            }
        };
        Ok(Self {
            root,
            reader_fail_on_missing_informer: options.reader_fail_on_missing_informer,
        })
    }

    /// The root layer.
    #[must_use]
    pub fn root(&self) -> &Layer {
        &self.root
    }

    /// Whether reads of a kind without an informer fail instead of starting one.
    #[must_use]
    pub fn reader_fail_on_missing_informer(&self) -> bool {
        self.reader_fail_on_missing_informer
    }

    /// The `byObject` kinds the cluster serves, ordered by group, version and kind: the kinds
    /// the manager starts eagerly.
    #[must_use]
    pub fn by_object_kinds(&self) -> Vec<GroupVersionKind> {
        match &self.root {
            Layer::ByKind { kinds, .. } => kinds
                .iter()
                .filter(|(_, layer)| !matches!(layer, Layer::Waiting { .. }))
                .map(|(gvk, _)| gvk.clone())
                .collect(),
            Layer::Informers(_) | Layer::MultiNamespace { .. } | Layer::Waiting { .. } => {
                Vec::new()
            }
        }
    }

    /// The kinds that wait for the API server to serve them (`byObject` kinds and kinds
    /// controllers read), with why.
    #[must_use]
    pub fn waiting_kinds(&self) -> Vec<(GroupVersionKind, String)> {
        match &self.root {
            Layer::ByKind { kinds, .. } => kinds
                .iter()
                .filter_map(|(_, layer)| match layer {
                    Layer::Waiting { gvk, reason, .. } => Some((gvk.clone(), reason.clone())),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The selectors whose added namespaces one cluster-wide informer serves.
    #[must_use]
    pub fn wide_selections(&self) -> BTreeSet<String> {
        let mut wide = BTreeSet::new();
        self.root.collect_wide(&mut wide);
        wide
    }

    /// Every namespace selector of the tree, once each, with the namespaces it matches now
    /// (`None` when the plan did not know the cluster's namespaces).
    #[must_use]
    pub fn namespace_selections(&self) -> BTreeMap<String, Option<BTreeSet<String>>> {
        let mut out = BTreeMap::new();
        self.root.collect_selections(&mut out);
        out
    }

    /// Every informer scope of the tree, outermost layer first, each with the kinds it starts.
    /// Two plans with the same spec share those informers.
    #[must_use]
    pub(crate) fn informer_specs(&self) -> Vec<InformerSpec> {
        let mut specs = Vec::new();
        self.root.collect_specs(&Kinds::Any, &mut specs);
        specs
    }

    /// Builds the caches of this plan. Nothing is started and no request is made until
    /// [`Cache::start`] or a read.
    #[must_use]
    ///
    /// Each cache takes over the informers of `context`'s pool that match its scope and kinds
    /// (see `InformerCache::adopt`): a tree built on the pool of a running tree serves every
    /// kind the old one had started, from the same stores, without a new LIST.
    pub fn instantiate(&self, context: &Context) -> Arc<dyn Cache> {
        self.root.instantiate(context, &|_| true)
    }

    /// The tree for `informant explain`, outermost layer first.
    #[must_use]
    pub fn describe(&self) -> Description {
        self.root
            .describe("root", self.reader_fail_on_missing_informer)
    }

    /// Which layers would serve a read of `gvk` in `namespace`, outermost first, or the error a
    /// read would fail with before reaching an informer. `namespaced` is the kind's scope.
    ///
    /// With `readerFailOnMissingInformer`, a plan has no informer yet, so every route ends in
    /// [`Error::KindNotCached`].
    ///
    /// # Errors
    /// The error the read would return (unknown namespace, kind not cached, ...).
    pub fn route(
        &self,
        gvk: &GroupVersionKind,
        namespaced: bool,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<Vec<String>, Error> {
        let mut path = Vec::new();
        self.root.route(
            &Read {
                gvk,
                namespaced,
                namespace,
                name,
            },
            self.reader_fail_on_missing_informer,
            &mut path,
        )?;
        Ok(path)
    }
}

/// The kinds read by controllers, not in `byObject`, that the cluster does not serve: each
/// waits in a layer of its own in front of the default cache.
fn waiting_outside_by_object(
    options: &Options,
    scope: &ClusterScope,
) -> Vec<(GroupVersionKind, Layer)> {
    scope
        .waiting
        .iter()
        .filter(|(gvk, _)| !options.by_object.iter().any(|by| &by.gvk == *gvk))
        .map(|(gvk, reason)| {
            let layer = Layer::Waiting {
                gvk: gvk.clone(),
                reason: reason.clone(),
                by_object: false,
            };
            (gvk.clone(), layer)
        })
        .collect()
}

/// What a routed read asks for.
struct Read<'a> {
    gvk: &'a GroupVersionKind,
    namespaced: bool,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
}

/// The scopes of a namespace map, and of the namespaces `selection` adds to it. The
/// [`NamespaceKey::AllOthers`] entry watches all namespaces except the listed ones: its field
/// selector gets `metadata.namespace!=<ns>` for each (controller-runtime `defaultOpts`), so no
/// object is cached twice. `Options::defaulted` already adds these; only what is missing is
/// added here.
fn namespace_scopes(
    map: &BTreeMap<NamespaceKey, Config>,
    metadata_only: bool,
    selection: Option<&Selection>,
) -> BTreeMap<NamespaceKey, InformerScope> {
    let mut scopes = listed_scopes(map, metadata_only);
    if let Some(selection) = selection.filter(|s| !s.wide) {
        for ns in &selection.added {
            scopes.insert(
                NamespaceKey::named(ns),
                InformerScope {
                    namespace: Some(ns.clone()),
                    settings: selection.settings.clone(),
                },
            );
        }
    }
    scopes
}

fn listed_scopes(
    map: &BTreeMap<NamespaceKey, Config>,
    metadata_only: bool,
) -> BTreeMap<NamespaceKey, InformerScope> {
    let listed: Vec<&str> = map
        .keys()
        .filter_map(|key| match key {
            NamespaceKey::Named(ns) => Some(ns.as_str()),
            NamespaceKey::AllOthers => None,
        })
        .collect();
    map.iter()
        .map(|(key, config)| {
            let mut settings = InformerSettings::from_config(config, metadata_only);
            let namespace = match key {
                NamespaceKey::Named(ns) => Some(ns.clone()),
                NamespaceKey::AllOthers => {
                    let present = |ns: &&str| {
                        settings.field_selector.as_ref().is_some_and(|f| {
                            f.requirements()
                                .contains(&FieldRequirement::not_equals("metadata.namespace", *ns))
                        })
                    };
                    let missing: Vec<&str> =
                        listed.iter().copied().filter(|ns| !present(ns)).collect();
                    if !missing.is_empty() {
                        let exclusion = excluding_namespaces(missing);
                        settings.field_selector = Some(match settings.field_selector.take() {
                            Some(own) => own.and(&exclusion),
                            None => exclusion,
                        });
                    }
                    None
                }
            };
            (
                key.clone(),
                InformerScope {
                    namespace,
                    settings,
                },
            )
        })
        .collect()
}

/// The last step of a route: the `InformerCache` of `scope`, or [`Error::KindNotCached`] when
/// reads may not start informers (a plan has none yet).
fn route_to_informers(
    scope: &InformerScope,
    read: &Read<'_>,
    reader_fail_on_missing_informer: bool,
    path: &mut Vec<String>,
) -> Result<(), Error> {
    if reader_fail_on_missing_informer {
        return Err(Error::KindNotCached {
            gvk: read.gvk.clone(),
        });
    }
    let d = InformerScopeDescription::of(scope, reader_fail_on_missing_informer);
    path.push(format!("InformerCache {}", d.to_text()));
    Ok(())
}

/// The role of a namespace key's layer in its parent; `selected` when a namespace selector
/// added it (it is not listed).
fn namespace_role(key: &NamespaceKey, selection: Option<&Selection>) -> String {
    match key {
        NamespaceKey::AllOthers => "namespace \"\" (every namespace not listed)".to_string(),
        NamespaceKey::Named(ns) => match selection {
            Some(s) => format!(
                "namespace {ns} (matches namespaceSelector {:?})",
                s.selector.to_string()
            ),
            None => format!("namespace {ns}"),
        },
    }
}

/// The selection of a layer when it added `key` (a namespace it matches that is not listed).
fn added_by<'a>(key: &NamespaceKey, selection: Option<&'a Selection>) -> Option<&'a Selection> {
    let selection = selection?;
    let NamespaceKey::Named(ns) = key else {
        return None;
    };
    selection.added.contains(ns).then_some(selection)
}

mod layer;
mod shard;

use shard::Serves;

#[cfg(test)]
mod tests;
