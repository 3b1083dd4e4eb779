//! Hot reload of a `CacheConfig` file through `config::watch` against the real file system:
//! edits, bursts, invalid and missing files, atomic renames and Kubernetes symlink swaps.
//!
//! Every wait is a channel receipt under a 10 s timeout; nothing sleeps to synchronise.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use informant::config::Validated;
use informant::config::watch::{Error, Options, ReloadOutcome, Watcher};
use tempfile::TempDir;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

/// A short debounce so tests are quick; the burst test uses a longer one.
const QUICK: Duration = Duration::from_millis(50);

/// A valid document whose `metadata.name` tells versions apart.
fn doc(name: &str) -> String {
    format!(
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: {name}}}\nspec: {{}}\n"
    )
}

/// An invalid document: a misspelt spec field.
const INVALID: &str = "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: bad}\nspec:\n  byObjects: []\n";

fn name(config: &Validated) -> String {
    config.resource.metadata.name.clone().unwrap_or_default()
}

/// A running watcher over `path`, with its receivers.
struct Running {
    configs: watch::Receiver<Arc<Validated>>,
    outcomes: broadcast::Receiver<ReloadOutcome>,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), Error>>,
}

fn start(path: &Path, debounce: Duration) -> Running {
    let (watcher, configs) = Watcher::new(path, Options::default().debounce(debounce)).unwrap();
    let outcomes = watcher.subscribe();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(watcher.run(shutdown.child_token()));
    Running {
        configs,
        outcomes,
        shutdown,
        task,
    }
}

impl Running {
    /// The next reload outcome, or a failure after [`WAIT`].
    async fn outcome(&mut self) -> ReloadOutcome {
        timeout(WAIT, self.outcomes.recv())
            .await
            .expect("no reload outcome within 10s")
            .expect("outcome channel")
    }

    /// Waits for the config named `want` to be applied. Rejections and unchanged reloads on
    /// the way are allowed (a reload may read a file mid-write); applying another config fails.
    async fn applied(&mut self, want: &str) -> Arc<Validated> {
        loop {
            match self.outcome().await {
                ReloadOutcome::Applied(config) => {
                    assert_eq!(name(&config), want, "published an unexpected config");
                    return config;
                }
                ReloadOutcome::Unchanged | ReloadOutcome::Rejected { .. } => {}
                other => panic!("unexpected outcome {other:?}"),
            }
        }
    }

    /// Waits for the next publication on the config receiver.
    async fn published(&mut self) -> Arc<Validated> {
        timeout(WAIT, self.configs.changed())
            .await
            .expect("no config published within 10s")
            .unwrap();
        Arc::clone(&self.configs.borrow_and_update())
    }

