//! Persistent exec hooks (`exec.mode: persistent`): long-lived processes that answer one
//! request per line instead of a process per call.
//!
//! informant writes `{"id": N, "request": <v1 request>}` and a newline on a process's standard
//! input and reads `{"id": N, "response": <v1 response>}` lines from its standard output, in
//! any order; one writer per process writes each request line whole, so a call that stops
//! waiting never leaves half a line for the next. Its standard error is logged line by line,
//! at the level a line states (`level=warn ...`), else at info, at most [`STDERR_BURST`]
//! lines at once and [`STDERR_PER_SECOND`] a second. [`Processes`] keeps one slot per unit of
//! the controller's concurrency; a slot's process takes `callsPerProcess` calls at once, in a
//! process group of its own (killed as a whole). A process that exits fails the calls in
//! flight ([`CallError::Exited`]) and is started again at the next call, after a backoff that
//! grows while processes keep dying without answering; a call past its timeout, or whose
//! caller stops waiting (an admission review's deadline), fails, and kills its process when
//! the process answered nothing meanwhile.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWriteExt as _, BufReader,
};
use tokio::process::ChildStdin;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::stderr::log_stderr;
#[cfg(test)]
use self::stderr::{LogBudget, STDERR_BURST, STDERR_PER_SECOND, stderr_level};
use super::call::{CallError, excerpt, excerpt_end};
use super::process::Started;
use super::resource::{ControllerSettings, ExecHookSpec, Hook};
use crate::config::{FieldError, FieldPath};

/// The first restart after a process died is at once; each further death without an answer
/// between doubles the wait from this, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// The longest wait before a process is started again.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How an exec hook runs (`spec.hook.exec.mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ExecMode {
    /// A process per call (default).
    PerCall,
    /// Long-lived processes, each taking this many calls at once.
    Persistent(u16),
}

impl ExecMode {
    /// The hook running `command` with `env` (beside the manager's [`HOOK_ENV`]) in this mode.
    ///
    /// [`HOOK_ENV`]: super::process::HOOK_ENV
    pub(super) fn hook(
        self,
        command: Vec<String>,
        env: Vec<(String, String)>,
        timeout: Duration,
    ) -> Hook {
        match self {
            ExecMode::PerCall => Hook::Exec {
                command,
                env,
                timeout,
            },
            ExecMode::Persistent(calls_per_process) => Hook::Persistent {
                command,
                env,
                timeout,
                calls_per_process,
            },
        }
    }
}

impl ControllerSettings {
    /// Hook calls at once: `concurrency`, times `callsPerProcess` for a persistent exec hook
    /// (each of the `concurrency` processes takes that many), never 0.
    pub(super) fn calls_at_once(&self) -> u16 {
        let per_process = match &self.hook {
            Hook::Persistent {
                calls_per_process, ..
            } => *calls_per_process,
            Hook::Exec { .. } | Hook::Webhook { .. } => 1,
        };
        self.concurrency.max(1).saturating_mul(per_process.max(1))
    }
}

