//! The manager: runs caches, the recorder and controllers, reloads them, reports status.

pub mod controller;
pub mod hooks;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod reload;
mod run;
pub mod source;
pub mod state;
pub mod status;

pub use run::{
    BoxError, ConfigSource, DEFAULT_SHUTDOWN_GRACE, Error, FIELD_MANAGER, Manager, Options, Reload,
};
