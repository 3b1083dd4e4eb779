//! kube-rs list, watch, watcher and reflector against the embedded API server: selectors,
//! pagination over a consistent snapshot, resourceVersion semantics, bookmarks, timeouts,
//! streaming lists, 410 Gone and relisting, and fault injection.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use informant::apiserver::{Config, Verb};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Error;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, VersionMatch, WatchEvent,
    WatchParams,
};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

/// Upper bound for anything that should happen promptly; a hang fails the test.
const PROMPTLY: Duration = Duration::from_secs(10);

use crate::support::{server, server_with};

fn cm(name: &str, app: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": app}}, "data": {"k": "v"}}),
    )
    .unwrap()
}

fn names<K: kube::Resource>(items: &[K]) -> Vec<String> {
    items
        .iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect()
}

async fn next_event<S, K>(stream: &mut S) -> WatchEvent<K>
where
    S: futures::Stream<Item = Result<WatchEvent<K>, Error>> + Unpin,
{
    tokio::time::timeout(PROMPTLY, stream.next())
        .await
        .expect("a watch event arrives promptly")
        .expect("the watch stream is open")
        .expect("the watch event decodes")
}

#[tokio::test]
async fn list_applies_label_and_field_selectors() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for (n, app) in [("a", "web"), ("b", "db"), ("c", "web")] {
        api.create(&PostParams::default(), &cm(n, app))
            .await
            .unwrap();
    }
    let web = api
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(names(&web.items), ["a", "c"]);
    let not_a = api
        .list(
            &ListParams::default()
                .labels("app in (web)")
                .fields("metadata.name!=a"),
        )
        .await
        .unwrap();
    assert_eq!(names(&not_a.items), ["c"]);

    let pods: Api<Pod> = Api::namespaced(client, "default");
    for (n, node) in [("p1", "n1"), ("p2", "n2")] {
        let p: Pod = serde_json::from_value(
            json!({"metadata": {"name": n}, "spec": {"nodeName": node, "containers": []}}),
        )
        .unwrap();
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    let on_n2 = pods
        .list(&ListParams::default().fields("spec.nodeName=n2"))
        .await
        .unwrap();
    assert_eq!(names(&on_n2.items), ["p2"]);
    let pending = pods
        .list(&ListParams::default().fields("status.phase=Pending"))
        .await
        .unwrap();
    assert_eq!(pending.items.len(), 2, "new pods are Pending");
    let Error::Api(status) = pods
        .list(&ListParams::default().fields("spec.bogus=1"))
        .await
        .unwrap_err()
    else {
        panic!("expected an API error");
    };
    assert_eq!(
        (status.code, status.message.as_str()),
        (400, "field label not supported: spec.bogus")
    );
    let Error::Api(status) = pods
        .list(&ListParams::default().labels("a in (b"))
        .await
        .unwrap_err()
    else {
        panic!("expected an API error");
    };
    assert_eq!(status.code, 400);
}

#[tokio::test]
async fn pages_continue_over_the_snapshot_of_the_first_page() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for n in ["a", "b", "c", "d", "e"] {
        api.create(&PostParams::default(), &cm(n, "x"))
            .await
            .unwrap();
    }
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(names(&first.items), ["a", "b"]);
    let snapshot_rv = first.metadata.resource_version.clone().unwrap();
    // Changes after the first page must not show in later pages.
    api.delete("c", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &cm("bb", "x"))
        .await
        .unwrap();
    let mut seen = names(&first.items);
    let mut token = first.metadata.continue_;
    while let Some(t) = token {
        let page = api
            .list(&ListParams::default().limit(2).continue_token(&t))
            .await
            .unwrap();
        assert_eq!(
            page.metadata.resource_version.as_deref(),
            Some(snapshot_rv.as_str())
        );
        seen.extend(names(&page.items));
        token = page.metadata.continue_;
    }
    assert_eq!(seen, ["a", "b", "c", "d", "e"]);
    let fresh = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(names(&fresh.items), ["a", "b", "bb", "d", "e"]);
}

#[tokio::test]
async fn resource_version_match_exact_reads_the_past_and_not_older_than_reads_now() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let a = api
        .create(&PostParams::default(), &cm("a", "x"))
        .await
        .unwrap();
    let rv = a.metadata.resource_version.unwrap();
    api.create(&PostParams::default(), &cm("b", "x"))
        .await
        .unwrap();
    let past = api
        .list(&ListParams::default().at(&rv).matching(VersionMatch::Exact))
        .await
        .unwrap();
    assert_eq!(names(&past.items), ["a"]);
    assert_eq!(past.metadata.resource_version.as_deref(), Some(rv.as_str()));
    let now = api
        .list(
            &ListParams::default()
                .at(&rv)
                .matching(VersionMatch::NotOlderThan),
        )
        .await
        .unwrap();
    assert_eq!(names(&now.items), ["a", "b"]);
}

