//! The manager: runs caches, the recorder and controllers, reloads them, reports status.

pub mod leader;
