use k8s_pb::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use k8s_pb::apimachinery::pkg::runtime::TypeMeta;

use super::*;
use crate::apiserver::registry::Registry;

fn ld(n: u8, bytes: &[u8]) -> Vec<u8> {
    let mut v = vec![(n << 3) | 2, u8::try_from(bytes.len()).unwrap()];
    v.extend_from_slice(bytes);
    v
}

/// `message` in the envelope kubectl sends.
fn envelope(kind: &str, message: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some("v1".into()),
            kind: Some(kind.into()),
        }),
        raw: Some(message.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [MAGIC.to_vec(), unknown.encode_to_vec()].concat()
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        labels: [("app".to_string(), "web".to_string())].into(),
        ..ObjectMeta::default()
    }
}

fn decoded(group: &str, plural: &str, body: &[u8]) -> Value {
    let rt = Registry::new().lookup(group, "v1", plural).unwrap();
    decode(body, &rt, "application/vnd.kubernetes.protobuf").unwrap()
}

#[test]
fn a_configmap_from_kubectl_create_decodes() {
    let meta = [
        ld(1, b"cm1"),
        ld(11, &[ld(1, b"app"), ld(2, b"web")].concat()),
    ]
    .concat();
    let cm = [ld(1, &meta), ld(2, &[ld(1, b"k"), ld(2, b"v")].concat())].concat();
    let envelope = [
        MAGIC.to_vec(),
        ld(1, &[ld(1, b"v1"), ld(2, b"ConfigMap")].concat()),
        ld(2, &cm),
    ]
    .concat();
    let v = decoded("", "configmaps", &envelope);
    assert_eq!(v["metadata"]["name"], "cm1");
    assert_eq!(v["metadata"]["labels"]["app"], "web");
    assert_eq!(v["data"]["k"], "v");
}

#[test]
fn a_body_of_each_core_kind_decodes_to_its_json() {
    let ns = core::Namespace {
        metadata: Some(ObjectMeta {
            finalizers: vec!["kubernetes".into()],
            annotations: [("a".to_string(), "b".to_string())].into(),
            ..meta("ops", None)
        }),
        ..core::Namespace::default()
    };
    assert_eq!(
        decoded("", "namespaces", &envelope("Namespace", &ns)),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops",
            "labels": {"app": "web"}, "annotations": {"a": "b"}, "finalizers": ["kubernetes"]}})
    );
    let cm = core::ConfigMap {
        metadata: Some(meta("cm", Some("ops"))),
        data: [("k".to_string(), "v".to_string())].into(),
        binary_data: [("b".to_string(), vec![0, 255])].into(),
        immutable: Some(true),
    };
    assert_eq!(
        decoded("", "configmaps", &envelope("ConfigMap", &cm)),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "ops", "labels": {"app": "web"}},
            "data": {"k": "v"}, "binaryData": {"b": "AP8="}, "immutable": true})
    );
    let secret = core::Secret {
        metadata: Some(meta("s", Some("ops"))),
        data: [
            ("a".to_string(), b"1".to_vec()),
            ("b".to_string(), b"2".to_vec()),
        ]
        .into(),
        string_data: [("b".to_string(), "3".to_string())].into(),
        r#type: Some("Opaque".into()),
        immutable: None,
    };
    assert_eq!(
        decoded("", "secrets", &envelope("Secret", &secret)),
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "ops", "labels": {"app": "web"}},
            "data": {"a": "MQ==", "b": "Mw=="}, "type": "Opaque"})
    );
    let sa = core::ServiceAccount {
        metadata: Some(meta("robot", Some("ops"))),
        ..core::ServiceAccount::default()
    };
    assert_eq!(
        decoded("", "serviceaccounts", &envelope("ServiceAccount", &sa)),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "robot", "namespace": "ops", "labels": {"app": "web"}}})
    );
}

