//! Namespace churn for the chaos harness: namespaces created (labelled or not), labelled,
//! unlabelled and deleted between the writer's writes, while the configs choose namespaces by
//! `namespaceSelector: <SELECTED>=yes`. The model of what the cache holds is the server's
//! namespaces as they are at the check, read one GET at a time.
//!
//! `blind` is the switch that shows the check able to fail: the server refuses every LIST and
//! WATCH of namespaces after the manager's first sync, so the manager never learns of the
//! churn, and the check must report the namespaces that entered or left.

use informant::apiserver::{Handle, TestServer, Verb};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{Figures, Rng, World};

/// The label the configs' `namespaceSelector` requires, with the value `yes`.
pub const SELECTED: &str = "chaos.informant.dev/in";

/// The namespaces that come and go.
pub const CHURN_NAMESPACES: [&str; 4] = ["churn-a", "churn-b", "churn-c", "churn-d"];

/// Namespace churn in a chaos run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Churn {
    /// The manager is kept from seeing any namespace change (the check must fail).
    pub blind: bool,
}

impl Churn {
    /// The churn namespaces before the manager starts: `churn-a` and `churn-c` labelled,
    /// `churn-b` not, `churn-d` absent.
    pub(super) fn seed_namespaces(server: &TestServer) {
        let h = server.handle();
        h.create(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "churn-a", "labels": {SELECTED: "yes"}}}))
            .unwrap();
        h.create(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "churn-b"}}))
            .unwrap();
        h.create(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "churn-c", "labels": {SELECTED: "yes"}}}))
            .unwrap();
    }

    /// Keeps the manager from listing or watching namespaces, when blind.
    pub(super) fn blind(self, h: &Handle) {
        if self.blind {
            h.fail_next(Some(Verb::List), Some("namespaces"), u32::MAX, 503);
            h.fail_next(Some(Verb::Watch), Some("namespaces"), u32::MAX, 503);
        }
    }

    /// One change of one churn namespace drawn from `rng`: created (labelled half the time)
    /// when absent; labelled, unlabelled or deleted when present. A request refused by an
    /// injected fault changes nothing.
    pub(super) async fn round(self, world: &World, rng: &mut Rng, figures: &mut Figures) {
        let name = *rng.pick(&CHURN_NAMESPACES);
        let api = Api::<Namespace>::all(world.client.clone());
        let Ok(current) = api.get_opt(name).await else {
            return;
        };
        let done = match current {
            None => {
                let labels = if rng.chance(50) {
                    json!({SELECTED: "yes"})
                } else {
                    json!({})
                };
                let namespace: Namespace =
                    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))
                        .unwrap();
                api.create(&PostParams::default(), &namespace)
                    .await
                    .map(|_| "namespace-created")
            }
            Some(ns) if ns.metadata.deletion_timestamp.is_some() => return,
            Some(_) => match rng.below(3) {
                0 => {
                    let patch = json!({"metadata": {"labels": {SELECTED: "yes"}}});
                    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                        .await
                        .map(|_| "namespace-labelled")
                }
                1 => {
                    let patch = json!({"metadata": {"labels": {SELECTED: null}}});
                    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                        .await
                        .map(|_| "namespace-unlabelled")
                }
                _ => api
                    .delete(name, &DeleteParams::default())
                    .await
                    .map(|_| "namespace-deleted"),
            },
        };
        if let Ok(what) = done {
            figures.fault(what);
        }
    }
}
