//! The `CronJob` story: a `CronJob`'s child Jobs complete; the `CronJob`
//! controller records `SawCompletedJob` (`Saw completed job: <job>, status: Complete`) and,
//! past `successfulJobsHistoryLimit`, deletes the oldest completed Jobs, recording
//! `SuccessfulDelete` (`Deleted job <job>`), all on the parent `CronJob`. With client-go's
//! spam key (source + involved object) those events share one token bucket with
//! `SuccessfulCreate` and fall silent after about nine runs; adding `reason` to the key
//! (`spec.recorder.correlator.spamKeyFields`) keeps them.
//!
//! Two halves:
//! - [`Reconciler`], the controller: `for` `CronJob`, `owns` Job. It reconciles the
//!   `CronJob`, not each Job, because both decisions are the parent's: the events are
//!   recorded on it, and which completed Jobs to delete depends on all of its Jobs at once
//!   (oldest first beyond the limit), which per-Job reconciles would race over. Kubernetes'
//!   `CronJobControllerV2` syncs per `CronJob` for the same reason.
//! - [`Schedule`] / [`simulate_schedule`], the fake scheduler of the demo: every tick it
//!   completes the previous Job through the status subresource and creates the next one,
//!   owned by the `CronJob`, recording `SuccessfulCreate` (`Created job <job>`).
//!
//! ```no_run
//! # async fn demo(ctx: informant::controller::Context, cronjob: k8s_openapi::api::batch::v1::CronJob)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use informant::samples::cronjob;
//! use tokio_util::sync::CancellationToken;
//!
//! let shutdown = CancellationToken::new();
//! let (client, recorder) = (ctx.client().clone(), ctx.recorder().clone());
//! tokio::try_join!(
//!     async { cronjob::run(ctx, None, shutdown.clone()).await.map_err(Box::<dyn std::error::Error>::from) },
//!     async {
//!         cronjob::simulate_schedule(client, recorder, cronjob, Duration::from_secs(60), shutdown.clone())
//!             .await
//!             .map_err(Box::<dyn std::error::Error>::from)
//!     },
//! )?;
//! # Ok(())
//! # }
//! ```

use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{Api, DeleteParams};
use kube::{Resource, ResourceExt};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use tokio_util::sync::CancellationToken;

use crate::cache::{self, ListOptions};
use crate::controller::ControllerMetrics;
use crate::controller::{self, Action, Context, Controller, default_error_policy};
use crate::recorder::EventType;

mod schedule;

pub use schedule::{Schedule, simulate_schedule};

/// The controller's name: its span field, metrics label and, in the demo, its recorder
/// component.
///
/// Kubernetes `pkg/controller/cronjob/cronjob_controllerv2.go` records as `cronjob-controller`.
pub const NAME: &str = "cronjob-controller";

/// How many completed Jobs a `CronJob` keeps when `spec.successfulJobsHistoryLimit` is unset.
///
/// Kubernetes `pkg/apis/batch/v1/defaults.go` `SetDefaults_CronJob`.
pub const DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT: i32 = 3;

