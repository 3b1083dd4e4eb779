//! Resources that share storage with another: `events.k8s.io/v1` events are stored as core
//! `v1` events, as in kube-apiserver, so an event written through one API is read through the
//! other. Field renames follow `k8s.io/kubernetes/pkg/apis/events/v1/conversion.go`.

use bytes::Bytes;
use serde_json::{Map, Value};

use super::registry::{ResourceKey, ResourceType};
use super::store::Stored;

/// `(core v1 field, events.k8s.io/v1 field)`.
const EVENT_RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

fn rename(value: &Value, api_version: &str, from_core: bool) -> Value {
    let Some(map) = value.as_object() else {
        return value.clone();
    };
    let mut out = Map::with_capacity(map.len());
    for (k, v) in map {
        let renamed = EVENT_RENAMES.iter().find_map(|(core, v1)| {
            if from_core {
                (k == core).then_some(*v1)
            } else {
                (k == v1).then_some(*core)
            }
        });
        out.insert(renamed.unwrap_or(k).to_string(), v.clone());
    }
    out.insert("apiVersion".into(), Value::String(api_version.to_string()));
    Value::Object(out)
}

impl ResourceType {
    /// The key under which this resource's objects are stored.
    #[must_use]
    pub fn storage_key(&self) -> ResourceKey {
        self.storage.clone().unwrap_or_else(|| self.key())
    }

    /// A stored object as this resource presents it.
    #[must_use]
    pub fn view(&self, stored: &Value) -> Value {
        if self.storage.is_some() {
            rename(stored, &self.api_version(self.preferred_version()), true)
        } else {
            stored.clone()
        }
    }

    /// A stored object's JSON as this resource presents it (no copy when nothing changes).
    #[must_use]
    pub fn view_bytes(&self, stored: &Stored) -> Bytes {
        if self.storage.is_some() {
            Bytes::from(serde_json::to_vec(&self.view(&stored.value)).unwrap_or_default())
        } else {
            stored.json.clone()
        }
    }

    /// An object in this resource's form, turned into the stored form.
    #[must_use]
    pub fn to_storage(&self, value: Value) -> Value {
        if self.storage.is_some() {
            rename(&value, "v1", false)
        } else {
            value
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::Registry;
    use serde_json::json;

    #[test]
    fn events_v1_round_trip_through_core_storage() {
        let reg = Registry::new();
        let rt = reg.lookup("events.k8s.io", "v1", "events").unwrap();
        assert_eq!(rt.storage_key(), ResourceKey::new("", "events"));
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "regarding": {"kind": "Pod"}, "note": "hi", "reportingController": "c"});
        let core = rt.to_storage(v1.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["kind"], "Pod");
        assert_eq!(core["message"], "hi");
        assert_eq!(core["reportingComponent"], "c");
        assert_eq!(rt.view(&core), v1);
    }

    #[test]
    fn other_resources_are_stored_as_they_are() {
        let reg = Registry::new();
        let rt = reg.lookup("", "v1", "events").unwrap();
        let v = json!({"message": "x"});
        assert_eq!(rt.to_storage(v.clone()), v);
        assert_eq!(rt.storage_key(), rt.key());
    }
}
