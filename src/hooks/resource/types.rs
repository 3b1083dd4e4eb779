//! The `Controller` resource's wire types (the CRD) and the typed settings a valid one becomes.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::CustomResource;
use kube::core::GroupVersionKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::{FieldError, Origin};
use crate::selector::{FieldSelector, LabelSelector};

/// How long a hook may take before it is killed (exec) or abandoned (webhook) unless
/// `timeout` says otherwise.
///
/// metacontroller docs/api/hook.md: a webhook's `timeout` defaults to 10 seconds.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// The most hook calls a `Controller` may run at once (`spec.concurrency`). Each call at once
/// may hold a process (a persistent hook keeps one per unit) and an answer of up to
/// `--hook-max-response-bytes` (4 MiB by default): 64 bound the worst case at 256 MiB and 64
/// processes per `Controller`, where a `u16` allowed 65,535 of each; controller-runtime
/// leaves `MaxConcurrentReconciles` unbounded, but its reconcilers run in the manager, not as
/// processes. More throughput per process is `callsPerProcess`'s.
pub const MAX_CONCURRENCY: u16 = 64;

/// Declares an operator written as a hook: the kind it reconciles (`for`), the kinds it owns
/// (its children, found by owner reference) and watches, and the hook the manager calls with
/// each object. The manager reads everything through its cache tree and writes the hook's
/// answer: events through its recorder, children with server-side apply, status through the
/// status subresource; an unchanged answer writes nothing.
#[allow(
    clippy::duplicated_attributes,
    reason = "each printcolumn of the kube derive repeats type_"
)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "informant.dev",
    version = "v1alpha1",
    kind = "Controller",
    namespaced,
    status = "ControllerStatus",
    shortname = "ctl",
    derive = "PartialEq",
    doc = "A Controller: an operator written as a hook (exec or webhook) that informant runs.",
    category = "informant",
    printcolumn(
        name = "Valid",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status",
        description = "whether the spec passed validation"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "whether the controller runs on the leader"
    ),
    printcolumn(
        name = "Reconciles",
        type_ = "integer",
        json_path = ".status.reconciles",
        description = "hook calls since the controller started"
    ),
    printcolumn(
        name = "Failures",
        type_ = "integer",
        json_path = ".status.failures",
        description = "failed hook calls since the controller started"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::config::paragraphs)]
pub struct ControllerSpec {
    /// The kind this controller reconciles: the hook is called for each of its objects the
    /// cache holds, when it or one of its children changes.
    #[serde(rename = "for")]
    pub for_: ForSpec,

    /// Kinds of the children: objects of these kinds whose controller owner reference names a
    /// reconciled object are sent to the hook under `children`, trigger a reconcile of their
    /// owner when they change, and are the kinds the hook may return in `children`. Needs
    /// the children on the replica of their owner: with a `CacheConfig` sharded by uid the
    /// controller does not start (`Ready=False`, reason `NeedsShardKeyNamespace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owns: Option<Vec<KindSpec>>,

    /// Kinds of related objects: the objects of these kinds that map to the reconciled
    /// object (by default every one in its namespace; see `mapTo`) are sent to the hook under
    /// `related`, and a change of one reconciles the objects it maps to. As `owns`, not with
    /// a `CacheConfig` sharded by uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watches: Option<Vec<WatchSpec>>,

    /// The hook: exactly one of `exec` or `webhook`.
    pub hook: HookSpec,

    /// How many hook calls run at once (never two for the same object), at most 64 (a manager
    /// may lower it with `--hook-max-concurrency`). Default 1 (controller-runtime's
    /// `MaxConcurrentReconciles`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub concurrency: Option<u16>,

    /// How often every object is reconciled even when nothing changed (a Go duration such as
    /// `10m`). Default: never (the hook can ask with `requeueAfterSeconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resync_period: Option<String>,

    /// How long one reconcile (the hook's call and the writes of its answer) may run before it
    /// is cancelled (a Go duration such as `2m`): its worker takes the next object, the object
    /// is retried with backoff, and the timeout is counted in
    /// `controller_runtime_reconcile_timeouts_total`. Default (or `0s`): none, as
    /// controller-runtime's `ReconciliationTimeout`; the hook's own `timeout` still ends a call
    /// that hangs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,

    /// Hold each object with the finalizer `hooks.informant.dev/<namespace>.<name>` (of this
    /// Controller) so that, once it is deleted, the hook is called with `finalizing: true`
    /// until it answers `finalized: true`; then the finalizer is removed and the object goes.
    /// Default `false` (the hook may never see a deletion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalize: Option<bool>,