#[tokio::test]
async fn watch_from_a_version_sends_only_later_events_and_from_zero_sends_synthetic_adds() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("old", "x"))
        .await
        .unwrap();
    let list = api.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();

    let mut from_zero = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    match next_event(&mut from_zero).await {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("old")),
        other => panic!("expected a synthetic ADDED, got {other:?}"),
    }

    let mut from_rv = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("new", "x"))
        .await
        .unwrap();
    api.patch(
        "new",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    api.delete("new", &DeleteParams::default()).await.unwrap();
    let kinds: Vec<String> = [
        next_event(&mut from_rv).await,
        next_event(&mut from_rv).await,
        next_event(&mut from_rv).await,
    ]
    .into_iter()
    .map(|e| match e {
        WatchEvent::Added(o) => format!("ADDED {}", o.metadata.name.unwrap()),
        WatchEvent::Modified(o) => format!("MODIFIED {}", o.metadata.name.unwrap()),
        WatchEvent::Deleted(o) => format!("DELETED {}", o.metadata.name.unwrap()),
        other => format!("{other:?}"),
    })
    .collect();
    assert_eq!(kinds, ["ADDED new", "MODIFIED new", "DELETED new"]);
}

#[tokio::test]
async fn an_object_that_stops_matching_the_selector_is_delivered_as_deleted() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut w = api
        .watch(&WatchParams::default().labels("app=web"), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("a", "db"))
        .await
        .unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}})),
    )
    .await
    .unwrap();
    assert!(
        matches!(next_event(&mut w).await, WatchEvent::Added(_)),
        "starts matching: ADDED"
    );
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}})),
    )
    .await
    .unwrap();
    match next_event(&mut w).await {
        WatchEvent::Deleted(o) => assert_eq!(o.metadata.labels.unwrap()["app"], "db"),
        other => panic!("expected DELETED, got {other:?}"),
    }
}

