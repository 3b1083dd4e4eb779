//! Conversion of custom resources between the versions of their CRD, as apiextensions-apiserver
//! converts them (`pkg/apiserver/conversion`): `strategy: None` only sets `apiVersion`;
//! `strategy: Webhook` posts one `ConversionReview` v1 for every object to convert (a list's
//! objects together) to `spec.conversion.webhook.clientConfig` and takes the converted objects
//! back, checked as kube-apiserver checks them. Objects are stored at the storage version.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use serde_json::{Value, json};

use super::admission::{self, Endpoint};
use super::registry::{ResourceKey, ResourceType};
use super::state::App;
use super::status::{ApiError, ApiResult};
use super::store::{ObjKey, Stored};

/// How long a conversion webhook may take (apiextensions-apiserver's 30 s).
const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read.
const ANSWER_LIMIT: usize = 64 * 1024 * 1024;

/// The conversion webhook of `rt`'s CRD, when it has `strategy: Webhook`.
pub(crate) fn webhook(app: &App, rt: &ResourceType) -> Option<Endpoint> {
    if !rt.custom || rt.versions.len() < 2 {
        return None;
    }
    let crd = app.store.get(
        &ResourceKey::new("apiextensions.k8s.io", "customresourcedefinitions"),
        &ObjKey::new("", &format!("{}.{}", rt.plural, rt.group)),
    )?;
    let conversion = &crd.value["spec"]["conversion"];
    if conversion["strategy"].as_str() != Some("Webhook") {
        return None;
    }
    admission::endpoint(&conversion["webhook"]["clientConfig"]).ok()
}

/// The validation errors of a CRD's `spec.conversion`, with their field paths.
pub(crate) fn validate(crd: &Value) -> Vec<String> {
    let conversion = &crd["spec"]["conversion"];
    let mut errors = Vec::new();
    match conversion["strategy"].as_str() {
        None | Some("None") => {}
        Some("Webhook") => {
            let client = &conversion["webhook"]["clientConfig"];
            if !client.is_object() {
                errors.push(
                    "spec.conversion.webhook.clientConfig: Required value: required when strategy \
                     is set to Webhook"
                        .to_string(),
                );
            } else if let Err(e) = admission::endpoint(client) {
                errors.push(format!(
                    "spec.conversion.webhook.clientConfig: Invalid value: {e}"
                ));
            }
            let versions = &conversion["webhook"]["conversionReviewVersions"];
            if !versions
                .as_array()
                .is_some_and(|v| v.iter().any(|v| v == "v1"))
            {
                errors.push(format!(
                    "spec.conversion.webhook.conversionReviewVersions: Unsupported value: \
                     {versions}: the embedded API server speaks ConversionReview v1 only"
                ));
            }
        }
        Some(other) => errors.push(format!(
            "spec.conversion.strategy: Unsupported value: {other:?}: supported values: \"None\", \
             \"Webhook\""
        )),
    }
    errors
}

/// A conversion failure, as kube-apiserver answers one it met (`ErrorToAPIStatus` of a plain
/// error: 500, reason `Unknown`).
fn failed(rt: &ResourceType, from_version: &str, list: bool, why: &str) -> ApiError {
    let kind = if list {
        format!("{}List", rt.kind)
    } else {
        rt.kind.clone()
    };
    let mut err = ApiError::internal(format!(
        "conversion webhook for {}, Kind={kind} failed: {why}",
        rt.api_version(from_version)
    ));
    err.reason = "Unknown";
    err
}

/// `items` at `version` of `rt`: converted by the CRD's webhook (one review for all of them,
/// `list` telling whether they answer a list) or by setting `apiVersion`.
///
/// # Errors
///
/// 500 when the webhook cannot be called, fails the conversion, or answers a malformed review.
pub(crate) async fn at_version(
    app: &App,
    rt: &ResourceType,
    version: &str,
    items: Vec<Arc<Stored>>,
    list: bool,
) -> ApiResult<Vec<Arc<Stored>>> {
    if !rt.custom || rt.versions.len() < 2 {
        return Ok(items);
    }
    let want = rt.api_version(version);
    let stale: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].value["apiVersion"].as_str() != Some(want.as_str()))
        .collect();
    if stale.is_empty() {
        return Ok(items);
    }
    let objects: Vec<Value> = stale.iter().map(|&i| items[i].value.clone()).collect();
    let converted = convert(app, rt, objects, version, list).await?;
    let mut items = items;
    for (&i, value) in stale.iter().zip(converted) {
        let rv = items[i].rv;
        items[i] = Arc::new(Stored::unsaved(value, rv));
    }
    Ok(items)
}

