//! The chaos suite, event conservation (issue 12): the recorder writes through `KubeSink` to
//! the embedded API server while a seeded schedule fails creates and patches of Events (500,
//! 429, 409), throttles and adds latency. After shutdown, events recorded = Σ fates, and every
//! Event in the server has the count of its last delivered write (created or patched).
//!
//! `cargo test --test chaos chaos_events:: -- --nocapture` prints the figures;
//! `INFORMANT_CHAOS_SEED=<n>` replays a run, `INFORMANT_CHAOS_ROUNDS=<n>` sets the bursts.

use crate::chaos_harness;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chaos_harness::{rounds_from_env, seed_from_env};
use informant::apiserver::{Handle, TestServer, Verb};
use informant::recorder::{
    EventType, Fate, KubeSink, ObjectRef, Options, Pipeline, Sink, SinkError, SinkOptions,
    SystemClock,
};
use k8s_openapi::api::core::v1 as corev1;
use kube::api::{Api, ListParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A sink that forwards to the API server and remembers, per Event, the count its last
/// delivered write carried: what the server must hold.
#[derive(Clone)]
struct Observed {
    inner: KubeSink,
    delivered: Arc<Mutex<BTreeMap<(String, String), i32>>>,
}

impl Sink for Observed {
    async fn create(&self, event: &corev1::Event) -> Result<(), SinkError> {
        let result = self.inner.create(event).await;
        if result.is_ok() {
            let key = (
                event.metadata.namespace.clone().unwrap_or_default(),
                event.metadata.name.clone().unwrap_or_default(),
            );
            self.delivered
                .lock()
                .unwrap()
                .insert(key, event.count.unwrap_or(1));
        }
        result
    }

    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        body: &serde_json::Value,
    ) -> Result<(), SinkError> {
        let result = self.inner.patch(namespace, name, body).await;
        if result.is_ok() {
            let count = i32::try_from(body["count"].as_i64().unwrap()).unwrap();
            self.delivered
                .lock()
                .unwrap()
                .insert((namespace.to_string(), name.to_string()), count);
        }
        result
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_sink_faults_every_recorded_event_ends_in_one_fate_and_delivered_counts_match() {
    let seed = seed_from_env(jiff::Timestamp::now().as_second().unsigned_abs());
    let mut rng = chaos_harness::Rng::new(seed);
    let bursts = rounds_from_env(40);
    let server = TestServer::start().await.unwrap();
    let h = server.handle().clone();
    for ns in chaos_harness::NAMESPACES {
        h.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .unwrap();
    }
    let client = server.client().await.unwrap();
    let delivered = Arc::new(Mutex::new(BTreeMap::new()));
    let sink = Observed {
        inner: KubeSink::new(client.clone()),
        delivered: Arc::clone(&delivered),
    };
    let options = Options {
        component: "chaos".into(),
        sink: SinkOptions {
            max_retries: 3,
            retry_interval: Duration::from_millis(5),
        },
        ..Options::default()
    };
    let pipeline = Pipeline::new(&options, sink, Arc::new(SystemClock));
    let recorder = pipeline.recorder();
    let fates = pipeline.fates();
    let run = tokio::spawn(pipeline.run(CancellationToken::new()));
    // About 20 events per object: under the spam filter's burst of 25 (client-go's), so the
    // events reach the sink and its faults, whatever the number of bursts.
    let object_count = usize::try_from(bursts / 2).unwrap().max(4);
    let objects: Vec<Arc<ObjectRef>> = (0..object_count)
        .map(|i| {
            let ns = chaos_harness::NAMESPACES[i % 4];
            Arc::new(ObjectRef::new(
                "v1",
                "Pod",
                ns,
                &format!("pod-{i}"),
                &format!("uid-{i}"),
            ))
        })
        .collect();
    let mut emitted = 0u64;
    let mut faults: BTreeMap<&str, u64> = BTreeMap::new();
    for _ in 0..bursts {
        inject_sink_fault(&h, &mut rng, &mut faults);
        for _ in 0..10 {
            let object = rng.pick(&objects);
            let reason = *rng.pick(&["BackOff", "Pulled", "Scheduled"]);
            recorder.record(
                object,
                EventType::Normal,
                reason,
                &format!("{reason} happened"),
            );
            emitted += 1;
        }
        // Every event of this burst meets this burst's faults before the next ones.
        let settled = chaos_harness::eventually(Duration::from_secs(30), || async {
            fates.total() == emitted
        })
        .await;
        assert!(
            settled,
            "seed {seed}: the burst did not settle: {:?}",
            fates.snapshot()
        );
        h.clear_faults();
    }
    drop(recorder);
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the pipeline drains")
        .unwrap();

    let per_fate: Vec<String> = Fate::ALL
        .iter()
        .map(|f| format!("{f}={}", fates.get(*f)))
        .collect();
    let faults_text: Vec<String> = faults.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!(
        "events seed={seed} bursts={bursts} recorded={emitted} sum-of-fates={} ({})\n  sink faults {} ({}), \
         requests answered with a fault={}",
        fates.total(),
        per_fate.join(" "),
        faults.values().sum::<u64>(),
        faults_text.join(" "),
        h.injected_faults()
    );
    assert_eq!(fates.total(), emitted, "seed {seed}: recorded = Σ fates");
    assert_eq!(
        fates.recorded(),
        emitted,
        "seed {seed}: the recorded counter"
    );
    let server_events = server_counts(&client).await;
    let delivered = delivered.lock().unwrap().clone();
    assert_eq!(
        server_events, delivered,
        "seed {seed}: every created or patched Event is in the server with the count of its \
         last delivered write"
    );
    assert!(fates.get(Fate::Created) > 0 && fates.get(Fate::Patched) > 0);
    server.shutdown().await.unwrap();
}

/// One sink fault drawn from `rng`, counted in `faults` by name.
fn inject_sink_fault(h: &Handle, rng: &mut chaos_harness::Rng, faults: &mut BTreeMap<&str, u64>) {
    // Up to 4 failures in a row: more than `max_retries`, so some events end `failed`.
    let count = u32::try_from(rng.below(4)).unwrap() + 1;
    match rng.below(6) {
        0 => {
            let code = *rng.pick(&[500, 429, 409]);
            h.fail_next(Some(Verb::Create), Some("events"), count, code);
            *faults.entry("create-failed-500-429-409").or_default() += 1;
        }
        1 => {
            let code = *rng.pick(&[500, 429, 409]);
            h.fail_next(Some(Verb::Patch), Some("events"), count, code);
            *faults.entry("patch-failed-500-429-409").or_default() += 1;
        }
        2 => {
            h.throttle_next(2, 1);
            *faults.entry("throttled-429").or_default() += 1;
        }
        3 => {
            h.set_latency(Duration::from_millis(rng.below(10) + 1));
            *faults.entry("latency").or_default() += 1;
        }
        _ => {}
    }
}

/// Every Event in the server: (namespace, name) → count.
async fn server_counts(client: &kube::Client) -> BTreeMap<(String, String), i32> {
    Api::<corev1::Event>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| {
            (
                (e.metadata.namespace.unwrap(), e.metadata.name.unwrap()),
                e.count.unwrap_or(1),
            )
        })
        .collect()
}
