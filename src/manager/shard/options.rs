//! [`ShardOptions`]: how a manager joins the shard ring its config names (`spec.sharding`):
//! its identity, where its Lease lives, its timings, and the debugging aids.

use std::path::PathBuf;
use std::time::Duration;

use crate::manager::leader::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, default_identity,
};

/// How this manager joins the ring of its config's `spec.sharding` (unused without it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardOptions {
    /// This member's identity, unique in the ring (`--shard-identity`); leader election's
    /// `<hostname>_<uuid>` by default.
    pub identity: String,
    /// The namespace of the member Leases (`--lease-namespace`).
    pub lease_namespace: String,
    /// How long the others wait, after last seeing this member's Lease change, before they
    /// count it gone (`--leader-elect-lease-duration`, 15 s).
    pub lease_duration: Duration,
    /// How long this member may fail to renew before it stops reconciling
    /// (`--leader-elect-renew-deadline`, 10 s).
    pub renew_deadline: Duration,
    /// How often it renews and reads the ring (`--leader-elect-retry-period`, 2 s).
    pub retry_period: Duration,
    /// Appends one JSON line per reconcile (member, controller, object, start, end) to this
    /// file (`--reconcile-log`; a debugging aid, sharded or not).
    pub reconcile_log: Option<PathBuf>,
    /// **Test only.** Act on every part the ring gives this member at once, without waiting
    /// for its previous owner to let go, and let go without waiting for running reconciles:
    /// the handover bug an overlap checker must catch (`INFORMANT_SHARD_SKIP_HANDOVER=true`).
    pub skip_handover: bool,
}

impl Default for ShardOptions {
    /// Leader election's timings, a fresh `<hostname>_<uuid>`, Leases in `default`.
    fn default() -> Self {
        Self {
            identity: default_identity(),
            lease_namespace: "default".to_owned(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            reconcile_log: None,
            skip_handover: false,
        }
    }
}
