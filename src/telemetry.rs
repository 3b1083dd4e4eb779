//! The tracing subscriber and OpenTelemetry export. Only the binary installs it.
//!
//! Logs go to standard error through `tracing-subscriber`'s `fmt` layer, filtered by `RUST_LOG`
//! (default `info`). Spans are exported with OTLP when the standard OpenTelemetry environment
//! variables ask for it: `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
//! set, and `OTEL_TRACES_EXPORTER` not `none`. The exporter itself reads the other `OTEL_*`
//! variables (headers, timeout, protocol), as the OpenTelemetry specification says.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// Errors while installing telemetry.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `RUST_LOG` is not a valid filter directive.
    #[error("invalid RUST_LOG filter")]
    Filter(#[source] tracing_subscriber::filter::FromEnvError),
    /// The OTLP span exporter could not be built from the `OTEL_*` variables.
    #[error("cannot build the OTLP span exporter")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
    /// A global subscriber was already installed.
    #[error("a tracing subscriber is already installed")]
    AlreadyInstalled(#[source] tracing_subscriber::util::TryInitError),
}

/// Keeps the OpenTelemetry pipeline alive; dropping it flushes and shuts down the exporter.
#[must_use = "dropping the guard shuts the exporter down at once"]
pub struct Guard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(error) = provider.shutdown()
        {
            eprintln!("informant: flushing OpenTelemetry spans failed: {error}");
        }
    }
}

/// Whether the environment asks for OTLP span export (see the module documentation).
#[must_use]
pub fn otlp_requested(get: &dyn Fn(&str) -> Option<String>) -> bool {
    let set = |k: &str| get(k).is_some_and(|v| !v.trim().is_empty());
    let disabled = get("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none");
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// Installs the global subscriber: `fmt` to standard error, `EnvFilter` from `RUST_LOG`, and the
/// OpenTelemetry layer when [`otlp_requested`].
///
/// # Errors
///
/// A bad `RUST_LOG`, an exporter that cannot be built, or a subscriber already installed.
pub fn init() -> Result<Guard, Error> {
    let filter = EnvFilter::builder()
        .with_default_directive(tracing::level_filters::LevelFilter::INFO.into())
        .from_env()
        .map_err(Error::Filter)?;
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter);

    let provider = if otlp_requested(&|k| std::env::var(k).ok()) {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
            .map_err(Error::Exporter)?;
        Some(
            SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .build(),
        )
    } else {
        None
    };
    let otel = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("informant")));

    tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init()
        .map_err(Error::AlreadyInstalled)?;
    Ok(Guard { provider })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::otlp_requested;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn otlp_is_off_without_an_endpoint() {
        assert!(!otlp_requested(&env(&[])));
        assert!(!otlp_requested(&env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            " "
        )])));
    }

    #[test]
    fn otlp_is_on_with_either_endpoint_variable() {
        assert!(otlp_requested(&env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://127.0.0.1:4318"
        )])));
        assert!(otlp_requested(&env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1:4318/v1/traces"
        )])));
    }

    #[test]
    fn otel_traces_exporter_none_wins_over_an_endpoint() {
        assert!(!otlp_requested(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ])));
    }
}
