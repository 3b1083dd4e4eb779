//! A `CacheConfig` resource in the cluster as the manager's config: validated configs published
//! on a `tokio::sync::watch`, each reload's outcome on a broadcast.
//!
//! [`ResourceWatcher`] is the resource counterpart of [`crate::config::watch::Watcher`] (the
//! file), with the same shape, so the manager treats both alike: `new` returns the watcher and a
//! receiver already holding the config to start from, [`ResourceWatcher::subscribe`] gives
//! [`ReloadOutcome`]s, [`ResourceWatcher::run`] drives kube-rs's `watcher` until shutdown.
//!
//! What counts as a change is the spec, never metadata or status: the manager writes this same
//! resource's status, and its own writes must not reload anything. A version with the uid and
//! spec last seen (valid or not) produces no outcome at all, so a status write after a
//! rejection does not repeat the rejection (and its Warning event).
//!
//! | the resource                      | published config        | outcome                 |
//! |-----------------------------------|-------------------------|-------------------------|
//! | absent at start                   | controller-runtime's defaults | none              |
//! | invalid at start                  | the defaults, in its ring if `spec.sharding` is valid | `Rejected` when `run` starts |
//! | created, or spec edited, valid    | the new config          | `Applied`               |
//! | valid, spec equal to the current  | unchanged               | `Unchanged`             |
//! | spec edited, invalid              | the last good one       | `Rejected`              |
//! | status or metadata written        | unchanged               | none                    |
//! | deleted                           | the defaults            | `Applied` (`Unchanged` if already the defaults) |
//! | valid, `spec.sharding` changed (deleted included) | the last good one | `Rejected` (a restart applies it) |
//!
//! After a `Rejected`, the next `Unchanged` or `Applied` means the spec is valid again.
//!
//! ```no_run
//! use informant::config::watch::ReloadOutcome;
//! use informant::config::source::ResourceWatcher;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn example(client: kube::Client) -> Result<(), informant::config::source::Error> {
//! let (watcher, mut configs) = ResourceWatcher::new(client, "informant", "default").await?;
//! let mut outcomes = watcher.subscribe(); // before run: an invalid start is sent then
//! let observed = watcher.observed(); // generation and uid, for status and Events
//! let shutdown = CancellationToken::new();
//! let run = tokio::spawn(watcher.run(shutdown.child_token()));
//! if let Ok(ReloadOutcome::Rejected { error }) = outcomes.recv().await {
//!     let generation = observed.borrow().as_ref().and_then(|o| o.generation);
//!     eprintln!("generation {generation:?}: {error}"); // the last good config is kept
//! }
//! configs.changed().await.ok();
//! shutdown.cancel();
//! # run.await.ok();
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::Resource;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::config::watch::ReloadOutcome;
use crate::config::{self, CacheConfig, CacheConfigSpec, Validated};
use crate::recorder::ObjectRef;

/// How many reload outcomes a slow [`ResourceWatcher::subscribe`] receiver may fall behind
/// before it loses the oldest; the same as the file watcher's.
const OUTCOME_CAPACITY: usize = 64;

/// Result of starting or running a [`ResourceWatcher`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of [`ResourceWatcher::new`] and [`ResourceWatcher::run`].
///
/// All are fatal for the watcher. Errors of the watch itself are not: kube-rs's watcher
/// retries them with its default backoff (logged at warn when a person must act: 401, 403,
/// 404), and an invalid resource is a [`ReloadOutcome::Rejected`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The first read failed for another reason than the resource being absent (server
    /// unreachable, RBAC): the manager cannot know which config to start from.
    #[error("cannot read cacheconfig {namespace}/{name} to start from it")]
    Get {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// What the client said.
        #[source]
        source: kube::Error,
    },

    /// The name is not a valid `CacheConfig` name, so even the defaults cannot be named.
    #[error("cannot watch cacheconfig {namespace}/{name}: not a valid name")]
    Name {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// Why (`metadata.name` with the rule it breaks).
        #[source]
        source: Box<config::Error>,
    },

    /// kube-rs's watcher stream ended (it does not, short of a bug).
    #[error("the watch of cacheconfig {namespace}/{name} ended")]
    WatchEnded {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
    },
}

/// The `CacheConfig` object as last seen: what status writes and Events refer to.
///
/// Changes with every spec edit (the generation) and when the object is recreated (the uid),
/// never with a status write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its `metadata.uid`.
    pub uid: String,
    /// Its `metadata.generation`: the `observedGeneration` of the status that describes it.
    pub generation: Option<i64>,
}

