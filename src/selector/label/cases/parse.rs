//! Parser tables: valid and invalid selectors, their canonical form, and what they match.
//!
//! Ports `TestSelectorParse`, `TestDeterministicParse`, `TestEverything`, `TestSelectorMatches`,
//! `TestParseOperator` and `TestSetSelectorParser`.

use super::{Pairs, Reqs, labels, req};
use crate::selector::label::{LabelSelector, Operator, Requirement};

// Ports `TestSelectorParse` (pkg/labels/selector_test.go): these parse, and print as the input
// with blanks removed.
const GOOD_STRINGS: &[&str] = &[
    "x=a,y=b,z=c",
    "",
    "x!=a,y=b",
    "x=",
    "x= ",
    "x=,z= ",
    "x= ,z= ",
    "!x",
    "x>1",
    "x>1,z<5",
];

// Ports `TestSelectorParse` (pkg/labels/selector_test.go): these are rejected.
const BAD_STRINGS: &[&str] = &["x=a||y=b", "x==a==b", "!x=a", "x<a"];

#[test]
fn good_selectors_parse_and_print_without_blanks() {
    for input in GOOD_STRINGS {
        let selector = LabelSelector::parse(input)
            .unwrap_or_else(|e| panic!("{input:?} should parse, got {e}"));
        assert_eq!(
            selector.to_string(),
            input.replace(' ', ""),
            "input {input:?}"
        );
    }
}

#[test]
fn bad_selectors_are_rejected() {
    for input in BAD_STRINGS {
        assert!(
            LabelSelector::parse(input).is_err(),
            "{input:?} should be rejected"
        );
    }
}

// Ports `TestDeterministicParse` (pkg/labels/selector_test.go).
#[test]
fn requirement_order_does_not_change_the_printed_selector() {
    let a = LabelSelector::parse("x=a,a=x").unwrap();
    let b = LabelSelector::parse("a=x,x=a").unwrap();
    assert_eq!(a.to_string(), b.to_string());
    assert_eq!(a, b);
}

// Ports `TestEverything` (pkg/labels/selector_test.go).
#[test]
fn everything_is_empty_and_matches_any_labels() {
    let everything = LabelSelector::everything();
    assert!(everything.matches(&labels(&[("x", "y")])));
    assert!(everything.is_empty());
    assert_eq!(LabelSelector::parse("").unwrap(), everything);
    assert_eq!(LabelSelector::parse(" \t\r\n").unwrap(), everything);
    assert_eq!(everything.to_string(), "");
}

// Ports `TestSelectorMatches` (pkg/labels/selector_test.go): (selector, labels, matches).
const SELECTOR_MATCHES: &[(&str, Pairs, bool)] = &[
    ("", &[("x", "y")], true),
    ("x=y", &[("x", "y")], true),
    ("x=y,z=w", &[("x", "y"), ("z", "w")], true),
    ("x!=y,z!=w", &[("x", "z"), ("z", "a")], true),
    ("notin=in", &[("notin", "in")], true), // in and notin in exact match
    ("x", &[("x", "z")], true),
    ("!x", &[("y", "z")], true),
    ("x>1", &[("x", "2")], true),
    ("x<1", &[("x", "0")], true),
    ("x=z", &[], false),
    ("x=y", &[("x", "z")], false),
    ("x=y,z=w", &[("x", "w"), ("z", "w")], false),
    ("x!=y,z!=w", &[("x", "z"), ("z", "w")], false),
    ("x", &[("y", "z")], false),
    ("!x", &[("x", "z")], false),
    ("x>1", &[("x", "0")], false),
    ("x<1", &[("x", "2")], false),
    ("foo=bar", &[("foo", "bar"), ("baz", "blah")], true),
    ("baz=blah", &[("foo", "bar"), ("baz", "blah")], true),
    ("foo=bar,baz=blah", &[("foo", "bar"), ("baz", "blah")], true),
    ("foo=blah", &[("foo", "bar"), ("baz", "blah")], false),
    ("baz=bar", &[("foo", "bar"), ("baz", "blah")], false),
    (
        "foo=bar,foobar=bar,baz=blah",
        &[("foo", "bar"), ("baz", "blah")],
        false,
    ),
];

#[test]
fn selectors_match_label_sets_as_upstream() {
    for (selector, set, expected) in SELECTOR_MATCHES {
        let parsed = LabelSelector::parse(selector).unwrap();
        assert_eq!(
            parsed.matches(&labels(set)),
            *expected,
            "{selector:?} against {set:?}"
        );
    }
}

// Ports `TestParseOperator` (pkg/labels/selector_test.go): (operator token, accepted). Each is
// tried after a key; rejected ones fail with "expected an operator".
const OPERATORS: &[(&str, bool)] = &[
    ("in", true),
    ("=", true),
    ("==", true),
    (">", true),
    ("<", true),
    ("notin", true),
    ("!=", true),
    ("!", false),
    ("exists", false),
    ("(", false),
];

#[test]
fn only_binary_operators_follow_a_key() {
    for (operator, accepted) in OPERATORS {
        let input = format!("x {operator} ");
        let error = LabelSelector::parse(&input).err().map(|e| e.to_string());
        let operator_error = error
            .as_deref()
            .is_some_and(|e| e.contains("at position 2, expected an operator"));
        assert_eq!(operator_error, !accepted, "input {input:?} gave {error:?}");
    }
}

/// The outcome expected from parsing one input of [`SET_SELECTOR_PARSER`].
enum Parsed {
    /// Valid, with these requirements in this order.
    Is(Reqs),
    /// Rejected.
    Invalid,
}