#[test]
fn a_body_of_each_rbac_kind_decodes_to_its_json() {
    let list_watch = rbac::PolicyRule {
        verbs: vec!["list".into(), "watch".into()],
        api_groups: vec![String::new()],
        resources: vec!["configmaps".into()],
        ..rbac::PolicyRule::default()
    };
    let rule_json =
        json!({"verbs": ["list", "watch"], "apiGroups": [""], "resources": ["configmaps"]});
    let role = rbac::Role {
        metadata: Some(meta("r", Some("ops"))),
        rules: vec![list_watch],
    };
    let v = decoded(
        "rbac.authorization.k8s.io",
        "roles",
        &envelope("Role", &role),
    );
    assert_eq!(v["apiVersion"], "rbac.authorization.k8s.io/v1");
    assert_eq!(v["kind"], "Role");
    assert_eq!(v["rules"], json!([rule_json]));
    let cluster_role = rbac::ClusterRole {
        metadata: Some(meta("cr", None)),
        rules: vec![rbac::PolicyRule {
            verbs: vec!["get".into()],
            non_resource_ur_ls: vec!["/healthz".into()],
            ..rbac::PolicyRule::default()
        }],
        aggregation_rule: Some(rbac::AggregationRule {
            cluster_role_selectors: vec![LabelSelector {
                match_labels: [("x".to_string(), "y".to_string())].into(),
                match_expressions: vec![LabelSelectorRequirement {
                    key: Some("tier".into()),
                    operator: Some("In".into()),
                    values: vec!["a".into()],
                }],
            }],
        }),
    };
    let v = decoded(
        "rbac.authorization.k8s.io",
        "clusterroles",
        &envelope("ClusterRole", &cluster_role),
    );
    assert_eq!(
        v["rules"],
        json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}])
    );
    assert_eq!(
        v["aggregationRule"],
        json!({"clusterRoleSelectors": [{"matchLabels": {"x": "y"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}]})
    );
    let binding = rbac::RoleBinding {
        metadata: Some(meta("rb", Some("ops"))),
        subjects: vec![rbac::Subject {
            kind: Some("ServiceAccount".into()),
            name: Some("inf".into()),
            namespace: Some("ops".into()),
            api_group: None,
        }],
        role_ref: Some(rbac::RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: Some("ClusterRole".into()),
            name: Some("cr".into()),
        }),
    };
    for (plural, kind) in [
        ("rolebindings", "RoleBinding"),
        ("clusterrolebindings", "ClusterRoleBinding"),
    ] {
        let v = decoded(
            "rbac.authorization.k8s.io",
            plural,
            &envelope(kind, &binding),
        );
        assert_eq!(v["kind"], kind);
        assert_eq!(
            v["subjects"],
            json!([{"kind": "ServiceAccount", "name": "inf", "namespace": "ops"}])
        );
        assert_eq!(
            v["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cr"})
        );
    }
}

#[test]
fn a_self_subject_access_review_and_a_token_request_decode() {
    let attributes = [ld(1, b"ops"), ld(2, b"list"), ld(5, b"configmaps")].concat();
    let review = ld(2, &ld(1, &attributes));
    let envelope = [MAGIC.to_vec(), ld(2, &review)].concat();
    let v = decode_auth(
        &envelope,
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        "x",
    )
    .unwrap();
    assert_eq!(v["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(
        v["spec"]["resourceAttributes"],
        json!({"namespace": "ops", "verb": "list", "resource": "configmaps"})
    );
    // expirationSeconds = 1200 (varint field 4), one audience.
    let spec = [ld(1, b"api"), vec![4 << 3, 0xb0, 0x09]].concat();
    let envelope = [MAGIC.to_vec(), ld(2, &ld(2, &spec))].concat();
    let v = decode_auth(&envelope, "authentication.k8s.io", "TokenRequest", "x").unwrap();
    assert_eq!(
        v["spec"],
        json!({"audiences": ["api"], "expirationSeconds": 1200})
    );
    assert_eq!(
        decode_auth(&envelope, "", "Pod", "x").unwrap_err().code,
        415
    );
}

#[test]
fn the_other_reviews_decode_to_their_json() {
    let review = authz::SubjectAccessReview {
        spec: Some(authz::SubjectAccessReviewSpec {
            non_resource_attributes: Some(authz::NonResourceAttributes {
                path: Some("/metrics".into()),
                verb: Some("get".into()),
            }),
            user: Some("alice".into()),
            groups: vec!["devs".into()],
            uid: Some("u1".into()),
            ..authz::SubjectAccessReviewSpec::default()
        }),
        ..authz::SubjectAccessReview::default()
    };
    let body = envelope("SubjectAccessReview", &review);
    let v = decode_auth(&body, "authorization.k8s.io", "SubjectAccessReview", "x").unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"},
                "user": "alice", "groups": ["devs"], "uid": "u1"}})
    );
    let rules = authz::SelfSubjectRulesReview {
        spec: Some(authz::SelfSubjectRulesReviewSpec {
            namespace: Some("ops".into()),
        }),
        ..authz::SelfSubjectRulesReview::default()
    };
    let body = envelope("SelfSubjectRulesReview", &rules);
    let v = decode_auth(&body, "authorization.k8s.io", "SelfSubjectRulesReview", "x").unwrap();
    assert_eq!(v["spec"], json!({"namespace": "ops"}));
    let whoami = authn::SelfSubjectReview {
        metadata: Some(meta("me", None)),
        ..authn::SelfSubjectReview::default()
    };
    let body = envelope("SelfSubjectReview", &whoami);
    let v = decode_auth(&body, "authentication.k8s.io", "SelfSubjectReview", "x").unwrap();
    assert_eq!(v["metadata"]["name"], "me");
    assert!(v.get("spec").is_none(), "{v}");
}