impl Observed {
    /// The reference Events about this object are recorded against.
    #[must_use]
    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(
            &CacheConfig::api_version(&()),
            &CacheConfig::kind(&()),
            &self.namespace,
            &self.name,
            &self.uid,
        )
    }

    fn of(object: &DynamicObject, namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: object.metadata.uid.clone().unwrap_or_default(),
            generation: object.metadata.generation,
        }
    }
}

/// The version last seen, valid or not: another version with the same uid and spec is a status
/// or metadata write and reloads nothing.
#[derive(Debug, PartialEq)]
struct Seen {
    uid: Option<String>,
    spec: Option<Value>,
}

/// Watches one `CacheConfig` resource and publishes each new valid version.
///
/// Create it with [`ResourceWatcher::new`], then drive it with [`ResourceWatcher::run`];
/// nothing happens in the background until `run` is polled.
///
/// The watch is kube-rs's [`watcher::watch_object`] (a list/watch with the field selector
/// `metadata.name=<name>` in the namespace) with kube-rs's default backoff. The resource is read
/// as a dynamic object, so a field this version of informant does not know (a newer CRD) is a
/// [`ReloadOutcome::Rejected`] naming the field, not a watch that fails to decode.
///
/// ## RBAC
///
/// `get`, `list` and `watch` on `cacheconfigs.informant.dev` in the namespace.
#[doc(alias = "hot reload")]
pub struct ResourceWatcher {
    api: Api<DynamicObject>,
    namespace: String,
    name: String,
    defaults: Arc<Validated>,
    seen: Option<Seen>,
    pending: Option<ReloadOutcome>,
    configs: watch::Sender<Arc<Validated>>,
    observed: watch::Sender<Option<Observed>>,
    outcomes: broadcast::Sender<ReloadOutcome>,
}

impl std::fmt::Debug for ResourceWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceWatcher")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// controller-runtime's defaults as a config: an empty spec named `namespace/name`.
fn defaults(namespace: &str, name: &str) -> Result<Validated> {
    let mut resource = CacheConfig::new(name, CacheConfigSpec::default());
    resource.metadata.namespace = Some(namespace.to_owned());
    config::validate(&resource).map_err(|source| Error::Name {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source: Box::new(source),
    })
}

impl ResourceWatcher {
    /// Reads the resource once, so the manager starts from the right config: the resource's
    /// if it is valid; controller-runtime's defaults (an empty spec named `namespace/name`) if
    /// it is absent, or if it is invalid, in which case a [`ReloadOutcome::Rejected`] is sent
    /// as soon as [`ResourceWatcher::run`] starts (subscribe before running to get it).
    ///
    /// Returns the watcher and a receiver holding that config; each new valid config is
    /// published to it.
    ///
    /// # Errors
    ///
    /// [`Error::Get`] if the read fails other than with 404 Not Found; [`Error::Name`] if
    /// `name` is not a valid object name.
    pub async fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<(Self, watch::Receiver<Arc<Validated>>)> {
        let defaults = Arc::new(defaults(namespace, name)?);
        let api = Api::namespaced_with(client, namespace, &ApiResource::erase::<CacheConfig>(&()));
        let object = api.get_opt(name).await.map_err(|source| Error::Get {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        })?;
        let (configs, rx) = watch::channel(Arc::clone(&defaults));
        let (observed, _) = watch::channel(None);
        let (outcomes, _) = broadcast::channel(OUTCOME_CAPACITY);
        let mut this = Self {
            api,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            defaults,
            seen: None,
            pending: None,
            configs,
            observed,
            outcomes,
        };
        match object {
            None => tracing::info!(
                k8s.namespace = namespace,
                object.ref = name,
                "cacheconfig not found; using controller-runtime's defaults"
            ),
            Some(object) => {
                if let Some(outcome) = this.on_present(object, Start::Now) {
                    log(&outcome);
                    // Nobody can have subscribed yet: `run` sends it.
                    if matches!(outcome, ReloadOutcome::Rejected { .. }) {
                        this.pending = Some(outcome);
                    }
                }
            }
        }
        Ok((this, rx))
    }

    /// A receiver of every [`ReloadOutcome`] from now on.
    #[must_use]
    pub fn subscribe(&self) -> broadcast::Receiver<ReloadOutcome> {
        self.outcomes.subscribe()
    }

    /// Whether the resource was invalid when [`ResourceWatcher::new`] read it (the defaults
    /// are published; [`ResourceWatcher::run`] sends the [`ReloadOutcome::Rejected`] first).
    #[must_use]
    pub fn rejected_at_start(&self) -> bool {
        matches!(self.pending, Some(ReloadOutcome::Rejected { .. }))
    }

