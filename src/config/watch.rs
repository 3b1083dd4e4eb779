//! Hot reload of a `CacheConfig` file: validated configs published on a `tokio::sync::watch`.
//!
//! Modelled on vector's `src/config/watcher.rs` (see STYLE.md §7): the file-system watcher is
//! created before [`Watcher::new`] returns, so no change is missed; bursts of changes are
//! debounced; the paths are re-added after every change, so a `ConfigMap` volume's symlink swap
//! (`config.yaml -> ..data/config.yaml`, `..data` renamed to a new directory) is followed;
//! after a watcher error a speculative reload runs and content comparison decides.
//!
//! One edit is one outcome. The directory is watched too (for renames and symlink swaps), so
//! anything written next to the file (a log, an editor's swap file) and the several events one
//! write raises all wake the watcher; a reload that reads exactly the text it read last time
//! (or fails to read it the same way) is not a change and sends nothing. So an invalid file is
//! rejected once, not again at every event until it is fixed, as the resource source rejects a
//! spec once; and a file whose text changed but declares the running config is
//! [`ReloadOutcome::Unchanged`]. A valid file that changes what only a restart changes
//! (`spec.sharding`, see [`super::reloadable`]) is rejected like an invalid one.
//!
//! ```no_run
//! use informant::config::watch::{Options, ReloadOutcome, Watcher};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn example() -> Result<(), informant::config::watch::Error> {
//! let (watcher, mut configs) = Watcher::new("/etc/informant/config.yaml", Options::default())?;
//! let mut outcomes = watcher.subscribe();
//! let shutdown = CancellationToken::new();
//! let run = tokio::spawn(watcher.run(shutdown.child_token()));
//! configs.changed().await.ok(); // a new valid config was published
//! if let Ok(ReloadOutcome::Rejected { error }) = outcomes.recv().await {
//!     eprintln!("{error}"); // the last good config is kept
//! }
//! shutdown.cancel();
//! # run.await.ok();
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::error::Origin;
use super::load::{Validated, load, load_file_text, read};
use super::restart::reloadable;

/// How long to wait after the first change of a burst before reloading.
///
/// Same as vector's `CONFIG_WATCH_DELAY` (vectordotdev/vector `src/config/watcher.rs`): editors
/// save in several writes and the reload logic copes with a half-written file anyway.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_secs(1);

/// How many reload outcomes a slow [`Watcher::subscribe`] receiver may fall behind before it
/// loses the oldest (it then sees [`broadcast::error::RecvError::Lagged`]).
const OUTCOME_CAPACITY: usize = 64;

/// Result of starting or running a [`Watcher`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of [`Watcher::new`] and [`Watcher::run`].
///
/// Both are fatal for the watcher; a bad reload is not an error (it is a
/// [`ReloadOutcome::Rejected`]). [`Error::Load`] at start means the process has no usable
/// config: exit 64 if the file is invalid, 66 if it cannot be read ([`super::Error::Read`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be loaded and validated before watching it.
    #[error("cannot load cacheconfig file {} to start watching it", path.display())]
    Load {
        /// The file.
        path: PathBuf,
        /// Why (unreadable, not YAML, or invalid with every field error).
        #[source]
        source: super::Error,
    },

    /// The file-system watcher could not be created or could not watch a path.
    #[error("cannot watch {} for cacheconfig changes", path.display())]
    Watch {
        /// The path (the file or its directory).
        path: PathBuf,
        /// What notify said.
        #[source]
        source: notify::Error,
    },

    /// The file-system watcher stopped delivering events (its thread ended).
    #[error("the file-system watcher of cacheconfig file {} stopped", path.display())]
    WatcherStopped {
        /// The file.
        path: PathBuf,
    },
}

/// Settings of a [`Watcher`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// How long to wait after the first change of a burst before reloading; every change in
    /// that window is folded into one reload. Default [`DEFAULT_DEBOUNCE`] (1 s). Lower it for
    /// snappier reloads; zero reloads on every event batch.
    pub debounce: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            debounce: DEFAULT_DEBOUNCE,
        }
    }
}

