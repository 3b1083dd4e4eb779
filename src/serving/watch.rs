//! [`CertWatcher`]: re-reads a certificate directory when it changes and swaps the new pair
//! into the [`CertificateCell`], as controller-runtime's `pkg/certwatcher` does, so a renewed
//! certificate (cert-manager rewriting its Secret, the kubelet updating the volume) is served
//! without a restart.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::cert::{self, CertificateCell};
use super::error::{Error, Result};

/// How often the files are re-read even when no change was seen: controller-runtime's
/// certwatcher `defaultWatchInterval` (10 s). A change notification can be missed (an
/// overflowed inotify queue, a file system without notifications); the poll bounds how long
/// an old certificate is served then.
pub const POLL_INTERVAL: Duration = Duration::from_secs(10);

/// Watches a certificate directory and keeps its [`CertificateCell`] current.
///
/// It watches the directory, not the files: a Kubernetes Secret volume publishes a new
/// version by swapping its `..data` symlink (the files are symlinks into it), which a watch
/// on a file's old inode would never see; a change in the directory is then a reason to read
/// both files again. A pair that does not load (a file half-written, a key that is not the
/// certificate's) is logged at warn and the previous one stays served; the same bad content
/// is reported once.
///
/// ```no_run
/// # async fn demo() -> Result<(), informant::serving::Error> {
/// use informant::serving::CertWatcher;
/// use tokio_util::sync::CancellationToken;
///
/// let watcher = CertWatcher::new("/tmp/k8s-metrics-server/metrics-certs".as_ref(), "tls.crt", "tls.key")?;
/// let cell = watcher.cell(); // hand to informant::serving::server_config
/// let shutdown = CancellationToken::new();
/// watcher.run(shutdown.child_token()).await;
/// # Ok(()) }
/// ```
pub struct CertWatcher {
    cell: Arc<CertificateCell>,
    dir: PathBuf,
    cert_path: PathBuf,
    key_path: PathBuf,
    poll: Duration,
    notify: RecommendedWatcher,
    events: mpsc::UnboundedReceiver<notify::Result<notify::Event>>,
    /// The bytes last read (loaded or refused), so an unchanged pair is not parsed or
    /// reported again.
    last: (Vec<u8>, Vec<u8>),
}

impl std::fmt::Debug for CertWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertWatcher")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })
}

impl CertWatcher {
    /// Starts watching `dir`, then reads `dir/cert_name` and `dir/key_name` (in that order, so
    /// a change between the two is seen). Nothing is polled until [`CertWatcher::run`].
    ///
    /// # Errors
    ///
    /// [`Error::Read`] when a file cannot be read, [`Error::NoCertificate`], [`Error::NoKey`]
    /// or [`Error::Pair`] when they do not load, [`Error::Watch`] when the directory cannot be
    /// watched.
    pub fn new(dir: &Path, cert_name: &str, key_name: &str) -> Result<Self> {
        let cert_path = dir.join(cert_name);
        let key_path = dir.join(key_name);
        let (tx, events) = mpsc::unbounded_channel();
        let watch_error = |source| Error::Watch {
            path: dir.to_owned(),
            source,
        };
        let mut notify = notify::recommended_watcher(move |event| {
            // The receiver is gone only when the watcher is dropped; nothing to do then.
            let _ = tx.send(event);
        })
        .map_err(watch_error)?;
        if let Err(source) = notify.watch(dir, RecursiveMode::NonRecursive) {
            // A missing directory is a missing file to the user.
            read(&cert_path)?;
            return Err(watch_error(source));
        }
        let cert_pem = read(&cert_path)?;
        let key_pem = read(&key_path)?;
        let loaded = cert::from_pem(&cert_pem, &key_pem, &cert_path, &key_path)?;
        Ok(Self {
            cell: Arc::new(CertificateCell::new(loaded)),
            dir: dir.to_owned(),
            cert_path,
            key_path,
            poll: POLL_INTERVAL,
            notify,
            events,
            last: (cert_pem, key_pem),
        })
    }

    /// Polls every `interval` instead of [`POLL_INTERVAL`].
    #[must_use]
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll = interval;
        self
    }

    /// The cell the watcher keeps current.
    #[must_use]
    pub fn cell(&self) -> Arc<CertificateCell> {
        Arc::clone(&self.cell)
    }

    /// Re-reads the pair at every change in the directory and every poll until `shutdown` is
    /// cancelled. Never fails: a watch error leaves the poll, a bad pair the old certificate.
    #[tracing::instrument(name = "cert_watch", skip_all, fields(file.path = %self.dir.display()))]
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut ticker = tokio::time::interval(self.poll);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ticker.tick().await;
        tracing::info!(
            poll_interval_seconds = self.poll.as_secs_f64(),
            "watching the serving certificate for changes"
        );
        let mut notifying = true;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                event = self.events.recv(), if notifying => match event {
                    Some(Ok(event)) if may_change_contents(event.kind) => self.reload(),
                    Some(Ok(_)) => {}
                    Some(Err(error)) => {
                        tracing::warn!(
                            error = %crate::telemetry::error_chain(&error),
                            "the certificate directory's watch failed; it is still re-read every poll"
                        );
                        // Re-adding the watch follows a directory that was replaced.
                        let _ = self.notify.unwatch(&self.dir);
                        let _ = self.notify.watch(&self.dir, RecursiveMode::NonRecursive);
                        self.reload();
                    }
                    None => {
                        tracing::warn!("the certificate directory's watch stopped; it is still re-read every poll");
                        notifying = false;
                    }
                },
                _ = ticker.tick() => self.reload(),
            }
        }
    }

    /// Reads the pair; swaps it in when it changed and loads.
    fn reload(&mut self) {
        let read_both = read(&self.cert_path).and_then(|c| Ok((c, read(&self.key_path)?)));
        let (cert_pem, key_pem) = match read_both {
            Ok(pair) => pair,
            Err(error) => {
                tracing::warn!(
                    error = %crate::telemetry::error_chain(&error),
                    "cannot re-read the serving certificate; the current one stays served"
                );
                return;
            }
        };
        if (&cert_pem, &key_pem) == (&self.last.0, &self.last.1) {
            return;
        }
        match cert::from_pem(&cert_pem, &key_pem, &self.cert_path, &self.key_path) {
            Ok(loaded) => {
                self.cell.replace(loaded);
                tracing::info!("serving the new certificate");
            }
            Err(error) => tracing::warn!(
                error = %crate::telemetry::error_chain(&error),
                "the new serving certificate does not load; the current one stays served"
            ),
        }
        self.last = (cert_pem, key_pem);
    }
}

/// Whether an event can mean new contents: anything but reads (reading the files ourselves
/// would otherwise be a change).
fn may_change_contents(kind: EventKind) -> bool {
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
    fn reads_are_not_changes_but_writes_renames_and_creations_are() {
        assert!(!may_change_contents(EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(!may_change_contents(EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(may_change_contents(EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(may_change_contents(EventKind::Modify(ModifyKind::Any)));
        assert!(may_change_contents(EventKind::Create(CreateKind::File)));
    }
}