/// `objects` (all of `rt`) at `version`.
///
/// # Errors
///
/// As [`at_version`].
pub(crate) async fn convert(
    app: &App,
    rt: &ResourceType,
    objects: Vec<Value>,
    version: &str,
    list: bool,
) -> ApiResult<Vec<Value>> {
    let want = rt.api_version(version);
    let Some(endpoint) = webhook(app, rt) else {
        return Ok(objects
            .into_iter()
            .map(|mut o| {
                o["apiVersion"] = json!(want);
                o
            })
            .collect());
    };
    let from = objects
        .first()
        .and_then(|o| o["apiVersion"].as_str())
        .and_then(|av| av.rsplit('/').next())
        .unwrap_or(version)
        .to_string();
    let fail = |why: &str| failed(rt, &from, list, why);
    let uid = uuid::Uuid::new_v4().to_string();
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": want, "objects": objects},
    });
    let url = format!("{}?timeout={}s", endpoint.url, TIMEOUT.as_secs());
    let post = |why: &dyn std::fmt::Display| fail(&format!("Post {url:?}: {why}"));
    let client =
        admission::webhook_client(&app.admission, &endpoint.ca_bundle).map_err(|e| post(&e))?;
    let request = http::Request::post(&url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .body(Full::new(Bytes::from(
            serde_json::to_vec(&review).unwrap_or_default(),
        )))
        .map_err(|e| post(&e))?;
    let exchange = async {
        let response = client.request(request).await.map_err(|e| post(&e))?;
        let status = response.status();
        let bytes = Limited::new(response.into_body(), ANSWER_LIMIT)
            .collect()
            .await
            .map_err(|e| post(&e))?
            .to_bytes();
        Ok::<_, ApiError>((status, bytes))
    };
    let (status, bytes) = tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| post(&"context deadline exceeded"))??;
    if !status.is_success() {
        return Err(fail(&format!(
            "the server responded with the status code {} but did not return more information",
            status.as_u16()
        )));
    }
    let answer: Value = serde_json::from_slice(&bytes).map_err(|e| fail(&e.to_string()))?;
    let response = &answer["response"];
    if response["uid"].as_str() != Some(uid.as_str()) {
        return Err(fail(&format!(
            "expected response.uid={uid:?}, got {}",
            response["uid"]
        )));
    }
    if response["result"]["status"].as_str() != Some("Success") {
        let why = match response["result"]["message"].as_str() {
            Some(m) if !m.is_empty() => m.to_string(),
            _ => format!(
                "response.result.status was {}, not 'Success'",
                response["result"]["status"]
            ),
        };
        return Err(fail(&why));
    }
    let converted = response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if converted.len() != objects_len(&review) {
        return Err(fail(&format!(
            "returned {} objects, expected {}",
            converted.len(),
            objects_len(&review)
        )));
    }
    for (sent, back) in review["request"]["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(&converted)
    {
        if back["apiVersion"].as_str() != Some(want.as_str()) {
            return Err(fail(&format!(
                "invalid converted object: expected apiVersion {want:?}, got {}",
                back["apiVersion"]
            )));
        }
        if back["metadata"]["uid"] != sent["metadata"]["uid"]
            || back["metadata"]["name"] != sent["metadata"]["name"]
        {
            return Err(fail(
                "invalid converted object: the metadata's name or uid changed",
            ));
        }
    }
    Ok(converted)
}

fn objects_len(review: &Value) -> usize {
    review["request"]["objects"].as_array().map_or(0, Vec::len)
}
