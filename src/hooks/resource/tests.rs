//! Unit tests of the `Controller` resource: validation into settings, `mapTo`, the CRD.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::GroupVersionKind;
use serde_json::Value;

use super::*;
use crate::config::Origin;

fn value(yaml: &str) -> Value {
    crate::yaml::from_str(yaml).unwrap()
}

const GOOD: &str = "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: cronjob-watch, namespace: ops}
spec:
  for: {apiVersion: batch/v1, kind: CronJob}
  owns: [{apiVersion: batch/v1, kind: Job}]
  hook: {exec: {command: [python3, hook.py], timeout: 5s}}
  concurrency: 4
";

#[test]
fn a_valid_controller_becomes_settings() {
    let v = validate_controller_value(value(GOOD), &Origin::Text, None).unwrap();
    assert_eq!(v.settings.key.to_string(), "ops/cronjob-watch");
    assert_eq!(
        v.settings.for_kind,
        GroupVersionKind::gvk("batch", "v1", "CronJob")
    );
    assert_eq!(
        v.settings.owns,
        [GroupVersionKind::gvk("batch", "v1", "Job")]
    );
    assert_eq!(v.settings.concurrency, 4);
    assert_eq!(
        v.settings.timeout, None,
        "no reconcile timeout unless asked"
    );
    assert_eq!(
        v.settings.hook,
        Hook::Exec {
            env: Vec::new(),
            command: vec!["python3".into(), "hook.py".into()],
            timeout: Duration::from_secs(5)
        }
    );
}

fn meta(namespace: Option<&str>, name: &str, annotation: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        namespace: namespace.map(str::to_owned),
        name: Some(name.to_owned()),
        annotations: annotation.map(|a| [("informant.dev/for".to_owned(), a.to_owned())].into()),
        ..ObjectMeta::default()
    }
}

#[test]
fn map_to_names_which_objects_a_related_object_reconciles() {
    let web = meta(Some("ops"), "web", None);
    let db = meta(Some("ops"), "db", None);
    let other_namespace = meta(Some("dev"), "web", None);
    let cluster = meta(None, "web", None);
    let plain = meta(Some("ops"), "web", None);
    assert!(MapTo::Namespace.maps(&plain, &web) && MapTo::Namespace.maps(&plain, &db));
    assert!(!MapTo::Namespace.maps(&plain, &other_namespace));
    assert!(MapTo::Namespace.maps(&meta(None, "node", None), &other_namespace));
    assert!(MapTo::SameName.maps(&plain, &web));
    assert!(!MapTo::SameName.maps(&plain, &db) && !MapTo::SameName.maps(&plain, &other_namespace));
    let by = MapTo::Annotation("informant.dev/for".to_owned());
    let names = meta(Some("ops"), "cfg", Some("web, dev/web"));
    assert!(by.maps(&names, &web) && by.maps(&names, &other_namespace));
    assert!(
        by.maps(&names, &cluster),
        "a plain name also names a cluster-scoped object"
    );
    assert!(!by.maps(&names, &db));
    assert!(!by.maps(&plain, &web), "no annotation maps to nothing");
    assert!(!by.maps(&meta(Some("ops"), "cfg", Some("")), &web));
}

