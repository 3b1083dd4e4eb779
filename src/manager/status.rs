//! The `CacheConfig` status: built from what the manager knows ([`desired_status`], pure) and written
//! to the status subresource with server-side apply ([`StatusWriter`], only when it changed).
//!
//! Two conditions, following apimachinery's `meta.SetStatusCondition`
//! (`k8s.io/apimachinery/pkg/api/meta/conditions.go`): `lastTransitionTime` changes only when
//! a condition's status flips; reason, message and `observedGeneration` always follow the input.
//!
//! | type    | status  | reason                          | message |
//! |---------|---------|---------------------------------|---------|
//! | `Valid` | `True`  | [`REASON_VALID`] (`Valid`)      | the spec passed validation |
//! | `Valid` | `False` | [`REASON_INVALID_SPEC`] (`InvalidSpec`) | every field error with its path, one per line, as `informant validate` prints them |
//! | `Ready` | `True`  | [`REASON_INFORMERS_SYNCED`] (`InformersSynced`) | how many informers synced |
//! | `Ready` | `False` | [`REASON_INFORMERS_SYNCING`] (`InformersSyncing`) | the informers not synced yet |
//! | `Ready` | `False` | [`REASON_INFORMER_FAILED`] (`InformerFailed`) | the informers that cannot list or watch, with the error |
//! | `Ready` | `False` | [`REASON_WAITING_FOR_KIND`] (`WaitingForKind`) | the `byObject` kinds the API server does not serve yet, with why |
//! | `Ready` | `False` | [`REASON_PERMISSION_MISSING`] (`PermissionMissing`) | each permission the config needs that the cluster does not grant |
//!
//! `status.controllers` lists each controller the manager runs (Rust controllers, hook
//! `Controller`s) with `ready`, and `reason` `Running` or [`REASON_WAITING_FOR_KIND`] with why.
//!
//! `kubectl get cacheconfigs` shows the `Valid` and `Ready` statuses and `informerCount`.
//!
//! ```
//! use informant::manager::{Readiness, StatusInput, Validity, desired_status};
//!
//! let input = StatusInput {
//!     generation: Some(2),
//!     validity: Validity::Valid,
//!     readiness: Readiness::Synced,
//!     informers: Vec::new(),
//!     namespace_selectors: Vec::new(),
//!     controllers: Vec::new(),
//!     sharding: None,
//!     last_reload_time: None,
//!     now: jiff::Timestamp::UNIX_EPOCH,
//! };
//! let first = desired_status(None, &input);
//! let later = StatusInput { now: jiff::Timestamp::MAX, ..input };
//! // Nothing flipped: the transition times stay.
//! assert_eq!(desired_status(Some(&first), &later), first);
//! ```

use std::fmt::Write as _;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::Resource;
use serde_json::{Value, json};

use crate::cache::InformerStatus;
use crate::config::{
    self, CONDITION_READY, CONDITION_VALID, CacheConfig, CacheConfigStatus, ControllerReady,
    NamespaceSelectorStatus, ShardingStatus,
};

/// `Valid=True` reason: the spec passed validation.
pub(crate) const REASON_VALID: &str = "Valid";

/// `Valid=False` reason: the spec is invalid; the manager keeps the last good config.
pub(crate) const REASON_INVALID_SPEC: &str = "InvalidSpec";

/// `Ready=True` reason: every informer of the cache tree has synced.
pub(crate) const REASON_INFORMERS_SYNCED: &str = "InformersSynced";

/// `Ready=False` reason: some informers have not synced yet.
pub(crate) const REASON_INFORMERS_SYNCING: &str = "InformersSyncing";

/// `Ready=False` reason: some informers cannot list or watch (RBAC, unknown kind, ...).
pub(crate) const REASON_INFORMER_FAILED: &str = "InformerFailed";

