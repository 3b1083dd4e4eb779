//! Error messages, object matching, integer comparison, keywords and serde.

use super::{Pairs, labels};
use crate::selector::label::LabelSelector;

// Error messages: (input, full message). Positions are character offsets.
const ERRORS: Pairs = &[
    (
        "app=web,=x",
        r#"unexpected "=" at position 8, expected a label key or "!" after ",""#,
    ),
    (
        "x in (a) y",
        r#"unexpected "y" at position 9, expected "," or end of input"#,
    ),
    (
        "x,",
        r#"unexpected end of input at position 2, expected a label key or "!" after ",""#,
    ),
    (
        "!=a",
        r#"unexpected "!=" at position 0, expected a label key or "!""#,
    ),
    (
        "!(",
        r#"unexpected "(" at position 1, expected a label key"#,
    ),
    (
        "!x=a",
        r#"unexpected "=" at position 2, expected "," or end of input ("!key" takes no operator or values)"#,
    ),
    (
        "x y",
        r#"unexpected "y" at position 2, expected an operator ("in", "notin", "=", "==", "!=", ">" or "<")"#,
    ),
    ("x in a", r#"unexpected "a" at position 5, expected "(""#),
    (
        "x in (a",
        r#"unexpected end of input at position 7, expected "," or ")""#,
    ),
    (
        "x in (=",
        r#"unexpected "=" at position 6, expected a value, "," or ")""#,
    ),
    (
        "x in (a,=)",
        r#"unexpected "=" at position 8, expected a value or ",""#,
    ),
    (
        "x==a==b",
        r#"unexpected "==" at position 4, expected "," or end of input"#,
    ),
    ("x=(", r#"unexpected "(" at position 2, expected a value"#),
    (
        "x>a",
        r#"invalid value "a" for ">" at position 2: must be an integer"#,
    ),
    (
        "x<",
        r#"invalid value "" for "<" at position 2: must be an integer"#,
    ),
    (
        "é=1",
        r#"invalid label key "é" at position 0: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"#,
    ),
    (
        "ab=-c",
        r#"invalid label value "-c" at position 3: a label value must be empty or must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"#,
    ),
    (
        "x in (a, aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa)",
        r#"invalid label value "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" at position 9: must be 63 characters or less"#,
    ),
    (
        "a/b/c",
        r#"invalid label key "a/b/c" at position 0: a label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"#,
    ),
    (
        "/a",
        r#"invalid label key "/a" at position 0: prefix part must be non-empty"#,
    ),
];

#[test]
fn errors_name_the_token_its_position_and_what_was_expected() {
    for (input, message) in ERRORS {
        let err = LabelSelector::parse(input).expect_err(input);
        assert_eq!(err.to_string(), *message, "input {input:?}");
    }
}

// apimachinery's messages for the same grammar errors (k8s.io/apimachinery
// pkg/labels/selector.go, `Parser.parse`): (input, message). Inside a requirement they are
// wrapped in "unable to parse requirement: ", as upstream wraps them.
const UPSTREAM: Pairs = &[
    ("app=web,=x", "found '=', expected: identifier after ','"),
    ("x in (a) y", "found 'y', expected: ',' or 'end of string'"),
    ("x,", "found '', expected: identifier after ','"),
    (
        "!=a",
        "found '!=', expected: !, identifier, or 'end of string'",
    ),
    (
        "!(",
        "unable to parse requirement: found '(', expected: identifier",
    ),
    ("!x=a", "found '=', expected: ',' or 'end of string'"),
    (
        "x (",
        "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt",
    ),
    (
        "x in a",
        "unable to parse requirement: found 'a' expected: '('",
    ),
    (
        "x in =",
        "unable to parse requirement: found '=' expected: '('",
    ),
    (
        "x in (=",
        "unable to parse requirement: found '=', expected: ',', ')' or identifier",
    ),
    (
        "x in (a b)",
        "unable to parse requirement: found 'b', expected: ',' or ')'",
    ),
    (
        "x in (a,=)",
        "unable to parse requirement: found '=', expected: ',', or identifier",
    ),
    (
        "x in (a,",
        "unable to parse requirement: found '', expected: ',', or identifier",
    ),
    (
        "x=(",
        "unable to parse requirement: found '(', expected: identifier",
    ),
];

#[test]
fn grammar_errors_have_apimachinerys_message_too() {
    for (input, message) in UPSTREAM {
        assert!(LabelSelector::parse(input).is_err(), "{input:?}");
        assert_eq!(
            LabelSelector::apimachinery_error(input).as_deref(),
            Some(*message),
            "input {input:?}"
        );
    }
    assert_eq!(LabelSelector::apimachinery_error("x=a"), None);
}

/// apimachinery's detail for a label name that is not one (`content.IsLabelKey`).
const NAME: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
/// apimachinery's detail for a label value that is not one (`content.IsLabelValue`).
const VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
/// apimachinery's detail for a key prefix that is not a DNS-1123 subdomain.
const PREFIX: &str = r"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

#[test]
fn a_key_or_value_upstream_refuses_has_apimachinerys_field_error() {
    let long = "a".repeat(64);
    let cases = [
        // validateLabelKey with the parser's nil path.
        ("-x=a", format!(r#"<nil>: Invalid value: "-x": name part {NAME}"#)),
        ("/a", r#"<nil>: Invalid value: "/a": prefix part must be non-empty"#.to_owned()),
        (
            "Ex.com/",
            format!(
                r#"<nil>: Invalid value: "Ex.com/": prefix part {PREFIX}; name part must be non-empty; name part {NAME}"#
            ),
        ),
        (
            "a/b/c",
            format!(
                r#"<nil>: Invalid value: "a/b/c": a valid label key {NAME} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"#
            ),
        ),
        // NewRequirement's values, a sorted set, each at values[i][key].
        ("a=b,x=x@", format!(r#"values[0][x]: Invalid value: "x@": {VALUE}"#)),
        (
            "x in (b@,a@,b@)",
            format!(
                r#"[values[0][x]: Invalid value: "a@": {VALUE}, values[1][x]: Invalid value: "b@": {VALUE}]"#
            ),
        ),
        (
            &format!("x notin ({long})"),
            format!(r#"values[0][x]: Invalid value: "{long}": must be no more than 63 bytes"#),
        ),
        (
            "x>a",
            r#"values[0]: Invalid value: "a": for 'Gt', 'Lt' operators, the value must be an integer"#
                .to_owned(),
        ),
        (
            "x<-a",
            format!(
                r#"[values[0]: Invalid value: "-a": for 'Gt', 'Lt' operators, the value must be an integer, values[0][x]: Invalid value: "-a": {VALUE}]"#
            ),
        ),
    ];
    for (input, error) in cases {
        assert!(LabelSelector::parse(input).is_err(), "{input:?}");
        assert_eq!(
            LabelSelector::apimachinery_error(input),
            Some(format!("unable to parse requirement: {error}")),
            "input {input:?}"
        );
    }
}

#[test]
fn a_grammar_error_after_a_bad_value_in_the_same_requirement_is_what_is_said() {
    // Upstream reads the whole requirement before it checks the values.
    let error = LabelSelector::parse("x in (a@ b)").unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"unexpected "b" at position 9, expected "," or ")""#
    );
    assert_eq!(
        LabelSelector::apimachinery_error("x in (a@ b)").as_deref(),
        Some("unable to parse requirement: found 'b', expected: ',' or ')'")
    );
}

#[test]
fn objects_are_matched_on_metadata_labels() {
    let selector = LabelSelector::parse("app=web,!canary").unwrap();
    let web = serde_json::json!({"metadata": {"name": "a", "labels": {"app": "web"}}});
    let canary = serde_json::json!({"metadata": {"labels": {"app": "web", "canary": "true"}}});
    let unlabelled = serde_json::json!({"metadata": {"name": "a"}});
    assert!(selector.matches_object(&web));
    assert!(!selector.matches_object(&canary));
    assert!(!selector.matches_object(&unlabelled));
    let absent = LabelSelector::parse("!app,tier notin (db)").unwrap();
    assert!(absent.matches_object(&unlabelled));
    assert!(absent.matches_object(&serde_json::json!({})));
}

#[test]
fn integer_comparisons_accept_signed_labels_and_reject_non_integers() {
    let greater = LabelSelector::parse("x>-1").err();
    assert!(greater.is_some(), "-1 is not a valid label value");
    let selector = LabelSelector::parse("x>1").unwrap();
    assert!(!selector.matches(&labels(&[("x", "1")])));
    assert!(selector.matches(&labels(&[("x", "+2")])));
    assert!(!selector.matches(&labels(&[("x", "99999999999999999999")])));
    assert!(!selector.matches(&labels(&[])));
}

#[test]
fn keywords_are_keys_and_values_where_those_are_expected() {
    let selector = LabelSelector::parse("in in (in),notin notin (notin),!in2,x=in").unwrap();
    assert_eq!(
        selector.to_string(),
        "in in (in),!in2,notin notin (notin),x=in"
    );
    assert_eq!(
        LabelSelector::parse(&selector.to_string()).unwrap(),
        selector
    );
}

#[test]
fn serde_uses_the_canonical_string_and_rejects_bad_syntax() {
    let selector = LabelSelector::parse("b in (y,x), a").unwrap();
    let json = serde_json::to_string(&selector).unwrap();
    assert_eq!(json, r#""a,b in (x,y)""#);
    let back: LabelSelector = serde_json::from_str(&json).unwrap();
    assert_eq!(back, selector);
    let err = serde_json::from_str::<LabelSelector>(r#""a in""#).unwrap_err();
    assert!(
        err.to_string()
            .contains(r#"unexpected end of input at position 4, expected "(""#),
        "{err}"
    );
}
