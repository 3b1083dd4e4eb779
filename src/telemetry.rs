//! The tracing subscriber and OpenTelemetry export. Only the binary installs it.