    /// Call the hook on a clock as well: a cron expression of five fields (minute hour
    /// day-of-month month day-of-week) or six (seconds first), or `@every 5m`, `@hourly`,
    /// `@daily`, `@weekly`, `@monthly`, `@yearly`. At each tick the leader calls the hook for
    /// every object (see `scheduleMode`); a tick that finds the previous one still running is
    /// skipped. Default: no schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,

    /// The IANA time zone `schedule` is read in, e.g. `Europe/Paris` (as a `CronJob`'s
    /// `timeZone`). Default `UTC`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,

    /// What a tick of `schedule` calls: `perObject` (default), one call per object through the
    /// controller's queue (merged with a call already queued for it), or `batch`, one call with
    /// every object in the request's `objects`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_mode: Option<String>,

    /// Admission hooks: validate or default the objects of the `for` kind before the API
    /// server stores them. The manager serves them over HTTPS and registers them in the
    /// webhook configurations it owns. See docs/hooks.md, "Admission".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Vec<super::admission::AdmissionSpec>>,

    /// A conversion hook: converts the objects of the `for` kind (a custom resource) between
    /// the versions of its CRD. The manager serves it over HTTPS and sets the CRD's
    /// `spec.conversion` to call it. See docs/hooks.md, "Conversion hooks".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion: Option<super::conversion::ConversionSpec>,
}

/// The reconciled kind, and which of its objects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForSpec {
    /// API version of the kind, e.g. `batch/v1`.
    pub api_version: String,
    /// The kind, e.g. `CronJob`.
    pub kind: String,
    /// Only objects whose labels match (Kubernetes selector syntax). Default: every object
    /// the cache holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
    /// Only objects whose fields match (e.g. `metadata.name=hello`). Default: every object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<String>,
}

/// A kind, by API version and kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KindSpec {
    /// API version of the kind, e.g. `batch/v1`.
    pub api_version: String,
    /// The kind, e.g. `Job`.
    pub kind: String,
}

/// A kind of related objects, and which reconciled objects each of them is about.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WatchSpec {
    /// API version of the kind, e.g. `v1`.
    pub api_version: String,
    /// The kind, e.g. `ConfigMap`.
    pub kind: String,
    /// Which reconciled objects a related object maps to: exactly one of `sameName` or
    /// `annotation`. Default: every reconciled object in the related object's namespace
    /// (every one, for a cluster-scoped related kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_to: Option<MapToSpec>,
}

/// Which reconciled objects a related object maps to (like a controller-runtime
/// `handler.EnqueueRequestsFromMapFunc`, declared): exactly one field.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MapToSpec {
    /// `true`: the reconciled object with the related object's namespace and name (a
    /// `ConfigMap` `web` configures the object `web`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_name: Option<bool>,
    /// An annotation key, e.g. `informant.dev/for`: the related object names the reconciled
    /// objects it is about in this annotation, comma-separated, each `name` (in the related
    /// object's namespace) or `namespace/name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation: Option<String>,
}

/// The hook: exactly one of `exec` or `webhook`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookSpec {
    /// Run a command: the request on its standard input, the response on its standard output
    /// (standard error is logged). A non-zero exit, a timeout or malformed JSON is a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecHookSpec>,
    /// POST the request to a URL; the response body is the answer. A non-2xx status, a
    /// timeout or malformed JSON is a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookSpec>,
}

/// A hook run as a command.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecHookSpec {
    /// The program and its arguments (no shell), e.g. `[python3, hooks/cronjob.py]`.
    pub command: Vec<String>,
    /// How long a call may take before the process is killed (a Go duration). Default `10s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// `perCall` (default): a process per call. `persistent`: long-lived processes (as many
    /// as `concurrency`), one request per line on standard input and one answer per line on
    /// standard output, each `{"id": N, ...}`; see docs/hooks.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["perCall", "persistent"]))]
    pub mode: Option<String>,
    /// With `mode: persistent`: calls one process answers at once. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub calls_per_process: Option<u16>,
    /// Environment variables the hook's processes get, beside `PATH`, `HOME`, `LANG` and `TZ`
    /// taken from the manager's environment (a variable named here replaces the manager's).
    /// Names as a Pod's `env` takes them; the dynamic loader's (`LD_*`, `DYLD_*`, and the
    /// others glibc removes for set-user-ID programs, such as `GCONV_PATH`) are refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVarSpec>,
}