/// Validates `exec.mode` and `exec.callsPerProcess` (at `path`), adding every error.
pub(super) fn exec_mode(
    exec: &ExecHookSpec,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> Option<ExecMode> {
    let persistent = match exec.mode.as_deref() {
        None | Some("perCall") => false,
        Some("persistent") => true,
        Some(other) => {
            errors.push(FieldError::new(
                &path.field("mode"),
                format!("unknown mode {other:?}: write perCall (the default) or persistent"),
            ));
            return None;
        }
    };
    match (persistent, exec.calls_per_process) {
        (false, None) => Some(ExecMode::PerCall),
        (false, Some(_)) => {
            errors.push(FieldError::new(
                &path.field("callsPerProcess"),
                "only with mode: persistent (a process per call answers one call); \
                 remove it or set mode: persistent",
            ));
            None
        }
        (true, Some(0)) => {
            errors.push(FieldError::new(
                &path.field("callsPerProcess"),
                "must be at least 1; remove it for the default of 1",
            ));
            None
        }
        (true, n) => Some(ExecMode::Persistent(n.unwrap_or(1))),
    }
}

/// What a call waits for: the `response` of the envelope answering its id (decoded by the
/// caller, which knows what it asked), or why none came.
type Answer = Result<Value, CallError>;

/// The calls waiting for an answer of one process, by id.
type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Answer>>>>;

/// The long-lived processes of one persistent exec hook, started at the first call that needs
/// one and stopped by [`Processes::stop`] or when dropped (each process is killed).
pub struct Processes {
    command: Vec<String>,
    /// What the processes get beside the manager's `PATH`, `HOME`, `LANG` and `TZ`.
    env: Vec<(String, String)>,
    timeout: Duration,
    limit: usize,
    controller: String,
    /// Calls at once over every slot: `slots × calls_per_process`.
    calls: Semaphore,
    /// Calls at once per process (`callsPerProcess`).
    per_process: usize,
    slots: Vec<Slot>,
    next_id: AtomicU64,
    starts: AtomicU64,
    tasks: TaskTracker,
    /// Cancelled when the set stops: the kill token of every process is its child, so that a
    /// process started while the set stops is killed at once, not left to no one.
    stopping: CancellationToken,
}

/// One process's place: the process (started when needed), its calls at once and backoff.
struct Slot {
    calls: Semaphore,
    process: tokio::sync::Mutex<Option<Arc<Process>>>,
    /// Processes of this slot that died since the last answer.
    deaths: AtomicU32,
}

/// A running process: the queue of its one writer, the calls waiting for an answer, and
/// tokens to kill it and to see it gone. Dropped, it is killed.
struct Process {
    /// Whole request lines, written one after the other by the process's writer: a call that
    /// stops waiting never leaves half a line on the process's standard input.
    requests: mpsc::Sender<(u64, Vec<u8>)>,
    pending: Pending,
    /// Lines read from its standard output so far.
    lines: Arc<AtomicU64>,
    kill: Kill,
    gone: CancellationToken,
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill.kill("killed: replaced or stopped");
    }
}

/// A request to kill a process, and the first reason given (what the calls it fails say).
#[derive(Clone)]
struct Kill {
    token: CancellationToken,
    why: Arc<Mutex<Option<String>>>,
}

impl Kill {
    fn child_of(parent: &CancellationToken) -> Self {
        Self {
            token: parent.child_token(),
            why: Arc::default(),
        }
    }

    fn kill(&self, why: impl Into<String>) {
        lock(&self.why).get_or_insert_with(|| why.into());
        self.token.cancel();
    }

    fn why(&self) -> String {
        lock(&self.why)
            .clone()
            .unwrap_or_else(|| "killed: the controller stops".to_owned())
    }
}

/// A call in flight on a process. Dropped before it is settled (its caller stopped waiting:
/// an admission review's deadline, a conversion's, a reconcile cancelled) or abandoned at the
/// timeout, its entry is removed and, when the process wrote no line since the call was
/// sent, the process is killed as hung: the calls it still holds fail ([`CallError::Exited`])
/// and the next call starts a new one.
struct Flight<'a> {
    set: &'a Processes,
    id: u64,
    process: Option<Arc<Process>>,
    lines_at_send: u64,
    settled: bool,
}

impl Flight<'_> {
    fn abandon(&mut self, why: &str) {
        self.settled = true;
        let Some(process) = self.process.take() else {
            return;
        };
        lock(&process.pending).remove(&self.id);
        if process.lines.load(Ordering::Relaxed) == self.lines_at_send
            && !process.gone.is_cancelled()
        {
            tracing::warn!(
                controller = %self.set.controller,
                hook = %self.set.program(),
                reason = why,
                "persistent hook answered nothing meanwhile: killed, to be restarted"
            );
            process
                .kill
                .kill(format!("killed: {why}, with nothing answered meanwhile"));
        }
    }
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.abandon("its caller stopped waiting for a call");
        }
    }
}

impl Processes {
    /// `slots` processes of `command` (at least 1), each taking `calls_per_process` calls at
    /// once (at least 1); a call fails after `timeout`; an answer line is read up to `limit`
    /// bytes. `controller` names the hook in the log.
    #[must_use]
    pub fn new(
        command: Vec<String>,
        timeout: Duration,
        slots: u16,
        calls_per_process: u16,
        limit: usize,
        controller: String,
    ) -> Self {
        let per = usize::from(calls_per_process.max(1));
        let slots: Vec<Slot> = (0..slots.max(1))
            .map(|_| Slot {
                calls: Semaphore::new(per),
                process: tokio::sync::Mutex::new(None),
                deaths: AtomicU32::new(0),
            })
            .collect();
        Self {
            command,
            env: Vec::new(),
            timeout,
            limit,
            controller,
            calls: Semaphore::new(slots.len() * per),
            per_process: per,
            slots,
            next_id: AtomicU64::new(1),
            starts: AtomicU64::new(0),
            tasks: TaskTracker::new(),
            stopping: CancellationToken::new(),
        }
    }

