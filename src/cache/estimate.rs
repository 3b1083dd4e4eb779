//! What a config's cache would hold on a cluster, before it runs (`informant explain
//! --estimate`): for every informer the plan starts for a `byObject` kind, its object count and
//! the bytes its store would hold, from a sample of its objects transformed and encoded as the
//! cache holds them. It only lists; it writes nothing.

use kube::api::{Api, ListParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::{self, Scope};
use serde::Serialize;

use super::compact::CompactObject;
use super::plan::{InformerScope, Kinds, Plan};
use super::settings::InformerSettings;

/// client-go's informer holds an object in about this many times its JSON (measured on
/// `ConfigMap`s by `cargo bench --bench cache`'s Go reference: 2.53×), the figure shown beside
/// ours.
pub const CLIENT_GO_JSON_RATIO: f64 = 2.53;

/// Objects a count LIST pages through at a time, where the API server does not give
/// `remainingItemCount` (with a field selector, for one).
const COUNT_PAGE: u32 = 500;

/// The estimate of one informer.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InformerEstimate {
    /// API version of the kind.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// The namespace watched; absent for every namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The label selector, when the informer has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
    /// The field selector, when the informer has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<String>,
    /// Objects the informer would hold.
    pub objects: u64,
    /// How many were sampled for their size.
    pub sampled: u64,
    /// Mean bytes the cache would hold per object (after the informer's transform).
    pub bytes_per_object: u64,
    /// `objects × bytesPerObject`.
    pub bytes: u64,
    /// Mean JSON size of an object as served.
    pub json_bytes_per_object: u64,
    /// What client-go's informer would hold for the same objects, untransformed
    /// ([`CLIENT_GO_JSON_RATIO`] × their JSON).
    pub client_go_bytes: u64,
}

/// The estimate of a whole config.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Estimate {
    /// One row per informer of a `byObject` kind.
    pub informers: Vec<InformerEstimate>,
    /// The bytes of every row.
    pub bytes: u64,
    /// client-go's bytes for the same objects.
    pub client_go_bytes: u64,
}

/// The informers `plan` starts for its `byObject` kinds (a default cache starts its informers
/// when a kind is first read, so it has none to estimate; a kind not served has none either).
#[must_use]
pub(crate) fn informers_of(plan: &Plan) -> Vec<(GroupVersionKind, InformerScope)> {
    plan.informer_specs()
        .into_iter()
        .filter_map(|spec| match spec.kinds {
            Kinds::Only(gvk) => Some((gvk, spec.scope)),
            Kinds::Any => None,
        })
        .collect()
}

fn list_params(settings: &InformerSettings) -> ListParams {
    let mut params = ListParams::default();
    if let Some(labels) = &settings.label_selector {
        params = params.labels(&labels.to_string());
    }
    if let Some(fields) = settings.field_selector.as_ref().filter(|f| !f.is_empty()) {
        params = params.fields(&fields.to_string());
    }
    params
}

/// Estimates every informer of `plan` against the cluster of `client`, sampling at most
/// `sample` objects of each.
///
/// # Errors
///
/// A kind cannot be discovered, or a LIST fails (RBAC: `list` on every `byObject` kind).
pub async fn estimate(
    plan: &Plan,
    client: &kube::Client,
    sample: u32,
) -> Result<Estimate, kube::Error> {
    let mut total = Estimate::default();
    for (gvk, scope) in informers_of(plan) {
        let row = estimate_one(client, &gvk, &scope, sample.max(1)).await?;
        total.bytes += row.bytes;
        total.client_go_bytes += row.client_go_bytes;
        total.informers.push(row);
    }
    Ok(total)
}

async fn estimate_one(
    client: &kube::Client,
    gvk: &GroupVersionKind,
    scope: &InformerScope,
    sample: u32,
) -> Result<InformerEstimate, kube::Error> {
    let (resource, capabilities) = discovery::pinned_kind(client, gvk).await?;
    let namespace = scope
        .namespace
        .as_deref()
        .filter(|_| capabilities.scope == Scope::Namespaced);
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let settings = &scope.settings;
    let params = list_params(settings);
    let page = api.list(&params.clone().limit(sample)).await?;
    let objects = match (
        page.metadata.continue_.as_deref(),
        page.metadata.remaining_item_count,
    ) {
        (None | Some(""), _) => page.items.len() as u64,
        (_, Some(remaining)) => page.items.len() as u64 + u64::try_from(remaining).unwrap_or(0),
        _ => count(&api, &params).await?,
    };
    let (mut held, mut json) = (0_u64, 0_u64);
    let sampled = page.items.len() as u64;
    for mut obj in page.items {
        json += serde_json::to_vec(&obj).map_or(0, |v| v.len() as u64);
        if settings.metadata_only {
            // The cache holds `PartialObjectMetadata`: the metadata and an empty body.
            obj.data = serde_json::Value::Object(serde_json::Map::new());
        }
        if !settings.transform.is_identity() {
            super::transform::apply(&settings.transform, &mut obj);
        }
        held += CompactObject::encode(&obj).map_or(0, |c| c.held_bytes() as u64);
    }
    let mean = |sum: u64| sum.checked_div(sampled).unwrap_or(0);
    let (bytes_per_object, json_bytes_per_object) = (mean(held), mean(json));
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "an estimate for people, far below 2^52 bytes"
    )]
    let client_go_bytes =
        (objects as f64 * json_bytes_per_object as f64 * CLIENT_GO_JSON_RATIO) as u64;
    Ok(InformerEstimate {
        api_version: gvk.api_version(),
        kind: gvk.kind.clone(),
        namespace: namespace.map(str::to_owned),
        label_selector: settings.label_selector.as_ref().map(ToString::to_string),
        field_selector: settings
            .field_selector
            .as_ref()
            .filter(|f| !f.is_empty())
            .map(ToString::to_string),
        objects,
        sampled,
        bytes_per_object,
        // The sample's sum scaled to the count (exactly the sum when every object was sampled).
        bytes: scale(held, objects, sampled),
        json_bytes_per_object,
        client_go_bytes,
    })
}

/// `sum × objects / sampled`, rounded down; 0 when nothing was sampled.
fn scale(sum: u64, objects: u64, sampled: u64) -> u64 {
    (u128::from(sum) * u128::from(objects))
        .checked_div(u128::from(sampled))
        .map_or(0, |v| u64::try_from(v).unwrap_or(u64::MAX))
}

/// Counts the objects of `api` matching `params` by paging through their metadata.
async fn count(api: &Api<DynamicObject>, params: &ListParams) -> Result<u64, kube::Error> {
    let mut total = 0_u64;
    let mut token: Option<String> = None;
    loop {
        let mut page_params = params.clone().limit(COUNT_PAGE);
        if let Some(t) = &token {
            page_params = page_params.continue_token(t);
        }
        let page = api.list_metadata(&page_params).await?;
        total += page.items.len() as u64;
        match page.metadata.continue_ {
            Some(next) if !next.is_empty() => token = Some(next),
            _ => return Ok(total),
        }
    }
}