    /// A receiver of the object as last seen (`None` while it does not exist): its generation
    /// for `observedGeneration`, its uid for Events. It is updated before the config and the
    /// outcome of the same version are sent, so a subscriber reading it on an outcome sees the
    /// version the outcome is about.
    #[must_use]
    pub fn observed(&self) -> watch::Receiver<Option<Observed>> {
        self.observed.subscribe()
    }

    /// The watched namespace.
    #[must_use]
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The watched name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Publishes each new version until `shutdown` is cancelled.
    ///
    /// A bad version never ends the loop: it is sent as [`ReloadOutcome::Rejected`] (the
    /// manager logs it at warn), and the last good config stays published.
    ///
    /// # Errors
    ///
    /// [`Error::WatchEnded`] if kube-rs's watcher stream ends.
    #[tracing::instrument(
        name = "config_reload",
        skip_all,
        fields(k8s.namespace = %self.namespace, object.ref = %self.name)
    )]
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<()> {
        if let Some(outcome) = self.pending.take() {
            // No subscriber is fine: it was logged in `new`.
            let _ = self.outcomes.send(outcome);
        }
        let events = watcher::watch_object(self.api.clone(), &self.name).default_backoff();
        let mut events = std::pin::pin!(events);
        loop {
            let next = tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ok(()),
                next = events.next() => next,
            };
            match next {
                None => {
                    return Err(Error::WatchEnded {
                        namespace: self.namespace,
                        name: self.name,
                    });
                }
                Some(Ok(Some(object))) => {
                    if let Some(outcome) = self.on_present(object, Start::Done) {
                        log(&outcome);
                        // No subscriber is fine: the outcome is also in the log.
                        let _ = self.outcomes.send(outcome);
                    }
                }
                Some(Ok(None)) => self.on_absent(),
                Some(Err(error)) => {
                    if crate::cache::is_permanent(&error) {
                        tracing::warn!(error = %crate::telemetry::error_chain(&error), "cannot watch the cacheconfig; retrying");
                    } else {
                        tracing::debug!(error = %crate::telemetry::error_chain(&error), "cacheconfig watch retrying");
                    }
                }
            }
        }
    }

    /// A version of the object was seen: the outcome to send, if any.
    fn on_present(&mut self, object: DynamicObject, start: Start) -> Option<ReloadOutcome> {
        let observed = Observed::of(&object, &self.namespace, &self.name);
        self.observed
            .send_if_modified(|current| replace_if_different(current, Some(observed)));
        let seen = Seen {
            uid: object.metadata.uid.clone(),
            spec: object.data.get("spec").cloned(),
        };
        if self.seen.as_ref() == Some(&seen) {
            tracing::trace!("cacheconfig spec unchanged (a status or metadata write)");
            return None;
        }
        self.seen = Some(seen);
        let sharding = object
            .data
            .get("spec")
            .and_then(|spec| spec.get("sharding"))
            .cloned();
        Some(match self.validate(object) {
            Ok(config) if start == Start::Now => self.publish_first(config),
            Ok(config) => self.publish(config),
            Err(error) => {
                if start == Start::Now
                    && let Some(config) = self.defaults_sharded(sharding)
                {
                    tracing::warn!(
                        sharding = %config::restart::describe(config.cache.sharding.as_ref()),
                        "cacheconfig invalid at start; running controller-runtime's defaults \
                         with its valid spec.sharding, so fixing the rest needs no restart"
                    );
                    self.publish_first(config);
                }
                ReloadOutcome::Rejected {
                    error: Arc::new(error),
                }
            }
        })
    }

    /// controller-runtime's defaults with `sharding` (the `spec.sharding` of a resource invalid
    /// at start), if `sharding` is valid on its own: the manager starts in the ring it asks
    /// for, so fixing the rest of the spec is a reload, not a change of sharding that only a
    /// restart applies. `None` without sharding, or when it is invalid too.
    fn defaults_sharded(&self, sharding: Option<Value>) -> Option<Validated> {
        let sharding = sharding.filter(|s| !s.is_null())?;
        config::validate_json(serde_json::json!({
            "apiVersion": CacheConfig::api_version(&()),
            "kind": CacheConfig::kind(&()),
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {"sharding": sharding},
        }))
        .ok()
    }

    /// The object is gone (deleted, or absent from a relist): back to the defaults.
    fn on_absent(&mut self) {
        self.observed
            .send_if_modified(|current| replace_if_different(current, None));
        if self.seen.take().is_none() {
            return;
        }
        let outcome = self.publish(Arc::clone(&self.defaults));
        if matches!(outcome, ReloadOutcome::Rejected { .. }) {
            // The manager says why at warn: the defaults would change the sharding.
            log(&outcome);
        } else {
            tracing::info!("cacheconfig deleted; using controller-runtime's defaults");
        }
        let _ = self.outcomes.send(outcome);
    }

    /// Publishes the config the manager starts from: every setting may differ from the
    /// defaults published until then, sharding included.
    fn publish_first(&self, config: Validated) -> ReloadOutcome {
        self.publish_spec(Arc::new(config))
    }

    /// Publishes `config` unless its spec equals the current one, or it changes what only a
    /// restart changes ([`config::reloadable`]: rejected, the current one stays).
    fn publish(&self, config: impl Into<Arc<Validated>>) -> ReloadOutcome {
        let config = config.into();
        let errors = config::restart_needed(&self.configs.borrow(), &config);
        if !errors.is_empty() {
            return ReloadOutcome::Rejected {
                error: Arc::new(config::Error::Invalid {
                    origin: config::Origin::Resource {
                        namespace: self.namespace.clone(),
                        name: self.name.clone(),
                    },
                    errors,
                }),
            };
        }
        self.publish_spec(config)
    }

    /// Publishes `config` unless its spec equals the current one.
    fn publish_spec(&self, config: Arc<Validated>) -> ReloadOutcome {
        let mut applied = false;
        self.configs.send_if_modified(|current| {
            applied = current.resource.spec != config.resource.spec;
            if applied {
                *current = Arc::clone(&config);
            }
            applied
        });
        if applied {
            ReloadOutcome::Applied(config)
        } else {
            ReloadOutcome::Unchanged
        }
    }

    fn validate(&self, object: DynamicObject) -> config::Result<Validated> {
        // Serializing an object that was just decoded does not fail; were it to, the empty
        // document would be rejected with a message rather than panic.
        let mut value = serde_json::to_value(object).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            // List items need not carry their type; the endpoint says what they are.
            map.insert(
                "apiVersion".to_owned(),
                CacheConfig::api_version(&()).into(),
            );
            map.insert("kind".to_owned(), CacheConfig::kind(&()).into());
            if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.entry("namespace")
                    .or_insert_with(|| self.namespace.clone().into());
            }
        }
        config::validate_json(value)
    }
}