#[test]
fn truncated_bodies_are_bad_requests_and_other_kinds_unsupported() {
    let rt = Registry::new().lookup("", "v1", "namespaces").unwrap();
    assert_eq!(decode(b"k8s\0\x12\x7f", &rt, "x").unwrap_err().code, 400);
    assert_eq!(decode(b"nope", &rt, "x").unwrap_err().code, 400);
    let pods = Registry::new().lookup("", "v1", "pods").unwrap();
    assert_eq!(decode(b"k8s\0", &pods, "x").unwrap_err().code, 415);
}

/// Every supported kind's body cut short, and garbage after the prefix, is a 400 (never a
/// panic, never an object made of what was read so far), for the kinds and the reviews.
#[test]
fn every_truncated_or_garbage_body_is_a_400() {
    let cm = core::ConfigMap {
        metadata: Some(meta("cm", Some("ops"))),
        data: [("k".to_string(), "v".repeat(40))].into(),
        ..core::ConfigMap::default()
    };
    // The payload last in the envelope, so that every cut from its first byte on is inside it.
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
        }),
        raw: Some(cm.encode_to_vec()),
        ..Unknown::default()
    };
    let body = [MAGIC.to_vec(), unknown.encode_to_vec()].concat();
    let rt = Registry::new().lookup("", "v1", "configmaps").unwrap();
    let mut refused = 0;
    for cut in 0..body.len() {
        match decode(&body[..cut], &rt, "x") {
            // A cut between the envelope's fields before the payload is a whole envelope
            // without one.
            Ok(v) => assert!(v.get("metadata").is_none(), "cut at {cut} decoded to {v}"),
            Err(err) => {
                assert_eq!(err.code, 400, "cut at {cut}");
                refused += 1;
            }
        }
    }
    assert!(refused > cm.encoded_len(), "{refused}");
    assert_eq!(
        decoded("", "configmaps", &body)["data"]["k"],
        "v".repeat(40)
    );
    let garbage: [&[u8]; 4] = [
        b"k8s\0junk",
        b"k8s\0\x12\x05\xff\xff\xff\xff\xff",
        // The payload's field 1 (metadata) as a varint: the wrong wire type.
        b"k8s\0\x12\x02\x08\x01",
        // A label that is not UTF-8.
        b"k8s\0\x12\x0a\x0a\x08\x5a\x06\x0a\x01\xff\x12\x01v",
    ];
    for body in garbage {
        let err = decode(body, &rt, "x").unwrap_err();
        assert_eq!(err.code, 400, "{body:?}");
        let err = decode_auth(body, "authentication.k8s.io", "TokenRequest", "x").unwrap_err();
        assert_eq!(err.code, 400, "{body:?}");
    }
}
