//! `informant demo`: the `CronJob` story on one machine. An embedded API server, the manager
//! reading a config file, the sample `CronJob` controller, a `CronJob` that runs every second; the
//! config is edited once mid-way (a namespace added, and the recorder's key widened: `reason`
//! added to the spam key on `--api v1`, `note` added to the series key on
//! `--api events.k8s.io/v1`), and the fate of every event is tallied by reason from the event
//! spans. With `--hooks`, the `CronJob` controller is the Python exec hook
//! `examples/hooks/cronjob.py`, declared as a `Controller` document of the same config file,
//! instead of the Rust sample.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use informant::apiserver::{self, Server};
use informant::cache::Plan;
use informant::config::parse_duration;
use informant::hooks::{self, HookMetrics};
use informant::manager::{self, ConfigSource, Manager, Reload};
use informant::recorder::{Fate, Recorder};
use informant::samples::cronjob::{self, Schedule};
use informant::telemetry::FateTally;
use k8s_openapi::api::batch::v1::CronJob;
use serde_json::json;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::exit::{self, Failure};
use super::out::{out, outln};

mod config;
mod report;

use config::{
    CRONJOB_HOOK, SERIES_KEY, cache_config, config_text, cronjob, series_periods, write_atomically,
};
use report::{fate_table, humanize, print_closing, print_endpoints, print_first_phase};

/// Flags of `informant demo`.
// Reason: these doc comments are the `--help` text, where Markdown backticks would show as-is.
#[allow(clippy::doc_markdown)]
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Leave the API server and the manager running at the end, and print how to reach them
    /// (kubeconfig, metrics, status); stop with Ctrl-C.
    #[arg(long)]
    pub keep_running: bool,

    /// CronJob runs before and after the config edit.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub runs: u32,

    /// Time between two runs of a CronJob (Go duration).
    #[arg(long, default_value = "1s", value_parser = period, value_name = "DURATION")]
    pub every: Duration,

    /// Run the CronJob controller as the Python exec hook examples/hooks/cronjob.py (a
    /// Controller document in the config file, needs python3) instead of the Rust sample.
    #[arg(long)]
    pub hooks: bool,

    /// The Events API the recorder writes: v1 (client-go's tools/record: the spam filter;
    /// the edit adds reason to the spam key) or events.k8s.io/v1 (client-go's tools/events:
    /// EventSeries; the edit adds note to the series key).
    #[arg(long, value_enum, default_value_t = Api::V1, value_name = "API")]
    pub api: Api,
}

/// The Events API of the demo's recorder (`spec.recorder.api`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    /// core/v1 Events, client-go's tools/record.
    #[value(name = "v1")]
    V1,
    /// events.k8s.io/v1 Events, client-go's tools/events.
    #[value(name = "events.k8s.io/v1")]
    EventsV1,
}

impl Api {
    /// The fates the table always shows, by the label of `informant_events_total{fate}`: the
    /// ones this API's story is about. Any other fate that occurred gets a column after them.
    fn table_fates(self) -> [Fate; 3] {
        match self {
            Api::V1 => [Fate::Created, Fate::Patched, Fate::SpamFiltered],
            Api::EventsV1 => [Fate::Created, Fate::SeriesPatched, Fate::SeriesCounted],
        }
    }
}