/// Whether a version of the object is the one the manager starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    /// Read by [`ResourceWatcher::new`]: the manager has not started yet.
    Now,
    /// Seen by [`ResourceWatcher::run`]: a reload.
    Done,
}

fn replace_if_different<T: PartialEq>(current: &mut T, new: T) -> bool {
    if *current == new {
        false
    } else {
        *current = new;
        true
    }
}

/// At debug: the subscriber says what an outcome means (the manager logs a rejection at warn
/// and records a Warning Event), once.
fn log(outcome: &ReloadOutcome) {
    match outcome {
        ReloadOutcome::Applied(_) => tracing::debug!("cacheconfig applied"),
        ReloadOutcome::Rejected { error } => tracing::debug!(
            error = %crate::telemetry::error_chain(error),
            errors = error.field_errors().len(),
            "cacheconfig rejected; keeping the last good config"
        ),
        _ => tracing::debug!("cacheconfig spec unchanged"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_an_empty_spec_named_after_the_watched_object() {
        let config = defaults("informant", "default").unwrap();
        assert_eq!(config.resource.spec, CacheConfigSpec::default());
        assert_eq!(config.resource.metadata.name.as_deref(), Some("default"));
        assert_eq!(
            config.resource.metadata.namespace.as_deref(),
            Some("informant")
        );
        assert!(config.cache.by_object.is_empty());
    }

    #[test]
    fn a_name_no_object_can_have_is_an_error_naming_the_rule() {
        let error = defaults("informant", "Not_A_Name").unwrap_err();
        assert!(matches!(error, Error::Name { .. }), "{error:?}");
        let Error::Name { source, .. } = &error else {
            unreachable!()
        };
        assert_eq!(
            source.field_errors()[0].path.to_string(),
            "metadata.name",
            "{source}"
        );
    }

    #[test]
    fn an_observed_object_is_referenced_by_its_kind_name_and_uid() {
        let observed = Observed {
            namespace: "ns".into(),
            name: "c".into(),
            uid: "u-1".into(),
            generation: Some(3),
        };
        let r = observed.object_ref();
        assert_eq!(&*r.api_version, "informant.dev/v1alpha1");
        assert_eq!(&*r.kind, "CacheConfig");
        assert_eq!((&*r.namespace, &*r.name, &*r.uid), ("ns", "c", "u-1"));
    }
}
