//! Converts a structured `metav1.LabelSelector` like apimachinery `LabelSelectorAsSelector`.
//!
//! Upstream: `pkg/apis/meta/v1/helpers.go`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;

use super::{LabelSelector, Operator, Requirement, RequirementError};

/// Why a `metav1.LabelSelector` could not be converted. `Display` names the entry; the
/// validation failure is the [`source`](std::error::Error::source).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// A `matchLabels` entry has an invalid key or value.
    #[error("invalid matchLabels entry {key:?}")]
    MatchLabel {
        /// The entry's key.
        key: String,
        /// What is wrong with it.
        #[source]
        source: RequirementError,
    },
    /// A `matchExpressions` entry breaks the requirement rules (for example values with
    /// `Exists`).
    #[error("invalid matchExpressions[{index}]")]
    MatchExpression {
        /// Index of the expression.
        index: usize,
        /// What is wrong with it.
        #[source]
        source: RequirementError,
    },
    /// A `matchExpressions` entry uses an operator other than `In`, `NotIn`, `Exists` and
    /// `DoesNotExist`.
    #[error(
        "matchExpressions[{index}].operator {operator:?} is not a valid label selector operator (In, NotIn, Exists, DoesNotExist)"
    )]
    UnknownOperator {
        /// Index of the expression.
        index: usize,
        /// The operator as written.
        operator: String,
    },
}

/// Converts like apimachinery `LabelSelectorAsSelector`: `matchLabels` become `key=value`,
/// `matchExpressions` keep their operator, and all are validated and sorted by key. An empty
/// selector is [`LabelSelector::everything`]. Upstream turns an absent (`nil`) selector into
/// "nothing"; an `Option` around this type is the caller's to interpret.
impl TryFrom<&metav1::LabelSelector> for LabelSelector {
    type Error = ConvertError;

    fn try_from(selector: &metav1::LabelSelector) -> Result<Self, Self::Error> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            let requirement = Requirement::new(key.clone(), Operator::Equals, [value.clone()])
                .map_err(|source| ConvertError::MatchLabel {
                    key: key.clone(),
                    source,
                })?;
            requirements.push(requirement);
        }
        for (index, expression) in selector.match_expressions.iter().flatten().enumerate() {
            let operator = match expression.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(ConvertError::UnknownOperator {
                        index,
                        operator: other.to_owned(),
                    });
                }
            };
            let values = expression.values.iter().flatten().cloned();
            let requirement = Requirement::new(expression.key.clone(), operator, values)
                .map_err(|source| ConvertError::MatchExpression { index, source })?;
            requirements.push(requirement);
        }
        Ok(Self::from_requirements(requirements))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn expression(key: &str, operator: &str, values: &[&str]) -> metav1::LabelSelectorRequirement {
        metav1::LabelSelectorRequirement {
            key: key.to_owned(),
            operator: operator.to_owned(),
            values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    fn convert(
        labels: &[(&str, &str)],
        expressions: Vec<metav1::LabelSelectorRequirement>,
    ) -> Result<String, ConvertError> {
        let selector = metav1::LabelSelector {
            match_labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            match_expressions: Some(expressions),
        };
        LabelSelector::try_from(&selector).map(|s| s.to_string())
    }

    // Ports `TestLabelSelectorAsSelector` (pkg/apis/meta/v1/helpers_test.go). Its `nil` case
    // (Nothing) is left to callers: they hold an `Option`.
    #[test]
    fn structured_selectors_convert_like_label_selector_as_selector() {
        let baz_in = || vec![expression("baz", "In", &["qux", "norf"])];
        assert_eq!(
            LabelSelector::try_from(&metav1::LabelSelector::default()),
            Ok(LabelSelector::everything())
        );
        assert_eq!(convert(&[("foo", "bar")], vec![]).unwrap(), "foo=bar");
        assert_eq!(convert(&[], baz_in()).unwrap(), "baz in (norf,qux)");
        assert_eq!(
            convert(&[("foo", "bar")], baz_in()).unwrap(),
            "baz in (norf,qux),foo=bar"
        );
        assert!(matches!(
            convert(&[], vec![expression("baz", "Exists", &["qux", "norf"])]),
            Err(ConvertError::MatchExpression {
                index: 0,
                source: RequirementError::UnexpectedValues { .. }
            })
        ));
    }

    #[test]
    fn unknown_operators_and_invalid_labels_name_the_entry() {
        let err = convert(
            &[],
            vec![
                expression("a", "Exists", &[]),
                expression("b", "Gt", &["1"]),
            ],
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"matchExpressions[1].operator "Gt" is not a valid label selector operator (In, NotIn, Exists, DoesNotExist)"#
        );
        let err = convert(&[("a", "-bad")], vec![]).unwrap_err();
        assert_eq!(err.to_string(), r#"invalid matchLabels entry "a""#);
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert!(source.is_some_and(|s| s.starts_with(r#"invalid label value "-bad""#)));
    }
}
