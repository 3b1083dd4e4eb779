//! A persistent process's standard error: logged line by line at the level each line states,
//! within a budget, its end kept for the error of a call the process failed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, BufReader};
use tokio_util::sync::CancellationToken;

use super::lock;

/// How much of a process's standard error is kept (its end) for the error of a call it failed.
const STDERR_TAIL: usize = 8 << 10;

/// The longest standard error line logged as one record; the rest of a longer line follows.
const STDERR_LINE: u64 = 16 << 10;

/// Logs each line of a process's standard error at the level it states (`level=warn ...`),
/// else at info, within a [`LogBudget`] (the lines over it are counted, and the count logged
/// with the next line logged or at the end), and keeps its last [`STDERR_TAIL`] bytes in
/// `tail` whether logged or not.
pub(super) async fn log_stderr(
    stderr: impl AsyncRead + Unpin,
    controller: String,
    hook: String,
    tail: Arc<Mutex<Vec<u8>>>,
    gone: CancellationToken,
) {
    let mut stderr = BufReader::new(stderr);
    // A child that escaped the process group may hold standard error open after the process
    // is gone: what is left is read for at most this long, so that the stop ends.
    let ended = async {
        gone.cancelled().await;
        tokio::time::sleep(STDERR_AFTER_END).await;
    };
    tokio::pin!(ended);
    let mut line = Vec::new();
    let mut budget = LogBudget::new(std::time::Instant::now());
    let dropped = |count: u64| {
        tracing::warn!(controller = %controller, %hook, dropped = count, "persistent hook wrote more standard error lines than are logged (at most {STDERR_BURST} at once, {STDERR_PER_SECOND} a second): these were not logged");
    };
    loop {
        line.clear();
        let mut limited = (&mut stderr).take(STDERR_LINE);
        let read = limited.read_until(b'\n', &mut line);
        tokio::select! {
            read = read => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            () = &mut ended => break,
        }
        {
            let mut kept = lock(&tail);
            kept.extend_from_slice(&line);
            if kept.len() > STDERR_TAIL {
                let cut = kept.len() - STDERR_TAIL;
                kept.drain(..cut);
            }
        }
        let Some(skipped) = budget.take(std::time::Instant::now()) else {
            continue;
        };
        if skipped > 0 {
            dropped(skipped);
        }
        let text = String::from_utf8_lossy(&line);
        let (level, message) = stderr_level(text.trim_end());
        match level {
            tracing::Level::ERROR => tracing::error!(controller = %controller, %hook, "{message}"),
            tracing::Level::WARN => tracing::warn!(controller = %controller, %hook, "{message}"),
            tracing::Level::DEBUG => tracing::debug!(controller = %controller, %hook, "{message}"),
            tracing::Level::TRACE => tracing::trace!(controller = %controller, %hook, "{message}"),
            _ => tracing::info!(controller = %controller, %hook, "{message}"),
        }
    }
    let skipped = budget.skipped();
    if skipped > 0 {
        dropped(skipped);
    }
}

/// How long standard error is still read once its process is gone.
const STDERR_AFTER_END: Duration = Duration::from_secs(1);

/// The most standard error lines of one process logged at once.
pub(super) const STDERR_BURST: u32 = 100;

/// The standard error lines of one process logged a second, past the burst.
pub(super) const STDERR_PER_SECOND: u32 = 20;

/// A token bucket of standard error lines: [`STDERR_BURST`] at once, refilled with
/// [`STDERR_PER_SECOND`]; a hook that writes a line per request at a high rate cannot flood
/// the manager's log (nor its collector).
#[derive(Debug)]
pub(in crate::hooks) struct LogBudget {
    /// Lines that may be logged now, in thousandths of a line.
    milli: u64,
    at: std::time::Instant,
    skipped: u64,
}

impl LogBudget {
    pub(super) fn new(now: std::time::Instant) -> Self {
        Self {
            milli: u64::from(STDERR_BURST) * 1000,
            at: now,
            skipped: 0,
        }
    }

    /// Whether a line may be logged at `now`: `Some` with the count of the lines skipped
    /// since the last one logged, or `None` (this one is skipped and counted).
    pub(super) fn take(&mut self, now: std::time::Instant) -> Option<u64> {
        let elapsed = now.saturating_duration_since(self.at);
        self.at = now;
        let refill = elapsed
            .as_millis()
            .saturating_mul(u128::from(STDERR_PER_SECOND));
        let cap = u64::from(STDERR_BURST) * 1000;
        self.milli = u64::try_from(u128::from(self.milli).saturating_add(refill))
            .unwrap_or(u64::MAX)
            .min(cap);
        if self.milli < 1000 {
            self.skipped += 1;
            return None;
        }
        self.milli -= 1000;
        Some(std::mem::take(&mut self.skipped))
    }

    /// The lines skipped since the last one logged, reset.
    pub(super) fn skipped(&mut self) -> u64 {
        std::mem::take(&mut self.skipped)
    }
}

/// The level a standard error line states (`level=error`, `warn`/`warning`, `info`, `debug`,
/// `trace`, then a space) and the rest; info and the whole line otherwise.
pub(in crate::hooks) fn stderr_level(line: &str) -> (tracing::Level, &str) {
    let Some(rest) = line.strip_prefix("level=") else {
        return (tracing::Level::INFO, line);
    };
    let (word, message) = rest.split_once(' ').unwrap_or((rest, ""));
    let level = match word.to_ascii_lowercase().as_str() {
        "error" => tracing::Level::ERROR,
        "warn" | "warning" => tracing::Level::WARN,
        "info" => tracing::Level::INFO,
        "debug" => tracing::Level::DEBUG,
        "trace" => tracing::Level::TRACE,
        _ => return (tracing::Level::INFO, line),
    };
    (level, message.trim_start())
}