/// An environment variable of an exec hook's processes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvVarSpec {
    /// The variable's name, e.g. `LOG_FORMAT`.
    pub name: String,
    /// Its value (empty when left out).
    #[serde(default)]
    pub value: String,
}

/// A hook called over HTTP or HTTPS.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookSpec {
    /// The URL the request is posted to, e.g. `https://hooks.ops.svc:8443/sync` (with
    /// `caBundle`), or `http://hooks.ops.svc:8080/sync` where the manager's hook policy allows
    /// plain HTTP (`--hook-allow-http`).
    pub url: String,
    /// How long a call may take (a Go duration). Default `10s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// PEM-encoded CA certificates, base64-encoded (as an admission webhook's
    /// `clientConfig.caBundle`), that the certificate of an `https://` URL must chain to.
    /// Required for `https://`: the manager trusts no other authority for a hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "byte"))]
    pub ca_bundle: Option<String>,
    /// A `kubernetes.io/tls` Secret in the Controller's namespace whose `tls.crt` and
    /// `tls.key` the manager presents as its client certificate (`https://` only; read again
    /// at most every 5 minutes). The manager needs `get` on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cert_secret_ref: Option<SecretRef>,
}

/// A Secret in the Controller's namespace, by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretRef {
    /// The Secret's name.
    pub name: String,
}

/// Condition type: the spec passed validation (`True`) or not (`False`, every error in the
/// message; the previous valid spec keeps running).
pub const CONTROLLER_CONDITION_VALID: &str = "Valid";

/// Condition type: the controller runs (on the leader) and its informers synced.
pub const CONTROLLER_CONDITION_READY: &str = "Ready";

/// Observed state of a `Controller`, written by the manager.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::config::paragraphs)]
pub struct ControllerStatus {
    /// The `metadata.generation` the rest of this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Valid` and `Ready` conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// When the next tick of `spec.schedule` is due (RFC 3339, UTC), on the leader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_time: Option<String>,
    /// Hook calls since the controller (re)started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciles: Option<i64>,
    /// Failed hook calls since the controller (re)started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failures: Option<i64>,
    /// The last hook failure, with the object it was about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The admission hooks as the leader registered them in the webhook configurations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission: Vec<AdmissionHookStatus>,
}

/// An admission hook as registered: whether the API server took its webhook, and where it
/// is called.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionHookStatus {
    /// The hook's name (`spec.admission[].name`).
    pub name: String,
    /// Whether its webhook is in the webhook configuration. `false`: the API server refused
    /// it (see `message`); the other hooks, of this and other Controllers, are registered.
    pub registered: bool,
    /// Why it is not registered, in the API server's words; or, when registered, how its
    /// namespaces were narrowed to the Controller's cache scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The namespaces it is called in: its own `namespaceSelector` AND the cache scope of
    /// the Controller (every namespace when both are empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
}

/// A `Controller` that is not valid: every problem, each with its field path.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{origin}: invalid controller ({} error{}):{}", errors.len(), if errors.len() == 1 { "" } else { "s" }, bullets(errors))]
pub struct ControllerError {
    /// Where the document came from.
    pub origin: Origin,
    /// Every problem found.
    pub errors: Vec<FieldError>,
}

fn bullets(errors: &[FieldError]) -> String {
    let mut out = String::new();
    for e in errors {
        out.push_str("\n  ");
        out.push_str(&e.to_string());
    }
    out
}

/// How the manager calls a hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hook {
    /// Run `command` (program and arguments), killed after `timeout`.
    Exec {
        /// Program and arguments.
        command: Vec<String>,
        /// The environment it gets beside the manager's `PATH`, `HOME`, `LANG` and `TZ`.
        env: Vec<(String, String)>,
        /// How long a call may take.
        timeout: Duration,
    },
    /// Run `command` as long-lived processes (`exec.mode: persistent`), one per unit of the
    /// controller's concurrency, each answering `calls_per_process` requests at once, one per
    /// line; a call is abandoned after `timeout`.
    Persistent {
        /// Program and arguments.
        command: Vec<String>,
        /// The environment it gets beside the manager's `PATH`, `HOME`, `LANG` and `TZ`.
        env: Vec<(String, String)>,
        /// How long a call may take.
        timeout: Duration,
        /// Calls one process answers at once.
        calls_per_process: u16,
    },
    /// POST to `url`, abandoned after `timeout`.
    Webhook {
        /// The URL.
        url: String,
        /// How long a call may take.
        timeout: Duration,
        /// For an `https://` URL: whom to trust and what to present.
        tls: Option<WebhookTls>,
    },
}

