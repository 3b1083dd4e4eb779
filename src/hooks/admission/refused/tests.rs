//! The entries an API server's refusal (422) names.

use super::*;

#[test]
fn a_refusal_names_its_entries_with_their_part_of_the_message() {
    let message = r#"ValidatingWebhookConfiguration.admissionregistration.k8s.io "hooks" is invalid: [webhooks[1].matchConditions[0].name: Invalid value: "a b": bad, webhooks[3].name: Invalid value: "x": worse, webhooks[1].timeoutSeconds: Invalid value: 31: too long, webhooks[9].name: out of range]"#;
    let entries = refused_entries(message, 4);
    assert_eq!(
        entries.into_iter().collect::<Vec<_>>(),
        [
            (
                1,
                r#"webhooks[1].matchConditions[0].name: Invalid value: "a b": bad; webhooks[1].timeoutSeconds: Invalid value: 31: too long"#
                    .to_owned()
            ),
            (3, r#"webhooks[3].name: Invalid value: "x": worse"#.to_owned()),
        ]
    );
    assert!(refused_entries("etcdserver: request is too large", 4).is_empty());
}
