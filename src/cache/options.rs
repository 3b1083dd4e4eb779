//! Typed cache options: what the cache tree caches, per kind and per namespace
//! (controller-runtime's `cache.Options`, `ByObject` and `Config`, v0.24).
//!
//! Built from a `CacheConfig` by the config module, or by hand. Unset settings are `None`
//! (Go's nil); [`Options::defaulted`] fills them in one pass with controller-runtime's
//! precedence, and [`Config`]'s `effective_*` accessors supply the built-in defaults for what
//! is still unset.
//!
//! # Precedence
//!
//! Most specific first; a more specific setting **replaces** a less specific one, it is never
//! combined with it (two label selectors are not ANDed):
//!
//! 1. `by_object[i].namespaces[ns]`
//! 2. `by_object[i]`
//! 3. `default_namespaces[ns]`
//! 4. `default_*` (and `sync_period`)
//!
//! The one exception is the [`NamespaceKey::AllOthers`] entry of a namespace map: its field
//! selector gets `metadata.namespace!=<ns>` for every listed namespace `AND`ed to it, so no
//! object is cached by two informers.
//!
//! # Namespaces chosen by label
//!
//! A namespace selector (`default_namespace_selector`, `ByObject::namespace_selector`) adds
//! every namespace whose labels match to the namespaces of its level, with that level's
//! settings (`default_*` for the default selector; the entry's, then `default_*`, for a
//! `byObject` one):
//!
//! - the named keys of the same map keep their own settings and are cached whether they
//!   match or not; the selector adds the namespaces it matches that are not listed;
//! - it cannot be combined with the [`NamespaceKey::AllOthers`] key, nor with
//!   [`Namespaces::All`]: both already mean the namespaces not listed
//!   ([`OptionsError::SelectorWithAllNamespaces`]);
//! - a `byObject` entry that sets its namespaces or its selector replaces both of the
//!   defaults' (they are one choice: which namespaces), as `namespaces` always has;
//! - it is refused for cluster-scoped kinds, as namespaces are.
//!
//! Which namespaces match is not an option: the [`super::Plan`] is made for the namespaces a
//! [`super::ClusterScope`] says exist, and planned again when they change.

mod defaulting;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use kube::core::GroupVersionKind;

use super::projection::Projection;
use crate::selector::{FieldSelector, LabelSelector, Sharding};

pub use defaulting::OptionsError;

/// Default resync period of every informer.
///
/// controller-runtime `pkg/cache/cache.go`: `defaultSyncPeriod = 10 * time.Hour`.
pub const DEFAULT_SYNC_PERIOD: Duration = Duration::from_hours(10);

/// Default of `enable_watch_bookmarks`.
///
/// controller-runtime `pkg/cache/cache.go` (`newCache`):
/// `EnableWatchBookmarks: ptr.Deref(config.EnableWatchBookmarks, true)`.
pub(crate) const DEFAULT_ENABLE_WATCH_BOOKMARKS: bool = true;

/// Default of `unsafe_disable_deep_copy`.
///
/// controller-runtime `pkg/cache/cache.go` (`newCache`):
/// `UnsafeDisableDeepCopy: ptr.Deref(config.UnsafeDisableDeepCopy, false)`.
pub(crate) const DEFAULT_UNSAFE_DISABLE_DEEP_COPY: bool = false;

