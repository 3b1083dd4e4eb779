//! The manager: runs caches, the recorder and controllers, reloads them, reports status.

pub mod controller;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod reload;
pub mod source;
pub mod state;
pub mod status;
