//! The `Controller` custom resource: an operator written as a hook (an executable or a
//! webhook, in any language) that the manager calls with an object and its children from the
//! cache tree, and whose answer (events, children, status) the manager writes.
//!
//! Validation reports every problem at once with its field path, as for a `CacheConfig`, and
//! checks the kinds against the active cache plan: a controller on a kind the cache would
//! refuse to read is an error that says which `CacheConfig` setting to change.

mod admission;
mod conversion;
mod crd;
mod env;
mod types;
mod validate;

pub use admission::{
    AdmissionHook, AdmissionSpec, AdmissionType, DEFAULT_ADMISSION_TIMEOUT_SECONDS, FailurePolicy,
    MAX_ADMISSION_TIMEOUT_SECONDS, MAX_MATCH_CONDITIONS, MatchConditionSpec, webhook_name,
};
pub use conversion::{ConversionHook, ConversionSpec};
pub use crd::controller_crd_yaml;
pub use types::{
    AdmissionHookStatus, CONTROLLER_CONDITION_READY, CONTROLLER_CONDITION_VALID, Controller,
    ControllerError, ControllerKey, ControllerSettings, ControllerSpec, ControllerStatus,
    DEFAULT_HOOK_TIMEOUT, EnvVarSpec, ExecHookSpec, FINALIZER_PREFIX, ForSpec, Hook, HookSpec,
    KindSpec, MAX_CONCURRENCY, MapTo, MapToSpec, SecretRef, ValidatedController, WatchSpec,
    WebhookSpec, WebhookTls,
};
pub use validate::{
    controllers_in, controllers_key, validate_controller, validate_controller_value,
};

#[cfg(test)]
mod tests;
