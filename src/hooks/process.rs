//! Hook processes: each exec hook (per call or persistent) starts with a clean environment
//! ([`HOOK_ENV`] and what its Controller declares in `exec.env`) in a process group of its own, which is killed as a whole (its children and theirs) when the call times out, when the
//! hook is stopped and when the call ends; the orphans a hook leaves are reaped by the
//! manager ([`reap_orphans`]).
//!
//! The image has no init, and informant runs as PID 1 in it: every process whose parent dies
//! is given to it, and a process nobody waits for stays a `<defunct>` entry until the PID
//! space runs out. The manager reaps them itself rather than shipping an init in the image
//! (tini, dumb-init) because the manager is also run outside that image (a user's image
//! `FROM` it, `docker run` without `--init`, a binary on a host), and because it knows which
//! of its children are its own: it marks itself a child subreaper
//! (`prctl(PR_SET_CHILD_SUBREAPER)`, so that a hook's orphans come to it and not to the
//! host's init when it is not PID 1) and reaps, on each `SIGCHLD`, every zombie child that
//! sits in another process group than its own and that it did not start itself (those are
//! waited for by whoever started them: tokio for a hook's own process, a library's
//! `std::process::Command` in the manager's group).

use std::collections::BTreeSet;
use std::process::Stdio;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rustix::process::{Pid, Signal, WaitOptions};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

/// How often orphans are looked for with no `SIGCHLD` seen (signals of several exits merge
/// into one; a missed one costs at most this).
const REAP_EVERY: Duration = Duration::from_secs(5);

/// The hook processes started and not yet released ([`Started`]): the reaper leaves them to
/// tokio, which waits for them. Process-wide by nature, as the children of a process are:
/// the spawn and the reaper must agree on them whichever `Controller` started one.
static STARTED: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

fn started() -> std::sync::MutexGuard<'static, BTreeSet<i32>> {
    STARTED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A hook process: its handle and its process group, killed (every member, `SIGKILL`) when
/// this is dropped or [`Started::kill_group`] is called.
pub(super) struct Started {
    /// The hook's own process (the leader of the group).
    pub(super) child: Child,
    group: Option<Pid>,
}

impl Started {
    /// Starts `command` (a program and its arguments) in a process group of its own, its
    /// standard input, output and error piped, killed if dropped; its environment the
    /// [`HOOK_ENV`] variables of the manager's and `env` (which wins for a name of both).
    ///
    /// # Errors
    /// The spawn's.
    pub(super) fn spawn(command: &[String], env: &[(String, String)]) -> std::io::Result<Self> {
        let program = command.first().map(String::as_str).unwrap_or_default();
        let mut builder = Command::new(program);
        builder
            .args(command.iter().skip(1))
            .env_clear()
            .envs(clean_env(|name| std::env::var_os(name)))
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // Held across the spawn: the reaper cannot take the new process for an orphan
        // between its start and its entry.
        let mut started = started();
        let child = builder.spawn()?;
        let group = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw);
        if let Some(pid) = group {
            started.insert(pid.as_raw_pid());
        }
        Ok(Self { child, group })
    }

    /// Kills every process of the group, and the hook's own process (if not yet waited for)
    /// whether or not it is still in it. Idempotent.
    pub(super) fn kill_group(&mut self) {
        if let Some(group) = self.group {
            // ESRCH: the group is empty, nothing to kill.
            let _ = rustix::process::kill_process_group(group, Signal::KILL);
        }
        let _ = self.child.start_kill();
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        // The group before the leader is released: while the leader is not waited for, its
        // PID (the group's ID) cannot be given to another process.
        self.kill_group();
        if let Some(group) = self.group {
            started().remove(&group.as_raw_pid());
        }
    }
}

/// The variables of the manager's environment a hook gets: where programs are, the home
/// directory, the language and the time zone. Nothing else: the manager's environment holds
/// what hooks must not see (OTLP headers with their credentials, the chart's `extraEnv`).
pub const HOOK_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TZ"];

/// `PATH` when the manager has none (the image sets none: distroless's default).
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The environment of a hook process, from the manager's (`get`): the [`HOOK_ENV`] variables
/// it has, and a default `PATH`.
pub(super) fn clean_env(
    get: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Vec<(&'static str, std::ffi::OsString)> {
    HOOK_ENV
        .iter()
        .filter_map(|&name| match get(name) {
            Some(value) => Some((name, value)),
            None if name == "PATH" => Some((name, DEFAULT_PATH.into())),
            None => None,
        })
        .collect()
}

/// Reaps, until `shutdown`, the orphans hook processes leave (see the module's doc); marks
/// the manager a child subreaper first, so that they come to it.
pub async fn reap_orphans(shutdown: CancellationToken) {
    if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        tracing::debug!(error = %e, "cannot become a child subreaper: orphans of hooks go to the system's init");
    }
    let mut signals = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child()) {
        Ok(signals) => Some(signals),
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch SIGCHLD: orphans of hooks are reaped every 5s");
            None
        }
    };
    let mut every = tokio::time::interval(REAP_EVERY);
    loop {
        let sigchld = async {
            match signals.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = sigchld => {}
            _ = every.tick() => {}
        }
        let reaped = tokio::task::spawn_blocking(reap_once).await.unwrap_or(0);
        if reaped > 0 {
            tracing::debug!(reaped, "orphans of hooks reaped");
        }
    }
}

/// Reaps the zombie children that are orphans of hook processes, once; how many.
#[must_use]
pub fn reap_once() -> usize {
    let me = rustix::process::getpid().as_raw_pid();
    let my_group = stat(me).map_or(0, |s| s.group);
    let candidates: Vec<i32> = children(me)
        .into_iter()
        .filter(|&pid| stat(pid).is_some_and(|s| s.parent == me && s.zombie && s.group != my_group))
        .collect();
    if candidates.is_empty() {
        return 0;
    }
    let started = started();
    candidates
        .into_iter()
        .filter(|pid| !started.contains(pid))
        .filter_map(Pid::from_raw)
        .filter(|&pid| {
            matches!(
                rustix::process::waitpid(Some(pid), WaitOptions::NOHANG),
                Ok(Some(_))
            )
        })
        .count()
}

/// What [`reap_once`] reads of `/proc/<pid>/stat`.
struct Stat {
    parent: i32,
    group: i32,
    zombie: bool,
}

fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (in parentheses) may hold spaces and parentheses: the fields that
    // follow start after its last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    Some(Stat {
        parent,
        group,
        zombie: state == "Z",
    })
}

/// The children of process `me`: from `/proc/<me>/task/*/children` where the kernel has it,
/// else every process of `/proc` (the reaper's caller filters them by parent).
fn children(me: i32) -> Vec<i32> {
    let numbers = |dir: &str| -> Vec<i32> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let tasks = numbers(&format!("/proc/{me}/task"));
    let mut listed = false;
    let mut children = Vec::new();
    for task in tasks {
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{me}/task/{task}/children")) {
            listed = true;
            children.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    if listed { children } else { numbers("/proc") }
}

#[cfg(test)]
mod tests;