impl Options {
    /// Sets [`Options::debounce`].
    #[must_use]
    pub fn debounce(mut self, debounce: Duration) -> Self {
        self.debounce = debounce;
        self
    }
}

/// What one reload did; sent to every [`Watcher::subscribe`] receiver.
///
/// The manager turns [`ReloadOutcome::Rejected`] into a Warning event and the `Valid=false`
/// condition; the config receiver keeps the last good config.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ReloadOutcome {
    /// A valid config that differs from the current one was published.
    Applied(Arc<Validated>),
    /// The file's text changed, but it declares the current config (a comment edited, or an
    /// invalid edit reverted); nothing was published.
    Unchanged,
    /// The file is missing, unreadable or invalid, or changes what only a restart changes
    /// (`spec.sharding`: [`super::restart_needed`]); the last good config stays published.
    Rejected {
        /// Why; [`super::Error::field_errors`] lists every field error with its path.
        error: Arc<super::Error>,
    },
}

/// Watches one `CacheConfig` file and publishes each new valid version.
///
/// Create it with [`Watcher::new`], then drive it with [`Watcher::run`]; nothing happens in
/// the background until `run` is polled, except that the file-system watcher's own thread
/// queues events so none are missed.
///
/// The file's directory is watched as well as the file itself, so any change in that
/// directory triggers a reload; content comparison keeps unrelated changes from publishing.
#[doc(alias = "hot reload")]
pub struct Watcher {
    path: PathBuf,
    dir: PathBuf,
    options: Options,
    notify: RecommendedWatcher,
    events: mpsc::UnboundedReceiver<notify::Result<notify::Event>>,
    configs: watch::Sender<Arc<Validated>>,
    outcomes: broadcast::Sender<ReloadOutcome>,
    last_read: LastRead,
}

/// What the last load read from the file: a reload that reads the same is no change.
#[derive(Debug, PartialEq, Eq)]
enum LastRead {
    /// The file's text.
    Text(String),
    /// The file could not be read, for this reason (missing, not UTF-8, no permission).
    Failed(std::io::ErrorKind),
}

impl LastRead {
    fn of(read: &std::io::Result<String>) -> Self {
        match read {
            Ok(text) => LastRead::Text(text.clone()),
            Err(error) => LastRead::Failed(error.kind()),
        }
    }
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("path", &self.path)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The state of [`Watcher::run`]'s loop.
enum State {
    /// No change seen since the last reload.
    Idle,
    /// A change was seen; reload at `deadline`, folding in every change until then.
    Debouncing {
        /// When to reload.
        deadline: Instant,
    },
}

impl Watcher {
    /// Loads and validates `path`, then starts watching it (and its directory) before
    /// returning, so a change made right after this call is seen by [`Watcher::run`].
    ///
    /// Returns the watcher and a receiver holding the loaded config; each new valid config is
    /// published to it. More receivers come from [`watch::Receiver::clone`].
    ///
    /// # Errors
    ///
    /// [`Error::Load`] if the file cannot be read or is not a valid `CacheConfig`;
    /// [`Error::Watch`] if the file-system watcher cannot be created or cannot watch the file
    /// or its directory.
    pub fn new(
        path: impl AsRef<Path>,
        options: Options,
    ) -> Result<(Self, watch::Receiver<Arc<Validated>>)> {
        let path = path.as_ref().to_owned();
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let (tx, events) = mpsc::unbounded_channel();
        let mut notify = notify::recommended_watcher(move |event| {
            // The receiver is gone only when the Watcher is dropped; nothing to do then.
            let _ = tx.send(event);
        })
        .map_err(|source| Error::Watch {
            path: path.clone(),
            source,
        })?;
        // Watch first, load second: a change between the two is then reloaded, not missed.
        let load_error = |source| Error::Load {
            path: path.clone(),
            source,
        };
        for p in [&dir, &path] {
            if let Err(source) = notify.watch(p, RecursiveMode::NonRecursive) {
                // A missing or unreadable file is a load error (the caller exits 66), not a
                // watcher failure.
                load(&path).map_err(load_error)?;
                return Err(Error::Watch {
                    path: p.clone(),
                    source,
                });
            }
        }
        let text = read(&path).map_err(load_error)?;
        let config = load_file_text(&path, &text).map_err(load_error)?;
        let (configs, rx) = watch::channel(Arc::new(config));
        let (outcomes, _) = broadcast::channel(OUTCOME_CAPACITY);
        Ok((
            Self {
                path,
                dir,
                options,
                notify,
                events,
                configs,
                outcomes,
                last_read: LastRead::Text(text),
            },
            rx,
        ))
    }

