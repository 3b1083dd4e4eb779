//! The chaos suite, bad input (issue 12): a running manager is fed a corpus of invalid
//! `CacheConfig` documents (its config file rewritten with each in turn) and malformed API
//! answers (truncated JSON, lists of the wrong kind, a huge object). It keeps the last good
//! config (reads still answer), `/readyz` stays ready while the config is invalid (the last
//! good one serves, as Prometheus stays ready after a bad reload), and nothing panics anywhere in the process (a panic hook records every panic).
//!
//! `cargo test --test chaos_bad_input -- --nocapture` prints the figures.

mod chaos_harness;
mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use informant::apiserver::Corruption;
use serde_json::json;

/// Spec bodies (under `spec:`) that validation must reject.
const BAD_SPECS: [&str; 44] = [
    "byObject: [{apiVersion: v1, kind: ConfigMap, labelSelector: 'app in (b'}]",
    "byObject: [{apiVersion: v1, kind: ConfigMap, labelSelector: '=x'}]",
    "byObject: [{apiVersion: v1, kind: ConfigMap, labelSelector: 'a b'}]",
    "byObject: [{apiVersion: v1, kind: ConfigMap, labelSelector: [a]}]",
    "byObject: [{apiVersion: v1, kind: ConfigMap, labelSelector: '-bad-=x'}]",
    "byObject: [{apiVersion: v1, kind: ConfigMap, fieldSelector: 'a in (b)'}]",
    "byObject: [{apiVersion: v1, kind: ConfigMap, fieldSelector: {a: b}}]",
    "byObject: [{apiVersion: v1, kind: Pod, fieldSelector: 'spec.nodeName'}]",
    "byObject: [{apiVersion: v1, kind: ConfigMap, labelSelecter: app=a}]",
    "byObject: [{apiVersion: v1, kind: ConfigMap, namespaces: [a]}]",
    "byObject: [{apiVersion: v1, kind: ConfigMap, namespaces: {'Not_A_Namespace': {}}}]",
    "byObject: [{apiVersion: v1, kind: ConfigMap, metadataOnly: maybe}]",
    "byObject: [{apiVersion: v1, kind: ''}]",
    "byObject: [{apiVersion: '', kind: ConfigMap}]",
    "byObject: [{apiVersion: 'a/b/c', kind: ConfigMap}]",
    "byObject: [{kind: ConfigMap}]",
    "byObject: [{apiVersion: v1}]",
    "byObject: [{apiVersion: v1, kind: ConfigMap}, {apiVersion: v1, kind: ConfigMap}]",
    "byObject: {apiVersion: v1, kind: ConfigMap}",
    "byObject: [42]",
    "byObject: [{apiVersion: v1, kind: ConfigMap, transform: {dropAnnotations: a}}]",
    "byObject: [{apiVersion: v1, kind: ConfigMap, transform: {stripManagedFields: 3}}]",
    "syncPeriod: forever",
    "syncPeriod: -1h",
    "syncPeriod: 10",
    "syncPeriod: NaNh",
    "readerFailOnMissingInformer: sometimes",
    "defaultNamespaces: [team-a]",
    "defaultNamespaces: {'UPPER': {}}",
    "defaultNamespaces: {team-a: {labelSelector: 'x in ('}}",
    "defaultNamespaces: {team-a: {fieldSelector: 'a in (b)'}}",
    "defaultLabelSelector: 'app in ('",
    "defaultFieldSelector: 'x in (y)'",
    "defaultTransform: {dropAnnotations: [1, 2]}",
    "defaultTransform: {unknown: true}",
    "defaultUnsafeDisableDeepCopy: 'yes please'",
    "recorder: {incomingQueueLength: -5}",
    "recorder: {watcherQueueLength: 18446744073709551616}",
    "recorder: {correlator: {qps: -1}}",
    "recorder: {correlator: {burst: many}}",
    "recorder: {correlator: {spamKeyFields: [nonsense]}}",
    "recorder: {sink: {retryInterval: soon}}",
    "recorder: {sink: {maxRetries: -3}}",
    "unknownTopLevelField: 1",
];

