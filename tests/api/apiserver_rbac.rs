//! The embedded API server with authorization on (`TestServer::start_with_rbac`): tokens from
//! `TokenRequest`, kube-apiserver's RBAC decisions over HTTPS, and the 401 and 403 bodies
//! compared field by field with the ones kube-apiserver 1.37 answers.

use http_body_util::BodyExt;
use informant::apiserver::TestServer;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// Sends `method path` with a JSON `body` through `client`; the status code and the body.
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

/// Applies RBAC objects (and anything else) as the administrator.
fn apply(server: &TestServer, objects: &Value) {
    for object in objects.as_array().unwrap() {
        server.handle().create(object.clone()).unwrap();
    }
}

/// A server with RBAC on, the namespace `ops` and its `ServiceAccount` `inf`, and a client
/// holding that account's token.
async fn server_and_account() -> (TestServer, Client) {
    let server = TestServer::start_with_rbac().await.unwrap();
    let admin = server.client().await.unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(admin, "ops");
    server
        .handle()
        .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}}))
        .unwrap();
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "inf"}})).unwrap(),
        )
        .await
        .unwrap();
    let token = server.token("ops", "inf").await.unwrap();
    assert_eq!(token.len(), 64);
    let client = server.client_with_token(&token).await.unwrap();
    (server, client)
}

fn status(message: &str, reason: &str, code: u16, details: Option<Value>) -> Value {
    let mut status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    if let Some(details) = details {
        status["details"] = details;
    }
    status
}

#[tokio::test]
async fn the_403_bodies_are_kube_apiservers_field_by_field() {
    let (server, sa) = server_and_account().await;
    let (code, body) = send(&sa, "GET", "/api/v1/namespaces/ops/configmaps", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        status(
            "configmaps is forbidden: User \"system:serviceaccount:ops:inf\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"ops\"",
            "Forbidden",
            403,
            Some(json!({"kind": "configmaps"})),
        )
    );
    let (code, body) = send(&sa, "GET", "/api/v1/nodes?watch=true", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        status(
            "nodes is forbidden: User \"system:serviceaccount:ops:inf\" cannot watch resource \"nodes\" in API group \"\" at the cluster scope",
            "Forbidden",
            403,
            Some(json!({"kind": "nodes"})),
        )
    );
    let (code, body) = send(
        &sa,
        "PATCH",
        "/api/v1/namespaces/ops/pods/web/status",
        Some(json!({})),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        status(
            "pods \"web\" is forbidden: User \"system:serviceaccount:ops:inf\" cannot patch resource \"pods/status\" in API group \"\" in the namespace \"ops\"",
            "Forbidden",
            403,
            Some(json!({"name": "web", "kind": "pods"})),
        )
    );
    let (code, body) = send(&sa, "GET", "/debug/requests", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        status(
            "forbidden: User \"system:serviceaccount:ops:inf\" cannot get path \"/debug/requests\"",
            "Forbidden",
            403,
            Some(json!({})),
        )
    );
    let refused = server.handle().refusals();
    assert_eq!(refused.len(), 4);
    assert_eq!(
        (
            refused[2].verb.as_str(),
            refused[2].resource.as_str(),
            refused[2].subresource.as_str(),
            refused[2].name.as_str()
        ),
        ("patch", "pods", "status", "web")
    );
    assert!(
        refused
            .iter()
            .all(|r| r.user == "system:serviceaccount:ops:inf")
    );
}

#[tokio::test]
async fn an_unknown_token_is_401_and_no_token_is_anonymous() {
    let (server, _) = server_and_account().await;
    let stranger = server.client_with_token("not-a-token").await.unwrap();
    let (code, body) = send(&stranger, "GET", "/api/v1/namespaces", None).await;
    assert_eq!(
        (code, body),
        (401, status("Unauthorized", "Unauthorized", 401, None))
    );
    let anonymous = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(
            server.handle().kubeconfig_with_token(None),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    // system:public-info-viewer: health and version, for everyone.
    for path in ["/healthz", "/livez", "/readyz", "/version"] {
        let request = http::Request::builder()
            .uri(path)
            .body(kube::client::Body::empty())
            .unwrap();
        let response = anonymous.send(request).await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
    }
    // Discovery is for authenticated users only (system:discovery).
    let (code, body) = send(&anonymous, "GET", "/api", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/api\""
    );
    assert_eq!(server.handle().refusals()[0].code, 401);
}

#[tokio::test]
async fn a_role_grants_exactly_its_verbs_in_its_namespace() {
    let (server, sa) = server_and_account().await;
    apply(
        &server,
        &json!([
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": "reader", "namespace": "ops"},
             "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "reader", "namespace": "ops"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
             "subjects": [{"kind": "ServiceAccount", "name": "inf", "namespace": "ops"}]},
        ]),
    );
    let cms: Api<ConfigMap> = Api::namespaced(sa.clone(), "ops");
    cms.list(&ListParams::default()).await.unwrap();
    // list is not watch, nor get, nor any other namespace.
    let (code, _) = send(
        &sa,
        "GET",
        "/api/v1/namespaces/ops/configmaps?watch=1",
        None,
    )
    .await;
    assert_eq!(code, 403);
    let (code, _) = send(&sa, "GET", "/api/v1/namespaces/ops/configmaps/x", None).await;
    assert_eq!(code, 403);
    let (code, _) = send(&sa, "GET", "/api/v1/namespaces/default/configmaps", None).await;
    assert_eq!(code, 403);
    let (code, _) = send(&sa, "GET", "/api/v1/configmaps", None).await;
    assert_eq!(code, 403);
}