    /// These processes with `env` in their environment, beside the manager's `PATH`, `HOME`,
    /// `LANG` and `TZ` (a name of both takes the value of `env`).
    #[must_use]
    pub fn with_env(mut self, env: Vec<(String, String)>) -> Self {
        self.env = env;
        self
    }

    /// How many processes were started so far.
    #[must_use]
    pub fn starts(&self) -> u64 {
        self.starts.load(Ordering::Relaxed)
    }

    fn program(&self) -> String {
        self.command.first().cloned().unwrap_or_default()
    }

    /// Sends `request` to a process and waits for its answer. Dropped before the answer (the
    /// caller's own deadline), the call is abandoned as at its timeout (its in-flight guard's
    /// drop).
    ///
    /// # Errors
    /// [`CallError::Spawn`], [`CallError::Exited`], [`CallError::Timeout`],
    /// [`CallError::Envelope`], [`CallError::Malformed`], [`CallError::Invalid`],
    /// [`CallError::TooLarge`].
    pub async fn call(&self, request: &(impl serde::Serialize + Sync)) -> Result<Value, CallError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let line = request_line(id, request)?;
        let Ok(_call) = self.calls.acquire().await else {
            return Err(self.stopped());
        };
        // The semaphore over every slot guarantees one slot has a free place; the least busy
        // is taken, so that calls spread over the processes.
        let mut slots: Vec<&Slot> = self.slots.iter().collect();
        slots.sort_by_key(|s| std::cmp::Reverse(s.calls.available_permits()));
        let Some((slot, _place)) = slots
            .into_iter()
            .find_map(|s| s.calls.try_acquire().ok().map(|p| (s, p)))
        else {
            return Err(self.stopped());
        };
        let mut flight = Flight {
            set: self,
            id,
            process: None,
            lines_at_send: 0,
            settled: false,
        };
        let exchanged = tokio::time::timeout(self.timeout, self.exchange(slot, line, &mut flight));
        let result = if let Ok(result) = exchanged.await {
            flight.settled = true;
            result
        } else {
            flight.abandon(&format!(
                "no answer within its timeout of {:?}",
                self.timeout
            ));
            Err(CallError::Timeout(self.timeout))
        };
        if result.is_ok() {
            slot.deaths.store(0, Ordering::Relaxed);
        }
        result
    }

    /// Hands `line` to the writer of `slot`'s process and waits for its answer.
    async fn exchange(&self, slot: &Slot, line: Vec<u8>, flight: &mut Flight<'_>) -> Answer {
        let running = self.running(slot).await?;
        let (sent, answer) = oneshot::channel();
        flight.lines_at_send = running.lines.load(Ordering::Relaxed);
        lock(&running.pending).insert(flight.id, sent);
        flight.process = Some(Arc::clone(&running));
        // A closed queue: the writer is gone with its process, whose reader fails the calls in
        // flight, this one included.
        let _ = running.requests.send((flight.id, line)).await;
        answer.await.unwrap_or_else(|_| Err(self.stopped()))
    }

    /// Kills every process and waits until they and their readers are gone. A call that took
    /// its slot before and starts a process now sees its process killed at once.
    pub async fn stop(&self) {
        self.calls.close();
        self.stopping.cancel();
        for slot in &self.slots {
            slot.process.lock().await.take();
        }
        self.tasks.close();
        self.tasks.wait().await;
    }

    fn stopped(&self) -> CallError {
        CallError::Exited {
            program: self.program(),
            status: "stopped: the controller stops".to_owned(),
            stderr: String::new(),
        }
    }

    /// The running process of `slot`, started (after the slot's backoff) if it has none.
    async fn running(&self, slot: &Slot) -> Result<Arc<Process>, CallError> {
        let mut current = slot.process.lock().await;
        if let Some(process) = current.as_ref()
            && !process.gone.is_cancelled()
        {
            return Ok(Arc::clone(process));
        }
        if current.take().is_some() {
            let deaths = slot.deaths.fetch_add(1, Ordering::Relaxed);
            let wait = backoff(deaths);
            if !wait.is_zero() {
                tracing::debug!(controller = %self.controller, hook = %self.program(), ?wait, "restarting a persistent hook after backoff");
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = self.stopping.cancelled() => return Err(self.stopped()),
                }
            }
        }
        if self.stopping.is_cancelled() {
            return Err(self.stopped());
        }
        let process = Arc::new(self.start()?);
        *current = Some(Arc::clone(&process));
        Ok(process)
    }

    /// Starts a process (in a process group of its own) and the tasks writing its standard
    /// input and reading its standard output and error.
    fn start(&self) -> Result<Process, CallError> {
        let program = self.program();
        let mut started =
            Started::spawn(&self.command, &self.env).map_err(|source| CallError::Spawn {
                program: program.clone(),
                source,
            })?;
        self.starts.fetch_add(1, Ordering::Relaxed);
        let child = &mut started.child;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(CallError::Spawn {
                program,
                source: std::io::Error::other("no pipe to the process"),
            });
        };
        tracing::info!(controller = %self.controller, hook = %program, pid = child.id(), "persistent hook started");
        let (requests, queue) = mpsc::channel(self.per_process);
        let process = Process {
            requests,
            pending: Arc::default(),
            lines: Arc::default(),
            kill: Kill::child_of(&self.stopping),
            gone: CancellationToken::new(),
        };
        let tail = Arc::new(Mutex::new(Vec::new()));
        self.tasks.spawn(log_stderr(
            stderr,
            self.controller.clone(),
            program.clone(),
            Arc::clone(&tail),
            process.gone.clone(),
        ));
        self.tasks.spawn(write_lines(
            stdin,
            queue,
            Arc::clone(&process.pending),
            process.kill.clone(),
        ));
        let reader = Reader {
            program,
            controller: self.controller.clone(),
            limit: self.limit,
            pending: Arc::clone(&process.pending),
            lines: Arc::clone(&process.lines),
            tail,
        };
        self.tasks
            .spawn(reader.run(started, stdout, process.kill.clone(), process.gone.clone()));
        Ok(process)
    }
}