/// Whole documents that are not a valid `CacheConfig` (a file of a lone `Controller` has no
/// `CacheConfig`; invalid `Controller`s are [`BAD_CONTROLLER_SPECS`]).
const BAD_DOCUMENTS: [&str; 12] = [
    "",
    "---\n",
    "{",
    "spec: [unclosed",
    "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\nspec:\n\tbyObject: []",
    "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\nspec: *undefined",
    "apiVersion: informant.dev/v1\nkind: CacheConfig\nmetadata: {name: c}\nspec: {}",
    "apiVersion: informant.dev/v1alpha1\nkind: CacheConfigs\nmetadata: {name: c}\nspec: {}",
    "apiVersion: informant.dev/v1alpha1\nkind: Controller\nmetadata: {name: c}\nspec: {}",
    "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: My Config}\nspec: {}",
    "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}",
    "- just\n- a\n- list",
];

fn bad_corpus() -> Vec<String> {
    let mut docs: Vec<String> = BAD_SPECS
        .iter()
        .map(|body| {
            format!(
                "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\n\
                 metadata: {{name: chaos, namespace: default}}\nspec:\n  {body}\n"
            )
        })
        .collect();
    docs.extend(BAD_DOCUMENTS.iter().map(ToString::to_string));
    docs
}

const GOOD: &str = "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\n\
    metadata: {name: chaos, namespace: default}\nspec:\n  byObject:\n    \
    - {apiVersion: v1, kind: ConfigMap}\n";

const GOOD_WITH_SECRETS: &str = "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\n\
    metadata: {name: chaos, namespace: default}\nspec:\n  byObject:\n    \
    - {apiVersion: v1, kind: ConfigMap}\n    - {apiVersion: v1, kind: Secret}\n";

static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Records every panic of the process (any thread, any task) for the test to assert on.
fn record_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(info.to_string());
            default(info);
        }));
    });
}

/// `ConfigMap`s in `default` a read through the manager's cache tree returns (0 when the
/// read fails).
async fn cached_configmaps(world: &chaos_harness::World) -> usize {
    let options = informant::cache::ListOptions {
        namespace: Some("default".into()),
        ..informant::cache::ListOptions::default()
    };
    let gvk = kube::core::GroupVersionKind::gvk("", "v1", "ConfigMap");
    world
        .manager_cache
        .load()
        .list(&gvk, &options)
        .await
        .map_or(0, |items| items.len())
}

/// Writes `text` as the config and waits until the manager runs a valid config again.
async fn replace_and_wait_valid(world: &chaos_harness::World, text: &str) {
    chaos_harness::replace(&world.path, text);
    let state = Arc::clone(&world.state);
    assert!(
        chaos_harness::eventually(Duration::from_secs(20), || {
            let state = Arc::clone(&state);
            async move { state.snapshot().invalid.is_empty() }
        })
        .await
    );
}

/// Whether every error names where the problem is: it starts with a field path
/// (`spec.byObject[0].labelSelector: …`, `<document>: …` for the whole document), or, for a
/// YAML syntax error, gives a line and column.
fn names_where(errors: &[String]) -> bool {
    errors.iter().all(|e| {
        let head = e.split(": ").next().unwrap_or_default();
        let path = !head.contains(' ')
            && ["spec", "metadata", "kind", "apiVersion", "<document>"]
                .iter()
                .any(|root| head.starts_with(root));
        path || (e.contains(" line ") && e.contains(" column "))
    })
}

/// Feeds each document to the manager, then the good config again. Per document: it is
/// rejected, reads still answer from the last good config, `/readyz` stays ready.
/// Returns how many rejections named where, and how many times `/readyz` said ready.
async fn feed_invalid_configs(world: &chaos_harness::World, corpus: &[String]) -> (usize, usize) {
    let (mut with_path, mut readyz_ready) = (0, 0);
    for (i, doc) in corpus.iter().enumerate() {
        chaos_harness::replace(&world.path, doc);
        let state = Arc::clone(&world.state);
        let rejected = chaos_harness::eventually(Duration::from_secs(20), || {
            let state = Arc::clone(&state);
            async move { !state.snapshot().invalid.is_empty() }
        })
        .await;
        assert!(rejected, "document {i} was not rejected:\n{doc}");
        let errors = world.state.snapshot().invalid;
        if names_where(&errors) {
            with_path += 1;
        } else {
            println!("document {i} rejected without saying where: {errors:?}");
        }
        let (code, body) = world.readyz().await;
        if code == 200 && body.contains("[+]config ok") {
            readyz_ready += 1;
        }
        assert_eq!(
            cached_configmaps(world).await,
            5,
            "reads answer from the last good config after document {i}"
        );
        replace_and_wait_valid(world, GOOD).await;
    }
    (with_path, readyz_ready)
}