#[tokio::test]
async fn resource_names_allow_a_list_and_watch_only_with_a_name_selector() {
    let (server, sa) = server_and_account().await;
    apply(
        &server,
        &json!([
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ops"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d", "namespace": "ops"}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": "c-only"},
             "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["c"],
                        "verbs": ["get", "list", "watch"]}]},
            // A RoleBinding may name a ClusterRole: its rules then apply in the namespace only.
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "c-only", "namespace": "ops"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "c-only"},
             "subjects": [{"kind": "ServiceAccount", "name": "inf"}]},
        ]),
    );
    let cms: Api<ConfigMap> = Api::namespaced(sa.clone(), "ops");
    let named = cms
        .list(&ListParams::default().fields("metadata.name=c"))
        .await
        .unwrap();
    assert_eq!(named.items.len(), 1);
    cms.get("c").await.unwrap();
    let (code, body) = send(&sa, "GET", "/api/v1/namespaces/ops/configmaps", None).await;
    assert_eq!(code, 403, "{body}");
    let (code, body) = send(
        &sa,
        "GET",
        "/api/v1/namespaces/ops/configmaps?watch=true&fieldSelector=metadata.name%3Dd",
        None,
    )
    .await;
    assert_eq!(code, 403);
    // The name from the selector is the request's name, in the message and the details.
    assert_eq!(
        body,
        status(
            "configmaps \"d\" is forbidden: User \"system:serviceaccount:ops:inf\" cannot watch resource \"configmaps\" in API group \"\" in the namespace \"ops\"",
            "Forbidden",
            403,
            Some(json!({"name": "d", "kind": "configmaps"})),
        )
    );
    let (code, _) = send(&sa, "GET", "/api/v1/namespaces/default/configmaps/c", None).await;
    assert_eq!(code, 403);
}

#[tokio::test]
async fn groups_cluster_bindings_and_subresources_are_honoured() {
    let (server, sa) = server_and_account().await;
    apply(
        &server,
        &json!([
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "ops"},
             "spec": {"containers": [{"name": "c", "image": "x"}]}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": "status-writer"},
             "rules": [{"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
                       {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": "ops-accounts"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "status-writer"},
             "subjects": [{"kind": "Group", "name": "system:serviceaccounts:ops",
                           "apiGroup": "rbac.authorization.k8s.io"}]},
        ]),
    );
    let pods: Api<Pod> = Api::namespaced(sa.clone(), "ops");
    pods.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    let (code, _) = send(
        &sa,
        "PATCH",
        "/api/v1/namespaces/ops/pods/web",
        Some(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await;
    assert_eq!(code, 403, "pods/status does not grant pods");
    let (code, _) = send(&sa, "GET", "/api/v1/nodes", None).await;
    assert_eq!(code, 200, "a ClusterRoleBinding grants cluster-wide");
}

#[tokio::test]
async fn access_reviews_answer_for_the_token_and_tokens_end_with_their_account() {
    let (server, sa) = server_and_account().await;
    let review = |namespace: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"resourceAttributes": {"verb": "list", "resource": "configmaps", "namespace": namespace}}})
    };
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let (code, body) = send(&sa, "POST", path, Some(review("ops"))).await;
    assert_eq!((code, &body["status"]), (201, &json!({"allowed": false})));
    apply(
        &server,
        &json!([
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": "cm-reader"},
             "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "cm-reader", "namespace": "ops"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cm-reader"},
             "subjects": [{"kind": "ServiceAccount", "name": "inf", "namespace": "ops"}]},
        ]),
    );
    let (_, body) = send(&sa, "POST", path, Some(review("ops"))).await;
    assert_eq!(
        body["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"cm-reader/ops\" of ClusterRole \"cm-reader\" to ServiceAccount \"inf/ops\""})
    );
    let (_, body) = send(&sa, "POST", path, Some(review(""))).await;
    assert_eq!(
        body["status"]["allowed"], false,
        "all namespaces is not granted"
    );
    let (_, body) = send(
        &sa,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
    )
    .await;
    assert_eq!(
        body["status"]["userInfo"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:ops",
            "system:authenticated"
        ])
    );
    // A token dies with its ServiceAccount.
    let admin = server.client().await.unwrap();
    Api::<ServiceAccount>::namespaced(admin, "ops")
        .delete("inf", &DeleteParams::default())
        .await
        .unwrap();
    let (code, _) = send(&sa, "POST", path, Some(review("ops"))).await;
    assert_eq!(code, 401);
}