/// `Ready=False` reason: every informer synced, but some kinds (`byObject` kinds, kinds
/// controllers read) are not served yet (their CRD is not established): they start when they
/// are. Also the reason of a controller that waits for them.
pub const REASON_WAITING_FOR_KIND: &str = "WaitingForKind";

/// A controller's reason when it runs (`status.controllers[].reason`).
pub(crate) const REASON_RUNNING: &str = "Running";
/// `Ready=False` reason: the cluster does not grant permissions the config needs (the check
/// the manager runs before informers start, as `informant rbac --check` does).
pub const REASON_PERMISSION_MISSING: &str = "PermissionMissing";

/// The field manager of status writes unless told otherwise.
pub const DEFAULT_FIELD_MANAGER: &str = "informant";

/// The longest condition message the API server accepts, in characters
/// (apimachinery `pkg/apis/meta/v1/types.go`, `Condition.Message`: `MaxLength=32768`).
const MAX_MESSAGE_CHARS: usize = 32_768;

/// Whether the spec is valid, for the `Valid` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Validity {
    /// The spec passed validation.
    Valid,
    /// The spec is invalid.
    Invalid {
        /// Every problem, `path: what is wrong; how to fix it`.
        errors: Vec<String>,
    },
}

impl Validity {
    /// The validity a rejected config has: every field error with its path (as
    /// `informant validate` prints them), or the error itself when it has no field errors.
    #[must_use]
    pub(crate) fn from_error(error: &config::Error) -> Self {
        let fields = error.field_errors();
        let errors = if fields.is_empty() {
            vec![crate::telemetry::error_chain(error)]
        } else {
            fields.iter().map(ToString::to_string).collect()
        };
        Self::Invalid { errors }
    }
}

/// Whether the cache tree is ready, for the `Ready` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Every informer synced.
    Synced,
    /// Some informers have not synced yet.
    Syncing {
        /// Each one, as `informer_name` names it.
        pending: Vec<String>,
    },
    /// Some informers cannot list or watch.
    Failed {
        /// Each one, named as `informer_name` does, with its error.
        failed: Vec<String>,
    },
    /// Every informer synced, but some `byObject` kinds are not served yet.
    WaitingForKind {
        /// Each kind (`example.com/v1 Widget`) with why it waits.
        waiting: Vec<String>,
    },
    /// The cluster does not grant permissions the config needs.
    Forbidden {
        /// Each one, `verb resource ... in namespace ...`.
        missing: Vec<String>,
    },
}

/// What a controller the manager runs says of itself (`status.controllers`,
/// `/readyz/controllers`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControllerReadiness {
    /// Its kinds are served: it runs.
    Running,
    /// One of its kinds is not served: it does not run, and starts when they are.
    WaitingForKind {
        /// Which kind and why (`example.com/v1 Widget: no CustomResourceDefinition defines
        /// Widget in group example.com`).
        reason: String,
    },
    /// It does not run until a person changes the config or the controller (a hook controller
    /// that owns or watches kinds while the cache is sharded by uid: reason
    /// `NeedsShardKeyNamespace`). Shown in status, not in readiness: like an invalid
    /// `Controller`, it is the controller's own condition, and every replica would be unready
    /// alike.
    KeptBack {
        /// The condition's reason (`NeedsShardKeyNamespace`).
        reason: String,
        /// Why, and the fix.
        message: String,
    },
}

impl ControllerReadiness {
    /// The status row of the controller `name` in this state.
    #[must_use]
    pub fn row(&self, name: &str) -> ControllerReady {
        match self {
            Self::Running => ControllerReady {
                name: name.to_owned(),
                ready: true,
                reason: REASON_RUNNING.to_owned(),
                message: None,
            },
            Self::WaitingForKind { reason } => ControllerReady {
                name: name.to_owned(),
                ready: false,
                reason: REASON_WAITING_FOR_KIND.to_owned(),
                message: Some(format!("not started until its kinds are served: {reason}")),
            },
            Self::KeptBack { reason, message } => ControllerReady {
                name: name.to_owned(),
                ready: false,
                reason: reason.clone(),
                message: Some(message.clone()),
            },
        }
    }
}