/// Typed cache options (controller-runtime's `cache.Options`).
///
/// `Default` caches every kind in every namespace with controller-runtime's defaults.
///
/// ```
/// use informant::cache::{Config, NamespaceKey, Options};
/// use informant::selector::LabelSelector;
///
/// let mut opts = Options::default();
/// opts.default_label_selector = Some(LabelSelector::parse("app=shop").unwrap());
/// opts.default_namespaces.insert(NamespaceKey::named("team-a"), Config::default());
/// let defaulted = opts.defaulted().unwrap();
/// let team_a = &defaulted.default_namespaces[&NamespaceKey::named("team-a")];
/// assert_eq!(team_a.label_selector.as_ref().unwrap().to_string(), "app=shop");
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// Resync period of every informer without its own; `None`: [`DEFAULT_SYNC_PERIOD`].
    pub sync_period: Option<Duration>,
    /// Reads of a kind without an informer fail instead of starting one.
    pub reader_fail_on_missing_informer: bool,
    /// Namespaces to cache, each with settings. Empty: every namespace (one cluster-wide
    /// informer per kind); otherwise only these (a `MultiNamespaceCache`).
    pub default_namespaces: BTreeMap<NamespaceKey, Config>,
    /// Namespaces chosen by their labels, added to `default_namespaces` with the `default_*`
    /// settings (see the module docs for how the two combine).
    pub default_namespace_selector: Option<LabelSelector>,
    /// Label selector of everything without its own.
    pub default_label_selector: Option<LabelSelector>,
    /// Field selector of everything without its own.
    pub default_field_selector: Option<FieldSelector>,
    /// Transform of everything without its own.
    pub default_transform: Option<Transform>,
    /// Skip deep copies on reads, for everything without its own setting.
    pub default_unsafe_disable_deep_copy: Option<bool>,
    /// Ask for watch bookmarks, for everything without its own setting.
    pub default_enable_watch_bookmarks: Option<bool>,
    /// Per-kind settings; each kind at most once (validation guarantees it).
    pub by_object: Vec<ByObject>,
    /// Sharing the objects of namespaced kinds among the members of a ring; `None`: this
    /// cache holds everything it is configured to hold.
    pub sharding: Option<Sharding>,
}

impl Options {
    /// The `default_*` settings as a [`Config`] (controller-runtime's
    /// `optionDefaultsToConfig`).
    #[must_use]
    pub fn default_config(&self) -> Config {
        Config {
            label_selector: self.default_label_selector.clone(),
            field_selector: self.default_field_selector.clone(),
            transform: self.default_transform.clone(),
            unsafe_disable_deep_copy: self.default_unsafe_disable_deep_copy,
            enable_watch_bookmarks: self.default_enable_watch_bookmarks,
            sync_period: self.sync_period,
        }
    }

    /// Adds per-kind settings (a `CacheConfig`'s `spec.byObject` entry).
    ///
    /// ```
    /// use informant::cache::{ByObject, Config, Namespaces, Options};
    /// use informant::selector::FieldSelector;
    /// use kube::core::GroupVersionKind;
    ///
    /// let pods = GroupVersionKind::gvk("", "v1", "Pod");
    /// let opts = Options::default()
    ///     .with_by_object(
    ///         ByObject::new(pods.clone())
    ///             .with_namespaces(Namespaces::All)
    ///             .with_config(Config::default().with_field_selector(
    ///                 FieldSelector::parse("spec.nodeName=node01").unwrap(),
    ///             )),
    ///     )
    ///     .defaulted()
    ///     .unwrap();
    /// assert_eq!(opts.by_object_for(&pods).unwrap().namespaces, Namespaces::All);
    /// ```
    #[must_use]
    pub fn with_by_object(mut self, by_object: ByObject) -> Self {
        self.by_object.push(by_object);
        self
    }

    /// Adds (or replaces) one entry of `default_namespaces`: the cache then holds only the
    /// namespaces named so (with each one's settings), as controller-runtime's
    /// `DefaultNamespaces`.
    ///
    /// ```
    /// use informant::cache::{Config, NamespaceKey, Options};
    /// use informant::selector::LabelSelector;
    ///
    /// let opts = Options::default()
    ///     .with_default_namespace(NamespaceKey::named("shop"), Config::default())
    ///     .with_default_namespace(
    ///         NamespaceKey::named("ops"),
    ///         Config::default().with_label_selector(LabelSelector::parse("team=ops").unwrap()),
    ///     );
    /// assert_eq!(opts.default_namespaces.len(), 2);
    /// ```
    #[must_use]
    pub fn with_default_namespace(mut self, key: NamespaceKey, config: Config) -> Self {
        self.default_namespaces.insert(key, config);
        self
    }