#[test]
fn map_to_is_validated_with_its_path() {
    let spec = |map_to: &str| {
        format!(
            "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: x, namespace: ops}}
spec:
  for: {{apiVersion: batch/v1, kind: CronJob}}
  watches:
    - {{apiVersion: v1, kind: Secret}}
    - {{apiVersion: v1, kind: ConfigMap, mapTo: {map_to}}}
  hook: {{exec: {{command: [x]}}}}
"
        )
    };
    let ok = |map_to: &str| {
        validate_controller_value(value(&spec(map_to)), &Origin::Text, None)
            .map(|v| v.settings.map_to)
    };
    assert_eq!(
        ok("{sameName: true}").unwrap(),
        [MapTo::Namespace, MapTo::SameName]
    );
    assert_eq!(
        ok("{annotation: informant.dev/for}").unwrap(),
        [
            MapTo::Namespace,
            MapTo::Annotation("informant.dev/for".to_owned())
        ]
    );
    for (bad, path, message) in [
        (
            "{}",
            "spec.watches[1].mapTo",
            "set sameName: true or annotation",
        ),
        (
            "{sameName: false}",
            "spec.watches[1].mapTo.sameName",
            "false maps to nothing",
        ),
        (
            "{sameName: true, annotation: a}",
            "spec.watches[1].mapTo",
            "exactly one",
        ),
        (
            "{annotation: 'x/-y'}",
            "spec.watches[1].mapTo.annotation",
            "invalid annotation key",
        ),
        (
            "{annotation: 'A_B/y'}",
            "spec.watches[1].mapTo.annotation",
            "its prefix",
        ),
        (
            "{nameFrom: x}",
            "spec.watches[1].mapTo.nameFrom",
            "unknown field",
        ),
    ] {
        let errors = ok(bad).unwrap_err().errors;
        assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
        assert_eq!(errors[0].path.to_string(), path, "{bad}");
        assert!(
            errors[0].message.contains(message),
            "{bad}: {}",
            errors[0].message
        );
    }
}

#[test]
fn every_error_is_reported_at_once_with_its_path() {
    let bad = "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: x, namespace: ops}
spec:
  for: {apiVersion: batch/v1/x, kind: cronjob, labelSelector: 'a=('}
  owns: [{apiVersion: batch/v1, kind: Job}, {apiVersion: batch/v1, kind: Job}]
  hook: {exec: {command: [], timeout: forever}}
  resyncPeriod: soon
  timeout: a while
";
    let e = validate_controller_value(value(bad), &Origin::Text, None).unwrap_err();
    let paths: Vec<String> = e.errors.iter().map(|e| e.path.to_string()).collect();
    assert_eq!(
        paths,
        [
            "spec.for.apiVersion",
            "spec.for.kind",
            "spec.for.labelSelector",
            "spec.owns[1]",
            "spec.hook.exec.timeout",
            "spec.hook.exec.command",
            "spec.resyncPeriod",
            "spec.timeout",
        ],
        "{e}"
    );
}

#[test]
fn a_reconcile_timeout_is_a_go_duration_and_zero_is_none() {
    let with = |timeout: &str| {
        let yaml = format!("{GOOD}  timeout: {timeout}\n");
        validate_controller_value(value(&yaml), &Origin::Text, None).map(|v| v.settings.timeout)
    };
    assert_eq!(with("90s").unwrap(), Some(Duration::from_secs(90)));
    assert_eq!(
        with("0s").unwrap(),
        None,
        "as controller-runtime's 0: no timeout"
    );
    let refused = with("-1m").unwrap_err();
    assert_eq!(
        refused.errors[0].path.to_string(),
        "spec.timeout",
        "{refused}"
    );
}

#[test]
fn unknown_fields_are_reported_at_their_path() {
    let e = validate_controller_value(
        value(&GOOD.replace("concurrency: 4", "concurency: 4")),
        &Origin::Text,
        None,
    )
    .unwrap_err();
    assert_eq!(e.errors[0].path.to_string(), "spec.concurency", "{e}");
}

#[test]
fn a_kind_cached_in_a_list_of_namespaces_is_served() {
    // The demo's config: the kinds cached in team-a only (a multi-namespace cache, which
    // refuses a list across all namespaces but serves each object's own namespace).
    let options = crate::config::load_str(
        "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: c}
spec:
  byObject:
    - {apiVersion: batch/v1, kind: CronJob, namespaces: {team-a: {}}}
    - {apiVersion: batch/v1, kind: Job, namespaces: {team-a: {}}}
",
    )
    .unwrap()
    .cache;
    validate_controller_value(value(GOOD), &Origin::Text, Some(&options)).unwrap();
}