/// A time between two runs: a Go duration longer than zero.
fn period(input: &str) -> Result<Duration, String> {
    match parse_duration(input) {
        Ok(d) if d.is_zero() => Err("must be longer than 0 (e.g. 100ms)".to_owned()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

fn software(what: &str, error: &dyn std::fmt::Display) -> Failure {
    Failure::message(exit::SOFTWARE, format!("demo: {what}: {error}"))
}

/// The demo's files, in one temporary directory: the kubeconfig, the config file and (with
/// `--hooks`) the Python hook.
struct Files {
    dir: PathBuf,
    kubeconfig: PathBuf,
    config: PathBuf,
    hook: Option<PathBuf>,
}

/// Runs the demo; `tally` is the event-span tally the telemetry layer fills.
///
/// Whatever ends the story (its end, Ctrl-C, a failure), it stops in order: the schedules,
/// then the manager (its controllers, informers and event sink), then the API server, so
/// nothing talks to a server that is gone. Its temporary directory is removed, unless
/// `--keep-running` (which prints its path).
pub async fn run(args: Args, shutdown: CancellationToken, tally: FateTally) -> exit::Result<()> {
    let dir = private_dir(&std::env::temp_dir())
        .map_err(|e| software("cannot create a directory", &e))?;
    let path = dir.path().to_owned();
    let tracker = TaskTracker::new();
    // Not a child of `shutdown`: Ctrl-C stops the manager first, the server after it.
    let server_stop = CancellationToken::new();
    let outcome = match start_api_server(&tracker, &server_stop, &path, &args).await {
        Ok(files) => story(&args, &files, &tracker, &shutdown, &tally).await,
        Err(e) => Err(e),
    };
    server_stop.cancel();
    tracker.close();
    tracker.wait().await;
    if args.keep_running {
        // Printed by the story (`its files stay in …`), removed by the user.
        let _kept = dir.keep();
    } else if let Err(e) = dir.close()
        && outcome.is_ok()
    {
        return Err(software(&format!("cannot remove {}", path.display()), &e));
    }
    outcome
}

/// A directory of the demo's own in `parent`: `informant-demo-` and a random suffix, created
/// (never reused: it fails if the name exists, and another name is tried) with mode 0700. The
/// demo runs the hook it writes there: a predictable name (the pid) would let another local
/// user create the directory first and change the hook, and a readable one would show the
/// kubeconfig. Removed when dropped.
fn private_dir(parent: &Path) -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt as _;
    tempfile::Builder::new()
        .prefix("informant-demo-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)
}

/// The manager, the schedules and the story; returns once the manager has stopped.
async fn story(
    args: &Args,
    files: &Files,
    tracker: &TaskTracker,
    shutdown: &CancellationToken,
    tally: &FateTally,
) -> exit::Result<()> {
    let client = super::cache::client(Some(&files.kubeconfig)).await?;
    let options = manager::Options {
        metrics_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        health_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        debounce: Duration::from_millis(100),
        ..manager::Options::new(ConfigSource::File(files.config.clone()))
    };
    let mut manager = Manager::new(client.clone(), options)
        .await
        .map_err(|e| super::run::failure(&e))?;
    if files.hook.is_some() {
        // Open: its one Controller runs `python3` on the hook the demo wrote, against its own
        // embedded API server, which nobody else writes to.
        hooks::add_to_manager_with(&mut manager, hooks::Policy::open());
    } else {
        cronjob::add_to(&mut manager);
    }
    let story = Story {
        args,
        files,
        client,
        recorder: manager.recorder(),
        hook_metrics: HookMetrics::of(&mut manager),
        endpoints: (manager.metrics_addr(), manager.health_addr()),
        shutdown,
        tally,
        schedules: TaskTracker::new(),
        schedules_stop: CancellationToken::new(),
    };
    let mut reloads = manager.reloads();
    let first = Arc::clone(&manager.state().snapshot().config);
    let plan = Plan::new(&first.cache).map_err(|e| software("cannot plan the cache", &e))?;
    outln!("2. The manager reads {}:", files.config.display())?;
    match args.api {
        Api::V1 => outln!(
            "   recorder: core/v1 Events (client-go's tools/record); spam key: source, \
             involvedObject, type (client-go's); cache tree:"
        )?,
        Api::EventsV1 => {
            let (refresh, finish) = series_periods(args.every);
            outln!(
                "   recorder: events.k8s.io/v1 Events (client-go's tools/events); series key: \
                 {SERIES_KEY} (client-go's: the note is not in it); series refreshed every {}, \
                 finished after {} quiet (client-go's 30m and 6m, scaled as a run every {} \
                 stands for one a minute); cache tree:",
                humanize(refresh),
                humanize(finish),
                humanize(args.every)
            )?;
        }
    }
    for line in plan.describe().to_text().lines() {
        outln!("     {line}")?;
    }
    let manager_stop = CancellationToken::new();
    let manager_done = tracker.spawn(manager.run(manager_stop.clone()));
    let told = story.tell(&mut reloads).await;
    // In order: the schedules (their writes and events), then the manager.
    story.schedules_stop.cancel();
    story.schedules.close();
    story.schedules.wait().await;
    drop(story);
    manager_stop.cancel();
    let stopped = match manager_done.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(super::run::failure(&e)),
        Err(e) => Err(software("the manager task failed", &e)),
    };
    told.and(stopped)
}

/// What the story needs while the manager runs.
struct Story<'a> {
    args: &'a Args,
    files: &'a Files,
    client: kube::Client,
    recorder: Recorder,
    hook_metrics: HookMetrics,
    endpoints: (Option<SocketAddr>, Option<SocketAddr>),
    shutdown: &'a CancellationToken,
    tally: &'a FateTally,
    /// The schedule tasks, stopped and awaited before the manager stops.
    schedules: TaskTracker,
    schedules_stop: CancellationToken,
}

impl Story<'_> {
    /// The two phases, the table, and (with `--keep-running`) the wait for Ctrl-C. Ctrl-C
    /// during a phase ends the story quietly, without the table.
    async fn tell(
        &self,
        reloads: &mut tokio::sync::broadcast::Receiver<Reload>,
    ) -> exit::Result<()> {
        let hook = self.files.hook.as_deref();
        // Before the edit: one CronJob in scope, its reasons share one spam bucket.
        print_first_phase(self.args, hook)?;
        let started = tokio::time::Instant::now();
        let team_a = self.schedule("team-a").await?;
        let Some([team_a]) = self.phase([team_a]).await? else {
            return Ok(());
        };
        let before = settled(self.tally, self.args.every).await;
        let first_phase = started.elapsed();

        // The edit, while no schedule runs: every event before it is counted before it.
        let (api, every) = (self.args.api, self.args.every);
        write_atomically(
            &self.files.config,
            &config_text(&cache_config(api, every, true), hook),
        )?;
        let widened = match api {
            Api::V1 => "reason added to the spam key",
            Api::EventsV1 => "note added to the series key",
        };
        outln!("4. Config edited: team-b added to both kinds, {widened}.")?;
        let summary = applied_summary(reloads).await?;
        outln!("   reloaded: {summary}")?;
        let now = match api {
            Api::V1 => "each reason now has its own bucket",
            Api::EventsV1 => "each note is now an Event of its own",
        };
        outln!("5. CronJob team-b/hello runs too; {now}.")?;
        let team_b = self.schedule("team-b").await?;
        if self.phase([team_a, team_b]).await?.is_none() {
            return Ok(());
        }
        let after = settled(self.tally, self.args.every).await;

        outln!(
            "\n6. Fates of every event recorded, by reason and fate (the labels of \
             informant_events_total{{fate}}), tallied from the event spans; {} runs of each \
             CronJob in each phase:\n",
            self.args.runs
        )?;
        out!("{}", fate_table(self.args.api, &before, &after))?;
        print_closing(
            self.args.api,
            hook.is_some(),
            &self.hook_metrics,
            &before,
            first_phase,
        )?;
        if self.args.keep_running {
            let (metrics, health) = self.endpoints;
            print_endpoints(&self.files.kubeconfig, metrics, health)?;
            outln!(
                "  (its files stay in {} after it stops)",
                self.files.dir.display()
            )?;
            self.shutdown.cancelled().await;
        }
        Ok(())
    }

    /// The schedule of the seeded `CronJob` `namespace/hello`.
    async fn schedule(&self, namespace: &str) -> exit::Result<Schedule> {
        let cronjob = cronjob_object(&self.client, namespace).await?;
        Ok(Schedule::new(
            self.client.clone(),
            self.recorder.clone(),
            cronjob,
        ))
    }

    /// Runs `args.runs` runs of each schedule at once and gives them back, or `None` when
    /// Ctrl-C came first.
    async fn phase<const N: usize>(
        &self,
        schedules: [Schedule; N],
    ) -> exit::Result<Option<[Schedule; N]>> {
        let tasks = schedules.map(|schedule| {
            self.schedules.spawn(run_ticks(
                schedule,
                self.args.runs,
                self.args.every,
                self.schedules_stop.clone(),
            ))
        });
        let all = futures::future::join_all(tasks);
        let done = tokio::select! {
            () = self.shutdown.cancelled() => return Ok(None),
            done = all => done,
        };
        let mut back = Vec::with_capacity(N);
        for result in done {
            let schedule = result
                .map_err(|e| software("a schedule task failed", &e))?
                .map_err(|e| software("a schedule failed", &e))?;
            back.push(schedule);
        }
        Ok(back.try_into().ok())
    }
}

