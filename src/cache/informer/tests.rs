//! Unit tests of `informer`.

use super::*;
use crate::cache::Transform;
use futures::stream;
use k8s_openapi::api::core::v1::ConfigMap;

fn cm(ns: &str, name: &str, labels: &[(&str, &str)]) -> DynamicObject {
    let mut obj = DynamicObject::new(name, &ApiResource::erase::<ConfigMap>(&())).within(ns);
    obj.types = None;
    obj.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
    );
    obj.data = serde_json::json!({"data": {"k": "v"}});
    obj
}

fn informer(settings: InformerSettings) -> Informer {
    Informer::new(
        GroupVersionKind::gvk("", "v1", "ConfigMap"),
        ApiResource::erase::<ConfigMap>(&()),
        true,
        None,
        settings,
    )
}

async fn feed(inf: &Informer, events: Vec<Result<watcher::Event<DynamicObject>, watcher::Error>>) {
    let writer = inf.take_writer().unwrap();
    inf.run_events(stream::iter(events), writer, CancellationToken::new())
        .await;
}

#[tokio::test]
async fn informer_syncs_on_init_done_and_serves_copies() {
    let inf = informer(InformerSettings::default());
    feed(
        &inf,
        vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(cm("a", "one", &[("app", "web")]))),
            Ok(watcher::Event::InitApply(cm("b", "two", &[]))),
            Ok(watcher::Event::InitDone),
        ],
    )
    .await;
    assert!(inf.has_synced());
    inf.wait_for_sync(&CancellationToken::new()).await.unwrap();
    let one = inf.get(Some("a"), "one").unwrap();
    assert_eq!(one.types.as_ref().unwrap().kind, "ConfigMap");
    let again = inf.get(Some("a"), "one").unwrap();
    assert!(
        !Arc::ptr_eq(&one, &again),
        "deep copy hands out distinct objects"
    );
    assert!(inf.get(Some("b"), "one").unwrap_err().is_not_found());
    let sel = LabelSelector::parse("app=web").unwrap();
    assert_eq!(inf.list(None, Some(&sel), &[], None).unwrap().len(), 1);
    assert_eq!(inf.list(Some("b"), None, &[], None).unwrap().len(), 1);
    assert_eq!(inf.list(None, None, &[], Some(1)).unwrap().len(), 1);
    assert_eq!(inf.status().objects, 2);
}

#[tokio::test]
async fn compact_store_serves_field_selectors_deletes_and_independent_copies() {
    let inf = informer(InformerSettings::default());
    let mut on_node = cm("a", "one", &[("app", "web")]);
    on_node.data = serde_json::json!({"data": {"k": "v"}, "spec": {"nodeName": "n1"}});
    feed(
        &inf,
        vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(on_node)),
            Ok(watcher::Event::InitApply(cm("a", "two", &[("app", "web")]))),
            Ok(watcher::Event::InitApply(cm("b", "three", &[]))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Delete(cm("b", "three", &[]))),
        ],
    )
    .await;
    assert!(inf.store.is_compact());
    assert_eq!(inf.status().objects, 2);
    let sel = LabelSelector::parse("app=web").unwrap();
    let on_n1 = inf
        .list(None, Some(&sel), &[("spec.nodeName", "n1")], None)
        .unwrap();
    assert_eq!(on_n1.len(), 1);
    assert_eq!(on_n1[0].metadata.name.as_deref(), Some("one"));
    let by_name = inf
        .list(None, None, &[("metadata.name", "two")], None)
        .unwrap();
    assert_eq!(by_name.len(), 1);
    let sorted: Vec<_> = inf
        .list(Some("a"), None, &[], None)
        .unwrap()
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(sorted, vec!["one", "two"]);
    let mut copy = inf.get(Some("a"), "one").unwrap();
    Arc::make_mut(&mut copy).metadata.labels = None;
    let again = inf.get(Some("a"), "one").unwrap();
    assert_eq!(again.metadata.labels.as_ref().unwrap()["app"], "web");
    assert_eq!(again.data["spec"]["nodeName"], "n1");
    assert!(inf.get(Some("b"), "three").unwrap_err().is_not_found());
}

#[tokio::test]
async fn unsafe_disable_deep_copy_hands_out_the_shared_object() {
    let inf = informer(InformerSettings {
        unsafe_disable_deep_copy: true,
        ..InformerSettings::default()
    });
    feed(
        &inf,
        vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(cm("a", "one", &[]))),
            Ok(watcher::Event::InitDone),
        ],
    )
    .await;
    let one = inf.get(Some("a"), "one").unwrap();
    let again = inf.get(Some("a"), "one").unwrap();
    assert!(Arc::ptr_eq(&one, &again));
}

