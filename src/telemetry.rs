//! The tracing subscriber and OpenTelemetry export: the binary installs it, and an operator
//! built on the library with one call, [`init_default`].
//!
//! Logs go to standard error through `tracing-subscriber`'s `fmt` layer, filtered by `RUST_LOG`
//! or, when it is unset, by the level the command asks for. Colours only on a terminal, and
//! never when `NO_COLOR` is set (<https://no-color.org>), so logs piped to a file stay plain. Spans are exported with OTLP when the standard OpenTelemetry environment
//! variables ask for it: `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
//! set, and `OTEL_TRACES_EXPORTER` not `none`. The exporter itself reads the other `OTEL_*`
//! variables (headers, timeout, protocol), as the OpenTelemetry specification says. Export is
//! the `otlp` feature (default); a build without it refuses the variables
//! (`Error::OtlpNotBuilt`) rather than drop the spans.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::sync::{Arc, Mutex, PoisonError};

#[cfg(feature = "otlp")]
use opentelemetry::trace::TracerProvider as _;
#[cfg(feature = "otlp")]
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::level_filters::LevelFilter;
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
    #[cfg(feature = "otlp")]
    #[error("cannot build the OTLP span exporter")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
    /// The `OTEL_*` variables ask for span export, and this build has no `otlp` feature.
    #[cfg(not(feature = "otlp"))]
    #[error(
        "OTEL_EXPORTER_OTLP_ENDPOINT asks for span export, but informant was built without its \
         `otlp` feature; enable it, or unset the variable (or set OTEL_TRACES_EXPORTER=none)"
    )]
    OtlpNotBuilt,
    /// A global subscriber was already installed.
    #[error("a tracing subscriber is already installed")]
    AlreadyInstalled(#[source] tracing_subscriber::util::TryInitError),
}

/// Keeps the OpenTelemetry pipeline alive; dropping it flushes and shuts down the exporter.
#[must_use = "dropping the guard shuts the exporter down at once"]
pub struct Guard {
    #[cfg(feature = "otlp")]
    provider: Option<SdkTracerProvider>,
}

#[cfg(feature = "otlp")]
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

/// Whether log lines get ANSI colours: only on a terminal, and not when `NO_COLOR` is set to
/// anything non-empty.
#[must_use]
pub fn use_color(is_terminal: bool, no_color: Option<&str>) -> bool {
    is_terminal && no_color.is_none_or(str::is_empty)
}

/// Crates whose lines below warn are not for users, quieted by the default filter: notify
/// says at info that it cannot remove the inotify watch of a file an editor or a `ConfigMap`
/// swap already replaced (`EINVAL`), at every reload of a config file.
const QUIET: &str = "notify=warn";

/// The log filter: `rust_log` (the value of `RUST_LOG`) when set and not empty, which decides
/// alone; else `default_level`, with the crates whose info lines are not for users (notify)
/// at warn.
///
/// # Errors
///
/// `rust_log` is not a valid filter.
pub fn filter(
    default_level: LevelFilter,
    rust_log: Option<&str>,
) -> Result<EnvFilter, tracing_subscriber::filter::FromEnvError> {
    let builder = EnvFilter::builder().with_default_directive(default_level.into());
    match rust_log {
        Some(directives) if !directives.trim().is_empty() => Ok(builder.parse(directives)?),
        // Below warn only: QUIET must not turn a crate's warnings on under a quieter default.
        _ if default_level > LevelFilter::WARN => {
            Ok(builder.parse_lossy(format!("{default_level},{QUIET}")))
        }
        _ => Ok(builder.parse_lossy("")),
    }
}

/// Installs the global subscriber: `fmt` to standard error, [`filter`] from `RUST_LOG` (or
/// `default_level` when it is unset), and the OpenTelemetry layer when [`otlp_requested`].
///
/// # Errors
///
/// A bad `RUST_LOG`, an exporter that cannot be built, or a subscriber already installed.
pub fn init(default_level: LevelFilter) -> Result<Guard, Error> {
    init_with(default_level, None)
}

