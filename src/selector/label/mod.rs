//! Label selectors (`app=web,!canary`): apimachinery semantics, canonical print, matching.
//!
//! Parsing follows `labels.Parse`; matching works on label maps and on objects' metadata.

mod convert;
mod lexer;
mod parser;
mod requirement;
mod upstream;

#[cfg(test)]
mod cases;

use std::collections::BTreeMap;

pub use convert::ConvertError;
pub use requirement::{
    LABEL_NAME_MAX_LENGTH, LABEL_PREFIX_MAX_LENGTH, Operator, Requirement, RequirementError,
};

use super::ParseError;

/// Every rule of a label value (apimachinery's `validation.IsValidLabelValue`) that `value`
/// breaks, in its words; empty when `value` is a valid label value.
#[must_use]
pub fn label_value_problems(value: &str) -> Vec<String> {
    upstream::label_value_errors(value)
}

/// A parsed label selector: the conjunction of its [`Requirement`]s.
///
/// Requirements are kept sorted by key, so [`Display`](std::fmt::Display) prints the canonical form of
/// apimachinery's `Selector.String()`, and parsing that output gives back an equal selector.
///
/// ```
/// use std::collections::BTreeMap;
/// use informant::selector::LabelSelector;
///
/// let selector: LabelSelector = "tier in (web, api),app=shop,!canary".parse().unwrap();
/// assert_eq!(selector.to_string(), "app=shop,!canary,tier in (api,web)");
///
/// let labels = BTreeMap::from([("app".to_owned(), "shop".to_owned()), ("tier".to_owned(), "api".to_owned())]);
/// assert!(selector.matches(&labels));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses a selector with the grammar and validation of apimachinery `labels.Parse`.
    ///
    /// The empty string (or only blanks) is [`LabelSelector::everything`].
    ///
    /// # Errors
    ///
    /// A [`ParseError`] naming the first offending token and its character position: bad syntax,
    /// an invalid key or value, or a non-integer value for `>`/`<`.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        parser::parse(s)
            .map(|requirements| Self { requirements })
            .map_err(|failure| failure.error)
    }

    /// The message apimachinery's `labels.Parse` gives for `s` (what kube-apiserver answers a
    /// list with that `labelSelector`), to the character: for its grammar
    /// (`found ',', expected: identifier`) and for a key or value it refuses (the field errors
    /// of `validateLabelKey` and `NewRequirement`); `None` when `s` parses.
    ///
    /// ```
    /// use informant::selector::LabelSelector;
    /// assert_eq!(
    ///     LabelSelector::apimachinery_error("x in a").as_deref(),
    ///     Some("unable to parse requirement: found 'a' expected: '('")
    /// );
    /// assert!(LabelSelector::apimachinery_error("x=x@").unwrap().starts_with(
    ///     r#"unable to parse requirement: values[0][x]: Invalid value: "x@": a valid label must be"#
    /// ));
    /// assert_eq!(LabelSelector::apimachinery_error("x in (a)"), None);
    /// ```
    #[must_use]
    pub fn apimachinery_error(s: &str) -> Option<String> {
        parser::parse(s).err().and_then(|failure| failure.upstream)
    }

    /// The selector that matches every object (apimachinery `labels.Everything()`).
    #[must_use]
    pub fn everything() -> Self {
        Self::default()
    }

    /// Builds a selector from requirements, sorting them by key like apimachinery `Selector.Add`.
    #[must_use]
    pub fn from_requirements(requirements: impl IntoIterator<Item = Requirement>) -> Self {
        let mut requirements: Vec<Requirement> = requirements.into_iter().collect();
        requirements.sort_by(|a, b| a.key().cmp(b.key()));
        Self { requirements }
    }

    /// Whether the selector has no requirements and so matches everything.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, sorted by key.
    #[must_use]
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// If the selector requires `key` to have exactly one value (`key=v`, `key==v` or
    /// `key in (v)`), that value (apimachinery `Selector.RequiresExactMatch`). Only the first
    /// requirement on `key` is considered, as upstream does.
    #[must_use]
    pub fn requires_exact_match(&self, key: &str) -> Option<&str> {
        let requirement = self.requirements.iter().find(|r| r.key() == key)?;
        match (requirement.operator(), requirement.values()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [value]) => Some(value),
            _ => None,
        }
    }

    /// Whether labels looked up through `lookup` satisfy every requirement.
    pub fn matches_with<'a>(&self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| r.matches_with(&lookup))
    }

    /// Whether `labels` satisfy every requirement.
    #[must_use]
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|key| labels.get(key).map(String::as_str))
    }

    /// Whether the labels of a Kubernetes object in JSON form (`metadata.labels`) satisfy every
    /// requirement. Missing labels are no labels; label values that are not strings are ignored.
    #[must_use]
    pub fn matches_object(&self, obj: &serde_json::Value) -> bool {
        let labels = obj.get("metadata").and_then(|m| m.get("labels"));
        self.matches_with(|key| {
            labels
                .and_then(|l| l.get(key))
                .and_then(serde_json::Value::as_str)
        })
    }
}

string_form!(LabelSelector, "internalSelector.String()");

/// Why `name` is not a qualified name (apimachinery `IsQualifiedName`: what a label key is,
/// an optional DNS subdomain prefix and `/`, then at most 63 characters of letters, digits,
/// `-`, `_` and `.`, starting and ending with a letter or digit), if it is not.
// Reason: the admission checks of the hooks and of the embedded API server call it.
#[cfg_attr(not(any(feature = "hooks", feature = "apiserver")), allow(dead_code))]
pub(crate) fn qualified_name_problem(name: &str) -> Option<String> {
    requirement::validate_key(name).err()
}
