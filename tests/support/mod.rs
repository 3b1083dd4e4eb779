//! Helpers shared by the integration tests that need the `CacheConfig` CRD on the embedded API
//! server (`mod support;` in each).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};

/// Installs the `cacheconfigs.informant.dev` CRD, as `kubectl apply -f crds/` does.
pub async fn install_cacheconfig_crd(client: &Client) {
    let crd: CustomResourceDefinition =
        serde_yaml::from_str(&informant::config::crd_yaml().unwrap()).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
}
