//! Label selector test tables ported from apimachinery `pkg/labels/selector_test.go`.
//!
//! Plus the error messages and object matching this crate adds; one file per area.

mod errors;
mod lexer;
mod parse;
mod requirement;

use std::collections::BTreeMap;

use super::{Operator, Requirement};

/// `(key, value)` pairs of a label set.
type Pairs = &'static [(&'static str, &'static str)];

/// Requirements as `(key, operator, values)`.
type Reqs = &'static [(&'static str, Operator, &'static [&'static str])];

/// A label set from `(key, value)` pairs.
fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A requirement that must be valid.
fn req(key: &str, operator: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, operator, values.iter().copied())
        .unwrap_or_else(|e| panic!("test requirement {key} is invalid: {e}"))
}

/// A selector from requirements that must be valid.
fn selector(requirements: Reqs) -> super::LabelSelector {
    super::LabelSelector::from_requirements(requirements.iter().map(|(k, op, vs)| req(k, *op, vs)))
}
