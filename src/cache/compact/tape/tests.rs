use super::*;
use serde_json::{Value, json};

fn tape_of(value: &impl serde::Serialize) -> (Vec<u8>, String) {
    let (mut structure, mut strings) = (Vec::new(), String::new());
    encode(
        &serde_json::to_vec(value).unwrap(),
        &mut structure,
        &mut strings,
    )
    .unwrap();
    (structure, strings)
}

fn roundtrip(value: &Value) -> Value {
    let (structure, strings) = tape_of(value);
    let mut reader = Tape::new(&structure, &strings);
    let back = de::Deserialize::deserialize(&mut reader).unwrap();
    reader.end().unwrap();
    back
}

#[test]
fn every_json_value_reads_back_as_it_was() {
    let long = "x".repeat(300);
    let value = json!({
        "null": null, "t": true, "f": false,
        "u": 18_446_744_073_709_551_615_u64, "i": -9_223_372_036_854_775_808_i64,
        "float": 1.5, "zero": 0.0, "exp": 1e300,
        "s": "quote \" backslash \\ newline \n unicode é ☃", "long": long,
        "arr": [1, "a", [], {}, [null]],
        "nested": {"a": {"b": {"c": []}}},
        "": "empty key",
    });
    assert_eq!(roundtrip(&value), value);
    for scalar in [json!(null), json!(7), json!("s"), json!([]), json!({})] {
        assert_eq!(roundtrip(&scalar), scalar);
    }
}

#[test]
fn words_and_strings_of_every_length_read_back_as_they_were() {
    let mut value = serde_json::Map::new();
    for word in super::super::words::WORDS {
        value.insert((*word).to_owned(), json!(word));
    }
    for len in [0, 1, 63, 64, 65, 127, 128, 8191, 8192, 20_000] {
        value.insert(format!("len-{len}"), json!("y".repeat(len)));
    }
    let value = Value::Object(value);
    assert_eq!(roundtrip(&value), value);
    // Each word, as a key and as a value, costs one or two bytes of structure and none of
    // text.
    let (structure, strings) = tape_of(&json!({"lastTransitionTime": "True"}));
    assert_eq!(strings, "");
    assert_eq!(structure.len(), 5 + 1 + 1 + 1);
}

#[test]
fn uuids_and_times_are_kept_as_bytes_and_read_back_as_text() {
    let uid = "0f8e2b1c-3d4a-4b5c-9d6e-7f8091a2b3c4";
    let time = "2026-11-27T03:04:05Z";
    let value = json!({"uid": uid, "t": time, "list": [uid, time]});
    let (structure, strings) = tape_of(&value);
    // Keys in order: `list`, `t` (text), `uid` (a word); each UUID 17 bytes, each time 8.
    assert_eq!(strings, "listt", "only two keys are text");
    assert_eq!(structure.len(), 5 + 3 + 5 + 2 * (17 + 8), "{structure:?}");
    assert_eq!(roundtrip(&value), value);
    // Near misses stay text, exactly as they were.
    for text in [
        "0F8E2B1C-3D4A-4B5C-9D6E-7F8091A2B3C4",
        "0f8e2b1c-3d4a-4b5c-9d6e-7f8091a2b3c",
        "0f8e2b1c-3d4a-4b5c-9d6e_7f8091a2b3c4",
        "0f8e2b1c-3d4a-4b5c-9d6e-7f8091a2b3cg",
        "2026-11-27T03:04:05.123456Z",
        "2026-11-27 03:04:05Z",
        "2026-11-27T03:04:05+00:00",
        "2026-1a-27T03:04:05Z",
    ] {
        let (_, strings) = tape_of(&json!(text));
        assert_eq!(strings, text);
        assert_eq!(roundtrip(&json!(text)), json!(text));
    }
    // Typed reads: the Time and the uid of an object, as serde_json reads them.
    let cm = json!({"metadata": {"name": "c", "uid": uid, "creationTimestamp": time}});
    let (structure2, strings2) = tape_of(&cm);
    let from_tape: k8s_openapi::api::core::v1::ConfigMap =
        de::Deserialize::deserialize(&mut Tape::new(&structure2, &strings2)).unwrap();
    assert_eq!(from_tape, serde_json::from_value(cm).unwrap());
}

#[test]
fn typed_reads_match_reading_the_json() {
    use k8s_openapi::api::core::v1::Pod;
    let pod = json!({
        "metadata": {"name": "p", "labels": {"a": "b"}, "creationTimestamp": "2024-01-02T03:04:05Z"},
        "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}],
                 "resources": {"limits": {"cpu": "500m"}},
                 "livenessProbe": {"httpGet": {"port": "http", "path": "/"}}}]},
        "status": {"phase": "Running", "unknownField": {"x": [1, 2]}},
    });
    let (structure, strings) = tape_of(&pod);
    let from_tape: Pod =
        de::Deserialize::deserialize(&mut Tape::new(&structure, &strings)).unwrap();
    let from_json: Pod = serde_json::from_value(pod).unwrap();
    assert_eq!(from_tape, from_json);
}

#[test]
fn enums_read_as_serde_json_reads_them() {
    #[derive(serde::Deserialize, PartialEq, Debug)]
    enum E {
        Unit,
        Newtype(u8),
        Tuple(u8, String),
        Struct { a: bool },
    }
    for value in [
        json!("Unit"),
        json!({"Newtype": 3}),
        json!({"Tuple": [1, "x"]}),
        json!({"Struct": {"a": true}}),
    ] {
        let (structure, strings) = tape_of(&value);
        let from_tape: E =
            de::Deserialize::deserialize(&mut Tape::new(&structure, &strings)).unwrap();
        assert_eq!(from_tape, serde_json::from_value::<E>(value).unwrap());
    }
}

#[test]
fn truncated_tapes_are_errors_not_panics() {
    let (structure, strings) = tape_of(&json!({"a": ["bé", 1, {"c": null}]}));
    for cut in 0..structure.len() {
        let mut reader = Tape::new(&structure[..cut], &strings);
        let read: Result<Value, _> = de::Deserialize::deserialize(&mut reader);
        assert!(read.is_err(), "cut at {cut}");
    }
    for cut in 0..strings.len() {
        let mut reader = Tape::new(&structure, strings.get(..cut).unwrap_or(""));
        let read: Result<Value, _> = de::Deserialize::deserialize(&mut reader);
        assert!(read.is_err(), "strings cut at {cut}");
    }
}