#[tokio::test]
async fn transform_applies_before_the_object_is_stored_in_both_forms() {
    for shared in [true, false] {
        let settings = InformerSettings {
            transform: Transform {
                drop_labels: vec!["secret".into()],
                ..Transform::default()
            },
            unsafe_disable_deep_copy: shared,
            ..InformerSettings::default()
        };
        let inf = informer(settings);
        feed(
            &inf,
            vec![
                Ok(watcher::Event::Init),
                Ok(watcher::Event::InitApply(cm(
                    "a",
                    "one",
                    &[("secret", "x"), ("app", "y")],
                ))),
                Ok(watcher::Event::InitDone),
            ],
        )
        .await;
        let labels = inf
            .get(Some("a"), "one")
            .unwrap()
            .metadata
            .labels
            .clone()
            .unwrap();
        assert_eq!(
            labels.keys().collect::<Vec<_>>(),
            vec!["app"],
            "shared={shared}"
        );
        let dropped = LabelSelector::parse("secret=x").unwrap();
        assert!(
            inf.list(None, Some(&dropped), &[], None)
                .unwrap()
                .is_empty(),
            "shared={shared}"
        );
    }
}

#[tokio::test]
async fn forbidden_list_fails_waiters_with_the_reason_instead_of_hanging() {
    let inf = informer(InformerSettings::default());
    let mut status = kube::core::Status::failure(
        "configmaps is forbidden: User \"x\" cannot list resource \"configmaps\"",
        "Forbidden",
    );
    status.code = 403;
    let forbidden = kube::Error::Api(status.boxed());
    feed(
        &inf,
        vec![Err(watcher::Error::InitialListFailed(forbidden))],
    )
    .await;
    let err = inf
        .wait_for_sync(&CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InformerFailed { .. }), "{err}");
    assert!(err.to_string().contains("forbidden"), "{err}");
    assert!(!inf.status().synced);
    assert!(inf.status().error.unwrap().contains("forbidden"));
}

#[tokio::test]
async fn a_cancelled_sync_wait_is_a_timeout() {
    let inf = informer(InformerSettings::default());
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert!(inf.wait_for_sync(&cancel).await.unwrap_err().is_timeout());
}

/// Subscribers are told the first list as `Resynced` and a list the watcher takes again while
/// the informer runs as `Relisted` (controllers reconcile every object after that one only).
#[tokio::test]
async fn the_first_list_is_resynced_and_a_later_one_relisted() {
    let (events, mut subscriber) = tokio::sync::broadcast::channel(16);
    let inf = informer(InformerSettings::default()).with_events(events);
    let list = || {
        vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(cm("a", "one", &[]))),
            Ok(watcher::Event::InitDone),
        ]
    };
    feed(&inf, list().into_iter().chain(list()).collect()).await;
    let mut seen = Vec::new();
    while let Ok(event) = subscriber.try_recv() {
        seen.push(match event {
            InformerEvent::Applied(_) => "applied",
            InformerEvent::Deleted(_) => "deleted",
            InformerEvent::Resynced => "resynced",
            InformerEvent::Relisted => "relisted",
        });
    }
    assert_eq!(seen, ["applied", "resynced", "applied", "relisted"]);
}

#[tokio::test]
async fn a_projection_lowers_the_bytes_the_informer_holds_counts_what_it_saved_and_is_named_in_its_status()
 {
    use crate::cache::projection::{ObjectPath, Projection};
    let mut held = Vec::new();
    for keep in [
        None,
        Some(vec![ObjectPath::parse("data[\"small\"]").unwrap()]),
    ] {
        let settings = InformerSettings {
            transform: Transform {
                projection: Projection::new(keep, vec![]),
                ..Transform::default()
            },
            ..InformerSettings::default()
        };
        let inf = informer(settings);
        let mut obj = cm("a", "one", &[("app", "y")]);
        obj.data = serde_json::json!({"data": {"small": "s", "large": "x".repeat(4096)}});
        feed(
            &inf,
            vec![
                Ok(watcher::Event::Init),
                Ok(watcher::Event::InitApply(obj)),
                Ok(watcher::Event::InitDone),
            ],
        )
        .await;
        let status = inf.status();
        held.push((status.bytes, status.projection, status.saved_bytes));
    }
    let (Some(full), None, None) = &held[0] else {
        panic!("{held:?}")
    };
    let (Some(projected), Some(named), Some(saved)) = &held[1] else {
        panic!("{held:?}")
    };
    assert!(*projected + 4096 <= *full, "{held:?}");
    assert_eq!(named, "keepFields[data[\"small\"]]");
    assert_eq!(
        *saved,
        full - projected,
        "what the projection saved is what the object held without it, less what it holds"
    );
}
