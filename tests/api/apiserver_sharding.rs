//! Server-side sharded list and watch (KEP-5866) on the embedded API server, through kube-rs
//! with informant's sharded client: complementary shards split the objects without overlap and
//! cover them all, on lists (paginated or not), watches, resumed watches and kube-runtime's
//! watcher; a bad selector is a 400 with apiserver's words; with the `ShardedListAndWatch`
//! gate off the parameter is ignored and the missing `shardInfo` says so.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use informant::apiserver::{Config, FeatureGates};
use informant::cache::{server_shards, sharded_client};
use informant::selector::{HASH_SPACE_END, ShardKey, ShardRange, ShardSelector, fnv1a_64};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::support::{holds_within, server, server_with};

const PROMPTLY: Duration = Duration::from_secs(10);

/// The two halves of the hash space on `key`.
fn halves(key: ShardKey) -> [ShardSelector; 2] {
    let middle = 1u64 << 63;
    [
        ShardSelector::new(key, vec![ShardRange::new(0, u128::from(middle)).unwrap()]).unwrap(),
        ShardSelector::new(key, vec![ShardRange::new(middle, HASH_SPACE_END).unwrap()]).unwrap(),
    ]
}

/// `n` `ConfigMap`s spread over the namespaces `shard-0` … `shard-2`.
fn seed(server: &informant::apiserver::TestServer, n: usize) {
    for i in 0..n {
        server
            .handle()
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": format!("shard-{}", i % 3), "name": format!("cm-{i}")}}))
            .unwrap();
    }
}

fn uids(items: &[ConfigMap]) -> BTreeSet<String> {
    items
        .iter()
        .filter_map(|c| c.metadata.uid.clone())
        .collect()
}

async fn all_uids(client: &Client) -> BTreeSet<String> {
    let all = Api::<ConfigMap>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    uids(&all.items)
}