#[test]
fn a_kind_the_cache_refuses_names_the_setting_to_change() {
    let options = crate::config::load_str(
        "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: c}
spec:
  readerFailOnMissingInformer: true
  byObject: [{apiVersion: batch/v1, kind: CronJob}]
",
    )
    .unwrap()
    .cache;
    let e = validate_controller_value(value(GOOD), &Origin::Text, Some(&options)).unwrap_err();
    assert_eq!(e.errors.len(), 1, "{e}");
    assert_eq!(e.errors[0].path.to_string(), "spec.owns[0]");
    assert!(
        e.errors[0]
            .message
            .contains("add {apiVersion: batch/v1, kind: Job} to the CacheConfig's spec.byObject"),
        "{e}"
    );
}

#[test]
fn multi_document_files_yield_their_controllers() {
    let text = format!(
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: c}}\nspec: {{}}\n---\n{GOOD}---\n"
    );
    let controllers = controllers_in(&text, &Origin::Text, None).unwrap();
    assert_eq!(controllers.len(), 1);
    assert!(controllers[0].is_ok());
}

fn webhook(hook: &str) -> Result<ValidatedController, ControllerError> {
    let yaml = format!(
        "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: w, namespace: ops}}
spec:
  for: {{apiVersion: v1, kind: ConfigMap}}
  hook: {{webhook: {hook}}}
"
    );
    validate_controller_value(value(&yaml), &Origin::Text, None)
}

fn errors(result: Result<ValidatedController, ControllerError>) -> Vec<String> {
    result
        .unwrap_err()
        .errors
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn an_https_webhook_needs_a_ca_bundle_of_pem_certificates_and_plain_http_has_none() {
    use base64::Engine as _;
    let key = rcgen::KeyPair::generate().unwrap();
    let ca = rcgen::CertificateParams::new(Vec::<String>::new())
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca.pem());
    let valid = webhook(&format!(
        "{{url: 'https://hooks.ops.svc:8443/sync', caBundle: {bundle}, \
         clientCertSecretRef: {{name: hook-client}}}}"
    ))
    .unwrap();
    let Hook::Webhook { tls: Some(tls), .. } = &valid.settings.hook else {
        panic!("{:?}", valid.settings.hook);
    };
    assert_eq!(tls.ca_bundle, ca.pem().as_bytes());
    assert_eq!(tls.client_cert_secret.as_deref(), Some("hook-client"));

    let plain = webhook("{url: 'http://hooks.ops.svc:8080/sync'}").unwrap();
    assert!(matches!(
        plain.settings.hook,
        Hook::Webhook { tls: None, .. }
    ));

    let missing = errors(webhook("{url: 'https://hooks.ops.svc/'}"));
    assert!(
        missing[0].starts_with("spec.hook.webhook.caBundle: required for an https:// URL"),
        "{missing:?}"
    );
    let not_base64 = errors(webhook("{url: 'https://h/', caBundle: '!!'}"));
    assert!(not_base64[0].contains("not base64"), "{not_base64:?}");
    let not_pem = errors(webhook("{url: 'https://h/', caBundle: aGVsbG8=}"));
    assert!(
        not_pem[0].contains("holds no PEM certificate"),
        "{not_pem:?}"
    );
    let on_http = errors(webhook(&format!(
        "{{url: 'http://h/', caBundle: {bundle}, clientCertSecretRef: {{name: c}}}}"
    )));
    assert_eq!(
        on_http,
        [
            "spec.hook.webhook.caBundle: only for an https:// URL; remove it or write https://",
            "spec.hook.webhook.clientCertSecretRef: only for an https:// URL; remove it or write \
             https://"
        ]
    );
    let bad_url = errors(webhook("{url: 'ftp://h/'}"));
    assert!(
        bad_url[0].contains("invalid URL \"ftp://h/\""),
        "{bad_url:?}"
    );
}