impl Readiness {
    /// The readiness of these informers (pass the eager ones: those the tree must sync before
    /// it serves): an unsynced informer with an error is failed, one without is syncing.
    pub fn of<'a>(informers: impl IntoIterator<Item = &'a InformerStatus>) -> Self {
        let mut pending = Vec::new();
        let mut failed = Vec::new();
        for informer in informers {
            if informer.synced {
                continue;
            }
            match &informer.error {
                Some(error) => failed.push(format!("{}: {error}", informer_name(informer))),
                None => pending.push(informer_name(informer)),
            }
        }
        if !failed.is_empty() {
            Self::Failed { failed }
        } else if !pending.is_empty() {
            Self::Syncing { pending }
        } else {
            Self::Synced
        }
    }
}

/// An informer as conditions name it: `v1 Pod in team-a`, `apps/v1 Deployment in every
/// namespace`, followed by its selectors (`labels tier=web`, `fields status.phase=Running`).
#[must_use]
pub(crate) fn informer_name(informer: &InformerStatus) -> String {
    let mut name = format!(
        "{} {} in {}",
        informer.api_version,
        informer.kind,
        informer.namespace.as_deref().unwrap_or("every namespace")
    );
    for (what, selector) in [
        ("labels", &informer.label_selector),
        ("fields", &informer.field_selector),
    ] {
        if let Some(selector) = selector {
            // Writing to a String does not fail.
            let _ = write!(name, ", {what} {selector}");
        }
    }
    name
}

/// What the manager knows, from which [`desired_status`] builds the status.
#[derive(Clone, Debug)]
pub struct StatusInput {
    /// The `metadata.generation` of the version the manager last saw (valid or not): the
    /// status's and each condition's `observedGeneration`.
    pub generation: Option<i64>,
    /// Whether that version is valid.
    pub validity: Validity,
    /// Whether the cache tree in use has synced.
    pub readiness: Readiness,
    /// The informers the cache tree runs.
    pub informers: Vec<InformerStatus>,
    /// Each namespace selector with the namespaces it matches now.
    pub namespace_selectors: Vec<NamespaceSelectorStatus>,
    /// Each controller the manager runs, ready or why not, sorted by name.
    pub controllers: Vec<ControllerReady>,
    /// With `spec.sharding`, the ring as this member sees it and its share.
    pub sharding: Option<ShardingStatus>,
    /// When a changed spec was last applied; `None` keeps the previous status's.
    pub last_reload_time: Option<Time>,
    /// The current time, for a condition that flips (truncated to seconds, as the API
    /// serializes times).
    pub now: jiff::Timestamp,
}