    /// These options choosing namespaces by `selector` (see the module docs).
    ///
    /// ```
    /// use informant::cache::Options;
    /// use informant::selector::LabelSelector;
    ///
    /// let opts = Options::default()
    ///     .with_default_namespace_selector(LabelSelector::parse("tenant=blue").unwrap());
    /// assert!(opts.uses_namespace_selector());
    /// ```
    #[must_use]
    pub fn with_default_namespace_selector(mut self, selector: LabelSelector) -> Self {
        self.default_namespace_selector = Some(selector);
        self
    }

    /// The per-kind settings of `gvk`, if any (after [`Options::defaulted`], with every
    /// setting it inherits filled in).
    ///
    /// ```
    /// use informant::cache::{ByObject, Options};
    /// use kube::core::GroupVersionKind;
    ///
    /// let secrets = GroupVersionKind::gvk("", "v1", "Secret");
    /// let opts = Options::default().with_by_object(ByObject::new(secrets.clone()).with_metadata_only(true));
    /// assert!(opts.by_object_for(&secrets).is_some_and(|b| b.metadata_only));
    /// assert!(opts.by_object_for(&GroupVersionKind::gvk("", "v1", "Pod")).is_none());
    /// ```
    #[must_use]
    pub fn by_object_for(&self, gvk: &GroupVersionKind) -> Option<&ByObject> {
        self.by_object.iter().find(|b| &b.gvk == gvk)
    }

    /// Whether any level chooses namespaces by label: the cache then follows the cluster's
    /// namespaces.
    #[must_use]
    pub fn uses_namespace_selector(&self) -> bool {
        self.default_namespace_selector.is_some()
            || self
                .by_object
                .iter()
                .any(|b| b.namespace_selector.is_some())
    }
}

/// Settings of one informer's list/watch and store (controller-runtime's `cache.Config`).
/// `None` means unset: filled by [`Options::defaulted`] from a less specific level.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    /// Label selector; `Some(everything)` stops defaulting.
    pub label_selector: Option<LabelSelector>,
    /// Field selector; `Some(everything)` stops defaulting.
    pub field_selector: Option<FieldSelector>,
    /// Transform applied before objects are stored.
    pub transform: Option<Transform>,
    /// Return cached objects without a deep copy.
    pub unsafe_disable_deep_copy: Option<bool>,
    /// Ask for watch bookmarks.
    pub enable_watch_bookmarks: Option<bool>,
    /// Resync period.
    pub sync_period: Option<Duration>,
}

impl Config {
    /// Fills every unset setting from `from` (controller-runtime's `defaultConfig`).
    #[must_use]
    pub fn or(mut self, from: &Config) -> Config {
        if self.label_selector.is_none() {
            self.label_selector.clone_from(&from.label_selector);
        }
        if self.field_selector.is_none() {
            self.field_selector.clone_from(&from.field_selector);
        }
        if self.transform.is_none() {
            self.transform.clone_from(&from.transform);
        }
        self.unsafe_disable_deep_copy = self
            .unsafe_disable_deep_copy
            .or(from.unsafe_disable_deep_copy);
        self.enable_watch_bookmarks = self.enable_watch_bookmarks.or(from.enable_watch_bookmarks);
        self.sync_period = self.sync_period.or(from.sync_period);
        self
    }

    /// These settings with a label selector (the API server's: only matching objects are
    /// listed, watched and held).
    ///
    /// ```
    /// use informant::cache::Config;
    /// use informant::selector::LabelSelector;
    ///
    /// let config = Config::default().with_label_selector(LabelSelector::parse("app=web").unwrap());
    /// let selector = config.effective_label_selector();
    /// assert!(selector.matches_with(|key| (key == "app").then_some("web")));
    /// assert!(!selector.matches_with(|key| (key == "app").then_some("db")));
    /// ```
    #[must_use]
    pub fn with_label_selector(mut self, selector: LabelSelector) -> Self {
        self.label_selector = Some(selector);
        self
    }

