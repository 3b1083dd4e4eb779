use super::*;
use crate::cache::typed::{As, gvk_of};
use k8s_openapi::api::core::v1::ConfigMap;

fn cm(value: &str) -> DynamicObject {
    let mut obj = DynamicObject::new("one", &ApiResource::erase::<ConfigMap>(&())).within("a");
    obj.data = serde_json::json!({ "data": { "k": value } });
    obj
}

fn typed(store: &ObjectStore) -> Option<Arc<ConfigMap>> {
    store
        .get_as(Some("a"), "one", &As::<ConfigMap>::new())
        .unwrap()
        .map(|obj| obj.downcast::<ConfigMap>().unwrap())
}

/// The bytes of every object in a compact store, summed from the store itself.
fn summed(store: &ObjectStore) -> i64 {
    let Reader::Compact(reader) = &store.reader else {
        panic!("not compact")
    };
    reader.state().iter().map(|o| held(o).0).sum()
}

fn named(name: &str, value: &str) -> DynamicObject {
    let mut obj = cm(value);
    obj.metadata.name = Some(name.into());
    obj
}

#[test]
fn a_compact_store_counts_the_bytes_its_objects_hold_through_every_event() {
    let resource = ApiResource::erase::<ConfigMap>(&());
    let (store, mut writer) = ObjectStore::new(gvk_of::<ConfigMap>(), &resource, false);
    assert_eq!(store.bytes(), Some(0));
    let mut seen = Vec::new();
    for event in [
        watcher::Event::Init,
        watcher::Event::InitApply(named("one", "v1")),
        watcher::Event::InitApply(named("two", "v2")),
        watcher::Event::InitDone,
        watcher::Event::Apply(named("one", &"x".repeat(1000))),
        watcher::Event::Apply(named("three", "v3")),
        watcher::Event::Delete(named("two", "v2")),
        // A relist replaces everything: the bytes are the new list's.
        watcher::Event::Init,
        watcher::Event::InitApply(named("four", "v4")),
        watcher::Event::InitDone,
        watcher::Event::Delete(named("absent", "v")),
    ] {
        writer.apply(&event);
        if matches!(event, watcher::Event::Init | watcher::Event::InitApply(_)) {
            continue; // the store is unchanged until InitDone
        }
        assert_eq!(store.bytes(), Some(summed(&store)), "after {event:?}");
        seen.push(summed(&store));
    }
    assert!(
        seen[1] > seen[0] + 900,
        "a larger object adds its bytes: {seen:?}"
    );
    assert!(
        seen[3] < seen[2],
        "a delete frees its object's bytes: {seen:?}"
    );
    assert_eq!(store.len(), 1);
    let one = CompactObject::encode(&named("four", "v4")).unwrap();
    assert_eq!(
        store.bytes(),
        Some(i64::try_from(one.held_bytes()).unwrap())
    );
}

/// What a transform that empties `data` saves on `obj`: its bytes as served less its
/// bytes transformed; and the event of the transformed object with that saving.
fn transformed(obj: &DynamicObject) -> (watcher::Event<DynamicObject>, Option<usize>) {
    let served = CompactObject::encode(obj).unwrap().held_bytes();
    let mut out = obj.clone();
    out.data = serde_json::json!({});
    (watcher::Event::Apply(out), Some(served))
}

#[test]
fn a_compact_store_counts_what_a_transform_saved_and_forgets_it_with_the_object() {
    let resource = ApiResource::erase::<ConfigMap>(&());
    let (store, mut writer) = ObjectStore::new(gvk_of::<ConfigMap>(), &resource, false);
    let saved_on = |obj: &DynamicObject| {
        let mut empty = obj.clone();
        empty.data = serde_json::json!({});
        let n = |o: &DynamicObject| CompactObject::encode(o).unwrap().held_bytes();
        i64::try_from(n(obj) - n(&empty)).unwrap()
    };
    let (big, small) = (named("one", &"x".repeat(1000)), named("two", "v"));
    for obj in [&big, &small] {
        let (event, served) = transformed(obj);
        writer.apply_transformed(&event, served);
    }
    assert_eq!(store.saved_bytes(), Some(saved_on(&big) + saved_on(&small)));
    assert!(saved_on(&big) > 1000, "{}", saved_on(&big));
    // Replaced by a smaller object, then deleted: the count follows the stored object.
    let (event, served) = transformed(&named("one", "y"));
    writer.apply_transformed(&event, served);
    assert_eq!(
        store.saved_bytes(),
        Some(saved_on(&named("one", "y")) + saved_on(&small))
    );
    writer.apply(&watcher::Event::Delete(named("two", "v")));
    assert_eq!(store.saved_bytes(), Some(saved_on(&named("one", "y"))));
    // A relist without a transform saves nothing.
    for event in [
        watcher::Event::Init,
        watcher::Event::InitApply(big.clone()),
        watcher::Event::InitDone,
    ] {
        writer.apply(&event);
    }
    assert_eq!(store.saved_bytes(), Some(0));
    assert_eq!(store.bytes(), Some(summed(&store)));
}

#[test]
fn a_shared_store_does_not_claim_a_byte_count() {
    let resource = ApiResource::erase::<ConfigMap>(&());
    let (store, mut writer) = ObjectStore::new(gvk_of::<ConfigMap>(), &resource, true);
    writer.apply(&watcher::Event::Apply(cm("v1")));
    assert_eq!(store.bytes(), None);
    assert_eq!(store.saved_bytes(), None);
}

#[test]
fn a_shared_store_makes_a_new_typed_copy_when_the_object_changes() {
    let resource = ApiResource::erase::<ConfigMap>(&());
    let (store, mut writer) = ObjectStore::new(gvk_of::<ConfigMap>(), &resource, true);
    writer.apply(&watcher::Event::Init);
    writer.apply(&watcher::Event::InitApply(cm("v1")));
    writer.apply(&watcher::Event::InitDone);
    let first = typed(&store).unwrap();
    assert!(Arc::ptr_eq(&first, &typed(&store).unwrap()));

    writer.apply(&watcher::Event::Apply(cm("v2")));
    let second = typed(&store).unwrap();
    assert!(!Arc::ptr_eq(&first, &second));
    assert_eq!(first.data.as_ref().unwrap()["k"], "v1");
    assert_eq!(second.data.as_ref().unwrap()["k"], "v2");
    assert!(Arc::ptr_eq(&second, &typed(&store).unwrap()));

    writer.apply(&watcher::Event::Delete(cm("v2")));
    assert!(typed(&store).is_none());
    assert_eq!(store.len(), 0);
}

#[test]
fn a_shared_store_converts_a_second_type_of_the_same_kind_on_each_read() {
    /// Another Rust type for the `ConfigMap` kind (a controller's partial view).
    #[derive(serde::Deserialize)]
    struct Keys {
        data: std::collections::BTreeMap<String, String>,
    }
    let resource = ApiResource::erase::<ConfigMap>(&());
    let (store, mut writer) = ObjectStore::new(gvk_of::<ConfigMap>(), &resource, true);
    writer.apply(&watcher::Event::Apply(cm("v1")));
    let first = typed(&store).unwrap();
    let keys = store
        .get_as(Some("a"), "one", &As::<Keys>::new())
        .unwrap()
        .unwrap()
        .downcast::<Keys>()
        .unwrap();
    assert_eq!(keys.data["k"], "v1");
    assert!(
        Arc::ptr_eq(&first, &typed(&store).unwrap()),
        "the first type keeps its slot"
    );
}
