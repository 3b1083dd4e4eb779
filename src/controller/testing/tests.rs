//! The test kit's own tests: the cache it reads, the writes its recording fake takes.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use kube::runtime::controller::Action;

use super::*;

/// A reconcile that reads its object through the cache and requeues after the state's
/// period.
async fn reconcile(
    configmap: Arc<ConfigMap>,
    ctx: Arc<Context<Duration>>,
) -> Result<Action, cache::Error> {
    let name = configmap.meta().name.as_deref().unwrap_or_default();
    let _: ConfigMap = ctx.get(Some("default"), name).await?;
    Ok(Action::requeue(*ctx.data()))
}

#[tokio::test]
async fn a_reconcile_sees_the_state_the_kit_context_carries() {
    let configmap = ConfigMap {
        metadata: ObjectMeta {
            name: Some("db".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    let kit = TestContext::new().with(&configmap).unwrap();
    for period in [Duration::from_secs(42), Duration::from_secs(7)] {
        let ctx = Arc::new(kit.context().with_data(period));
        let action = reconcile(Arc::new(configmap.clone()), ctx).await.unwrap();
        assert_eq!(action, Action::requeue(period));
    }
}

// The recording fake is the embedded API server's: the `testing` feature.
#[cfg(feature = "testing")]
mod recording {
    use std::collections::BTreeMap;

    use kube::CustomResourceExt as _;
    use kube::api::{Api, Patch, PatchParams};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    use super::*;
    use crate::controller::WriteError;

    /// The operator of issue 47, cut to its writes: a `Website` owning a `ConfigMap`.
    #[derive(kube::CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
    #[kube(
        group = "example.com",
        version = "v1",
        kind = "Website",
        namespaced,
        status = "WebsiteStatus"
    )]
    struct WebsiteSpec {
        message: String,
    }

    #[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    struct WebsiteStatus {
        ready: bool,
        observed_generation: Option<i64>,
    }

    async fn reconcile(site: Arc<Website>, ctx: Arc<Context>) -> Result<Action, WriteError> {
        let content = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("{}-content", site.name_any())),
                namespace: site.namespace(),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(
                "message".to_owned(),
                site.spec.message.clone(),
            )])),
            ..ConfigMap::default()
        };
        ctx.apply_owned(site.as_ref(), &content).await?;
        let status = WebsiteStatus {
            ready: true,
            observed_generation: None,
        };
        ctx.apply_status(site.as_ref(), &status).await?;
        Ok(Action::await_change())
    }

    fn kit() -> TestContext {
        let mut site = Website::new(
            "site",
            WebsiteSpec {
                message: "hello".into(),
            },
        );
        site.metadata.namespace = Some("default".into());
        TestContext::recording()
            .unwrap()
            .with(&Website::crd())
            .unwrap()
            .with(&site)
            .unwrap()
    }

    use kube::ResourceExt as _;

    #[tokio::test]
    async fn the_fake_records_a_reconciles_writes_and_applies_them() {
        let kit = kit();
        let site: Website = kit.stored(Some("default"), "site").unwrap();
        let uid = site.uid().unwrap();
        let ctx = Arc::new(kit.context().with_field_manager("website"));
        let action = reconcile(Arc::new(site), ctx).await.unwrap();
        assert_eq!(action, Action::await_change());

        let writes = kit.writes();
        assert_eq!(writes.len(), 2, "{writes:#?}");
        let child = &writes[0];
        assert!(child.is_apply() && !child.is_status(), "{child:?}");
        assert_eq!(
            child.path,
            "/api/v1/namespaces/default/configmaps/site-content"
        );
        assert_eq!(child.field_manager().as_deref(), Some("website"));
        let owner = &child.body.as_ref().unwrap()["metadata"]["ownerReferences"][0];
        assert_eq!(owner["uid"], uid.as_str());
        assert_eq!(owner["controller"], true);
        assert_eq!(owner["blockOwnerDeletion"], true);
        assert_eq!(child.status, http::StatusCode::CREATED);

        let status = &writes[1];
        assert!(status.is_apply() && status.is_status(), "{status:?}");
        assert_eq!(
            status.path,
            "/apis/example.com/v1/namespaces/default/websites/site/status"
        );
        // The typed status, its `observedGeneration` filled by the helper.
        assert_eq!(
            status.body.as_ref().unwrap()["status"],
            json!({"ready": true, "observedGeneration": 1})
        );

        // The writes are applied: the cache reads what they stored.
        let content: ConfigMap = kit.stored(Some("default"), "site-content").unwrap();
        assert_eq!(content.data.unwrap()["message"], "hello");
        let managers: Vec<_> = content
            .metadata
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| m.manager)
            .collect();
        assert_eq!(managers, ["website"]);
        let site: Website = kit.stored(Some("default"), "site").unwrap();
        let status = site.status.unwrap();
        assert!(status.ready);
        assert_eq!(status.observed_generation, Some(1));
    }

    #[tokio::test]
    async fn a_child_another_owner_controls_is_refused_unwritten() {
        let theirs = ConfigMap {
            metadata: ObjectMeta {
                name: Some("site-content".into()),
                namespace: Some("default".into()),
                owner_references: Some(vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        api_version: "example.com/v1".into(),
                        kind: "Website".into(),
                        name: "other".into(),
                        uid: "uid-of-other".into(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    },
                ]),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        let kit = kit().with(&theirs).unwrap();
        let site: Website = kit.stored(Some("default"), "site").unwrap();
        let refused = reconcile(Arc::new(site), Arc::new(kit.context())).await;
        match refused {
            Err(WriteError::AlreadyOwned {
                kind,
                name,
                owner_kind,
                owner_name,
            }) => {
                assert_eq!(
                    (kind.as_str(), name.as_str()),
                    ("ConfigMap", "site-content")
                );
                assert_eq!(
                    (owner_kind.as_str(), owner_name.as_str()),
                    ("Website", "other")
                );
            }
            other => panic!("expected AlreadyOwned, got {other:?}"),
        }
        assert!(kit.writes().is_empty(), "{:#?}", kit.writes());
    }

    #[tokio::test]
    async fn the_fake_keeps_server_side_applys_field_ownership() {
        let kit = kit();
        let site: Website = kit.stored(Some("default"), "site").unwrap();
        let ctx = Arc::new(kit.context().with_field_manager("website"));
        reconcile(Arc::new(site), ctx).await.unwrap();

        // Another manager changing the field the controller owns conflicts, unforced.
        let api: Api<ConfigMap> = Api::namespaced(kit.fake().unwrap().client(), "default");
        let theirs = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "site-content"}, "data": {"message": "theirs"}});
        let refused = api
            .patch(
                "site-content",
                &PatchParams::apply("intruder"),
                &Patch::Apply(&theirs),
            )
            .await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(s)) if s.code == 409),
            "{refused:?}"
        );
        let last = kit.requests().pop().unwrap();
        assert_eq!(last.status, http::StatusCode::CONFLICT);
        let content: ConfigMap = kit.stored(Some("default"), "site-content").unwrap();
        assert_eq!(content.data.unwrap()["message"], "hello");
    }

    #[tokio::test]
    async fn a_kit_writes_through_the_client_the_test_gives() {
        let kit = kit();
        let site: Website = kit.stored(Some("default"), "site").unwrap();
        let refuse = tower::service_fn(|_request: http::Request<kube::client::Body>| async {
            let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "reason": "Forbidden", "code": 403, "message": "no"});
            http::Response::builder()
                .status(403)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(
                    serde_json::to_vec(&body).unwrap_or_default(),
                ))
        });
        let kit = kit.with_client(kube::Client::new(refuse, "default"));
        let refused = reconcile(Arc::new(site), Arc::new(kit.context())).await;
        assert!(
            matches!(&refused, Err(WriteError::Api { source: kube::Error::Api(s), .. }) if s.code == 403),
            "{refused:?}"
        );
        assert!(kit.writes().is_empty(), "the fake saw no write");
    }
}
