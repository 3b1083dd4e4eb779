//! One label requirement (`key in (a,b)`, `!key`, `key>5`): validation, matching, printing.
//!
//! The validation rules are those of apimachinery `labels.NewRequirement`.

use std::fmt;

/// Longest label key name and label value, in characters.
/// Upstream: apimachinery `pkg/api/validate/content/kube.go` (`labelKeyMaxLength`,
/// `LabelValueMaxLength`).
pub const LABEL_NAME_MAX_LENGTH: usize = 63;

/// Longest label key prefix (a DNS-1123 subdomain), in characters.
/// Upstream: apimachinery `pkg/api/validate/content/dns.go` (`DNS1123SubdomainMaxLength`).
pub const LABEL_PREFIX_MAX_LENGTH: usize = 253;

/// How a [`Requirement`] relates its key to its values (apimachinery `selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    /// `key in (a,b)`: the label exists and its value is one of the values.
    In,
    /// `key notin (a,b)`: the label is absent or its value is none of the values.
    NotIn,
    /// `key=a`: the label exists and equals the one value.
    Equals,
    /// `key==a`: same as [`Operator::Equals`], kept apart because it prints as `==`.
    DoubleEquals,
    /// `key!=a`: the label is absent or differs from the one value.
    NotEquals,
    /// `key`: the label exists, with any value.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key>5`: the label exists, is an integer, and is greater than the one value.
    GreaterThan,
    /// `key<5`: the label exists, is an integer, and is less than the one value.
    LessThan,
}

impl Operator {
    /// The operator's name as in apimachinery `selection.Operator` (`in`, `notin`, `=`, `==`,
    /// `!=`, `exists`, `!`, `gt`, `lt`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::In => "in",
            Self::NotIn => "notin",
            Self::Equals => "=",
            Self::DoubleEquals => "==",
            Self::NotEquals => "!=",
            Self::Exists => "exists",
            Self::DoesNotExist => "!",
            Self::GreaterThan => "gt",
            Self::LessThan => "lt",
        }
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why [`Requirement::new`] rejected its arguments (the rules of apimachinery `NewRequirement`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
pub enum RequirementError {
    /// The key is not a qualified name with an optional DNS subdomain prefix.
    #[error("invalid label key {key:?}: {reason}")]
    InvalidKey {
        /// The rejected key.
        key: String,
        /// Every rule it breaks, joined by `; `.
        reason: String,
    },
    /// A value is longer than 63 characters or uses characters a label value cannot hold.
    #[error("invalid label value {value:?}: {reason}")]
    InvalidValue {
        /// The rejected value.
        value: String,
        /// Every rule it breaks, joined by `; `.
        reason: String,
    },
    /// `in` or `notin` was given no values.
    #[error("operator \"{operator}\" needs at least one value")]
    NoValues {
        /// The operator.
        operator: Operator,
    },
    /// `=`, `==`, `!=`, `gt` or `lt` was not given exactly one value.
    #[error("operator \"{operator}\" needs exactly one value, got {count}")]
    NotOneValue {
        /// The operator.
        operator: Operator,
        /// How many values it was given.
        count: usize,
    },
    /// `exists` or `!` was given values.
    #[error("operator \"{operator}\" takes no values, got {count}")]
    UnexpectedValues {
        /// The operator.
        operator: Operator,
        /// How many values it was given.
        count: usize,
    },
    /// `gt` or `lt` was given a value that is not a 64-bit integer.
    #[error("invalid value {value:?} for operator \"{operator}\": must be an integer")]
    NotAnInteger {
        /// The operator.
        operator: Operator,
        /// The rejected value.
        value: String,
    },
}

/// One condition of a [`LabelSelector`](super::LabelSelector): a key, an operator and values.
///
/// Values are kept sorted and free of duplicates (apimachinery's parser collects them in a set),
/// so two requirements that match the same labels compare equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Validates and builds a requirement, like apimachinery `labels.NewRequirement`.
    ///
    /// The empty string is a valid value. Values are sorted and deduplicated.
    ///
    /// # Errors
    ///
    /// The first rule broken, checked in upstream's order: the key, the number of values for the
    /// operator, integer values for `gt`/`lt`, then each value.
    pub fn new(
        key: impl Into<String>,
        operator: Operator,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, RequirementError> {
        let key = key.into();
        let mut values: Vec<String> = values.into_iter().map(Into::into).collect();
        validate_key(&key).map_err(|reason| RequirementError::InvalidKey {
            key: key.clone(),
            reason,
        })?;
        check_value_count(operator, &values)?;
        for value in &values {
            validate_value(value).map_err(|reason| RequirementError::InvalidValue {
                value: value.clone(),
                reason,
            })?;
        }
        values.sort();
        values.dedup();
        Ok(Self {
            key,
            operator,
            values,
        })
    }

    /// Builds a requirement from parts the parser has already validated.
    pub(super) fn from_validated(key: String, operator: Operator, mut values: Vec<String>) -> Self {
        values.sort();
        values.dedup();
        Self {
            key,
            operator,
            values,
        }
    }

    /// The label key.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    #[must_use]
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted and without duplicates; empty for `exists` and `!`.
    #[must_use]
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether labels looked up through `lookup` satisfy this requirement (apimachinery
    /// `Requirement.Matches`).
    pub fn matches_with<'a>(&self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        let has_value = |v: &str| self.values.iter().any(|candidate| candidate == v);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                lookup(&self.key).is_some_and(has_value)
            }
            Operator::NotIn | Operator::NotEquals => !lookup(&self.key).is_some_and(has_value),
            Operator::Exists => lookup(&self.key).is_some(),
            Operator::DoesNotExist => lookup(&self.key).is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                // A label that is not an integer never matches; neither does a requirement whose
                // value is not one (only constructible through invalid input, which `new` rejects).
                let Some(Ok(actual)) = lookup(&self.key).map(str::parse::<i64>) else {
                    return false;
                };
                let [wanted] = self.values.as_slice() else {
                    return false;
                };
                let Ok(wanted) = wanted.parse::<i64>() else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    actual > wanted
                } else {
                    actual < wanted
                }
            }
        }
    }
}