    /// These settings with a field selector (the API server's).
    ///
    /// ```
    /// use informant::cache::Config;
    /// use informant::selector::FieldSelector;
    ///
    /// let config =
    ///     Config::default().with_field_selector(FieldSelector::parse("spec.nodeName=node01").unwrap());
    /// let selector = config.effective_field_selector();
    /// assert!(selector.matches_object(&serde_json::json!({"spec": {"nodeName": "node01"}})));
    /// assert!(!selector.matches_object(&serde_json::json!({"spec": {"nodeName": "node02"}})));
    /// ```
    #[must_use]
    pub fn with_field_selector(mut self, selector: FieldSelector) -> Self {
        self.field_selector = Some(selector);
        self
    }

    /// These settings with a transform, applied to each object before it is held
    /// (controller-runtime's `ByObject.Transform`, declared).
    ///
    /// ```
    /// use informant::cache::{Config, Transform};
    ///
    /// let strip = Transform { strip_managed_fields: true, ..Transform::default() };
    /// let config = Config::default().with_transform(strip.clone());
    /// assert_eq!(config.transform, Some(strip));
    /// ```
    #[must_use]
    pub fn with_transform(mut self, transform: Transform) -> Self {
        self.transform = Some(transform);
        self
    }

    /// These settings with a resync period (`syncPeriod`: every controller reconciles each
    /// object again once per `period`; zero turns it off).
    ///
    /// ```
    /// use std::time::Duration;
    /// use informant::cache::{Config, DEFAULT_SYNC_PERIOD};
    ///
    /// assert_eq!(Config::default().effective_sync_period(), DEFAULT_SYNC_PERIOD);
    /// let config = Config::default().with_sync_period(Duration::from_secs(600));
    /// assert_eq!(config.effective_sync_period(), Duration::from_secs(600));
    /// ```
    #[must_use]
    pub fn with_sync_period(mut self, period: Duration) -> Self {
        self.sync_period = Some(period);
        self
    }

    /// The label selector to list/watch with (everything if unset).
    #[must_use]
    pub fn effective_label_selector(&self) -> LabelSelector {
        self.label_selector
            .clone()
            .unwrap_or_else(LabelSelector::everything)
    }

    /// The field selector to list/watch with (everything if unset).
    #[must_use]
    pub fn effective_field_selector(&self) -> FieldSelector {
        self.field_selector
            .clone()
            .unwrap_or_else(FieldSelector::everything)
    }

    /// The resync period ([`DEFAULT_SYNC_PERIOD`] if unset).
    #[must_use]
    pub fn effective_sync_period(&self) -> Duration {
        self.sync_period.unwrap_or(DEFAULT_SYNC_PERIOD)
    }

    /// Whether to ask for bookmarks (`DEFAULT_ENABLE_WATCH_BOOKMARKS` if unset).
    #[must_use]
    pub fn effective_enable_watch_bookmarks(&self) -> bool {
        self.enable_watch_bookmarks
            .unwrap_or(DEFAULT_ENABLE_WATCH_BOOKMARKS)
    }

    /// Whether to skip deep copies (`DEFAULT_UNSAFE_DISABLE_DEEP_COPY` if unset).
    #[must_use]
    pub fn effective_unsafe_disable_deep_copy(&self) -> bool {
        self.unsafe_disable_deep_copy
            .unwrap_or(DEFAULT_UNSAFE_DISABLE_DEEP_COPY)
    }
}

/// A declarative transform applied to objects before they are stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Transform {
    /// Remove `metadata.managedFields`.
    pub strip_managed_fields: bool,
    /// Annotation keys to remove.
    pub drop_annotations: Vec<String>,
    /// Label keys to remove.
    pub drop_labels: Vec<String>,
    /// The fields kept and dropped (`keepFields`, `dropFields`); the default keeps everything.
    pub projection: Projection,
}