/// Why a reconcile or a schedule tick failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Jobs could not be listed through the cache.
    #[error("cannot list the jobs of cronjob {namespace}/{name} through the cache")]
    ListJobs {
        /// The `CronJob`'s namespace.
        namespace: String,
        /// The `CronJob`.
        name: String,
        /// Why (boxed: cache errors are large and this one is rare).
        #[source]
        source: Box<cache::Error>,
    },
    /// A Job could not be deleted.
    #[error("cannot delete job {namespace}/{name}")]
    Delete {
        /// The Job's namespace.
        namespace: String,
        /// The Job.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A Job could not be created.
    #[error("cannot create job {namespace}/{name}")]
    Create {
        /// The Job's namespace.
        namespace: String,
        /// The Job.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A Job's status could not be written.
    #[error("cannot write the status of job {namespace}/{name}")]
    Status {
        /// The Job's namespace.
        namespace: String,
        /// The Job.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The `CronJob` lacks a namespace, name or uid (it was not read from the API server).
    #[error("cronjob {name:?} has no {missing}")]
    Incomplete {
        /// The `CronJob`'s name, if it has one.
        name: Option<String>,
        /// `metadata.namespace`, `metadata.name` or `metadata.uid`.
        missing: &'static str,
    },
}

/// The identity of a `CronJob`: namespace, name, uid.
fn identity(cronjob: &CronJob) -> Result<(String, String, String), Error> {
    let meta = cronjob.meta();
    let missing = |missing| Error::Incomplete {
        name: meta.name.clone(),
        missing,
    };
    Ok((
        meta.namespace
            .clone()
            .ok_or_else(|| missing("metadata.namespace"))?,
        meta.name.clone().ok_or_else(|| missing("metadata.name"))?,
        meta.uid.clone().ok_or_else(|| missing("metadata.uid"))?,
    ))
}

/// Whether `job` finished successfully: a `Complete=True` condition or a succeeded pod.
#[must_use]
pub fn is_complete(job: &Job) -> bool {
    let Some(status) = &job.status else {
        return false;
    };
    let complete = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Complete" && c.status == "True");
    complete || status.succeeded.unwrap_or(0) >= 1
}

/// Whether `job`'s controller owner is the object with `uid`.
fn controlled_by(job: &Job, uid: &str) -> bool {
    job.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// Kubernetes' `byJobStartTime`: by start time, Jobs without one last, then by name.
fn by_start_time(a: &Job, b: &Job) -> std::cmp::Ordering {
    let start = |job: &Job| job.status.as_ref().and_then(|s| s.start_time.clone());
    match (start(a), start(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    }
    .then_with(|| a.name_any().cmp(&b.name_any()))
}

/// What the controller already did for the Jobs of one `CronJob`, by Job uid.
#[derive(Debug, Default)]
struct Seen {
    completed: HashSet<String>,
    deleted: HashSet<String>,
}

/// The `CronJob` controller's reconcile. It remembers, per `CronJob`, the uids of the Jobs
/// it recorded as completed and those it deleted, so reconciling again records and deletes
/// nothing new; a uid is forgotten once its Job leaves the cache. A restarted controller
/// starts with an empty memory and records `SawCompletedJob` again for the completed Jobs
/// still kept (as the Kubernetes controller does for Jobs still in `status.active`); the
/// memory of a deleted `CronJob` stays until the controller restarts (two small sets).
#[derive(Debug, Default)]
pub struct Reconciler {
    seen: Mutex<HashMap<String, Seen>>,
}

/// What one reconcile decided under the lock, done after it.
struct Plan {
    saw: Vec<String>,
    delete: Vec<(String, String)>,
}

impl Reconciler {
    /// A reconciler that has seen nothing.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The controller this reconciler runs in: `for` `CronJob`, `owns` Job.
    #[must_use]
    pub fn controller() -> Controller<CronJob> {
        Controller::new(NAME).owns::<Job>()
    }

    /// Reconciles `cronjob`: records `SawCompletedJob` once for each of its completed Jobs,
    /// then deletes its oldest completed Jobs beyond `spec.successfulJobsHistoryLimit`
    /// (default 3), recording `SuccessfulDelete` for each. Jobs are read through the cache.
    ///
    /// # Errors
    /// [`Error::ListJobs`] when the cache can not list Jobs, [`Error::Delete`] when a delete
    /// fails (the remaining ones are retried by the next reconcile).
    pub async fn reconcile(
        &self,
        cronjob: Arc<CronJob>,
        ctx: Arc<Context>,
    ) -> Result<Action, Error> {
        let (namespace, name, uid) = identity(&cronjob)?;
        let options = ListOptions {
            namespace: Some(namespace.clone()),
            ..ListOptions::default()
        };
        let mut jobs: Vec<Job> = ctx
            .list::<Job>(&options)
            .await
            .map_err(|source| Error::ListJobs {
                namespace: namespace.clone(),
                name: name.clone(),
                source: Box::new(source),
            })?
            .into_iter()
            .filter(|job| controlled_by(job, &uid))
            .collect();
        jobs.sort_by(by_start_time);
        let limit = cronjob
            .spec
            .as_ref()
            .and_then(|s| s.successful_jobs_history_limit)
            .unwrap_or(DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT);
        let plan = self.plan(&uid, &jobs, usize::try_from(limit).unwrap_or(0));

        for job in &plan.saw {
            let message = format!("Saw completed job: {job}, status: Complete");
            ctx.record(
                cronjob.as_ref(),
                EventType::Normal,
                "SawCompletedJob",
                &message,
            );
        }
        let api: Api<Job> = Api::namespaced(ctx.client().clone(), &namespace);
        for (job, job_uid) in plan.delete {
            match api.delete(&job, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                Err(source) => {
                    return Err(Error::Delete {
                        namespace,
                        name: job,
                        source,
                    });
                }
            }
            self.mark_deleted(&uid, job_uid);
            let message = format!("Deleted job {job}");
            ctx.record(
                cronjob.as_ref(),
                EventType::Normal,
                "SuccessfulDelete",
                &message,
            );
        }
        Ok(Action::await_change())
    }

    fn mark_deleted(&self, cronjob_uid: &str, job_uid: String) {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(cronjob_uid.to_owned())
            .or_default()
            .deleted
            .insert(job_uid);
    }

    /// Decides, from the `CronJob`'s Jobs sorted oldest first, which completions to record
    /// and which Jobs to delete, and remembers the completions.
    fn plan(&self, cronjob_uid: &str, jobs: &[Job], limit: usize) -> Plan {
        let mut all = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let seen = all.entry(cronjob_uid.to_owned()).or_default();
        let present: HashSet<&str> = jobs
            .iter()
            .filter_map(|j| j.metadata.uid.as_deref())
            .collect();
        seen.completed.retain(|uid| present.contains(uid.as_str()));
        seen.deleted.retain(|uid| present.contains(uid.as_str()));

        let completed: Vec<(&Job, &str)> = jobs
            .iter()
            .filter(|job| is_complete(job))
            .filter_map(|job| Some((job, job.metadata.uid.as_deref()?)))
            .collect();
        let mut saw = Vec::new();
        for (job, uid) in &completed {
            if seen.completed.insert((*uid).to_owned()) {
                saw.push(job.name_any());
            }
        }
        let kept: Vec<&(&Job, &str)> = completed
            .iter()
            .filter(|(_, uid)| !seen.deleted.contains(*uid))
            .collect();
        let excess = kept.len().saturating_sub(limit);
        let delete = kept[..excess]
            .iter()
            .map(|(job, uid)| (job.name_any(), (*uid).to_owned()))
            .collect();
        Plan { saw, delete }
    }
}

/// Adds the `CronJob` controller ([`Reconciler::controller`], [`Reconciler::reconcile`],
/// controller-runtime's error backoff) to `manager`: it runs on the leader, through the
/// manager's cache tree and recorder, counted in its controller metrics.
pub fn add_to(manager: &mut crate::manager::Manager) {
    let reconciler = Arc::new(Reconciler::new());
    Reconciler::controller().add_to(
        manager,
        move |cronjob, ctx| {
            let reconciler = Arc::clone(&reconciler);
            async move { reconciler.reconcile(cronjob, ctx).await }
        },
        default_error_policy,
    );
}

/// Runs the `CronJob` controller ([`Reconciler::controller`], [`Reconciler::reconcile`],
/// controller-runtime's error backoff) until `shutdown`, counted in `metrics` when given.
///
/// # Errors
/// As [`Controller::run`].
pub async fn run(
    ctx: Context,
    metrics: Option<&ControllerMetrics>,
    shutdown: CancellationToken,
) -> controller::Result<()> {
    let reconciler = Arc::new(Reconciler::new());
    let mut controller = Reconciler::controller();
    if let Some(metrics) = metrics {
        controller = controller.metrics(metrics);
    }
    controller
        .run(
            ctx,
            move |cronjob, ctx| {
                let reconciler = Arc::clone(&reconciler);
                async move { reconciler.reconcile(cronjob, ctx).await }
            },
            default_error_policy,
            shutdown,
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
    use kube::api::ObjectMeta;

    fn job(name: &str, owner: &str, start: Option<i64>, complete: bool) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                owner_references: Some(vec![OwnerReference {
                    api_version: "batch/v1".into(),
                    kind: "CronJob".into(),
                    name: "hello".into(),
                    uid: owner.into(),
                    controller: Some(true),
                    block_owner_deletion: None,
                }]),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(JobStatus {
                start_time: start.map(|s| Time(jiff::Timestamp::from_second(s).unwrap())),
                conditions: complete.then(|| {
                    vec![JobCondition {
                        type_: "Complete".into(),
                        status: "True".into(),
                        ..JobCondition::default()
                    }]
                }),
                ..JobStatus::default()
            }),
        }
    }

    #[test]
    fn run_is_a_send_future_a_manager_can_run() {
        fn is_send<T: Send>(_: &T) {}
        // Type-checked, never called: the manager spawns runnables on its runtime.
        let _ = |ctx: Context| {
            let running = run(ctx, None, CancellationToken::new());
            is_send(&running);
        };
    }

    #[test]
    fn a_job_is_complete_by_its_condition_or_a_succeeded_pod() {
        assert!(is_complete(&job("a", "cj", None, true)));
        assert!(!is_complete(&job("b", "cj", None, false)));
        let mut succeeded = job("c", "cj", None, false);
        succeeded.status.as_mut().unwrap().succeeded = Some(1);
        assert!(is_complete(&succeeded));
        let mut not_yet = job("d", "cj", None, false);
        not_yet.status.as_mut().unwrap().conditions = Some(vec![JobCondition {
            type_: "Complete".into(),
            status: "False".into(),
            ..JobCondition::default()
        }]);
        assert!(!is_complete(&not_yet));
    }

    #[test]
    fn jobs_sort_by_start_time_with_unstarted_ones_last_then_by_name() {
        let mut jobs = [
            job("z", "cj", None, true),
            job("b", "cj", Some(20), true),
            job("a", "cj", Some(20), true),
            job("c", "cj", Some(10), true),
        ];
        jobs.sort_by(by_start_time);
        let names: Vec<String> = jobs.iter().map(ResourceExt::name_any).collect();
        assert_eq!(names, vec!["c", "a", "b", "z"]);
    }

    #[test]
    fn a_plan_records_each_completion_once_and_deletes_the_oldest_beyond_the_limit_once() {
        let reconciler = Reconciler::new();
        let jobs: Vec<Job> = (1..=5)
            .map(|n| job(&format!("hello-{n}"), "cj", Some(n), n <= 4))
            .collect();
        let first = reconciler.plan("cj", &jobs, 3);
        assert_eq!(first.saw, vec!["hello-1", "hello-2", "hello-3", "hello-4"]);
        assert_eq!(
            first.delete,
            vec![("hello-1".to_string(), "uid-hello-1".to_string())]
        );
        reconciler.mark_deleted("cj", "uid-hello-1".into());
        // The cache still shows the deleted Job: nothing new to record or delete.
        let again = reconciler.plan("cj", &jobs, 3);
        assert!(again.saw.is_empty() && again.delete.is_empty());
        // Once it left the cache its uid is forgotten, and the rest stays seen.
        let again = reconciler.plan("cj", &jobs[1..], 3);
        assert!(again.saw.is_empty() && again.delete.is_empty());
        assert_eq!(reconciler.seen.lock().unwrap()["cj"].completed.len(), 3);
    }

    #[test]
    fn jobs_of_another_owner_are_not_this_cronjobs() {
        assert!(controlled_by(&job("a", "cj", None, true), "cj"));
        assert!(!controlled_by(&job("a", "other", None, true), "cj"));
    }

    fn cronjob(uid: &str, limit: i32) -> CronJob {
        CronJob {
            metadata: ObjectMeta {
                name: Some("hello".into()),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                ..ObjectMeta::default()
            },
            spec: Some(k8s_openapi::api::batch::v1::CronJobSpec {
                successful_jobs_history_limit: Some(limit),
                ..k8s_openapi::api::batch::v1::CronJobSpec::default()
            }),
            status: None,
        }
    }

    /// The test kit (`controller::testing`): the reconcile reads its Jobs through a context
    /// over the objects given here, and what it recorded is read back, with no server.
    #[tokio::test]
    async fn a_reconcile_over_the_test_kit_records_each_completed_job_of_its_own_once() {
        use crate::controller::testing::TestContext;
        let cronjob = cronjob("cj", 10);
        let mut kit = TestContext::new().with(&cronjob).unwrap();
        for job in [
            job("hello-1", "cj", Some(1), true),
            job("hello-2", "cj", Some(2), true),
            job("hello-3", "cj", Some(3), false),
            job("other-1", "another-cronjob", Some(1), true),
        ] {
            kit = kit.with(&job).unwrap();
        }
        let reconciler = Reconciler::new();
        let ctx = Arc::new(kit.context().with_event_source(NAME));
        let action = reconciler
            .reconcile(Arc::new(cronjob.clone()), Arc::clone(&ctx))
            .await
            .unwrap();
        assert_eq!(action, Action::await_change());
        let events = kit.events();
        let messages: Vec<&str> = events.iter().map(|e| &*e.message).collect();
        assert_eq!(
            messages,
            [
                "Saw completed job: hello-1, status: Complete",
                "Saw completed job: hello-2, status: Complete"
            ]
        );
        assert!(events.iter().all(|e| &*e.source.component == NAME
            && &*e.reporting_controller == NAME
            && &*e.involved_object.name == "hello"));
        // Nothing new: the next reconcile records nothing.
        reconciler.reconcile(Arc::new(cronjob), ctx).await.unwrap();
        assert_eq!(kit.events().len(), 2);
    }

    /// Past the history limit the reconcile deletes through the client, which the kit points
    /// at no server: the failure names the Job, and the completions were recorded first.
    #[tokio::test]
    async fn a_delete_the_kit_can_not_serve_fails_naming_the_job() {
        use crate::controller::testing::TestContext;
        let cronjob = cronjob("cj", 1);
        let kit = TestContext::new()
            .with(&cronjob)
            .and_then(|kit| kit.with(&job("hello-1", "cj", Some(1), true)))
            .and_then(|kit| kit.with(&job("hello-2", "cj", Some(2), true)))
            .unwrap();
        let error = Reconciler::new()
            .reconcile(Arc::new(cronjob), Arc::new(kit.context()))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, Error::Delete { name, .. } if name == "hello-1"),
            "{error}"
        );
        assert_eq!(kit.reasons(), ["SawCompletedJob", "SawCompletedJob"]);
    }
}
