//! Requirement tables: constructor, printing, matching, `Add`, exact match, key validation.
//!
//! Ports `TestRequirementConstructor`, `TestToString`, `TestRequirementSelectorMatching`,
//! `TestAdd` and `TestRequiresExactMatch`.

use super::{Pairs, Reqs, labels, req, selector};
use crate::selector::label::{LabelSelector, Operator, Requirement, RequirementError};

/// What `Requirement::new` is expected to say.
#[derive(Debug)]
enum Want {
    Ok,
    NoValues,
    NotOneValue,
    UnexpectedValues,
    NotAnInteger,
    InvalidKey,
    InvalidValue,
}

// Ports `TestRequirementConstructor` (pkg/labels/selector_test.go): (key, operator, values,
// expected outcome). Upstream's "unsupportedOp" case (x18) cannot be written: `Operator` is an
// enum.
const REQUIREMENT_CONSTRUCTOR: &[(&str, Operator, &[&str], Want)] = &[
    ("x1", Operator::In, &[], Want::NoValues),
    ("x2", Operator::NotIn, &[], Want::NoValues),
    ("x3", Operator::In, &["foo"], Want::Ok),
    ("x4", Operator::NotIn, &["foo"], Want::Ok),
    ("x5", Operator::Equals, &["foo", "bar"], Want::NotOneValue),
    ("x6", Operator::Exists, &[], Want::Ok),
    ("x7", Operator::DoesNotExist, &[], Want::Ok),
    ("x8", Operator::Exists, &["foo"], Want::UnexpectedValues),
    ("x9", Operator::In, &["bar"], Want::Ok),
    ("x10", Operator::In, &["bar"], Want::Ok),
    ("x11", Operator::GreaterThan, &["1"], Want::Ok),
    ("x12", Operator::LessThan, &["6"], Want::Ok),
    ("x13", Operator::GreaterThan, &[], Want::NotOneValue),
    ("x14", Operator::GreaterThan, &["bar"], Want::NotAnInteger),
    ("x15", Operator::LessThan, &["bar"], Want::NotAnInteger),
    // 254 characters break the rule that a key is at most 253 (prefix) / 63 (name) long.
    (
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        Operator::Exists,
        &[],
        Want::InvalidKey,
    ),
    (
        "x16",
        Operator::Equals,
        &[
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ],
        Want::InvalidValue,
    ),
    ("x17", Operator::Equals, &["a b"], Want::InvalidValue),
];

#[test]
fn requirement_constructor_applies_upstream_validation() {
    for (key, operator, values, want) in REQUIREMENT_CONSTRUCTOR {
        let got = Requirement::new(*key, *operator, values.iter().copied());
        let ok = matches!(
            (&got, want),
            (Ok(_), Want::Ok)
                | (Err(RequirementError::NoValues { .. }), Want::NoValues)
                | (Err(RequirementError::NotOneValue { .. }), Want::NotOneValue)
                | (
                    Err(RequirementError::UnexpectedValues { .. }),
                    Want::UnexpectedValues
                )
                | (
                    Err(RequirementError::NotAnInteger { .. }),
                    Want::NotAnInteger
                )
                | (Err(RequirementError::InvalidKey { .. }), Want::InvalidKey)
                | (
                    Err(RequirementError::InvalidValue { .. }),
                    Want::InvalidValue
                )
        );
        assert!(
            ok,
            "{key} {operator} {values:?}: want {want:?}, got {got:?}"
        );
    }
}

#[test]
fn the_long_key_and_value_fixtures_are_254_characters() {
    assert_eq!(REQUIREMENT_CONSTRUCTOR[15].0.len(), 254);
    assert_eq!(REQUIREMENT_CONSTRUCTOR[16].2[0].len(), 254);
}