    /// A receiver of the valid configs: it holds the current one, and each new one as it is
    /// published.
    #[must_use]
    pub fn configs(&self) -> watch::Receiver<Arc<Validated>> {
        self.configs.subscribe()
    }

    /// A receiver of every [`ReloadOutcome`] from now on.
    #[must_use]
    pub fn subscribe(&self) -> broadcast::Receiver<ReloadOutcome> {
        self.outcomes.subscribe()
    }

    /// The watched file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reloads on every (debounced) change until `shutdown` is cancelled.
    ///
    /// A bad reload never ends the loop: it is sent as [`ReloadOutcome::Rejected`] (logged
    /// here at debug; the subscriber says it: the manager logs it at warn and records a
    /// Warning Event), and the last good config stays published. The same bad text is
    /// rejected once.
    ///
    /// # Errors
    ///
    /// [`Error::WatcherStopped`] if the file-system watcher stops delivering events.
    #[tracing::instrument(name = "config_reload", skip_all, fields(file.path = %self.path.display()))]
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<()> {
        let mut state = State::Idle;
        loop {
            state = match state {
                State::Idle => tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return Ok(()),
                    event = self.events.recv() => if self.on_event(event)? {
                        State::Debouncing {
                            deadline: Instant::now() + self.options.debounce,
                        }
                    } else {
                        State::Idle
                    },
                },
                State::Debouncing { deadline } => tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep_until(deadline) => {
                        // Re-add the paths first, so a change made during the reload is seen.
                        self.rewatch();
                        self.reload();
                        State::Idle
                    }
                    event = self.events.recv() => {
                        self.on_event(event)?;
                        State::Debouncing { deadline }
                    }
                },
            };
        }
    }

    /// Whether `event` calls for a reload.
    fn on_event(&self, event: Option<notify::Result<notify::Event>>) -> Result<bool> {
        match event {
            None => Err(Error::WatcherStopped {
                path: self.path.clone(),
            }),
            Some(Ok(event)) => Ok(is_change(event.kind)),
            Some(Err(error)) => {
                // As vector does: the error may hide a change, so reload speculatively and let
                // content comparison decide.
                tracing::warn!(
                    error = %crate::telemetry::error_chain(&error),
                    "file-system watcher error; reloading the cacheconfig in case it changed"
                );
                Ok(true)
            }
        }
    }

    /// Watches the directory and the file again: after an atomic rename or a symlink swap the
    /// old watch points at a deleted inode.
    fn rewatch(&mut self) {
        for p in [&self.dir, &self.path] {
            // The old watch may already be gone with its inode; that is expected.
            let _ = self.notify.unwatch(p);
            if let Err(error) = self.notify.watch(p, RecursiveMode::NonRecursive) {
                // The file may be missing mid-swap; the directory watch sees it come back.
                tracing::debug!(error = %crate::telemetry::error_chain(&error), watch.path = %p.display(), "cannot re-add watch");
            }
        }
    }

    /// Loads the file and publishes it if it is valid and different; sends nothing when it
    /// reads what the last reload read.
    fn reload(&mut self) {
        let text = std::fs::read_to_string(&self.path);
        let last_read = LastRead::of(&text);
        if last_read == self.last_read {
            // Trace, not debug: a debug log written next to the file would wake the watcher
            // again at every line.
            tracing::trace!("cacheconfig file reads as last time; nothing to reload");
            return;
        }
        self.last_read = last_read;
        let loaded = text
            .map_err(|source| super::Error::Read {
                path: self.path.clone(),
                source,
            })
            .and_then(|text| load_file_text(&self.path, &text))
            .and_then(|config| {
                let running = Arc::clone(&self.configs.borrow());
                reloadable(&running, config, Origin::File(self.path.clone()))
            });
        let outcome = match loaded {
            Ok(config) => {
                let mut applied = None;
                self.configs.send_if_modified(|current| {
                    if **current == config {
                        false
                    } else {
                        let config = Arc::new(config);
                        *current = Arc::clone(&config);
                        applied = Some(config);
                        true
                    }
                });
                if let Some(config) = applied {
                    tracing::debug!("cacheconfig reloaded");
                    ReloadOutcome::Applied(config)
                } else {
                    tracing::debug!("cacheconfig unchanged");
                    ReloadOutcome::Unchanged
                }
            }
            Err(error) => {
                tracing::debug!(
                    error = %crate::telemetry::error_chain(&error),
                    errors = error.field_errors().len(),
                    "cacheconfig rejected; keeping the last good config"
                );
                ReloadOutcome::Rejected {
                    error: Arc::new(error),
                }
            }
        };
        // No subscriber is fine: the outcome is also in the log.
        let _ = self.outcomes.send(outcome);
    }
}