/// Runs `runs` runs of `schedule`, one every `every` (the first at once), unless `stop` comes
/// first, and gives the schedule back (its last Job completes at its next run).
async fn run_ticks(
    mut schedule: Schedule,
    runs: u32,
    every: Duration,
    stop: CancellationToken,
) -> Result<Schedule, cronjob::Error> {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for _ in 0..runs {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = ticks.tick() => {}
        }
        let job = schedule.tick().await?;
        tracing::info!(job, "cronjob schedule created a job");
    }
    Ok(schedule)
}

/// How long no event may end before the tally counts as settled: longer than the controller
/// (or the Python hook) takes to answer the last run.
const SETTLE: Duration = Duration::from_secs(1);

/// The most the demo waits for the tally to settle, at the least.
const SETTLE_MAX: Duration = Duration::from_secs(30);

/// The tally once every event recorded so far has its fate and none has ended for [`SETTLE`]:
/// the recorder, the controller and the hook have nothing left in flight from the runs so far.
/// On events.k8s.io/v1 an occurrence folded into a series' count waits for the series' finish
/// (6–12 runs after its last occurrence). At most [`SETTLE_MAX`], or 20 runs if longer.
async fn settled(tally: &FateTally, every: Duration) -> BTreeMap<(String, String), u64> {
    let deadline = tokio::time::Instant::now() + SETTLE_MAX.max(every.saturating_mul(20));
    let mut last = tally.snapshot();
    loop {
        tokio::time::sleep(SETTLE).await;
        let now = tally.snapshot();
        if (now == last && tally.in_flight() == 0) || tokio::time::Instant::now() >= deadline {
            return now;
        }
        last = now;
    }
}