/// How long an informer may take to list again: kube-runtime's default watcher backoff
/// (800 ms doubling to 30 s, jittered) applies after every failed list and every 410.
const CORRUPTED_WAIT: Duration = Duration::from_secs(90);

/// How long the relist into the huge answer is waited for before the watches are dropped and
/// the history expired again.
const KICK_EVERY: Duration = Duration::from_secs(5);

/// Corrupts the lists of `Secret`s (a new informer) and `ConfigMap`s (relisting after 410):
/// truncated, then of the wrong kind, then with a huge object. Returns how many corrupted
/// answers were served.
async fn feed_malformed_answers(world: &mut chaos_harness::World) -> u64 {
    let h = world.server.handle().clone();
    let before = h.injected_faults();
    for resource in ["secrets", "configmaps"] {
        for corruption in [
            Corruption::Truncated,
            Corruption::WrongKind,
            Corruption::Huge,
        ] {
            h.corrupt_next(Some(resource), 1, corruption);
        }
    }
    world.reload_text(GOOD_WITH_SECRETS).await;
    h.drop_watches();
    h.expire_history();
    // Truncated, then wrong kind: each informer's list fails once, then stores the wrong
    // kind. One more 410 makes them relist into the huge object.
    let listed = chaos_harness::eventually(CORRUPTED_WAIT, || async {
        h.injected_faults() >= before + 4
    })
    .await;
    assert!(listed, "truncated and wrong-kind answers were served");
    // At least one of them relists into it (the other may sit in its watcher backoff). A 410
    // needs the informer's resourceVersion to be older than the compacted one: a write of a
    // kind nobody caches moves the server past it first. The kick repeats every few seconds,
    // so an informer in a long backoff, or one that resumed just before, is caught by the next.
    let deadline = tokio::time::Instant::now() + CORRUPTED_WAIT;
    let mut kicks = 0;
    let huge = loop {
        kicks += 1;
        h.create(
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"namespace": "default", "name": format!("kick-{kicks}")}}),
        )
        .unwrap();
        h.drop_watches();
        h.expire_history();
        if chaos_harness::eventually(KICK_EVERY, || async { h.injected_faults() >= before + 5 })
            .await
        {
            break true;
        }
        if tokio::time::Instant::now() >= deadline {
            break false;
        }
    };
    assert!(huge, "a huge object was served ({kicks} kicks)");
    h.clear_faults();
    h.injected_faults() - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_configs_and_malformed_answers_leave_the_manager_serving_without_panics() {
    record_panics();
    let corpus = bad_corpus();
    assert!(corpus.len() >= 50, "{}", corpus.len());
    let valid: Vec<&String> = corpus
        .iter()
        .filter(|doc| informant::config::load_str(doc).is_ok())
        .collect();
    assert!(
        valid.is_empty(),
        "valid documents in the corpus: {valid:#?}"
    );
    let mut world = chaos_harness::World::start(chaos_harness::ChaosConfig::everything()).await;
    replace_and_wait_valid(&world, GOOD).await;
    let h = world.server.handle().clone();
    for i in 0..5 {
        h.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": format!("cm-{i}")}}))
            .unwrap();
        h.create(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"namespace": "default", "name": format!("s-{i}")}}))
            .unwrap();
    }
    let seeded = chaos_harness::eventually(Duration::from_secs(20), || async {
        cached_configmaps(&world).await == 5
    })
    .await;
    assert!(seeded);

    let (with_path, readyz_ready) = feed_invalid_configs(&world, &corpus).await;
    let served = feed_malformed_answers(&mut world).await;
    let (code, _) = world.readyz().await;
    println!(
        "bad input: {} invalid documents tried, {with_path} rejected naming where, /readyz \
         ready for {readyz_ready}; malformed answers served={served} \
         (truncated, wrong kind, huge), then /readyz answered {code}",
        corpus.len(),
    );
    assert_eq!(with_path, corpus.len(), "every rejection names where");
    assert_eq!(
        readyz_ready,
        corpus.len(),
        "/readyz stays ready while the last good config serves"
    );
    let answering = chaos_harness::eventually(Duration::from_secs(30), || async {
        cached_configmaps(&world).await >= 5
    })
    .await;
    assert!(answering, "reads still answer after malformed answers");
    world.stop().await;
    let panics = PANICS.lock().unwrap().clone();
    assert!(panics.is_empty(), "panics: {panics:#?}");
}