/// Whether an event kind may mean the content changed. Opens and reads (including our own)
/// do not; everything else, unknown kinds included, does.
fn is_change(kind: EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, ModifyKind};

    #[test]
    fn reads_do_not_trigger_a_reload_but_writes_and_renames_do() {
        assert!(!is_change(EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(!is_change(EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(is_change(EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(is_change(EventKind::Modify(ModifyKind::Any)));
        assert!(is_change(EventKind::Create(CreateKind::File)));
        assert!(is_change(EventKind::Other));
    }

    const DOC: &str =
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\nspec: {}\n";

    /// A watcher whose event channel the test feeds, instead of the file system.
    fn fed_watcher(
        dir: &tempfile::TempDir,
    ) -> (
        Watcher,
        mpsc::UnboundedSender<notify::Result<notify::Event>>,
        watch::Receiver<Arc<Validated>>,
    ) {
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, DOC).unwrap();
        let (mut watcher, configs) = Watcher::new(&path, Options::default()).unwrap();
        let (tx, events) = mpsc::unbounded_channel();
        watcher.events = events;
        (watcher, tx, configs)
    }

    #[tokio::test(start_paused = true)]
    async fn a_watcher_error_triggers_a_speculative_reload_that_content_comparison_settles() {
        let dir = tempfile::TempDir::new().unwrap();
        let (watcher, tx, configs) = fed_watcher(&dir);
        let mut outcomes = watcher.subscribe();
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(watcher.run(shutdown.clone()));

        // A comment added: the text changed, the config did not.
        std::fs::write(dir.path().join("config.yaml"), format!("# edited\n{DOC}")).unwrap();
        tx.send(Err(notify::Error::generic("inotify queue overflow")))
            .unwrap();
        let outcome = tokio::time::timeout(Duration::from_secs(10), outcomes.recv())
            .await
            .expect("no reload after a watcher error")
            .unwrap();
        assert!(matches!(outcome, ReloadOutcome::Unchanged), "{outcome:?}");
        assert!(!configs.has_changed().unwrap());

        shutdown.cancel();
        run.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_events_within_the_debounce_window_is_one_reload() {
        let dir = tempfile::TempDir::new().unwrap();
        let (watcher, tx, _configs) = fed_watcher(&dir);
        let mut outcomes = watcher.subscribe();
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(watcher.run(shutdown.clone()));

        std::fs::write(dir.path().join("config.yaml"), format!("# edited\n{DOC}")).unwrap();
        for _ in 0..5 {
            tx.send(Ok(notify::Event::new(EventKind::Modify(ModifyKind::Any))))
                .unwrap();
        }
        let first = tokio::time::timeout(Duration::from_secs(10), outcomes.recv()).await;
        assert!(
            matches!(first, Ok(Ok(ReloadOutcome::Unchanged))),
            "{first:?}"
        );
        // A read of our own is not a change: it must not cause a second reload.
        tx.send(Ok(notify::Event::new(EventKind::Access(AccessKind::Open(
            AccessMode::Any,
        )))))
        .unwrap();
        let second = tokio::time::timeout(Duration::from_secs(10), outcomes.recv()).await;
        assert!(second.is_err(), "a second reload happened: {second:?}");

        shutdown.cancel();
        run.await.unwrap().unwrap();
    }

    /// The next outcome within 10 s of virtual time, or `None`.
    async fn next(outcomes: &mut broadcast::Receiver<ReloadOutcome>) -> Option<ReloadOutcome> {
        tokio::time::timeout(Duration::from_secs(10), outcomes.recv())
            .await
            .ok()
            .map(Result::unwrap)
    }

    fn modified() -> notify::Event {
        notify::Event::new(EventKind::Modify(ModifyKind::Any))
    }

    #[tokio::test(start_paused = true)]
    async fn the_same_invalid_text_is_rejected_once_however_many_events_follow() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("config.yaml");
        let (watcher, tx, configs) = fed_watcher(&dir);
        let mut outcomes = watcher.subscribe();
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(watcher.run(shutdown.clone()));

        std::fs::write(
            &path,
            DOC.replace("spec: {}", "spec: {syncPeriod: 90 minutes}"),
        )
        .unwrap();
        tx.send(Ok(modified())).unwrap();
        let rejected = next(&mut outcomes).await;
        assert!(
            matches!(rejected, Some(ReloadOutcome::Rejected { .. })),
            "{rejected:?}"
        );
        // What wakes the watcher without changing the file: a log line written next to it,
        // the second event of the same write.
        for _ in 0..3 {
            tx.send(Ok(modified())).unwrap();
            let again = next(&mut outcomes).await;
            assert!(
                again.is_none(),
                "the same text was reloaded again: {again:?}"
            );
        }
        // A missing file is rejected once too.
        std::fs::remove_file(&path).unwrap();
        tx.send(Ok(modified())).unwrap();
        let missing = next(&mut outcomes).await;
        assert!(
            matches!(&missing, Some(ReloadOutcome::Rejected { error }) if matches!(**error, crate::config::Error::Read { .. })),
            "{missing:?}"
        );
        tx.send(Ok(modified())).unwrap();
        assert!(next(&mut outcomes).await.is_none());
        // The running config written back: the text changed, the config did not.
        std::fs::write(&path, DOC).unwrap();
        tx.send(Ok(modified())).unwrap();
        let fixed = next(&mut outcomes).await;
        assert!(matches!(fixed, Some(ReloadOutcome::Unchanged)), "{fixed:?}");
        assert!(!configs.has_changed().unwrap());

        shutdown.cancel();
        run.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn one_edit_is_one_applied_outcome_even_when_its_events_come_in_two_batches() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("config.yaml");
        let (watcher, tx, mut configs) = fed_watcher(&dir);
        let mut outcomes = watcher.subscribe();
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(watcher.run(shutdown.clone()));

        // Nothing is sent at start.
        assert!(next(&mut outcomes).await.is_none());
        std::fs::write(&path, DOC.replace("spec: {}", "spec: {syncPeriod: 5h}")).unwrap();
        tx.send(Ok(modified())).unwrap();
        let applied = next(&mut outcomes).await;
        assert!(
            matches!(applied, Some(ReloadOutcome::Applied(_))),
            "{applied:?}"
        );
        assert!(configs.has_changed().unwrap());
        configs.mark_unchanged();
        // The same write seen by the directory's watch, after the debounce window.
        tx.send(Ok(modified())).unwrap();
        let second = next(&mut outcomes).await;
        assert!(second.is_none(), "one edit, two outcomes: {second:?}");
        assert!(!configs.has_changed().unwrap());

        shutdown.cancel();
        run.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn run_fails_when_the_file_system_watcher_stops() {
        let dir = tempfile::TempDir::new().unwrap();
        let (watcher, tx, _configs) = fed_watcher(&dir);
        drop(tx);
        let result = watcher.run(CancellationToken::new()).await;
        assert!(
            matches!(result, Err(Error::WatcherStopped { .. })),
            "{result:?}"
        );
    }

    #[test]
    fn the_default_debounce_is_vectors_one_second() {
        assert_eq!(Options::default().debounce, Duration::from_secs(1));
        assert_eq!(
            Options::default().debounce(Duration::ZERO).debounce,
            Duration::ZERO
        );
    }
}
