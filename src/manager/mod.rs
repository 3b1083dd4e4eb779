//! The manager: runs caches, the recorder and controllers, reloads them, reports status.

pub mod controller;
pub mod http;
pub mod metrics;
pub mod reload;
pub mod state;