/// The status the manager should write, given the previous one and what it knows now.
///
/// `previous` is the status last written ([`StatusWriter::last_written`]), or at start the
/// resource's own ([`config::Validated::resource`]), so transition times survive restarts.
/// The conditions are exactly `Valid` then `Ready`; informers are sorted by kind, namespace and
/// selectors, so the same set always makes the same status (and no write).
#[must_use]
pub fn desired_status(
    previous: Option<&CacheConfigStatus>,
    input: &StatusInput,
) -> CacheConfigStatus {
    let now = Time(jiff::Timestamp::from_second(input.now.as_second()).unwrap_or(input.now));
    let before = previous.map_or(&[][..], |p| p.conditions.as_slice());
    let condition = |type_: &str, status: bool, reason: &str, message: String| {
        let status = if status { "True" } else { "False" };
        let last_transition_time = before
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
        Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: truncate(message),
            observed_generation: input.generation,
            last_transition_time,
        }
    };
    let valid = match &input.validity {
        Validity::Valid => condition(
            CONDITION_VALID,
            true,
            REASON_VALID,
            "the spec passed validation".to_owned(),
        ),
        Validity::Invalid { errors } => condition(
            CONDITION_VALID,
            false,
            REASON_INVALID_SPEC,
            format!(
                "the spec is invalid ({} error{}); the last good config stays in use:\n{}",
                errors.len(),
                plural(errors.len()),
                errors.join("\n")
            ),
        ),
    };
    let (ready, reason, message) = ready_condition(&input.readiness, input.informers.len());
    let ready = condition(CONDITION_READY, ready, reason, message);
    let mut informers = input.informers.clone();
    informers.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
    let memory = memory::Memory::of(&informers);
    CacheConfigStatus {
        observed_generation: input.generation,
        conditions: vec![valid, ready],
        informer_count: Some(i32::try_from(informers.len()).unwrap_or(i32::MAX)),
        cache_bytes: memory.total,
        memory: memory
            .total
            .map(|b| crate::cache::human_bytes(u64::try_from(b).unwrap_or(0))),
        memory_by_kind: memory.by_kind,
        memory_by_namespace: memory.by_namespace,
        informers,
        last_reload_time: input
            .last_reload_time
            .clone()
            .or_else(|| previous.and_then(|p| p.last_reload_time.clone())),
        namespace_selectors: input.namespace_selectors.clone(),
        controllers: input.controllers.clone(),
        sharding: input.sharding.clone(),
    }
}

/// The `Ready` condition's status, reason and message for `readiness` (`informers`: how many
/// the tree runs).
fn ready_condition(readiness: &Readiness, informers: usize) -> (bool, &'static str, String) {
    match readiness {
        Readiness::Synced => (
            true,
            REASON_INFORMERS_SYNCED,
            format!("{} informer{} synced", informers, plural(informers)),
        ),
        Readiness::Syncing { pending } => (
            false,
            REASON_INFORMERS_SYNCING,
            format!(
                "waiting for {} informer{} to sync: {}",
                pending.len(),
                plural(pending.len()),
                pending.join("; ")
            ),
        ),
        Readiness::Forbidden { missing } => (
            false,
            REASON_PERMISSION_MISSING,
            format!(
                "{} permission{} the config needs {} not granted (`informant rbac --check` prints the objects granting them): {}",
                missing.len(),
                plural(missing.len()),
                if missing.len() == 1 { "is" } else { "are" },
                missing.join("; ")
            ),
        ),
        Readiness::Failed { failed } => (
            false,
            REASON_INFORMER_FAILED,
            format!(
                "{} informer{} cannot list or watch: {}",
                failed.len(),
                plural(failed.len()),
                failed.join("; ")
            ),
        ),
        Readiness::WaitingForKind { waiting } => (
            false,
            REASON_WAITING_FOR_KIND,
            format!(
                "{} kind{} not served yet, {} start when served: {}",
                waiting.len(),
                plural(waiting.len()),
                if waiting.len() == 1 {
                    "it will"
                } else {
                    "they will"
                },
                waiting.join("; ")
            ),
        ),
    }
}