// Key validation beyond the upstream table: (key, valid). Upstream rules live in
// apimachinery `pkg/api/validate/content/kube.go` (`IsLabelKey`).
const KEYS: &[(&str, bool)] = &[
    ("a", true),
    ("A.b-c_D", true),
    ("example.com/MyName", true),
    ("0.1.2.domain/99", true),
    ("-a", false),
    ("a-", false),
    ("/a", false),
    ("a/", false),
    ("a/b/c", false),
    ("Example.com/a", false),
    ("exa_mple.com/a", false),
    (".example.com/a", false),
    (
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        true,
    ), // 63
    (
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        false,
    ), // 64
    ("a\u{0}", false),
];

#[test]
fn label_keys_follow_the_qualified_name_rules() {
    for (key, valid) in KEYS {
        assert_eq!(
            Requirement::new(*key, Operator::Exists, Vec::<String>::new()).is_ok(),
            *valid,
            "key {key:?}"
        );
    }
}

#[test]
fn a_prefix_may_be_253_characters_but_not_254() {
    let label = "a".repeat(61);
    let prefix_253 = [label.as_str(); 4].join(".") + ".a"; // 4 * 61 + 3 + 2 = 249
    let prefix_253 = format!("{prefix_253}.abc"); // 253
    assert_eq!(prefix_253.len(), 253);
    assert!(
        Requirement::new(
            format!("{prefix_253}/n"),
            Operator::Exists,
            Vec::<String>::new()
        )
        .is_ok()
    );
    let prefix_254 = format!("{prefix_253}a");
    let err = Requirement::new(
        format!("{prefix_254}/n"),
        Operator::Exists,
        Vec::<String>::new(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("prefix part must be 253 characters or less"),
        "{err}"
    );
}

// Ports `TestToString` (pkg/labels/selector_test.go): requirements built directly, and their
// printed selector. Upstream's case with a zero-value `Requirement` cannot be written: every
// `Requirement` here is valid.
const TO_STRING: &[(Reqs, &str)] = &[
    (
        &[
            ("x", Operator::In, &["abc", "def"]),
            ("y", Operator::NotIn, &["jkl"]),
            ("z", Operator::Exists, &[]),
        ],
        "x in (abc,def),y notin (jkl),z",
    ),
    (
        &[
            ("x", Operator::NotIn, &["abc", "def"]),
            ("y", Operator::NotEquals, &["jkl"]),
            ("z", Operator::DoesNotExist, &[]),
        ],
        "x notin (abc,def),y!=jkl,!z",
    ),
    (
        &[
            ("x", Operator::NotIn, &["abc"]),
            ("y", Operator::In, &["jkl", "mno"]),
            ("z", Operator::NotIn, &[""]),
        ],
        "x notin (abc),y in (jkl,mno),z notin ()",
    ),
    (
        &[
            ("x", Operator::Equals, &["abc"]),
            ("y", Operator::DoubleEquals, &["jkl"]),
            ("z", Operator::NotEquals, &["a"]),
            ("z", Operator::Exists, &[]),
        ],
        "x=abc,y==jkl,z!=a,z",
    ),
    (
        &[
            ("x", Operator::GreaterThan, &["2"]),
            ("y", Operator::LessThan, &["8"]),
            ("z", Operator::Exists, &[]),
        ],
        "x>2,y<8,z",
    ),
];

#[test]
fn requirements_print_in_the_upstream_format() {
    for (requirements, expected) in TO_STRING {
        let selector = selector(requirements);
        assert_eq!(selector.to_string(), *expected);
        assert_eq!(
            LabelSelector::parse(expected).unwrap(),
            selector,
            "{expected}"
        );
    }
}

// Ports `TestRequirementSelectorMatching` (pkg/labels/selector_test.go): (labels, requirements,
// matches). Upstream's zero-value `Requirement` case cannot be written.
const REQUIREMENT_MATCHING: &[(Pairs, Reqs, bool)] = &[
    (
        &[("x", "foo"), ("y", "baz")],
        &[
            ("x", Operator::In, &["foo"]),
            ("y", Operator::NotIn, &["alpha"]),
        ],
        true,
    ),
    (
        &[("x", "foo"), ("y", "baz")],
        &[
            ("x", Operator::In, &["foo"]),
            ("y", Operator::In, &["alpha"]),
        ],
        false,
    ),
    (
        &[("y", "")],
        &[("x", Operator::NotIn, &[""]), ("y", Operator::Exists, &[])],
        true,
    ),
    (
        &[("y", "")],
        &[
            ("x", Operator::DoesNotExist, &[]),
            ("y", Operator::Exists, &[]),
        ],
        true,
    ),
    (
        &[("y", "")],
        &[
            ("x", Operator::NotIn, &[""]),
            ("y", Operator::DoesNotExist, &[]),
        ],
        false,
    ),
    (&[("y", "baz")], &[("x", Operator::In, &[""])], false),
    (&[("z", "2")], &[("z", Operator::GreaterThan, &["1"])], true),
    (
        &[("z", "v2")],
        &[("z", Operator::GreaterThan, &["1"])],
        false,
    ),
];

#[test]
fn built_selectors_match_as_upstream() {
    for (set, requirements, expected) in REQUIREMENT_MATCHING {
        let selector = selector(requirements);
        assert_eq!(
            selector.matches(&labels(set)),
            *expected,
            "{selector} against {set:?}"
        );
    }
}

// Ports `TestAdd` (pkg/labels/selector_test.go): adding a requirement keeps them sorted by key.
#[test]
fn adding_requirements_keeps_them_sorted_by_key() {
    let first = LabelSelector::from_requirements([req("key", Operator::In, &["value"])]);
    assert_eq!(first.requirements(), [req("key", Operator::In, &["value"])]);
    let both = LabelSelector::from_requirements(first.requirements().iter().cloned().chain([req(
        "key2",
        Operator::Equals,
        &["value2"],
    )]));
    assert_eq!(both.to_string(), "key in (value),key2=value2");
}

// Ports `TestRequiresExactMatch` (pkg/labels/selector_test.go): (requirements, label, value).
const REQUIRES_EXACT_MATCH: &[(Reqs, &str, Option<&str>)] = &[
    (&[("key", Operator::In, &["value"])], "key", Some("value")),
    (&[("key", Operator::In, &["value", "value2"])], "key", None),
    (
        &[
            ("key", Operator::In, &["value", "value1"]),
            ("key2", Operator::In, &["value2"]),
        ],
        "key2",
        Some("value2"),
    ),
    (
        &[("key", Operator::Equals, &["value"])],
        "key",
        Some("value"),
    ),
    (
        &[("key", Operator::DoubleEquals, &["value"])],
        "key",
        Some("value"),
    ),
    (&[("key", Operator::NotEquals, &["value"])], "key", None),
    (
        &[
            ("key", Operator::In, &["value"]),
            ("key2", Operator::In, &["value2"]),
        ],
        "key",
        Some("value"),
    ),
];

#[test]
fn exact_matches_are_found_only_for_single_value_equality() {
    for (requirements, key, expected) in REQUIRES_EXACT_MATCH {
        let selector = selector(requirements);
        assert_eq!(
            selector.requires_exact_match(key),
            *expected,
            "{selector} for {key}"
        );
    }
}

#[test]
fn requirement_errors_name_the_operator_as_upstream_spells_it() {
    let cases: [(Result<Requirement, RequirementError>, &str); 4] = [
        (
            Requirement::new("x", Operator::In, Vec::<String>::new()),
            r#"operator "in" needs at least one value"#,
        ),
        (
            Requirement::new("x", Operator::DoubleEquals, ["a", "b"]),
            r#"operator "==" needs exactly one value, got 2"#,
        ),
        (
            Requirement::new("x", Operator::DoesNotExist, ["a"]),
            r#"operator "!" takes no values, got 1"#,
        ),
        (
            Requirement::new("x", Operator::LessThan, ["1.5"]),
            r#"invalid value "1.5" for operator "lt": must be an integer"#,
        ),
    ];
    for (got, message) in cases {
        assert_eq!(got.unwrap_err().to_string(), message);
    }
}