impl Transform {
    /// Whether the transform changes nothing.
    #[must_use]
    pub fn is_identity(&self) -> bool {
        !self.strip_managed_fields
            && self.drop_annotations.is_empty()
            && self.drop_labels.is_empty()
            && self.projection.is_identity()
    }

    /// Applies the transform to an object as the informer holds it, as the informer does
    /// before storing each object it receives.
    pub fn apply_to(&self, obj: &mut kube::core::DynamicObject) {
        super::transform::apply(self, obj);
    }

    /// Applies the transform to an object in its JSON form; other shapes are left alone.
    ///
    /// ```
    /// use informant::cache::Transform;
    /// let t = Transform { strip_managed_fields: true, drop_labels: vec!["x".into()], ..Default::default() };
    /// let mut pod = serde_json::json!({"metadata": {"managedFields": [{}], "labels": {"x": "1", "y": "2"}}});
    /// t.apply(&mut pod);
    /// assert_eq!(pod, serde_json::json!({"metadata": {"labels": {"y": "2"}}}));
    /// ```
    pub fn apply(&self, object: &mut serde_json::Value) {
        if !self.projection.is_identity() {
            // The projection works on the object as the informer holds it.
            if let Ok(mut obj) = serde_json::from_value::<kube::core::DynamicObject>(object.clone())
            {
                self.projection.apply(&mut obj);
                if let Ok(projected) = serde_json::to_value(obj) {
                    *object = projected;
                }
            }
        }
        let Some(meta) = object.get_mut("metadata").and_then(|m| m.as_object_mut()) else {
            return;
        };
        if self.strip_managed_fields {
            meta.remove("managedFields");
        }
        for (field, keys) in [
            ("annotations", &self.drop_annotations),
            ("labels", &self.drop_labels),
        ] {
            if let Some(map) = meta.get_mut(field).and_then(|m| m.as_object_mut()) {
                for key in keys {
                    map.remove(key);
                }
            }
        }
    }
}

/// A key of a namespace map: one namespace, or every namespace not listed.
///
/// Orders like the strings (`AllOthers`, the `""` key, first).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NamespaceKey {
    /// The `""` key: every namespace not listed in the same map (controller-runtime's
    /// `cache.AllNamespaces`).
    AllOthers,
    /// One namespace (a DNS-1123 label; validation guarantees it).
    Named(String),
}

impl NamespaceKey {
    /// The key of one namespace.
    #[must_use]
    pub fn named(namespace: &str) -> Self {
        NamespaceKey::Named(namespace.to_owned())
    }

    /// The key as written in a `CacheConfig` (`""` for [`NamespaceKey::AllOthers`]).
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            NamespaceKey::AllOthers => "",
            NamespaceKey::Named(ns) => ns,
        }
    }
}

impl fmt::Display for NamespaceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NamespaceKey::AllOthers => f.write_str("<all other namespaces>"),
            NamespaceKey::Named(ns) => f.write_str(ns),
        }
    }
}

/// The scope of a built-in kind, or `None` if `gvk` is not one (a custom resource, whose scope
/// only discovery knows).
///
/// ```
/// use informant::cache::{builtin_scope, Scope};
/// use kube::core::GroupVersionKind;
/// assert_eq!(builtin_scope(&GroupVersionKind::gvk("", "v1", "Node")), Some(Scope::Cluster));
/// assert_eq!(builtin_scope(&GroupVersionKind::gvk("apps", "v1", "Deployment")), Some(Scope::Namespaced));
/// assert_eq!(builtin_scope(&GroupVersionKind::gvk("example.com", "v1", "Widget")), None);
/// ```
#[must_use]
pub fn builtin_scope(gvk: &GroupVersionKind) -> Option<Scope> {
    crate::kinds::builtin(&gvk.group, &gvk.version, &gvk.kind).map(|k| {
        if k.namespaced {
            Scope::Namespaced
        } else {
            Scope::Cluster
        }
    })
}

