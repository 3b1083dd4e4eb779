//! What each [`Layer`] of a plan does: instantiate itself into a cache, describe itself, list
//! the informers it needs, and route a multi-namespace layer's namespaces to their caches.

#[allow(
    clippy::wildcard_imports,
    reason = "the parent module's types and helpers, split by concept"
)]
use super::*;

impl Layer {
    pub(super) fn collect_specs(&self, kinds: &Kinds, specs: &mut Vec<InformerSpec>) {
        match self {
            Layer::Informers(scope) => specs.push(InformerSpec {
                kinds: kinds.clone(),
                scope: scope.clone(),
            }),
            Layer::MultiNamespace {
                namespaces,
                cluster,
                selection,
            } => {
                let wide = selection.as_ref().and_then(|s| s.wide_scope());
                for scope in namespaces.values().chain(cluster.iter()).chain(wide.iter()) {
                    specs.push(InformerSpec {
                        kinds: kinds.clone(),
                        scope: scope.clone(),
                    });
                }
            }
            Layer::ByKind { kinds: by, default } => {
                for (gvk, layer) in by {
                    layer.collect_specs(&Kinds::Only(gvk.clone()), specs);
                }
                default.collect_specs(kinds, specs);
            }
            Layer::Waiting { .. } => {}
        }
    }

    pub(super) fn collect_wide(&self, out: &mut BTreeSet<String>) {
        match self {
            Layer::MultiNamespace {
                selection: Some(selection),
                ..
            } if selection.wide => {
                out.insert(selection.selector.to_string());
            }
            Layer::ByKind { kinds, default } => {
                for (_, layer) in kinds {
                    layer.collect_wide(out);
                }
                default.collect_wide(out);
            }
            _ => {}
        }
    }

    pub(super) fn collect_selections(&self, out: &mut BTreeMap<String, Option<BTreeSet<String>>>) {
        match self {
            Layer::MultiNamespace {
                selection: Some(selection),
                ..
            } => {
                out.insert(selection.selector.to_string(), selection.matched.clone());
            }
            Layer::ByKind { kinds, default } => {
                for (_, layer) in kinds {
                    layer.collect_selections(out);
                }
                default.collect_selections(out);
            }
            Layer::Informers(_) | Layer::MultiNamespace { .. } | Layer::Waiting { .. } => {}
        }
    }

    /// Builds this layer's caches; they adopt the pool's informers of the kinds `wanted`
    /// accepts (a `byObject` layer only its kind, the default layer every other kind).
    pub(super) fn instantiate(
        &self,
        context: &Context,
        wanted: &dyn Fn(&GroupVersionKind) -> bool,
    ) -> Arc<dyn Cache> {
        match self {
            Layer::Informers(scope) => {
                let cache = InformerCache::new(
                    context.clone(),
                    scope.namespace.clone(),
                    scope.settings.clone(),
                );
                cache.adopt(wanted);
                Arc::new(cache)
            }
            Layer::MultiNamespace {
                namespaces,
                cluster,
                selection,
            } => {
                let mut cache = MultiNamespaceCache::new(
                    context.clone(),
                    namespaces
                        .iter()
                        .map(|(key, scope)| (key.clone(), scope.settings.clone()))
                        .collect(),
                    cluster.as_ref().map(|scope| scope.settings.clone()),
                );
                if let Some(selection) = selection {
                    cache = cache.with_selector(selection.selector.to_string());
                    if selection.wide {
                        cache =
                            cache.with_wide(selection.settings.clone(), selection.added.clone());
                    }
                }
                cache.adopt(wanted);
                Arc::new(cache)
            }
            Layer::ByKind { kinds, default } => {
                let by_kind = kinds
                    .iter()
                    .map(|(gvk, layer)| (gvk.clone(), layer.instantiate(context, &|g| g == gvk)))
                    .collect();
                let listed = |g: &GroupVersionKind| kinds.iter().any(|(k, _)| k == g);
                let default = default.instantiate(context, &|g| !listed(g) && wanted(g));
                Arc::new(ByKindCache::new(by_kind, default))
            }
            Layer::Waiting { gvk, reason, .. } => Arc::new(WaitingCache::new(gvk.clone(), reason)),
        }
    }