/// `Controller` documents that are invalid, each for one reason (the spec lines after
/// `metadata`); a valid one is `for: {apiVersion: v1, kind: ConfigMap}` with an exec hook.
const BAD_CONTROLLER_SPECS: [&str; 14] = [
    "spec: {}",
    "spec: {hook: {exec: {command: [sh]}}}",
    "spec: {for: {apiVersion: v1, kind: ConfigMap}}",
    "spec: {for: {apiVersion: v1, kind: ConfigMap}, hook: {}}",
    "spec: {for: {apiVersion: v1, kind: ConfigMap}, hook: {exec: {command: []}}}",
    "spec: {for: {apiVersion: v1, kind: ConfigMap}, hook: {exec: {command: [sh]}, webhook: {url: 'http://x'}}}",
    "spec: {for: {apiVersion: v1, kind: ConfigMap}, hook: {webhook: {url: 'not a url'}}}",
    "spec: {for: {apiVersion: v1, kind: ConfigMap}, hook: {exec: {command: [sh], timeout: soon}}}",
    "spec: {for: {apiVersion: v1, kind: ConfigMap}, hook: {exec: {command: [sh]}}, concurrency: -1}",
    "spec: {for: {apiVersion: v1, kind: ConfigMap}, hook: {exec: {command: [sh]}}, resyncPeriod: often}",
    "spec: {for: {apiVersion: v1, kind: ConfigMap, labelSelector: 'app in (a'}, hook: {exec: {command: [sh]}}}",
    "spec: {for: {apiVersion: v1, kind: ConfigMap}, owns: [{apiVersion: v1}], hook: {exec: {command: [sh]}}}",
    "spec: {for: {apiVersion: 'v1/v2/v3', kind: ConfigMap}, hook: {exec: {command: [sh]}}}",
    "spec: {for: {apiVersion: v1, kind: ConfigMap}, hook: {exec: {command: [sh]}}, finalise: true}",
];

fn bad_controllers() -> Vec<String> {
    BAD_CONTROLLER_SPECS
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            format!(
                "apiVersion: informant.dev/v1alpha1\nkind: Controller\n\
                 metadata: {{name: bad-{i}, namespace: default}}\n{spec}\n"
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_controllers_are_rejected_with_their_paths_and_leave_the_manager_serving() {
    record_panics();
    let cache = informant::config::load_str(GOOD).unwrap().cache;
    let corpus = bad_controllers();
    let mut with_path = 0;
    for doc in &corpus {
        let value: serde_json::Value = serde_yaml::from_str(doc).unwrap();
        let Err(error) = informant::hooks::validate_controller_value(
            value,
            &informant::config::Origin::Text,
            Some(&cache),
        ) else {
            panic!("accepted:\n{doc}");
        };
        let paths: Vec<String> = error.errors.iter().map(|e| e.path.to_string()).collect();
        if !error.errors.is_empty()
            && paths
                .iter()
                .all(|p| p.starts_with("spec") || p.starts_with("metadata"))
        {
            with_path += 1;
        } else {
            println!("rejected without a path: {error}");
        }
    }
    assert_eq!(with_path, corpus.len(), "every rejection names its field");

    // All of them at once in the file of a running manager (with its hook runnable): the
    // CacheConfig beside them keeps serving, the manager stays ready, nothing panics.
    let mut world = chaos_harness::World::start(chaos_harness::ChaosConfig::everything()).await;
    let first = world.reload_text(GOOD).await;
    assert!(
        matches!(first, informant::manager::Reload::Applied { .. }),
        "{first:?}"
    );
    world
        .server
        .handle()
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": "cm-0"}}))
        .unwrap();
    let mut text = GOOD.to_string();
    for doc in &corpus {
        text.push_str("---\n");
        text.push_str(doc);
    }
    let reload = world.reload_text(&text).await;
    assert!(
        matches!(reload, informant::manager::Reload::Unchanged),
        "the CacheConfig beside the bad Controllers is unchanged: {reload:?}"
    );
    let (code, body) = world.readyz().await;
    assert_eq!(code, 200, "{body}");
    let answering = chaos_harness::eventually(Duration::from_secs(20), || async {
        cached_configmaps(&world).await == 1
    })
    .await;
    assert!(answering, "reads answer");
    println!(
        "bad controllers: {} invalid Controller documents tried, {with_path} rejected with \
         their field paths; all in one running manager's file: /readyz {code}",
        corpus.len()
    );
    world.stop().await;
    let panics = PANICS.lock().unwrap().clone();
    assert!(panics.is_empty(), "panics: {panics:#?}");
}
