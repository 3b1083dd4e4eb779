//! Helpers shared by the integration tests of the manager on the embedded API server
//! (`mod support;` in each; a test binary uses some of them).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};

/// The sorted names of every `K` a read through `cache` returns.
#[allow(dead_code, reason = "not every test binary reads through a cache")]
pub async fn cached_names<K: kube::Resource<DynamicType = ()>>(
    cache: &dyn informant::cache::Cache,
) -> Vec<String> {
    let gvk = informant::cache::typed::gvk_of::<K>();
    let options = informant::cache::ListOptions::default();
    let mut names: Vec<String> = cache
        .list(&gvk, &options)
        .await
        .unwrap()
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    names.sort();
    names
}

/// Installs the `cacheconfigs.informant.dev` CRD, as `kubectl apply -f crds/` does.
#[allow(dead_code, reason = "not every test binary needs the CRD")]
pub async fn install_cacheconfig_crd(client: &Client) {
    let crd: CustomResourceDefinition =
        serde_yaml::from_str(&informant::config::crd_yaml().unwrap()).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
}