#[test]
fn admission_hooks_default_to_the_controllers_hook_and_kube_apiservers_defaults() {
    let yaml = format!(
        "{GOOD}  admission:
  - {{name: require-owner, type: Validating}}
  - name: defaults
    type: Mutating
    operations: ['*']
    failurePolicy: Ignore
    timeoutSeconds: 3
    hook: {{webhook: {{url: 'http://127.0.0.1:9/defaults'}}}}
    objectSelector: {{matchLabels: {{app: web}}}}
    matchConditions: [{{name: not-system, expression: \"!object.metadata.name.startsWith('system-')\"}}]
"
    );
    let v = validate_controller_value(value(&yaml), &Origin::Text, None).unwrap();
    let [owner, defaults] = v.settings.admission.as_slice() else {
        panic!("two hooks: {:?}", v.settings.admission)
    };
    assert_eq!(owner.type_, AdmissionType::Validating);
    assert_eq!(owner.operations, ["CREATE", "UPDATE"]);
    assert_eq!(owner.failure_policy, FailurePolicy::Fail);
    assert_eq!(owner.timeout, Duration::from_secs(10));
    assert_eq!(owner.hook, v.settings.hook, "the Controller's own hook");
    assert_eq!(defaults.type_, AdmissionType::Mutating);
    assert_eq!(defaults.operations, ["*"]);
    assert_eq!(defaults.failure_policy, FailurePolicy::Ignore);
    assert_eq!(defaults.timeout, Duration::from_secs(3));
    assert!(matches!(defaults.hook, Hook::Webhook { .. }));
    assert_eq!(defaults.match_conditions.len(), 1);
    assert!(defaults.object_selector.is_some());
}

#[test]
fn admission_hooks_report_every_error_at_once_with_its_path() {
    let yaml = format!(
        "{GOOD}  admission:
  - {{name: Bad_Name, type: Checking, operations: [CREATE, PATCH, CREATE], failurePolicy: Never, timeoutSeconds: 31}}
  - name: twice
    type: Validating
    operations: ['*', DELETE]
    namespaceSelector: {{matchExpressions: [{{key: team, operator: In}}, {{key: env, operator: Exists, values: [x]}}, {{key: k, operator: Near}}]}}
    matchConditions: [{{name: a, expression: 'true'}}, {{name: a, expression: ' '}}, {{name: 'has owner!', expression: 'true'}}]
  - {{name: twice, type: Mutating, hook: {{exec: {{command: []}}}}}}
"
    );
    let errors = errors(validate_controller_value(value(&yaml), &Origin::Text, None));
    let expected = [
        "spec.admission[0].name: invalid name \"Bad_Name\"",
        "spec.admission[0].type: \"Checking\" is not a type of admission hook",
        "spec.admission[0].operations[1]: \"PATCH\" is not an operation",
        "spec.admission[0].operations[2]: CREATE is listed twice",
        "spec.admission[0].failurePolicy: \"Never\" is not a failure policy",
        "spec.admission[0].timeoutSeconds: 31 is out of range",
        "spec.admission[1].operations: * already means every operation",
        "spec.admission[1].namespaceSelector.matchExpressions[0].values: required with operator In",
        "spec.admission[1].namespaceSelector.matchExpressions[1].values: must be empty with operator Exists",
        "spec.admission[1].namespaceSelector.matchExpressions[2].operator: \"Near\" is not an operator",
        "spec.admission[1].matchConditions[1].name: \"a\" names another condition",
        "spec.admission[1].matchConditions[1].expression: required",
        "spec.admission[1].matchConditions[2].name: invalid name \"has owner!\": name part must consist",
        "spec.admission[2].name: \"twice\" names another admission hook",
        "spec.admission[2].hook.exec.command: required",
    ];
    for e in expected {
        assert!(
            errors.iter().any(|got| got.starts_with(e)),
            "missing {e:?} in {errors:#?}"
        );
    }
    assert_eq!(errors.len(), expected.len(), "{errors:#?}");
}

/// Issue 45, item 4: `matchConditions[].expression: "("` passed `informant validate`, and the
/// API server then refused the whole webhook configuration (422) forever, every Controller's
/// hooks with it; a webhook name past 253 characters did the same.
#[test]
fn a_bad_cel_condition_or_a_too_long_webhook_name_is_refused_beside_a_good_controller() {
    let controller = |name: &str, hook: &str, expression: &str| {
        value(&format!(
            "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: {name}, namespace: ops}}
spec:
  for: {{apiVersion: v1, kind: ConfigMap}}
  hook: {{exec: {{command: [/hooks/h]}}}}
  admission:
  - name: {hook}
    type: Validating
    matchConditions: [{{name: c, expression: {expression:?}}}]
"
        ))
    };
    let good = validate_controller_value(
        controller(
            "good",
            "check",
            "object.metadata.name != 'x' && request.operation == 'CREATE'",
        ),
        &Origin::Text,
        None,
    )
    .unwrap();
    assert_eq!(
        good.settings.admission[0].match_conditions,
        [(
            "c".to_owned(),
            "object.metadata.name != 'x' && request.operation == 'CREATE'".to_owned()
        )]
    );
    let bad = errors(validate_controller_value(
        controller("bad", "check", "("),
        &Origin::Text,
        None,
    ));
    assert_eq!(bad.len(), 1, "{bad:#?}");
    assert!(
        bad[0].starts_with("spec.admission[0].matchConditions[0].expression: \"(\" is not CEL"),
        "{bad:#?}"
    );
    let undeclared = errors(validate_controller_value(
        controller("bad", "check", "params.x == 1"),
        &Origin::Text,
        None,
    ));
    assert!(
        undeclared[0].contains("undeclared reference to \"params\""),
        "{undeclared:#?}"
    );
    // A valid Controller name (DNS labels of 63) and hook name, a webhook name past 253.
    let (name, hook) = (format!("{0}.{0}.{0}", "c".repeat(63)), "h".repeat(63));
    let length = super::webhook_name(&hook, ("ops", &name)).len();
    assert!(length > 253);
    let long = errors(validate_controller_value(
        controller(&name, &hook, "true"),
        &Origin::Text,
        None,
    ));
    assert_eq!(long.len(), 1, "{long:#?}");
    assert!(
        long[0].starts_with("spec.admission[0].name: the webhook registered for it")
            && long[0].contains(&format!(
                "is {length} characters: the API server takes at most 253"
            )),
        "{long:#?}"
    );
}

// Issue 45, item 8: a u16 let a Controller ask for 65,535 hook processes at once, each with
// its answer buffer.
#[test]
fn concurrency_over_its_maximum_is_refused_at_its_path() {
    let at_max = GOOD.replace("concurrency: 4", &format!("concurrency: {MAX_CONCURRENCY}"));
    let v = validate_controller_value(value(&at_max), &Origin::Text, None).unwrap();
    assert_eq!(v.settings.concurrency, MAX_CONCURRENCY);
    for over in [u32::from(MAX_CONCURRENCY) + 1, 65_535] {
        let yaml = GOOD.replace("concurrency: 4", &format!("concurrency: {over}"));
        let said = errors(validate_controller_value(value(&yaml), &Origin::Text, None));
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("spec.concurrency: "), "{said:?}");
        // The schema's maximum (what the API server enforces too) speaks first.
        assert!(said[0].contains("at most 64"), "{said:?}");
    }
    let schema = serde_json::to_value(schemars::schema_for!(ControllerSpec)).unwrap();
    assert_eq!(
        schema["properties"]["concurrency"]["maximum"],
        MAX_CONCURRENCY
    );
    // Typed settings that skip the schema (a library user's) meet the same bound.
    let v = validate_controller_value(value(GOOD), &Origin::Text, None).unwrap();
    let mut resource = v.resource;
    resource.spec.concurrency = Some(MAX_CONCURRENCY + 1);
    let said: Vec<String> = validate_controller(&resource, None)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        said,
        [
            "spec.concurrency: 65 is over the most of 64 (each call at once may hold a process \
          and an answer of up to --hook-max-response-bytes); for more throughput, use \
          exec.mode: persistent with callsPerProcess"
        ]
    );
}