#[tokio::test]
async fn complementary_uid_shards_list_disjoint_halves_that_cover_every_object() {
    let (s, client) = server().await;
    seed(&s, 60);
    let everything = all_uids(&client).await;
    assert_eq!(everything.len(), 60);
    let mut union = BTreeSet::new();
    for (i, half) in halves(ShardKey::Uid).iter().enumerate() {
        assert!(
            server_shards(&client, "/api/v1/configmaps", half)
                .await
                .unwrap(),
            "the list echoes the selector in metadata.shardInfo"
        );
        let api = Api::<ConfigMap>::all(sharded_client(&client, half));
        let listed = uids(&api.list(&ListParams::default()).await.unwrap().items);
        assert!(
            !listed.is_empty() && listed.len() < 60,
            "half {i}: {}",
            listed.len()
        );
        for uid in &listed {
            assert!(
                half.matches_value(uid),
                "{uid} (hash {:#018x}) is outside half {i}",
                fnv1a_64(uid.as_bytes())
            );
            assert!(union.insert(uid.clone()), "{uid} listed by both halves");
        }
        // Paginated: the same share, page by page.
        let mut paged = BTreeSet::new();
        let mut params = ListParams::default().limit(7);
        loop {
            let page = api.list(&params).await.unwrap();
            assert!(page.items.len() <= 7);
            paged.extend(uids(&page.items));
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
        assert_eq!(paged, listed, "half {i} paginated");
    }
    assert_eq!(union, everything, "the halves cover every object");
}

#[tokio::test]
async fn the_list_log_says_which_shard_each_answer_applied_and_what_it_held() {
    let (s, client) = server().await;
    seed(&s, 40);
    let halves = halves(ShardKey::Uid);
    let mut held = Vec::new();
    for half in &halves {
        let api = Api::<ConfigMap>::all(sharded_client(&client, half));
        held.push(api.list(&ListParams::default()).await.unwrap().items.len());
    }
    Api::<ConfigMap>::namespaced(client.clone(), "shard-1")
        .list(&ListParams::default())
        .await
        .unwrap();
    let answers = s.handle().lists();
    let logged: Vec<(Option<String>, Option<&str>, usize)> = answers
        .iter()
        .map(|a| (a.shard_selector.clone(), a.namespace.as_deref(), a.items))
        .collect();
    assert_eq!(
        logged,
        vec![
            (Some(halves[0].to_string()), None, held[0]),
            (Some(halves[1].to_string()), None, held[1]),
            (None, Some("shard-1"), 13),
        ]
    );
    assert_eq!(held[0] + held[1], 40);
    assert!(
        answers
            .iter()
            .all(|a| a.resource == "configmaps" && a.group.is_empty())
    );
    assert!(
        answers.iter().all(|a| a.bytes > 100 * a.items.max(1)),
        "each answer's body is counted: {answers:?}"
    );
    assert!(answers.iter().all(|a| a.first_page() && a.last_page()));
    // A paginated list: its pages, the first and the last marked.
    let api = Api::<ConfigMap>::all(sharded_client(&client, &halves[0]));
    let first = api.list(&ListParams::default().limit(7)).await.unwrap();
    let token = first.metadata.continue_.unwrap();
    api.list(&ListParams::default().limit(100).continue_token(&token))
        .await
        .unwrap();
    let pages = &s.handle().lists()[3..];
    let summary: Vec<(bool, bool, usize)> = pages
        .iter()
        .map(|a| (a.first_page(), a.last_page(), a.items))
        .collect();
    assert_eq!(summary, vec![(true, false, 7), (false, true, held[0] - 7)]);
    assert_eq!(
        pages[1].continued, pages[0].next,
        "a page carries the token of the page before"
    );
}

#[tokio::test]
async fn a_namespace_key_keeps_every_object_of_a_namespace_on_one_side() {
    let (s, client) = server().await;
    seed(&s, 30);
    let [lower, upper] = halves(ShardKey::Namespace);
    for ns in ["shard-0", "shard-1", "shard-2"] {
        let side = if lower.matches_value(ns) {
            &lower
        } else {
            &upper
        };
        let other = if lower.matches_value(ns) {
            &upper
        } else {
            &lower
        };
        let mine = Api::<ConfigMap>::namespaced(sharded_client(&client, side), ns)
            .list(&ListParams::default())
            .await
            .unwrap();
        let theirs = Api::<ConfigMap>::namespaced(sharded_client(&client, other), ns)
            .list(&ListParams::default())
            .await
            .unwrap();
        assert_eq!((mine.items.len(), theirs.items.len()), (10, 0), "{ns}");
    }
}

#[tokio::test]
async fn watchers_on_complementary_shards_follow_creates_updates_and_deletes_of_their_share() {
    let (s, client) = server().await;
    seed(&s, 20);
    let halves = halves(ShardKey::Uid);
    let mut stores = Vec::new();
    for half in &halves {
        let api = Api::<ConfigMap>::all(sharded_client(&client, half));
        let (reader, writer) = reflector::store();
        let stream = reflector(writer, watcher(api, watcher::Config::default()))
            .applied_objects()
            .boxed();
        tokio::spawn(stream.for_each(|_| async {}));
        stores.push(reader);
    }
    // Changes after the initial list: 20 more objects, the 7 first of `shard-0` deleted.
    let api = Api::<ConfigMap>::namespaced(client.clone(), "shard-0");
    for i in 0..20 {
        api.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": format!("late-{i}")}})).unwrap(),
        )
        .await
        .unwrap();
    }
    for i in (0..20).step_by(3) {
        api.delete(&format!("cm-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    let expected = all_uids(&client).await;
    assert_eq!(expected.len(), 33);
    let converged = holds_within(PROMPTLY, || {
        let stores = stores.clone();
        let expected = expected.clone();
        let halves = halves.clone();
        async move {
            stores.iter().zip(&halves).all(|(store, half)| {
                let held: BTreeSet<String> = store
                    .state()
                    .iter()
                    .filter_map(|c| c.metadata.uid.clone())
                    .collect();
                let want: BTreeSet<String> = expected
                    .iter()
                    .filter(|u| half.matches_value(u))
                    .cloned()
                    .collect();
                held == want
            })
        }
    })
    .await;
    assert!(converged, "each watcher holds exactly its share");
}

#[tokio::test]
async fn a_resumed_watch_replays_only_the_shard_and_bookmarks_still_arrive() {
    let (s, client) = server_with(Config {
        bookmark_interval: Duration::from_millis(20),
        ..Config::default()
    })
    .await;
    let start = Api::<ConfigMap>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    seed(&s, 20);
    let [lower, _] = halves(ShardKey::Uid);
    let api = Api::<ConfigMap>::all(sharded_client(&client, &lower));
    let mut events = api
        .watch(&WatchParams::default(), &start)
        .await
        .unwrap()
        .boxed();
    let share = all_uids(&client)
        .await
        .into_iter()
        .filter(|u| lower.matches_value(u))
        .count();
    let mut seen = 0;
    let mut bookmarked = false;
    while seen < share || !bookmarked {
        match tokio::time::timeout(PROMPTLY, events.next()).await {
            Ok(Some(Ok(WatchEvent::Added(cm)))) => {
                assert!(lower.matches_value(&cm.uid().unwrap()), "{}", cm.name_any());
                seen += 1;
            }
            Ok(Some(Ok(WatchEvent::Bookmark(_)))) => bookmarked = seen == share,
            other => panic!("unexpected {other:?} after {seen} of {share}"),
        }
    }
}

#[tokio::test]
async fn a_bad_shard_selector_is_a_400_with_the_apiserver_message() {
    let (_s, client) = server().await;
    for (query, message) in [
        (
            "shardSelector=shardRange(object.metadata.name,%270x0000000000000000%27,%270x8000000000000000%27)",
            "invalid shard selector: unsupported field path \"object.metadata.name\"; supported: object.metadata.uid, object.metadata.namespace",
        ),
        (
            "watch=true&shardSelector=",
            "invalid shard selector: empty shard selector is not allowed; omit the parameter for unfiltered lists",
        ),
    ] {
        let request = http::Request::get(format!("/api/v1/configmaps?{query}"))
            .body(Vec::new())
            .unwrap();
        match client.request::<serde_json::Value>(request).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(
                    (status.code, status.reason.as_str(), status.message.as_str()),
                    (400, "BadRequest", message)
                );
            }
            other => panic!("{query}: expected a 400, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn without_the_gate_the_parameter_is_ignored_and_the_missing_shard_info_says_so() {
    let (s, client) = server_with(Config {
        feature_gates: FeatureGates {
            sharded_list_and_watch: false,
        },
        ..Config::default()
    })
    .await;
    seed(&s, 12);
    let [lower, _] = halves(ShardKey::Uid);
    assert!(
        !server_shards(&client, "/api/v1/configmaps", &lower)
            .await
            .unwrap()
    );
    let listed = Api::<ConfigMap>::all(sharded_client(&client, &lower))
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 12, "everything, unfiltered");
    let answer = s.handle().lists().pop().unwrap();
    assert_eq!(
        (answer.shard_selector, answer.items),
        (None, 12),
        "the list log says no selector applied"
    );
    // An invalid selector is not even read.
    let request = http::Request::get("/api/v1/configmaps?shardSelector=nonsense")
        .body(Vec::new())
        .unwrap();
    assert!(client.request::<serde_json::Value>(request).await.is_ok());
}