/// Logs for an operator built on the library, in one call at the top of its `main`:
/// [`init`] at `info` (or what `RUST_LOG` says), to standard error, spans to OTLP when the
/// `OTEL_*` variables ask for it. Keep the [`Guard`] until the end of `main` (it flushes the
/// exporter). Without a subscriber, `tracing` drops every log line of the manager and its
/// controllers; [`crate::manager::Manager::new`] says so once on standard error.
///
/// # Errors
///
/// As [`init`].
pub fn init_default() -> Result<Guard, Error> {
    init(LevelFilter::INFO)
}

/// [`init`], plus a [`FateTally`] of every event span when given (`informant demo` prints its
/// table of fates per reason from it).
///
/// # Errors
///
/// As [`init`].
pub fn init_with(default_level: LevelFilter, tally: Option<FateTally>) -> Result<Guard, Error> {
    let filter =
        filter(default_level, std::env::var("RUST_LOG").ok().as_deref()).map_err(Error::Filter)?;
    let color = use_color(
        std::io::stderr().is_terminal(),
        std::env::var("NO_COLOR").ok().as_deref(),
    );
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(color)
        .with_filter(filter);

    #[cfg(feature = "otlp")]
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
    #[cfg(feature = "otlp")]
    let otel = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("informant")));
    #[cfg(not(feature = "otlp"))]
    let otel: Option<tracing_subscriber::layer::Identity> = {
        if otlp_requested(&|k| std::env::var(k).ok()) {
            return Err(Error::OtlpNotBuilt);
        }
        None
    };

    let tally = tally.map(|t| {
        t.with_filter(tracing_subscriber::filter::filter_fn(|meta| {
            meta.is_span() && meta.name() == "event"
        }))
    });
    tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .with(tally)
        .try_init()
        .map_err(Error::AlreadyInstalled)?;
    Ok(Guard {
        #[cfg(feature = "otlp")]
        provider,
    })
}

/// Formats an error with its whole `source()` chain, joined with `: ` (`a: b: c`): the one
/// formatter of error chains, for the CLI's messages, the logs and the status conditions. Each
/// error's `Display` covers only its own layer, so this is how a command shows the whole story.
///
/// Each cause is printed once, in words (STYLE.md §5):
///
/// - a cause whose text the layer above already contains (errors of other crates, kube's
///   `KubeconfigError` or kube-runtime's watcher errors, interpolate their source and also
///   return it from `source()`) is not repeated: the layer's text is kept, with the cause's
///   own rendering in its place;
/// - an answer of the API server (`kube::Error::Api`, whose `Display` holds the message and a
///   `Debug` dump of the `Status`, and whose source is the `Status` again) is its message and
///   its code and reason: `… is forbidden: User "…" cannot get … (403 Forbidden)`.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    if let Some(status) = api_status(error) {
        return status_words(status);
    }
    let text = error.to_string();
    let Some(cause) = error.source() else {
        return text;
    };
    let cause_text = cause.to_string();
    let rendered = error_chain(cause);
    match text.rfind(&cause_text) {
        Some(at) if !cause_text.is_empty() => {
            format!(
                "{}{rendered}{}",
                &text[..at],
                &text[at + cause_text.len()..]
            )
        }
        _ => format!("{text}: {rendered}"),
    }
}

/// The API server's answer `error` is, if it is one.
fn api_status<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a kube::core::Status> {
    match error.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(status)) => Some(status),
        _ => error.downcast_ref::<kube::core::Status>(),
    }
}

/// An answer of the API server in words: its message, then its code and reason.
fn status_words(status: &kube::core::Status) -> String {
    let code = match (status.code, status.reason.as_str()) {
        (0, "") => String::new(),
        (0, reason) => reason.to_owned(),
        (code, "") => code.to_string(),
        (code, reason) => format!("{code} {reason}"),
    };
    match (status.message.as_str(), code.as_str()) {
        ("", "") => "the API server refused the request".to_owned(),
        ("", code) => format!("the API server answered {code}"),
        (message, "") => message.to_owned(),
        (message, code) => format!("{message} ({code})"),
    }
}