#[tokio::test]
async fn the_administrator_may_do_anything_and_impersonate() {
    let (server, _) = server_and_account().await;
    let admin = server.client().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "ops");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap(),
    )
    .await
    .unwrap();
    let (code, _) = send(&admin, "GET", "/debug/requests", None).await;
    assert_eq!(code, 200);
    let request = http::Request::builder()
        .uri("/api/v1/namespaces/ops/configmaps")
        .header("impersonate-user", "system:serviceaccount:ops:inf")
        .body(kube::client::Body::empty())
        .unwrap();
    let response = admin.send(request).await.unwrap();
    assert_eq!(response.status().as_u16(), 403, "as the ServiceAccount");
    assert!(server.handle().refusals()[0].user == "system:serviceaccount:ops:inf");
}

#[tokio::test]
async fn with_authorization_off_every_request_is_the_administrators() {
    let server = TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    let (code, body) = send(
        &client,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        Some(json!({"spec": {"resourceAttributes": {"verb": "delete", "resource": "nodes"}}})),
    )
    .await;
    assert_eq!((code, &body["status"]["allowed"]), (201, &json!(true)));
    let stranger = server.client_with_token("whatever").await.unwrap();
    let (code, _) = send(&stranger, "GET", "/api/v1/namespaces", None).await;
    assert_eq!(code, 200);
    assert!(server.handle().refusals().is_empty());
}

/// A token's lifetime is bounded as kube-apiserver bounds it (ten minutes to 2^32 seconds,
/// 422 outside), unless the server lowers the minimum (`--token-min-expiration`), which a test
/// harness does to watch a token expire.
#[tokio::test]
async fn token_lifetimes_are_bounded_and_the_minimum_can_be_lowered() {
    use std::time::Duration;
    for (minimum, shortest) in [(None, 600), (Some(Duration::from_secs(20)), 20)] {
        let mut config = informant::apiserver::Config {
            authorization: informant::apiserver::Authorization::Rbac,
            ..informant::apiserver::Config::default()
        };
        if let Some(minimum) = minimum {
            config.token_min_expiration = minimum;
        }
        let server = TestServer::start_with(config).await.unwrap();
        let admin = server.client().await.unwrap();
        server
            .handle()
            .create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                           "metadata": {"name": "inf", "namespace": "default"}}))
            .unwrap();
        let path = "/api/v1/namespaces/default/serviceaccounts/inf/token";
        let ask = |seconds: Value| json!({"spec": {"expirationSeconds": seconds}});
        let (code, body) = send(&admin, "POST", path, Some(ask(json!(shortest)))).await;
        assert_eq!(code, 201, "{body}");
        assert_eq!(body["spec"]["expirationSeconds"], shortest);
        let token = body["status"]["token"].as_str().unwrap();
        let account = server.client_with_token(token).await.unwrap();
        let (code, who) = send(
            &account,
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            Some(json!({})),
        )
        .await;
        assert_eq!(code, 201, "{who}");
        assert_eq!(
            who["status"]["userInfo"]["username"],
            "system:serviceaccount:default:inf"
        );
        let (code, body) = send(&admin, "POST", path, Some(ask(json!(shortest - 1)))).await;
        assert_eq!(code, 422, "{body}");
        let (code, body) = send(&admin, "POST", path, Some(ask(json!(i64::MAX)))).await;
        assert_eq!(code, 422, "{body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .ends_with("may not specify a duration larger than 2^32 seconds"),
            "{body}"
        );
        let (code, body) = send(&admin, "POST", path, Some(ask(json!("600")))).await;
        assert_eq!(
            (code, body["reason"].as_str()),
            (400, Some("BadRequest")),
            "{body}"
        );
    }
}
