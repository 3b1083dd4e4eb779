//! Test cases ported from apimachinery `pkg/fields/selector_test.go`, as data tables.

use std::collections::BTreeMap;

use super::FieldSelector;

#[test]
fn common_selectors_parse_print_and_match() {
    let selector = FieldSelector::parse(r"x=a\,b,metadata.name!=y").unwrap();
    assert_eq!(selector.to_string(), r"metadata.name!=y,x=a\,b");
    let set = BTreeMap::from([("x".to_owned(), "a,b".to_owned())]);
    assert!(selector.matches_set(&set));
}