#[tokio::test]
async fn bookmarks_arrive_periodically_once_the_resource_has_changed() {
    let (_s, client) = server_with(Config {
        bookmark_interval: Duration::from_millis(20),
        ..Config::default()
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = api
        .create(&PostParams::default(), &cm("a", "x"))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.unwrap();
    let mut w = api
        .watch(&WatchParams::default().labels("app=x"), &rv)
        .await
        .unwrap()
        .boxed();
    // A change the watch does not select: only a bookmark can tell the client it happened.
    let other = api
        .create(&PostParams::default(), &cm("b", "y"))
        .await
        .unwrap();
    let other_rv: u64 = other.metadata.resource_version.unwrap().parse().unwrap();
    match next_event(&mut w).await {
        WatchEvent::Bookmark(b) => {
            let at: u64 = b.metadata.resource_version.parse().unwrap();
            assert!(at >= other_rv, "bookmark at {at}, change at {other_rv}");
        }
        other => panic!("expected a BOOKMARK, got {other:?}"),
    }
}

#[tokio::test]
async fn a_watch_ends_after_timeout_seconds() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut w = api
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    let end = tokio::time::timeout(PROMPTLY, w.next())
        .await
        .expect("the watch ends by itself");
    assert!(
        end.is_none(),
        "no events, then the end of the stream: {end:?}"
    );
}

#[tokio::test]
async fn resuming_from_an_expired_version_gets_410_gone() {
    let (s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let a = api
        .create(&PostParams::default(), &cm("a", "x"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("b", "x"))
        .await
        .unwrap();
    s.handle().expire_history();
    let mut w = api
        .watch(
            &WatchParams::default(),
            a.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    match next_event(&mut w).await {
        WatchEvent::Error(e) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected ERROR 410, got {other:?}"),
    }
}

#[tokio::test]
async fn the_history_window_is_bounded() {
    let (_s, client) = server_with(Config {
        limits: informant::apiserver::Limits {
            history: 3,
            ..Default::default()
        },
        ..Config::default()
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = api
        .create(&PostParams::default(), &cm("a", "x"))
        .await
        .unwrap();
    for n in ["b", "c", "d", "e"] {
        api.create(&PostParams::default(), &cm(n, "x"))
            .await
            .unwrap();
    }
    let mut w = api
        .watch(
            &WatchParams::default(),
            first.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    assert!(matches!(next_event(&mut w).await, WatchEvent::Error(e) if e.code == 410));
}

#[tokio::test]
async fn the_watcher_streaming_list_ends_with_the_initial_events_end_bookmark() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for n in ["a", "b"] {
        api.create(&PostParams::default(), &cm(n, "x"))
            .await
            .unwrap();
    }
    let mut events = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut init = Vec::new();
    loop {
        match tokio::time::timeout(PROMPTLY, events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::Init => {}
            watcher::Event::InitApply(o) => init.push(o.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(init, ["a", "b"]);
    api.create(&PostParams::default(), &cm("c", "x"))
        .await
        .unwrap();
    match tokio::time::timeout(PROMPTLY, events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        watcher::Event::Apply(o) => assert_eq!(o.metadata.name.as_deref(), Some("c")),
        other => panic!("unexpected {other:?}"),
    }
}

/// Wait until the reflector's store satisfies `cond`, driving the reflector stream meanwhile.
async fn drive_until<S>(
    stream: &mut S,
    reader: &reflector::Store<ConfigMap>,
    cond: impl Fn(&reflector::Store<ConfigMap>) -> bool,
) where
    S: futures::Stream + Unpin,
{
    tokio::time::timeout(PROMPTLY, async {
        while !cond(reader) {
            assert!(stream.next().await.is_some(), "the reflector stream ended");
        }
    })
    .await
    .expect("the reflector converges promptly");
}

fn store_names(reader: &reflector::Store<ConfigMap>) -> Vec<String> {
    let mut v: Vec<String> = reader
        .state()
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn the_reflector_relists_after_410_and_after_dropped_watches() {
    let (s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("a", "x"))
        .await
        .unwrap();
    let (reader, writer) = reflector::store();
    let mut stream = reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .default_backoff()
        .boxed();
    drive_until(&mut stream, &reader, |r| store_names(r) == ["a"]).await;
    let lists_before = s.handle().request_count(Verb::List, "configmaps");
    let watches_before = s.handle().request_count(Verb::Watch, "configmaps");

    // Dropped watches: the watcher re-watches from its last version, no relist needed.
    s.handle().drop_watches();
    api.create(&PostParams::default(), &cm("b", "x"))
        .await
        .unwrap();
    drive_until(&mut stream, &reader, |r| store_names(r) == ["a", "b"]).await;
    assert!(s.handle().request_count(Verb::Watch, "configmaps") > watches_before);

    // Expired history: the resume gets 410 and the watcher relists, seeing changes made
    // while it was not watching.
    s.handle().expire_history();
    s.handle().drop_watches();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &cm("c", "x"))
        .await
        .unwrap();
    s.handle().expire_history();
    drive_until(&mut stream, &reader, |r| store_names(r) == ["b", "c"]).await;
    assert!(
        s.handle().request_count(Verb::List, "configmaps") > lists_before,
        "a 410 makes the watcher relist"
    );
}

#[tokio::test]
async fn the_watcher_recovers_from_injected_list_failures() {
    let (s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("a", "x"))
        .await
        .unwrap();
    s.handle()
        .fail_next(Some(Verb::List), Some("configmaps"), 2, 500);
    let (reader, writer) = reflector::store();
    let mut stream = reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .boxed();
    drive_until(&mut stream, &reader, |r| store_names(r) == ["a"]).await;
    assert_eq!(
        s.handle().request_count(Verb::List, "configmaps"),
        3,
        "two failures, then success"
    );
}

#[tokio::test]
async fn throttling_answers_429_with_retry_after_which_kube_rs_honours() {
    let (s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    s.handle().throttle_next(1, 1);
    // kube-rs retries a 429 after Retry-After; the retry then finds nothing.
    let Error::Api(status) = api.get("x").await.unwrap_err() else {
        panic!("expected an API error");
    };
    assert_eq!(status.code, 404);
    assert_eq!(
        s.handle().request_count(Verb::Get, "configmaps"),
        2,
        "429, then the retry"
    );
}

#[tokio::test]
async fn debug_requests_reports_counters_per_verb_and_resource() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let _ = api.get("x").await;
    let _ = api.list(&ListParams::default()).await.unwrap();
    let req = http::Request::get("/debug/requests")
        .body(Vec::new())
        .unwrap();
    let text = client.request_text(req).await.unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let count = |verb: &str| {
        v["requests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["verb"] == verb && r["resource"] == "configmaps")
            .map(|r| r["count"].clone())
    };
    assert_eq!(count("get"), Some(json!(1)));
    assert_eq!(count("list"), Some(json!(1)));
}

#[tokio::test]
async fn metadata_only_lists_gets_and_watches_answer_partial_object_metadata() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &cm("a", "web"))
        .await
        .unwrap();
    let list = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(
        list.items[0].types.as_ref().unwrap().kind,
        "PartialObjectMetadata"
    );
    assert_eq!(
        list.items[0].metadata.labels.as_ref().unwrap()["app"],
        "web"
    );
    let one = api.get_metadata("a").await.unwrap();
    assert_eq!(one.types.unwrap().api_version, "meta.k8s.io/v1");

    let meta: Api<kube::core::PartialObjectMeta<ConfigMap>> = Api::namespaced(client, "default");
    let mut events = watcher(meta, watcher::Config::default()).boxed();
    let mut initial = Vec::new();
    loop {
        match tokio::time::timeout(PROMPTLY, events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::Init => {}
            watcher::Event::InitApply(o) => initial.push(o.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(initial, ["a"]);
    api.create(&PostParams::default(), &cm("b", "web"))
        .await
        .unwrap();
    match tokio::time::timeout(PROMPTLY, events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        watcher::Event::Apply(o) => {
            assert_eq!(o.metadata.name.as_deref(), Some("b"));
            assert_eq!(o.types.unwrap().kind, "PartialObjectMetadata");
        }
        other => panic!("unexpected {other:?}"),
    }
}