// Ports `TestSetSelectorParser` (pkg/labels/selector_test.go): (input, outcome). Upstream leaves
// some expectations unchecked (`Match: false`); here each is written out, sorted by key.
const SET_SELECTOR_PARSER: &[(&str, Parsed)] = &[
    ("", Parsed::Is(&[])),
    ("\rx", Parsed::Is(&[("x", Operator::Exists, &[])])),
    (
        "this-is-a-dns.domain.com/key-with-dash",
        Parsed::Is(&[(
            "this-is-a-dns.domain.com/key-with-dash",
            Operator::Exists,
            &[],
        )]),
    ),
    (
        "this-is-another-dns.domain.com/key-with-dash in (so,what)",
        Parsed::Is(&[(
            "this-is-another-dns.domain.com/key-with-dash",
            Operator::In,
            &["so", "what"],
        )]),
    ),
    (
        "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
        Parsed::Is(&[(
            "0.1.2.domain/99",
            Operator::NotIn,
            &["10.10.100.1", "tick.tack.clock"],
        )]),
    ),
    (
        "foo  in\t (abc)",
        Parsed::Is(&[("foo", Operator::In, &["abc"])]),
    ),
    (
        "x notin\n (abc)",
        Parsed::Is(&[("x", Operator::NotIn, &["abc"])]),
    ),
    (
        "x  notin\t\t\t(abc,def)",
        Parsed::Is(&[("x", Operator::NotIn, &["abc", "def"])]),
    ),
    (
        "x in (abc,def)",
        Parsed::Is(&[("x", Operator::In, &["abc", "def"])]),
    ),
    (
        "x in (abc,)",
        Parsed::Is(&[("x", Operator::In, &["abc", ""])]),
    ),
    (
        "x in (abc,abc)",
        Parsed::Is(&[("x", Operator::In, &["abc"])]),
    ),
    ("x in ()", Parsed::Is(&[("x", Operator::In, &[""])])),
    ("x in (a,,)", Parsed::Is(&[("x", Operator::In, &["a", ""])])),
    (
        "x in (a,,,)",
        Parsed::Is(&[("x", Operator::In, &["a", ""])]),
    ),
    (
        "x in (a,,,,,,)",
        Parsed::Is(&[("x", Operator::In, &["a", ""])]),
    ),
    (
        "x in (a,,a,,a,,a,,)",
        Parsed::Is(&[("x", Operator::In, &["a", ""])]),
    ),
    (
        "x notin (abc,,def),bar,z in (),w",
        Parsed::Is(&[
            ("bar", Operator::Exists, &[]),
            ("w", Operator::Exists, &[]),
            ("x", Operator::NotIn, &["abc", "", "def"]),
            ("z", Operator::In, &[""]),
        ]),
    ),
    (
        "x,y in (a)",
        Parsed::Is(&[("x", Operator::Exists, &[]), ("y", Operator::In, &["a"])]),
    ),
    ("x=a", Parsed::Is(&[("x", Operator::Equals, &["a"])])),
    ("x>1", Parsed::Is(&[("x", Operator::GreaterThan, &["1"])])),
    ("x<7", Parsed::Is(&[("x", Operator::LessThan, &["7"])])),
    (
        "x=a,y!=b",
        Parsed::Is(&[
            ("x", Operator::Equals, &["a"]),
            ("y", Operator::NotEquals, &["b"]),
        ]),
    ),
    (
        "x=a,y!=b,z in (h,i,j)",
        Parsed::Is(&[
            ("x", Operator::Equals, &["a"]),
            ("y", Operator::NotEquals, &["b"]),
            ("z", Operator::In, &["h", "i", "j"]),
        ]),
    ),
    ("x=a||y=b", Parsed::Invalid),
    ("x,,y", Parsed::Invalid),
    (",x,y", Parsed::Invalid),
    ("x nott in (y)", Parsed::Invalid),
    ("x notin ( )", Parsed::Is(&[("x", Operator::NotIn, &[""])])),
    (
        "x notin (, a)",
        Parsed::Is(&[("x", Operator::NotIn, &["", "a"])]),
    ),
    ("a in (xyz),", Parsed::Invalid),
    ("a in (xyz)b notin ()", Parsed::Invalid),
    ("a ", Parsed::Is(&[("a", Operator::Exists, &[])])),
    // operator 'in' inside list of identifiers
    (
        "a in (x,y,notin, z,in)",
        Parsed::Is(&[("a", Operator::In, &["in", "notin", "x", "y", "z"])]),
    ),
    ("a in (xyz abc)", Parsed::Invalid), // no comma
    ("a notin(", Parsed::Invalid),       // bad formed
    ("a (", Parsed::Invalid),            // cpar
    ("(", Parsed::Invalid),              // opar
];

#[test]
fn set_based_selectors_parse_as_upstream() {
    for (input, outcome) in SET_SELECTOR_PARSER {
        let got = LabelSelector::parse(input);
        match outcome {
            Parsed::Invalid => assert!(got.is_err(), "{input:?} should be rejected, got {got:?}"),
            Parsed::Is(requirements) => {
                let want: Vec<Requirement> = requirements
                    .iter()
                    .map(|(k, op, vs)| req(k, *op, vs))
                    .collect();
                let got = got.unwrap_or_else(|e| panic!("{input:?} should parse, got {e}"));
                assert_eq!(got.requirements(), want.as_slice(), "input {input:?}");
            }
        }
    }
}