fn sort_key(i: &InformerStatus) -> impl Ord + '_ {
    (
        &i.api_version,
        &i.kind,
        &i.namespace,
        &i.label_selector,
        &i.field_selector,
        i.metadata_only,
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Cuts `message` to what the API server accepts, marking the cut.
fn truncate(message: String) -> String {
    if message.chars().count() <= MAX_MESSAGE_CHARS {
        return message;
    }
    let mut cut: String = message.chars().take(MAX_MESSAGE_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Result of [`StatusWriter::write`].
pub(crate) type Result<T, E = StatusError> = std::result::Result<T, E>;

/// Errors of [`StatusWriter::write`]. All are worth retrying at the next write: the status is
/// rebuilt from scratch each time.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StatusError {
    /// The API server refused the status or could not be reached.
    #[error("cannot write the status of cacheconfig {namespace}/{name}")]
    Write {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// What the client said.
        #[source]
        source: kube::Error,
    },

    /// The status could not be encoded as JSON (a bug: it is built from static types).
    #[error("cannot encode the status of cacheconfig {namespace}/{name}")]
    Encode {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
}

/// Writes a `CacheConfig`'s status with server-side apply, only when it changed.
///
/// The apply body holds `apiVersion`, `kind`, `metadata.name` and `status` only, sent to the
/// status subresource with [`PatchParams::apply`] and `force` (the manager is the status's
/// only writer, as Kubernetes recommends for controllers): a user's spec edits are never
/// overwritten, and `status` fields this writer stops sending are removed.
///
/// ## RBAC
///
/// `patch` on `cacheconfigs/status` in the namespace.
#[derive(Debug)]
pub struct StatusWriter {
    /// Dynamic, so the answer decodes even with spec fields this version does not know.
    api: Api<DynamicObject>,
    namespace: String,
    name: String,
    params: PatchParams,
    /// The status of the last accepted write, kept when a later write fails: transition times
    /// come from it.
    written: Option<CacheConfigStatus>,
    /// The status (as sent) the server is known to hold; `None` when unknown.
    held: Option<Value>,
}

impl StatusWriter {
    /// A writer of `namespace/name`'s status as `field_manager` (usually
    /// [`DEFAULT_FIELD_MANAGER`]). Sends nothing until [`StatusWriter::write`].
    #[must_use]
    pub fn new(client: kube::Client, namespace: &str, name: &str, field_manager: &str) -> Self {
        Self {
            api: Api::namespaced_with(client, namespace, &ApiResource::erase::<CacheConfig>(&())),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            params: PatchParams::apply(field_manager).force(),
            written: None,
            held: None,
        }
    }

    /// Applies `status` unless it equals the status last written. Returns whether a request
    /// was made and accepted.
    ///
    /// A 404 (the resource is gone) is not an error: it returns `Ok(false)`, logged at debug,
    /// and the writer forgets what it wrote.
    ///
    /// # Errors
    ///
    /// [`StatusError::Write`] if the API server refuses the status or cannot be reached; the next
    /// write sends again, even an equal status, and [`StatusWriter::last_written`] still holds
    /// the last accepted one.
    pub async fn write(&mut self, status: &CacheConfigStatus) -> Result<bool> {
        let value = serde_json::to_value(status).map_err(|source| StatusError::Encode {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        })?;
        if self.held.as_ref() == Some(&value) {
            return Ok(false);
        }
        // Whatever happens now, what the server holds is no longer known for sure.
        self.held = None;
        let body = json!({
            "apiVersion": CacheConfig::api_version(&()),
            "kind": CacheConfig::kind(&()),
            "metadata": {"name": self.name},
            "status": value,
        });
        match self
            .api
            .patch_status(&self.name, &self.params, &Patch::Apply(body))
            .await
        {
            Ok(_) => {
                self.written = Some(status.clone());
                self.held = Some(value);
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                self.written = None;
                tracing::debug!(
                    k8s.namespace = %self.namespace,
                    object.ref = %self.name,
                    "cacheconfig gone; status not written"
                );
                Ok(false)
            }
            Err(source) => Err(StatusError::Write {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
                source,
            }),
        }
    }

    /// The status of the last accepted write (the `previous` of [`desired_status`]); `None` before
    /// the first, after a 404 and after [`StatusWriter::forget`].
    #[must_use]
    pub fn last_written(&self) -> Option<&CacheConfigStatus> {
        self.written.as_ref()
    }

    /// Forgets the status last written, so the next write sends even an equal status and
    /// [`desired_status`] starts transition times afresh. Call it when the object was recreated (its
    /// uid changed): the new object has no status yet.
    pub fn forget(&mut self) {
        self.written = None;
        self.held = None;
    }
}

mod memory;
#[cfg(test)]
mod tests;
