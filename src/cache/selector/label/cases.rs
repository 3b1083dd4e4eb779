//! Test cases ported from apimachinery `pkg/labels/selector_test.go`, as data tables.

use std::collections::BTreeMap;

use super::LabelSelector;

/// A label set from `(key, value)` pairs.
fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn common_selectors_parse_print_and_match() {
    let selector = LabelSelector::parse("x in (b,a),y!=c,!z").unwrap();
    assert_eq!(selector.to_string(), "x in (a,b),y!=c,!z");
    assert!(selector.matches(&labels(&[("x", "a")])));
    assert!(!selector.matches(&labels(&[("x", "a"), ("z", "")])));
}