    pub(super) fn describe(
        &self,
        role: &str,
        reader_fail_on_missing_informer: bool,
    ) -> Description {
        match self {
            Layer::Informers(scope) => Description::informers(
                role,
                InformerScopeDescription::of(scope, reader_fail_on_missing_informer),
            ),
            Layer::MultiNamespace {
                namespaces,
                cluster,
                selection,
            } => {
                let mut children: Vec<Description> = namespaces
                    .iter()
                    .map(|(key, scope)| {
                        Description::informers(
                            &namespace_role(key, added_by(key, selection.as_deref())),
                            InformerScopeDescription::of(scope, reader_fail_on_missing_informer),
                        )
                    })
                    .collect();
                if let Some(s) = selection.as_ref().filter(|s| s.wide) {
                    let mut scope = InformerScopeDescription::of(
                        &InformerScope {
                            namespace: None,
                            settings: s.settings.clone(),
                        },
                        reader_fail_on_missing_informer,
                    );
                    "<all, filtered to the matching>".clone_into(&mut scope.namespace);
                    children.push(Description::informers(
                        &format!(
                            "the {} namespaces namespaceSelector {:?} adds: one cluster-wide \
                             informer, reads filtered in the process (chosen because it matches \
                             at least {WIDE_ENTER_PERCENT}% of the namespaces: one watch instead \
                             of {})",
                            s.added.len(),
                            s.selector.to_string(),
                            s.added.len()
                        ),
                        scope,
                    ));
                }
                if let Some(s) = selection.as_ref().filter(|s| s.matched.is_none()) {
                    // Which namespaces match is known only in the cluster: say what each gets.
                    let mut scope = InformerScopeDescription::of(
                        &InformerScope {
                            namespace: None,
                            settings: s.settings.clone(),
                        },
                        reader_fail_on_missing_informer,
                    );
                    "<each matching>".clone_into(&mut scope.namespace);
                    children.push(Description::informers(
                        &format!(
                            "every namespace namespaceSelector {:?} matches, known at run time",
                            s.selector.to_string()
                        ),
                        scope,
                    ));
                }
                if let Some(scope) = cluster {
                    children.push(Description::informers(
                        "cluster-scoped kinds",
                        InformerScopeDescription::of(scope, reader_fail_on_missing_informer),
                    ));
                }
                let mut description = Description::routing("MultiNamespaceCache", role, children);
                if let Some(s) = selection {
                    description = description.with_selection(
                        s.selector.to_string(),
                        s.matched.as_ref().map(|m| m.iter().cloned().collect()),
                    );
                }
                description
            }
            Layer::ByKind { kinds, default } => {
                let mut children: Vec<Description> = kinds
                    .iter()
                    .map(|(gvk, layer)| {
                        layer.describe(&layer.kind_role(gvk), reader_fail_on_missing_informer)
                    })
                    .collect();
                children.push(default.describe(
                    "default: every kind not in byObject",
                    reader_fail_on_missing_informer,
                ));
                Description::routing("ByKindCache", role, children)
            }
            Layer::Waiting { reason, .. } => Description::waiting(role, reason),
        }
    }

    /// The role of this layer, the one of `gvk` in a `ByKind` layer.
    fn kind_role(&self, gvk: &GroupVersionKind) -> String {
        if matches!(
            self,
            Layer::Waiting {
                by_object: false,
                ..
            }
        ) {
            format!(
                "kind {}/{} a controller reads (not in byObject)",
                gvk.api_version(),
                gvk.kind
            )
        } else {
            format!("byObject {}/{}", gvk.api_version(), gvk.kind)
        }
    }

    pub(super) fn route(
        &self,
        read: &Read<'_>,
        reader_fail_on_missing_informer: bool,
        path: &mut Vec<String>,
    ) -> Result<(), Error> {
        match self {
            Layer::Informers(scope) => {
                route_to_informers(scope, read, reader_fail_on_missing_informer, path)
            }
            Layer::MultiNamespace {
                namespaces,
                cluster,
                selection,
            } => route_multi_namespace(
                namespaces,
                cluster.as_ref(),
                selection.as_deref(),
                read,
                reader_fail_on_missing_informer,
                path,
            ),
            Layer::ByKind { kinds, default } => {
                let listed = kinds.iter().find(|(gvk, _)| gvk == read.gvk);
                let kind = format!("{}/{}", read.gvk.api_version(), read.gvk.kind);
                let layer = if let Some((_, layer)) = listed {
                    if matches!(
                        layer,
                        Layer::Waiting {
                            by_object: false,
                            ..
                        }
                    ) {
                        path.push(format!(
                            "ByKindCache: {kind} is not in byObject and waits for the API server to serve it"
                        ));
                    } else {
                        path.push(format!("ByKindCache: {kind} is listed in byObject"));
                    }
                    layer
                } else {
                    path.push(format!(
                        "ByKindCache: {kind} is not in byObject, served by the default cache"
                    ));
                    default
                };
                layer.route(read, reader_fail_on_missing_informer, path)
            }
            Layer::Waiting { gvk, reason, .. } => Err(Error::WaitingForKind {
                gvk: gvk.clone(),
                reason: reason.clone(),
            }),
        }
    }
}