    /// Stops the watcher and checks that `run` ends cleanly.
    async fn stop(self) {
        self.shutdown.cancel();
        timeout(WAIT, self.task)
            .await
            .expect("run did not end within 10s of cancellation")
            .unwrap()
            .unwrap();
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// Writes a temporary file in the same directory and renames it over `path`.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn file_with(dir: &TempDir, text: &str) -> PathBuf {
    let path = dir.path().join("config.yaml");
    write(&path, text);
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_edit_is_published() {
    let dir = TempDir::new().unwrap();
    let path = file_with(&dir, &doc("c0"));
    let mut w = start(&path, QUICK);
    assert_eq!(name(&w.configs.borrow()), "c0");

    write(&path, &doc("c1"));
    assert_eq!(name(&*w.published().await), "c1");
    assert_eq!(name(&*w.applied("c1").await), "c1");
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_five_writes_publishes_only_the_final_content() {
    let dir = TempDir::new().unwrap();
    let path = file_with(&dir, &doc("c0"));
    // A whole second for five writes made back to back.
    let mut w = start(&path, Duration::from_secs(1));

    for i in 1..=5 {
        write(&path, &doc(&format!("c{i}")));
    }
    // `applied` fails on any other publication, so c1..c4 were never published.
    w.applied("c5").await;
    assert_eq!(name(&*w.published().await), "c5");

    // A later change proves nothing else was published in between: outcomes are ordered.
    replace(&path, &doc("c6"));
    w.applied("c6").await;
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_edit_is_rejected_with_field_paths_and_the_last_good_config_is_kept() {
    let dir = TempDir::new().unwrap();
    let path = file_with(&dir, &doc("c0"));
    let mut w = start(&path, QUICK);

    write(&path, INVALID);
    let paths = loop {
        match w.outcome().await {
            ReloadOutcome::Rejected { error } => {
                let paths: Vec<String> = error
                    .field_errors()
                    .iter()
                    .map(|e| e.path.to_string())
                    .collect();
                // A read mid-write sees a partial document; wait for the whole one.
                if paths.iter().any(|p| p == "spec.byObjects") {
                    break paths;
                }
            }
            ReloadOutcome::Unchanged => {}
            other => panic!("unexpected outcome {other:?}"),
        }
    };
    assert_eq!(paths, ["spec.byObjects"]);
    assert!(!w.configs.has_changed().unwrap());
    assert_eq!(name(&w.configs.borrow()), "c0");

    // Fixing it publishes again.
    write(&path, &doc("c1"));
    w.applied("c1").await;
    assert_eq!(name(&*w.published().await), "c1");
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewriting_identical_content_is_no_reload_and_a_comment_edit_is_unchanged() {
    let dir = TempDir::new().unwrap();
    let path = file_with(&dir, &doc("c0"));
    // No debounce: each rename below is reloaded on its own, as far as timing allows.
    let mut w = start(&path, Duration::ZERO);

    // The same text saved again is not an edit: no outcome at all (not `Unchanged`).
    replace(&path, &doc("c0"));
    // The text changed, the config did not: `Unchanged`, published nothing.
    replace(&path, &format!("# a comment\n{}", doc("c0")));
    match w.outcome().await {
        ReloadOutcome::Unchanged => {}
        other => panic!("unexpected outcome {other:?}"),
    }
    assert!(!w.configs.has_changed().unwrap());
    // The next outcome is the next edit's: nothing came of the identical save in between.
    replace(&path, &doc("c1"));
    match w.outcome().await {
        ReloadOutcome::Applied(config) => assert_eq!(name(&config), "c1"),
        other => panic!("unexpected outcome {other:?}"),
    }
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_atomic_rename_over_the_file_is_seen_and_followed() {
    let dir = TempDir::new().unwrap();
    let path = file_with(&dir, &doc("c0"));
    let mut w = start(&path, QUICK);

    replace(&path, &doc("c1"));
    assert_eq!(name(&*w.published().await), "c1");
    // The new inode is watched too: an in-place edit of it is seen.
    write(&path, &doc("c2"));
    assert_eq!(name(&*w.published().await), "c2");
    w.stop().await;
}

/// Lays out a `ConfigMap` volume as the kubelet's atomic writer does:
/// `config.yaml -> ..data/config.yaml`, `..data -> <version dir>`.
fn configmap_volume(dir: &Path, version: &str, text: &str) -> PathBuf {
    let data = dir.join(version);
    std::fs::create_dir(&data).unwrap();
    write(&data.join("config.yaml"), text);
    std::os::unix::fs::symlink(version, dir.join("..data")).unwrap();
    let path = dir.join("config.yaml");
    std::os::unix::fs::symlink("..data/config.yaml", &path).unwrap();
    path
}

/// Swaps `..data` to a new version directory atomically and removes the old one.
fn swap_version(dir: &Path, old: &str, new: &str, text: &str) {
    let data = dir.join(new);
    std::fs::create_dir(&data).unwrap();
    write(&data.join("config.yaml"), text);
    std::os::unix::fs::symlink(new, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(dir.join(old)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubernetes_configmap_symlink_swap_is_seen_and_followed() {
    let dir = TempDir::new().unwrap();
    let path = configmap_volume(dir.path(), "..2026_a", &doc("c0"));
    let mut w = start(&path, QUICK);
    assert_eq!(name(&w.configs.borrow()), "c0");

    swap_version(dir.path(), "..2026_a", "..2026_b", &doc("c1"));
    assert_eq!(name(&*w.published().await), "c1");
    // A second swap proves the watch follows the new target.
    swap_version(dir.path(), "..2026_b", "..2026_c", &doc("c2"));
    assert_eq!(name(&*w.published().await), "c2");
    // Only the re-added watch on the file (through the symlinks) sees an in-place edit of the
    // new target: the directory watch covers the volume's top level only.
    write(&dir.path().join("..2026_c").join("config.yaml"), &doc("c3"));
    assert_eq!(name(&*w.published().await), "c3");
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_file_is_rejected_and_the_last_good_config_is_kept() {
    let dir = TempDir::new().unwrap();
    let path = file_with(&dir, &doc("c0"));
    let mut w = start(&path, QUICK);

    std::fs::remove_file(&path).unwrap();
    match w.outcome().await {
        ReloadOutcome::Rejected { error } => assert!(
            matches!(*error, informant::config::Error::Read { .. }),
            "{error}"
        ),
        other => panic!("unexpected outcome {other:?}"),
    }
    assert!(!w.configs.has_changed().unwrap());
    assert_eq!(name(&w.configs.borrow()), "c0");

    // The directory watch sees it come back.
    write(&path, &doc("c1"));
    assert_eq!(name(&*w.published().await), "c1");
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_token_ends_run_promptly_even_mid_debounce() {
    let dir = TempDir::new().unwrap();
    let path = file_with(&dir, &doc("c0"));
    // An hour-long debounce: only cancellation can end run quickly.
    let w = start(&path, Duration::from_hours(1));
    write(&path, &doc("c1"));
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_or_invalid_file_at_start_is_a_load_error() {
    let dir = TempDir::new().unwrap();
    let missing = dir.path().join("missing.yaml");
    match Watcher::new(&missing, Options::default()) {
        Err(Error::Load {
            source: informant::config::Error::Read { .. },
            ..
        }) => {}
        other => panic!("expected a read error, got {other:?}"),
    }
    let invalid = file_with(&dir, INVALID);
    match Watcher::new(&invalid, Options::default()) {
        Err(Error::Load { source, .. }) => {
            assert_eq!(source.field_errors().len(), 1, "{source}");
        }
        other => panic!("expected an invalid config error, got {other:?}"),
    }
}
