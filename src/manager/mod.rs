//! The manager: runs caches, the recorder and controllers, reloads them, reports status.

/// Leader election on a Lease (`informant run --leader-elect`), gating controllers and status.
pub mod leader;
