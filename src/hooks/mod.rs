//! Operators without Rust: `Controller` resources whose hook (an executable or a webhook, in
//! any language) is called with an object and its children from the cache tree, and whose
//! answer the manager writes.
//!
//! ```text
//! InformerPool ─▶ kube-runtime scheduler/runner ─▶ reconcile: cache tree ─▶ Request ─▶ hook
//!   (for + owns kinds)   (dedupe, concurrency,        ◀─ Response: events ─▶ recorder
//!                         requeue, backoff)               children ─▶ server-side apply / delete
//!                                                         status   ─▶ status subresource
//! ```
//!
//! The contract is [`contract`] (documented in `docs/hooks.md`, schema
//! `docs/hooks-v1.schema.json`). [`HookController`] runs one `Controller`;
//! [`Supervisor`] runs a changing set of them, restarting only the ones whose spec changed.
//!
//! A controller with `finalize: true` holds its objects with its finalizer; when it stops
//! holding them (its `Controller` deleted or dropped from the file, edited to
//! `finalize: false` or to another `for` kind) the supervisor removes that finalizer from
//! every object after stopping it, never at shutdown. A `Controller` resource is itself held
//! with [`CONTROLLER_FINALIZER`] until its objects are released, so a deletion made while no
//! manager led is still seen.

mod admission;
mod call;
pub mod contract;
mod controller;
mod conversion;
mod metrics;
mod persistent;
mod policy;
mod process;
mod reconcile;
mod release;
mod resource;
mod routes;
mod schedule;
mod shared;
mod sources;
mod stats;
mod supervisor;
mod webhook;

pub use admission::{
    AdmissionAnswer, AdmissionCall, AdmissionFate, AdmissionName, AdmissionRoutes, Admitter,
    BadReview, Decision, OwnedConfigurations, OwnedPass, ServedHook, admission_path,
};
pub use call::{CallError, EXCERPT_CHARS, call, call_under, decode, excerpt, excerpt_end};
pub use controller::{Error, HookController, REASON_HOOK_FAILED};
pub use conversion::{
    BadConversionReview, CONVERSION_DEADLINE, Conversion, ConversionAnswer, ConversionCall,
    ConversionFailure, ConversionFate, ConversionPass, ConversionRoutes, ConversionStep, Converter,
    OwnedCrds, ServedConversion, checked_answer, conversion_path,
};
pub use metrics::HookMetrics;
pub use persistent::Processes;
pub use policy::{
    Allowed, Cidr, DEFAULT_MAX_RESPONSE_BYTES, ExecRule, Policy, PolicyError,
    REASON_HOOK_NOT_ALLOWED, UrlRule,
};
pub use reconcile::ReconcileError;
pub use release::CONTROLLER_FINALIZER;
pub use resource::{
    AdmissionHook, AdmissionHookStatus, AdmissionSpec, AdmissionType, CONTROLLER_CONDITION_READY,
    CONTROLLER_CONDITION_VALID, Controller, ControllerError, ControllerKey, ControllerSettings,
    ControllerSpec, ControllerStatus, ConversionHook, ConversionSpec,
    DEFAULT_ADMISSION_TIMEOUT_SECONDS, DEFAULT_HOOK_TIMEOUT, EnvVarSpec, ExecHookSpec,
    FINALIZER_PREFIX, FailurePolicy, ForSpec, Hook, HookSpec, KindSpec,
    MAX_ADMISSION_TIMEOUT_SECONDS, MAX_CONCURRENCY, MAX_MATCH_CONDITIONS, MapTo, MapToSpec,
    MatchConditionSpec, SecretRef, ValidatedController, WatchSpec, WebhookSpec, WebhookTls,
    controller_crd_yaml, controllers_in, controllers_key, validate_controller,
    validate_controller_value,
};
pub use schedule::{
    Clock as ScheduleClock, Schedule, ScheduleErrors, ScheduleMode, SystemClock, TokioClock,
};
pub use sources::{
    NamespaceSource, add_to_manager, add_to_manager_limited, add_to_manager_with,
    desired_from_text, follow_file, follow_namespace,
};
pub use stats::Stats;
pub use supervisor::{
    Desired, Progress, REASON_ADMISSION_NOT_SERVED, REASON_CONVERSION_NOT_SERVED,
    REASON_NEEDS_SHARD_KEY_NAMESPACE, Supervisor,
};