/// The route of a read through a `MultiNamespace` layer.
fn route_multi_namespace(
    namespaces: &BTreeMap<NamespaceKey, InformerScope>,
    cluster: Option<&InformerScope>,
    selection: Option<&Selection>,
    read: &Read<'_>,
    reader_fail_on_missing_informer: bool,
    path: &mut Vec<String>,
) -> Result<(), Error> {
    if !read.namespaced {
        let Some(cluster) = cluster else {
            return Err(Error::ClusterScopedNotCached {
                gvk: read.gvk.clone(),
            });
        };
        path.push("MultiNamespaceCache: cluster-scoped kind, served by the cluster cache (namespace ignored)".to_string());
        return route_to_informers(cluster, read, reader_fail_on_missing_informer, path);
    }
    let namespace = read.namespace.unwrap_or_default();
    if namespace.is_empty() && read.name.is_none() {
        // A list across all namespaces merges every namespace's cache
        // (pkg/cache/multi_namespace_cache.go `List` with NamespaceAll).
        path.push(format!(
            "MultiNamespaceCache: a list across namespaces, merged from {} caches",
            namespaces.len()
        ));
        for (key, scope) in namespaces {
            let added = added_by(key, selection);
            path.push(format!("  {}:", namespace_role(key, added)));
            route_to_informers(scope, read, reader_fail_on_missing_informer, path)?;
        }
        if let Some(s) = selection
            && let Some(wide) = s.wide_scope()
        {
            path.push(format!(
                "  the {} namespaces namespaceSelector {:?} adds, from its cluster-wide informer:",
                s.added.len(),
                s.selector.to_string()
            ));
            route_to_informers(&wide, read, reader_fail_on_missing_informer, path)?;
        }
        return Ok(());
    }
    let listed = namespaces.get_key_value(&NamespaceKey::named(namespace));
    if listed.is_none()
        && let Some(s) = selection.filter(|s| s.added.contains(namespace))
        && let Some(wide) = s.wide_scope()
    {
        path.push(format!(
            "MultiNamespaceCache: namespace {namespace:?} matches namespaceSelector \
             {:?}, served by its cluster-wide informer (filtered in the process)",
            s.selector.to_string()
        ));
        return route_to_informers(&wide, read, reader_fail_on_missing_informer, path);
    }
    if listed.is_none()
        && let Some(s) = selection.filter(|s| s.matched.is_none())
    {
        path.push(format!(
            "MultiNamespaceCache: namespace {namespace:?} is not listed, served only \
             while its labels match namespaceSelector {:?}",
            s.selector.to_string()
        ));
        let scope = InformerScope {
            namespace: Some(namespace.to_owned()),
            settings: s.settings.clone(),
        };
        return route_to_informers(&scope, read, reader_fail_on_missing_informer, path);
    }
    let Some((key, scope)) = listed.or_else(|| namespaces.get_key_value(&NamespaceKey::AllOthers))
    else {
        let selector = selection.map(|s| s.selector.to_string());
        return Err(match read.name {
            Some(name) => Error::UnknownNamespaceGet {
                namespace: namespace.to_string(),
                name: name.to_string(),
                selector,
            },
            None => Error::UnknownNamespaceList {
                namespace: namespace.to_string(),
                selector,
            },
        });
    };
    path.push(match key {
        NamespaceKey::Named(_) => match added_by(key, selection) {
            Some(s) => format!(
                "MultiNamespaceCache: namespace {namespace:?} matches namespaceSelector {:?}",
                s.selector.to_string()
            ),
            None => format!("MultiNamespaceCache: namespace {namespace:?} is listed"),
        },
        NamespaceKey::AllOthers => format!(
            "MultiNamespaceCache: namespace {namespace:?} is not listed, served by the \"\" entry"
        ),
    });
    route_to_informers(scope, read, reader_fail_on_missing_informer, path)
}