/// The TLS settings of an `https://` webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookTls {
    /// The CA certificates the webhook's certificate must chain to (PEM, decoded from
    /// `caBundle`); no other authority is trusted.
    pub ca_bundle: Vec<u8>,
    /// The `kubernetes.io/tls` Secret (in the Controller's namespace) holding the client
    /// certificate the manager presents, if any.
    pub client_cert_secret: Option<String>,
}

/// A `Controller` resource's namespace and name: the key of the set of running controllers,
/// shown as `namespace/name` (its metrics label and the field manager of its children).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ControllerKey {
    /// `metadata.namespace` (`default` when a document has none).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

impl ControllerKey {
    /// The key of the `Controller` `name` in `namespace`.
    #[must_use]
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

impl std::fmt::Display for ControllerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A valid `Controller` as typed settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ControllerSettings {
    /// Which `Controller` (shown as `namespace/name`: the field manager of the children and
    /// the metrics label).
    pub key: ControllerKey,
    /// The reconciled kind.
    pub for_kind: GroupVersionKind,
    /// Only objects whose labels match.
    pub label_selector: Option<LabelSelector>,
    /// Only objects whose fields match.
    pub field_selector: Option<FieldSelector>,
    /// Child kinds.
    pub owns: Vec<GroupVersionKind>,
    /// Related kinds.
    pub watches: Vec<GroupVersionKind>,
    /// For each related kind (same order as `watches`), which reconciled objects its objects
    /// map to.
    pub map_to: Vec<MapTo>,
    /// The hook.
    pub hook: Hook,
    /// Hook calls at once.
    pub concurrency: u16,
    /// Periodic reconcile, if any.
    pub resync_period: Option<Duration>,
    /// How long one reconcile may run before it is cancelled (`spec.timeout`), if at all.
    pub timeout: Option<Duration>,
    /// The finalizer held on each object (`spec.finalize`), if any.
    pub finalizer: Option<String>,
    /// When the hook is called on a clock (`spec.schedule`), if ever.
    pub schedule: Option<crate::hooks::Schedule>,
    /// The admission hooks (`spec.admission`).
    pub admission: Vec<super::admission::AdmissionHook>,
    /// The conversion hook (`spec.conversion`), if any.
    pub conversion: Option<super::conversion::ConversionHook>,
}

/// Which reconciled objects a related object maps to (`spec.watches[].mapTo`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MapTo {
    /// Every reconciled object in the related object's namespace (every one, for a
    /// cluster-scoped related object).
    #[default]
    Namespace,
    /// The reconciled object with the related object's namespace and name.
    SameName,
    /// The reconciled objects the related object's annotation with this key names
    /// (comma-separated `name` or `namespace/name`).
    Annotation(String),
}

impl MapTo {
    /// Whether the related object `related` maps to the reconciled object `object`.
    #[must_use]
    pub fn maps(&self, related: &ObjectMeta, object: &ObjectMeta) -> bool {
        match self {
            MapTo::Namespace => {
                related.namespace.is_none() || related.namespace == object.namespace
            }
            MapTo::SameName => related.namespace == object.namespace && related.name == object.name,
            MapTo::Annotation(key) => {
                let Some(value) = related.annotations.as_ref().and_then(|a| a.get(key)) else {
                    return false;
                };
                value.split(',').map(str::trim).any(|entry| {
                    let (namespace_matches, name) = match entry.split_once('/') {
                        Some((namespace, name)) => {
                            (object.namespace.as_deref() == Some(namespace), name)
                        }
                        // A plain name: in the related object's namespace, or a
                        // cluster-scoped object.
                        None => (
                            object.namespace.is_none() || object.namespace == related.namespace,
                            entry,
                        ),
                    };
                    namespace_matches && !name.is_empty() && object.name.as_deref() == Some(name)
                })
            }
        }
    }
}

/// The prefix of the finalizer of a `Controller` with `finalize: true`, followed by
/// `<namespace>.<name>`.
pub const FINALIZER_PREFIX: &str = "hooks.informant.dev/";

/// A valid `Controller` and its typed settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidatedController {
    /// The resource as loaded.
    pub resource: Controller,
    /// What the manager runs.
    pub settings: ControllerSettings,
}