/// Which namespaces a kind is cached in: a three-way setting (Go: nil map, empty map, map).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Namespaces {
    /// Take [`Options::default_namespaces`] (the `namespaces` field is absent). Never left
    /// after [`Options::defaulted`].
    #[default]
    Inherit,
    /// Every namespace, with one cluster-wide informer (`namespaces: {}`; always the case for
    /// cluster-scoped kinds).
    All,
    /// Only these namespaces, each with its settings (never empty, unless a namespace
    /// selector adds the others).
    Only(BTreeMap<NamespaceKey, Config>),
}

/// Whether a kind's objects live in namespaces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Namespaced (`Pod`, `ConfigMap`, ...); assumed for kinds that are not built in.
    #[default]
    Namespaced,
    /// Cluster-scoped (`Node`, `Namespace`, `ClusterRole`, ...).
    Cluster,
}

/// Settings of one kind (controller-runtime's `ByObject`).
#[derive(Clone, Debug, PartialEq)]
pub struct ByObject {
    /// The kind.
    pub gvk: GroupVersionKind,
    /// Its scope: from [`builtin_scope`] for built-in kinds, else namespaced. The cache
    /// builder may correct it from discovery before calling [`Options::defaulted`].
    pub scope: Scope,
    /// Which namespaces to cache it in.
    pub namespaces: Namespaces,
    /// Namespaces chosen by their labels, added to `namespaces` with this entry's settings.
    /// Set (or `namespaces` set), it replaces the defaults' namespaces and selector; after
    /// [`Options::defaulted`] it is the selector in effect for the kind (the inherited one,
    /// when the entry inherits).
    pub namespace_selector: Option<LabelSelector>,
    /// Its settings; replace the `default_*` ones.
    pub config: Config,
    /// Cache `PartialObjectMetadata` only.
    pub metadata_only: bool,
}

impl ByObject {
    /// Settings for `gvk`, namespaced, inheriting everything.
    #[must_use]
    pub fn new(gvk: GroupVersionKind) -> Self {
        let scope = builtin_scope(&gvk).unwrap_or_default();
        Self {
            gvk,
            scope,
            namespaces: Namespaces::Inherit,
            namespace_selector: None,
            config: Config::default(),
            metadata_only: false,
        }
    }

    /// Whether this entry takes the defaults' namespaces (it sets neither `namespaces` nor a
    /// selector).
    #[must_use]
    pub(crate) fn inherits_namespaces(&self) -> bool {
        self.namespaces == Namespaces::Inherit && self.namespace_selector.is_none()
    }

    /// These settings with other namespaces.
    #[must_use]
    pub fn with_namespaces(mut self, namespaces: Namespaces) -> Self {
        self.namespaces = namespaces;
        self
    }

    /// These settings with other per-kind settings.
    #[must_use]
    pub fn with_config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// These settings, choosing namespaces by `selector` too (added to `namespaces`, with
    /// this entry's settings).
    ///
    /// ```
    /// use informant::cache::{ByObject, Options};
    /// use informant::selector::LabelSelector;
    /// use kube::core::GroupVersionKind;
    ///
    /// let pods = ByObject::new(GroupVersionKind::gvk("", "v1", "Pod"))
    ///     .with_namespace_selector(LabelSelector::parse("tenant=blue").unwrap());
    /// assert!(Options::default().with_by_object(pods).uses_namespace_selector());
    /// ```
    #[must_use]
    pub fn with_namespace_selector(mut self, selector: LabelSelector) -> Self {
        self.namespace_selector = Some(selector);
        self
    }

    /// These settings, caching metadata only (`PartialObjectMetadata`), or not.
    ///
    /// ```
    /// use informant::cache::ByObject;
    /// use kube::core::GroupVersionKind;
    ///
    /// let secrets = ByObject::new(GroupVersionKind::gvk("", "v1", "Secret")).with_metadata_only(true);
    /// assert!(secrets.metadata_only);
    /// ```
    #[must_use]
    pub fn with_metadata_only(mut self, metadata_only: bool) -> Self {
        self.metadata_only = metadata_only;
        self
    }
}