/// The one writer of a process's standard input: writes each queued line whole, skipping the
/// lines whose call stopped waiting before their turn. Only a kill interrupts a line (the
/// process dies with it); a write that fails kills the process, which can take no request.
async fn write_lines(
    mut stdin: ChildStdin,
    mut queue: mpsc::Receiver<(u64, Vec<u8>)>,
    pending: Pending,
    kill: Kill,
) {
    loop {
        let (id, line) = tokio::select! {
            () = kill.token.cancelled() => return,
            next = queue.recv() => match next {
                Some(next) => next,
                None => return,
            },
        };
        if !lock(&pending).contains_key(&id) {
            continue;
        }
        let written = tokio::select! {
            () = kill.token.cancelled() => return,
            written = stdin.write_all(&line) => written,
        };
        if written.is_err() {
            kill.kill("killed: its standard input is closed");
            return;
        }
    }
}

/// `{"id": id, "request": request}` and a newline: one line, as JSON never holds a raw newline.
fn request_line<R: serde::Serialize>(id: u64, request: &R) -> Result<Vec<u8>, CallError> {
    #[derive(serde::Serialize)]
    struct Line<'a, R> {
        id: u64,
        request: &'a R,
    }
    let mut line = serde_json::to_vec(&Line { id, request }).map_err(|e| CallError::Malformed {
        reason: excerpt(&e.to_string()),
    })?;
    line.push(b'\n');
    Ok(line)
}

