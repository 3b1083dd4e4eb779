//! The fake `CronJob` scheduler of the demo: what Kubernetes' `CronJobControllerV2` and Job
//! controller do for a `CronJob` whose Jobs each succeed within a run, apart from the
//! reconciler it feeds ([`super::Reconciler`]).

use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Error, identity};
use crate::controller;
use crate::recorder::{EventType, Recorder};

/// The fake `CronJob` scheduler of the demo (what Kubernetes' `CronJobControllerV2` and Job
/// controller do for a `CronJob` whose Jobs each succeed within a run): each [`Schedule::tick`]
/// completes the previous Job and creates the next.
pub struct Schedule {
    client: Client,
    recorder: Recorder,
    cronjob: CronJob,
    /// The scheduled minute of the next run (Kubernetes names a Job after it).
    next_minute: i64,
    previous: Option<String>,
}

impl std::fmt::Debug for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schedule")
            .field("cronjob", &self.cronjob.metadata.name)
            .field("next_minute", &self.next_minute)
            .field("previous", &self.previous)
            .finish_non_exhaustive()
    }
}

impl Schedule {
    /// A schedule for `cronjob` (read from the API server: it needs its uid), writing with
    /// `client` and recording `SuccessfulCreate` with `recorder`. Runs are a minute apart on
    /// the schedule's own clock, starting now, however fast [`Schedule::tick`] is called.
    #[must_use]
    pub fn new(client: Client, recorder: Recorder, cronjob: CronJob) -> Self {
        let next_minute = jiff::Timestamp::now().as_second().div_euclid(60);
        Self {
            client,
            recorder,
            cronjob,
            next_minute,
            previous: None,
        }
    }

    /// One run: marks the previous Job complete through the status subresource, then creates
    /// the next Job (`<cronjob>-<scheduled minute>`, owned by the `CronJob` with
    /// `controller: true`), records `SuccessfulCreate` (`Created job <job>`) on the `CronJob`,
    /// and returns the new Job's name.
    ///
    /// # Errors
    /// [`Error::Incomplete`] for a `CronJob` without uid, [`Error::Status`] or
    /// [`Error::Create`] when a write fails.
    pub async fn tick(&mut self) -> Result<String, Error> {
        let (namespace, name, uid) = identity(&self.cronjob)?;
        let api: Api<Job> = Api::namespaced(self.client.clone(), &namespace);
        if let Some(previous) = self.previous.take() {
            let now = Time(jiff::Timestamp::now());
            let status = json!({"status": {
                "active": 0,
                "succeeded": 1,
                "completionTime": now,
                "conditions": [{"type": "Complete", "status": "True",
                    "lastProbeTime": now, "lastTransitionTime": now}],
            }});
            api.patch_status(&previous, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .map_err(|source| Error::Status {
                    namespace: namespace.clone(),
                    name: previous,
                    source,
                })?;
        }
        let job = loop {
            let job = self.job(&namespace, &name, &uid);
            self.next_minute += 1;
            match api.create(&PostParams::default(), &job).await {
                Ok(created) => break created,
                // A run of an earlier schedule (a restarted demo) took this name.
                Err(kube::Error::Api(status)) if status.is_already_exists() => {}
                Err(source) => {
                    return Err(Error::Create {
                        namespace,
                        name: job.name_any(),
                        source,
                    });
                }
            }
        };
        let job_name = job.name_any();
        let started = json!({"status": {"active": 1, "startTime": Time(jiff::Timestamp::now())}});
        api.patch_status(&job_name, &PatchParams::default(), &Patch::Merge(&started))
            .await
            .map_err(|source| Error::Status {
                namespace: namespace.clone(),
                name: job_name.clone(),
                source,
            })?;
        let message = format!("Created job {job_name}");
        self.recorder.record(
            &controller::object_ref(&self.cronjob),
            EventType::Normal,
            "SuccessfulCreate",
            &message,
        );
        self.previous = Some(job_name.clone());
        Ok(job_name)
    }

    /// The Job of the next run: the `CronJob`'s job template, or one `busybox` container.
    fn job(&self, namespace: &str, cronjob: &str, uid: &str) -> Job {
        let template = self.cronjob.spec.as_ref().map(|s| &s.job_template);
        let spec = template
            .and_then(|t| t.spec.clone())
            .unwrap_or_else(|| JobSpec {
                template: PodTemplateSpec {
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: "hello".into(),
                            image: Some("busybox:1.28".into()),
                            ..Container::default()
                        }],
                        restart_policy: Some("OnFailure".into()),
                        ..PodSpec::default()
                    }),
                    ..PodTemplateSpec::default()
                },
                ..JobSpec::default()
            });
        let template_meta = template
            .and_then(|t| t.metadata.clone())
            .unwrap_or_default();
        Job {
            metadata: ObjectMeta {
                name: Some(format!("{cronjob}-{}", self.next_minute)),
                namespace: Some(namespace.to_owned()),
                labels: template_meta.labels,
                annotations: template_meta.annotations,
                owner_references: Some(vec![OwnerReference {
                    api_version: CronJob::api_version(&()).into_owned(),
                    kind: CronJob::kind(&()).into_owned(),
                    name: cronjob.to_owned(),
                    uid: uid.to_owned(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
            status: None,
        }
    }

    /// Ticks every `every` until `shutdown` (the first tick at once).
    ///
    /// # Errors
    /// The first failed tick.
    pub async fn run(mut self, every: Duration, shutdown: CancellationToken) -> Result<(), Error> {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                _ = ticks.tick() => {}
            }
            let job = self.tick().await?;
            tracing::info!(job, "cronjob schedule created a job");
        }
    }
}

/// Runs a [`Schedule`] for `cronjob`, one tick every `every`, until `shutdown`.
///
/// # Errors
/// As [`Schedule::run`].
pub async fn simulate_schedule(
    client: Client,
    recorder: Recorder,
    cronjob: CronJob,
    every: Duration,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    Schedule::new(client, recorder, cronjob)
        .run(every, shutdown)
        .await
}
