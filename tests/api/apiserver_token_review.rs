//! `TokenReview` on the embedded API server with RBAC on, as kube-apiserver answers it: the
//! tokens it issued authenticate as their `ServiceAccount` for the audiences they were issued
//! for, others do not, and creating a review needs `create tokenreviews`.

use http_body_util::BodyExt;
use informant::apiserver::TestServer;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

async fn send(client: &Client, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(
            body.map(|b| serde_json::to_vec(&b).unwrap())
                .unwrap_or_default(),
        ))
        .unwrap();
    let response = client.send(request).await.unwrap();
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn review(token: &str, audiences: Option<&[&str]>) -> TokenReview {
    TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_owned()),
            audiences: audiences.map(|a| a.iter().map(|s| (*s).to_owned()).collect()),
        },
        ..TokenReview::default()
    }
}

#[tokio::test]
async fn token_reviews_authenticate_the_servers_tokens_for_their_audiences() {
    let server = TestServer::start_with_rbac().await.unwrap();
    let admin = server.client().await.unwrap();
    let handle = server.handle();
    handle
        .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}}))
        .unwrap();
    let account = handle
        .create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "inf", "namespace": "ops"}}))
        .unwrap();
    let token = server.token("ops", "inf").await.unwrap();
    let reviews: Api<TokenReview> = Api::all(admin.clone());
    let create = |r: TokenReview| {
        let reviews = reviews.clone();
        async move { reviews.create(&PostParams::default(), &r).await.unwrap() }
    };

    let status = create(review(&token, None)).await.status.unwrap();
    assert_eq!(status.authenticated, Some(true), "{status:?}");
    let user = status.user.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:ops:inf")
    );
    assert_eq!(user.uid.as_deref(), account["metadata"]["uid"].as_str());
    assert_eq!(
        user.groups.unwrap(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:ops",
            "system:authenticated"
        ]
    );
    assert_eq!(status.audiences.unwrap(), [API_AUDIENCE]);
    assert_eq!(status.error, None);

    // The administrator's token is the administrator.
    let root = create(review(handle.admin_token(), None))
        .await
        .status
        .unwrap();
    assert_eq!(root.authenticated, Some(true));
    let root = root.user.unwrap();
    assert_eq!(root.username.as_deref(), Some("admin"));
    assert!(root.groups.unwrap().contains(&"system:masters".to_owned()));

    let unknown = create(review("not-a-token", None)).await.status.unwrap();
    assert_eq!(unknown.authenticated, Some(false));
    assert_eq!(unknown.error.as_deref(), Some("invalid bearer token"));
    assert_eq!(unknown.audiences, None);

    // A token for another audience (`kubectl create token inf --audience vault`).
    let (code, issued) = send(
        &admin,
        "POST",
        "/api/v1/namespaces/ops/serviceaccounts/inf/token",
        Some(
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"audiences": ["vault"]}}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{issued}");
    let vault = issued["status"]["token"].as_str().unwrap().to_owned();
    let elsewhere = create(review(&vault, None)).await.status.unwrap();
    assert_eq!(elsewhere.authenticated, Some(false));
    assert_eq!(
        elsewhere.error.as_deref(),
        Some(
            "token audiences [\"vault\"] is invalid for the target audiences [\"https://kubernetes.default.svc.cluster.local\"]"
        )
    );
    let for_vault = create(review(&vault, Some(&["vault", "other"])))
        .await
        .status
        .unwrap();
    assert_eq!(for_vault.authenticated, Some(true));
    assert_eq!(for_vault.audiences.unwrap(), ["vault"]);

    // The token ends with its account.
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admin.clone(), "ops")
        .delete("inf", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    let gone = create(review(&token, None)).await.status.unwrap();
    assert_eq!(gone.authenticated, Some(false));
}

#[tokio::test]
async fn a_token_review_needs_a_token_and_the_create_grant_and_is_discovered() {
    let server = TestServer::start_with_rbac().await.unwrap();
    let admin = server.client().await.unwrap();
    let path = "/apis/authentication.k8s.io/v1/tokenreviews";
    let (code, body) = send(
        &admin,
        "POST",
        path,
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}})),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        body["message"],
        "token is required for TokenReview in authentication"
    );

    server
        .handle()
        .create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "plain", "namespace": "default"}}))
        .unwrap();
    let token = server.token("default", "plain").await.unwrap();
    let plain = server.client_with_token(&token).await.unwrap();
    let (code, body) = send(
        &plain,
        "POST",
        path,
        Some(
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                    "spec": {"token": token}}),
        ),
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["message"],
        "tokenreviews.authentication.k8s.io is forbidden: User \"system:serviceaccount:default:plain\" cannot create resource \"tokenreviews\" in API group \"authentication.k8s.io\" at the cluster scope"
    );

    let (code, discovery) = send(&admin, "GET", "/apis/authentication.k8s.io/v1", None).await;
    assert_eq!(code, 200);
    let entry = discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "tokenreviews")
        .cloned();
    assert_eq!(
        entry.map(|e| (
            e["kind"].clone(),
            e["namespaced"].clone(),
            e["verbs"].clone()
        )),
        Some((json!("TokenReview"), json!(false), json!(["create"])))
    );
}