/// Prints the requirement as apimachinery `Requirement.String()` does: `!key`, `key`, `key=v`,
/// `key==v`, `key!=v`, `key>v`, `key<v`, `key in (a,b)`, `key notin (a,b)`.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let joined = self.values.join(",");
        match self.operator {
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::Equals => write!(f, "{}={joined}", self.key),
            Operator::DoubleEquals => write!(f, "{}=={joined}", self.key),
            Operator::NotEquals => write!(f, "{}!={joined}", self.key),
            Operator::GreaterThan => write!(f, "{}>{joined}", self.key),
            Operator::LessThan => write!(f, "{}<{joined}", self.key),
            Operator::In => write!(f, "{} in ({joined})", self.key),
            Operator::NotIn => write!(f, "{} notin ({joined})", self.key),
        }
    }
}

/// Checks the number of values (and for `gt`/`lt`, that they are integers) for `operator`.
pub(super) fn check_value_count(
    operator: Operator,
    values: &[String],
) -> Result<(), RequirementError> {
    let count = values.len();
    match operator {
        Operator::In | Operator::NotIn if values.is_empty() => {
            Err(RequirementError::NoValues { operator })
        }
        Operator::In | Operator::NotIn => Ok(()),
        Operator::Exists | Operator::DoesNotExist if values.is_empty() => Ok(()),
        Operator::Exists | Operator::DoesNotExist => {
            Err(RequirementError::UnexpectedValues { operator, count })
        }
        Operator::GreaterThan | Operator::LessThan => match values {
            [value] => check_integer(operator, value),
            _ => Err(RequirementError::NotOneValue { operator, count }),
        },
        Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => match values {
            [_] => Ok(()),
            _ => Err(RequirementError::NotOneValue { operator, count }),
        },
    }
}

/// Checks that a `gt`/`lt` value is a base-10 64-bit integer (Go `strconv.ParseInt(v, 10, 64)`).
pub(super) fn check_integer(operator: Operator, value: &str) -> Result<(), RequirementError> {
    value
        .parse::<i64>()
        .map(drop)
        .map_err(|_| RequirementError::NotAnInteger {
            operator,
            value: value.to_owned(),
        })
}

/// Rule text for names and values. Upstream: apimachinery `content/kube.go` (`labelKeyErrMsg`).
const NAME_CHARSET_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// Rule text for key prefixes. Upstream: apimachinery `content/dns.go`.
const PREFIX_CHARSET_RULE: &str = "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// Validates a label key: an optional DNS-1123 subdomain prefix and `/`, then a name of at most
/// 63 characters (apimachinery `content.IsLabelKey`). Returns every broken rule, joined by `; `.
pub(super) fn validate_key(key: &str) -> Result<(), String> {
    let mut errors = Vec::new();
    let name = match key.split('/').collect::<Vec<_>>().as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                if prefix.chars().count() > LABEL_PREFIX_MAX_LENGTH {
                    errors.push(format!(
                        "prefix part must be {LABEL_PREFIX_MAX_LENGTH} characters or less"
                    ));
                }
                if !is_dns1123_subdomain(prefix) {
                    errors.push(format!("prefix part {PREFIX_CHARSET_RULE}"));
                }
            }
            *name
        }
        _ => {
            return Err(format!(
                "a label key {NAME_CHARSET_RULE}, with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.chars().count() > LABEL_NAME_MAX_LENGTH {
        errors.push(format!(
            "name part must be {LABEL_NAME_MAX_LENGTH} characters or less"
        ));
    }
    if !is_label_name(name) {
        errors.push(format!("name part {NAME_CHARSET_RULE}"));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Validates a label value: empty, or at most 63 characters of the label-name alphabet
/// (apimachinery `content.IsLabelValue`). Returns every broken rule, joined by `; `.
pub(super) fn validate_value(value: &str) -> Result<(), String> {
    let mut errors = Vec::new();
    if value.chars().count() > LABEL_NAME_MAX_LENGTH {
        errors.push(format!(
            "must be {LABEL_NAME_MAX_LENGTH} characters or less"
        ));
    }
    if !value.is_empty() && !is_label_name(value) {
        errors.push(format!(
            "a label value must be empty or {NAME_CHARSET_RULE}"
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, without the length limit.
pub(super) fn is_label_name(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`, without the length limit.
pub(super) fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let bytes = label.as_bytes();
        let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        match (bytes.first(), bytes.last()) {
            (Some(first), Some(last)) => {
                alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
            }
            _ => false,
        }
    })
}