/// The wait before the next start of a slot's process after `deaths` deaths without an answer.
fn backoff(deaths: u32) -> Duration {
    if deaths == 0 {
        return Duration::ZERO;
    }
    FIRST_BACKOFF
        .saturating_mul(1 << (deaths - 1).min(16))
        .min(MAX_BACKOFF)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads a process's answers and hands each to its call; at the end (the process exited or
/// is to be killed) kills its process group and fails the calls still waiting.
struct Reader {
    program: String,
    controller: String,
    limit: usize,
    pending: Pending,
    lines: Arc<AtomicU64>,
    tail: Arc<Mutex<Vec<u8>>>,
}

impl Reader {
    async fn run(
        self,
        mut process: Started,
        stdout: impl AsyncRead + Unpin,
        kill: Kill,
        gone: CancellationToken,
    ) {
        let mut stdout = BufReader::new(stdout);
        let mut line = Vec::new();
        let cap = u64::try_from(self.limit)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let ended = loop {
            line.clear();
            let mut limited = (&mut stdout).take(cap);
            let read = tokio::select! {
                () = kill.token.cancelled() => break Ended::Killed,
                read = limited.read_until(b'\n', &mut line) => read,
            };
            match read {
                Ok(0) | Err(_) => break Ended::Closed,
                Ok(_) if line.len() > self.limit && !line.ends_with(b"\n") => {
                    break Ended::TooLarge;
                }
                Ok(_) => {
                    self.lines.fetch_add(1, Ordering::Relaxed);
                    self.answer(&line);
                }
            }
        };
        // Seen gone at once: the next call starts another process rather than write here.
        gone.cancel();
        let status = match ended {
            Ended::Closed => tokio::select! {
                biased;
                status = process.child.wait() => status.map_or_else(|e| e.to_string(), |s| s.to_string()),
                () = kill.token.cancelled() => kill_now(&mut process, &kill.why()).await,
            },
            Ended::Killed => kill_now(&mut process, &kill.why()).await,
            Ended::TooLarge => kill_now(&mut process, "killed: an answer line too large").await,
        };
        // What the process left running dies with its group.
        drop(process);
        let stderr = String::from_utf8_lossy(&lock(&self.tail)).into_owned();
        tracing::info!(controller = %self.controller, hook = %self.program, %status, "persistent hook ended");
        let waiting: Vec<_> = lock(&self.pending).drain().collect();
        for (_, call) in waiting {
            let error = if matches!(ended, Ended::TooLarge) {
                CallError::TooLarge { limit: self.limit }
            } else {
                CallError::Exited {
                    program: self.program.clone(),
                    status: status.clone(),
                    stderr: excerpt_end(&stderr),
                }
            };
            let _ = call.send(Err(error));
        }
    }

    /// Hands one line to the call its id names; a line without a readable id fails the only
    /// call in flight, if there is exactly one, and is otherwise logged.
    fn answer(&self, line: &[u8]) {
        let text = line.trim_ascii();
        if text.is_empty() {
            return;
        }
        let envelope = match serde_json::from_slice::<Value>(text) {
            Ok(Value::Object(envelope)) => envelope,
            Ok(_) => return self.unattributed("not a JSON object", text),
            Err(e) => return self.unattributed(&format!("not JSON: {e}"), text),
        };
        let Some(id) = envelope.get("id").and_then(Value::as_u64) else {
            return self.unattributed("no integer \"id\"", text);
        };
        let Some(call) = lock(&self.pending).remove(&id) else {
            tracing::debug!(controller = %self.controller, hook = %self.program, id, "answer to no call in flight (past its timeout?)");
            return;
        };
        let _ = call.send(decode(envelope));
    }

    fn unattributed(&self, what: &str, line: &[u8]) {
        let reason = excerpt(&format!("{what}: {}", String::from_utf8_lossy(line)));
        let mut pending = lock(&self.pending);
        if pending.len() == 1
            && let Some(id) = pending.keys().next().copied()
            && let Some(call) = pending.remove(&id)
        {
            let _ = call.send(Err(CallError::Envelope { reason }));
            return;
        }
        tracing::warn!(controller = %self.controller, hook = %self.program, %reason, "persistent hook wrote a line that answers no call");
    }
}

/// An envelope's `response`; any other key than `id` and `response` is an error.
fn decode(mut envelope: serde_json::Map<String, Value>) -> Answer {
    if let Some(key) = envelope.keys().find(|k| *k != "id" && *k != "response") {
        return Err(CallError::Envelope {
            reason: excerpt(&format!(
                "unknown field {key:?}; write only id and response"
            )),
        });
    }
    envelope
        .remove("response")
        .ok_or_else(|| CallError::Envelope {
            reason: "no \"response\"".to_owned(),
        })
}

/// Why a reader stopped reading.
enum Ended {
    /// The process closed its standard output (it exited).
    Closed,
    /// A kill was asked for (a call's timeout, the controller's stop).
    Killed,
    /// An answer line went past the limit.
    TooLarge,
}

async fn kill_now(process: &mut Started, why: &str) -> String {
    process.kill_group();
    match process.child.wait().await {
        Ok(status) => format!("{why}; {status}"),
        Err(e) => format!("{why}; {e}"),
    }
}

mod stderr;

#[cfg(test)]
mod tests;