/// Counts the `event` spans the recorder closes, by reason and fate: the same trace an OTLP
/// backend receives, tallied in process; and the ones still open (events recorded that have
/// no fate yet).
#[derive(Clone, Debug, Default)]
pub struct FateTally(Arc<Mutex<Tally>>);

#[derive(Debug, Default)]
struct Tally {
    closed: BTreeMap<(String, String), u64>,
    open: u64,
}

/// The reason and fate recorded on one `event` span so far.
#[derive(Default)]
struct EventFields {
    reason: Option<String>,
    fate: Option<String>,
}

impl tracing::field::Visit for EventFields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "event.reason" => self.reason = Some(value.to_string()),
            "event.fate" => self.fate = Some(value.to_string()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "event.reason" | "event.fate" => self.record_str(field, &format!("{value:?}")),
            _ => {}
        }
    }
}

impl FateTally {
    /// `(reason, fate) → events` so far, sorted by reason then fate.
    #[must_use]
    pub fn snapshot(&self) -> BTreeMap<(String, String), u64> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed
            .clone()
    }

    /// Events recorded whose span is still open: no fate yet (queued, being written, or
    /// folded into a series' count that no write has delivered yet).
    #[must_use]
    pub fn in_flight(&self) -> u64 {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).open
    }
}