/// Starts the seeded API server on `tracker` (stopped by `stop`) and writes its kubeconfig, the
/// first config and (with `--hooks`) the Python hook into `dir`.
async fn start_api_server(
    tracker: &TaskTracker,
    stop: &CancellationToken,
    dir: &Path,
    args: &Args,
) -> exit::Result<Files> {
    let config = apiserver::Config {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        seeds: vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}}),
            cronjob("team-a"),
            cronjob("team-b"),
        ],
        ..apiserver::Config::default()
    };
    let server = Server::bind(config)
        .await
        .map_err(|e| software("cannot start the API server", &e))?;
    let addr = server.local_addr();
    tracker.spawn(server.run(stop.clone()));
    let kubeconfig = dir.join("kubeconfig");
    apiserver::write_kubeconfig(&kubeconfig, &apiserver::kubeconfig(addr)).map_err(|e| {
        Failure::message(exit::SOFTWARE, format!("demo: {}", exit::error_chain(&e)))
    })?;
    let hook = if args.hooks {
        let path = dir.join("cronjob.py");
        std::fs::write(&path, CRONJOB_HOOK).map_err(|e| software("cannot write the hook", &e))?;
        Some(path)
    } else {
        None
    };
    let config = dir.join("cacheconfig.yaml");
    write_atomically(
        &config,
        &config_text(&cache_config(args.api, args.every, false), hook.as_deref()),
    )?;
    outln!("informant demo: the CronJob story, on an embedded API server (no cluster)\n")?;
    outln!("1. API server on {addr}: namespaces team-a and team-b, CronJob hello in each.")?;
    Ok(Files {
        dir: dir.to_owned(),
        kubeconfig,
        config,
        hook,
    })
}

/// Waits for the reload of the edited config and returns its summary.
async fn applied_summary(
    reloads: &mut tokio::sync::broadcast::Receiver<Reload>,
) -> exit::Result<String> {
    loop {
        match tokio::time::timeout(Duration::from_secs(30), reloads.recv()).await {
            Ok(Ok(Reload::Applied { summary, .. })) => return Ok(summary),
            Ok(Ok(Reload::Rejected { errors })) => {
                return Err(software(
                    "the edited config was rejected",
                    &errors.join("; "),
                ));
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(software("reload notifications ended", &e)),
            Err(_) => return Err(software("no reload within 30s", &"timeout")),
        }
    }
}

async fn cronjob_object(client: &kube::Client, namespace: &str) -> exit::Result<CronJob> {
    kube::Api::<CronJob>::namespaced(client.clone(), namespace)
        .get("hello")
        .await
        .map_err(|e| software("cannot read the seeded CronJob", &e))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::private_dir;

    /// Issue #33 item 7: `/tmp/informant-demo-<pid>` was made with `create_dir_all`, which
    /// takes a directory another local user created first.
    #[test]
    fn each_demo_gets_a_fresh_directory_only_its_user_can_enter() {
        let parent = tempfile::tempdir().unwrap();
        // The old predictable name, prepared by someone else: never used.
        let old = parent
            .path()
            .join(format!("informant-demo-{}", std::process::id()));
        std::fs::create_dir(&old).unwrap();
        let first = private_dir(parent.path()).unwrap();
        let second = private_dir(parent.path()).unwrap();
        for dir in [&first, &second] {
            let name = dir.path().file_name().unwrap().to_str().unwrap();
            assert!(name.starts_with("informant-demo-"), "{name}");
            assert_ne!(dir.path(), old, "the predictable name is not taken over");
            let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{name}: {mode:o}");
        }
        assert_ne!(first.path(), second.path(), "two demos, two directories");
        let path = first.path().to_owned();
        first.close().unwrap();
        assert!(!path.exists(), "removed at the end");
    }
}
