//! The manager: the process that runs caches, the recorder and what is added to it (the
//! leader-elected runnables: Rust and hook controllers), reloads the config, reports status,
//! serves probes and metrics, elects a leader, and with `spec.sharding` joins a shard ring
//! (its caches hold and its controllers reconcile only its share: [`ShardGate`]).
//!
//! ```text
//! Manager::run ─▶ probes ─▶ shard member ─▶ caches (CacheReloader, first config synced) ─▶ reload loop
//!                 (http)    (its share)     (one RunnableGroup each, stopped in reverse)    (config source)
//!                                                                  ─▶ controllers (every member when
//!                                                                     sharded), leader-elected:
//!                                                                     status writer, runnables
//! ```
//!
//! Everything a user deploys is here, and nothing of controllers: `crate::controller` and
//! `crate::hooks` add themselves to a [`Manager`].

mod access;
#[cfg(feature = "cli")]
mod args;
mod elected;
mod group;
mod http;
mod leader;
mod members;
pub(crate) mod metrics;
mod options;
mod probes;
mod reload;
mod run;
mod shard;
mod state;
mod status;
mod webhook;

pub use access::PERMISSIONS_RECHECK_INTERVAL;
#[cfg(feature = "cli")]
pub use args::{Args, ArgsError, ClientError};
pub use http::{
    BindAddressError, BindError, Check, HttpServer, METRICS_CONTENT_TYPE, Probes, SecureMetrics,
    parse_bind_address,
};
pub use leader::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, LeaderElection,
    LeaderElector, LeaderError, LostCause, default_identity,
};
pub use members::{RingMember, ring_members};
pub use metrics::{ManagerMetrics, MetricsRegistry, RELOAD_DURATION_BUCKETS, ReloadResult};
pub use options::{
    BoxError, ConfigSource, DEFAULT_LEASE_NAME, DEFAULT_SHUTDOWN_GRACE, Error, FIELD_MANAGER,
    Options, pod_namespace,
};
pub use reload::Reload;
pub use run::{Manager, file_watcher};
pub use shard::{
    Admission, CLAIMS_ANNOTATION, Fence, Gain, Member, MemberView, Membership, RING_LABEL, Ring,
    ShardGate, ShardOptions,
};
pub use state::{Snapshot, State};
pub use status::{
    ControllerReadiness, DEFAULT_FIELD_MANAGER, REASON_PERMISSION_MISSING, REASON_WAITING_FOR_KIND,
    Readiness, StatusError, StatusInput, StatusWriter, Validity, desired_status,
};
pub use webhook::WebhookOptions;