impl<S> tracing_subscriber::Layer<S> for FateTally
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id) {
            let mut fields = EventFields::default();
            attrs.record(&mut fields);
            span.extensions_mut().insert(fields);
            self.0.lock().unwrap_or_else(PoisonError::into_inner).open += 1;
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<EventFields>()
        {
            values.record(fields);
        }
    }

    fn on_close(&self, id: tracing::span::Id, ctx: tracing_subscriber::layer::Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(fields) = span.extensions_mut().remove::<EventFields>() else {
            return;
        };
        let reason = fields.reason.unwrap_or_default();
        let fate = fields.fate.unwrap_or_else(|| "unknown".to_string());
        let mut tally = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        tally.open = tally.open.saturating_sub(1);
        *tally.closed.entry((reason, fate)).or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{error_chain, filter, otlp_requested, use_color};
    use tracing::level_filters::LevelFilter;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    /// An error that interpolates its source and also returns it, as kube's do.
    #[derive(Debug, thiserror::Error)]
    #[error("failed to read kubeconfig: {0}")]
    struct Interpolating(#[source] std::io::Error);

    #[test]
    fn a_cause_the_layer_above_already_prints_is_printed_once() {
        let error = Interpolating(std::io::Error::other("no such file"));
        assert_eq!(
            error_chain(&error),
            "failed to read kubeconfig: no such file"
        );
    }

    /// A layer of ours over kube's error, as `config::source::Error::Get` is.
    #[derive(Debug, thiserror::Error)]
    #[error("cannot read cacheconfig informant-system/informant")]
    struct Ours(#[source] kube::Error);

    /// kube-runtime's habit: the source interpolated and returned.
    #[derive(Debug, thiserror::Error)]
    #[error("failed to perform initial object list: {0}")]
    struct Watcher(#[source] kube::Error);

    fn forbidden() -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure(
                "cacheconfigs.informant.dev \"informant\" is forbidden: User \"system:serviceaccount:a:b\" cannot get resource \"cacheconfigs\"",
                "Forbidden",
            )
            .with_code(403),
        ))
    }

    /// Issue #33 item 9: a 403 printed its message three times and a `Debug` dump of the
    /// `Status`.
    #[test]
    fn an_api_servers_answer_is_its_message_once_with_its_code_in_words() {
        let chain = error_chain(&Ours(forbidden()));
        assert_eq!(
            chain,
            "cannot read cacheconfig informant-system/informant: cacheconfigs.informant.dev \
             \"informant\" is forbidden: User \"system:serviceaccount:a:b\" cannot get resource \
             \"cacheconfigs\" (403 Forbidden)"
        );
        let interpolated = error_chain(&Watcher(forbidden()));
        assert_eq!(
            interpolated.matches("is forbidden").count(),
            1,
            "{interpolated}"
        );
        assert!(!interpolated.contains("Status {"), "{interpolated}");
        assert!(
            interpolated.starts_with("failed to perform initial object list: cacheconfigs"),
            "{interpolated}"
        );
        assert!(interpolated.ends_with("(403 Forbidden)"), "{interpolated}");
    }

    /// The lines `filter(level, rust_log)` lets through of: notify's info and warn, and
    /// informant's info.
    fn logged(level: LevelFilter, rust_log: Option<&str>) -> String {
        let buffer = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let writer = {
            let buffer = std::sync::Arc::clone(&buffer);
            move || Writer(std::sync::Arc::clone(&buffer))
        };
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(false)
            .without_time();
        let subscriber =
            tracing_subscriber::registry().with(fmt.with_filter(filter(level, rust_log).unwrap()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(
                target: "notify::inotify",
                "unable to remove watch descriptor from inotify: Invalid argument"
            );
            tracing::warn!(target: "notify::inotify", "inotify queue overflow");
            tracing::info!(target: "informant::manager::reload", "config reloaded");
        });
        let bytes = buffer.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    struct Writer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Writer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_default_filter_keeps_notify_below_warn_out_and_rust_log_decides_alone() {
        for level in [LevelFilter::INFO, LevelFilter::TRACE] {
            let out = logged(level, None);
            assert!(!out.contains("unable to remove watch descriptor"), "{out}");
            assert!(out.contains("inotify queue overflow"), "{out}");
            assert!(out.contains("config reloaded"), "{out}");
        }
        assert_eq!(logged(LevelFilter::OFF, None), "");
        assert!(!logged(LevelFilter::WARN, None).contains("config reloaded"));
        let empty = logged(LevelFilter::INFO, Some(" "));
        assert!(
            !empty.contains("unable to remove watch descriptor"),
            "{empty}"
        );
        let asked = logged(LevelFilter::INFO, Some("info"));
        assert!(
            asked.contains("unable to remove watch descriptor"),
            "{asked}"
        );
        assert!(filter(LevelFilter::INFO, Some("notify=loud")).is_err());
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(use_color(true, None));
        assert!(use_color(true, Some("")));
        assert!(!use_color(true, Some("1")));
        assert!(!use_color(false, None), "a pipe or a file gets plain text");
    }

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

#[cfg(test)]
mod tally_tests {
    use std::sync::Arc;

    use tracing_subscriber::layer::SubscriberExt as _;

    use super::FateTally;
    use crate::recorder::{EventType, NullSink, ObjectRef, Options, Pipeline, SystemClock};

    #[tokio::test(flavor = "current_thread")]
    async fn the_tally_counts_each_event_span_by_reason_and_fate() {
        let tally = FateTally::default();
        let subscriber = tracing_subscriber::registry().with(tally.clone());
        let _guard = tracing::subscriber::set_default(subscriber);
        let pipeline = Pipeline::new(&Options::default(), NullSink, Arc::new(SystemClock));
        let recorder = pipeline.recorder();
        let pod = Arc::new(ObjectRef::new("v1", "Pod", "default", "web-0", "uid-1"));
        for _ in 0..30 {
            recorder.record(&pod, EventType::Warning, "BackOff", "back-off");
        }
        drop(recorder);
        pipeline
            .run(tokio_util::sync::CancellationToken::new())
            .await;
        let counts = tally.snapshot();
        let get = |fate: &str| counts.get(&("BackOff".into(), fate.into())).copied();
        assert_eq!(get("created"), Some(1));
        assert_eq!(get("patched"), Some(24));
        assert_eq!(get("spam_filtered"), Some(5));
        assert_eq!(counts.values().sum::<u64>(), 30);
    }
}
