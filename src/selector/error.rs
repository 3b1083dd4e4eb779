//! The error both selector parsers return: what was wrong, where, and what was expected.

use std::fmt;

/// A selector string that could not be parsed.
///
/// `Display` reads `<message> at position <n>` followed by the detail, for example
/// `unexpected "=" at position 7, expected a label key` or
/// `invalid label value "…" at position 4: must be 63 characters or less`. The config validator
/// prefixes it with the field path of the selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{message} at position {position}{}", DetailSuffix(.detail.as_ref()))]
pub struct ParseError {
    /// Offset of the offending input, in characters (not bytes) from the start of the selector.
    /// Equal to the character count when the input ended too early.
    pub position: usize,
    /// What was wrong, without the position (`unexpected "="`, `invalid label key "-a"`).
    pub message: String,
    /// What was expected instead, or why the input is invalid.
    pub detail: Option<Detail>,
}

/// The part of a [`ParseError`] printed after its position.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Detail {
    /// What the parser expected at that position; printed as `, expected <text>`.
    Expected(String),
    /// Why the input at that position is invalid; printed as `: <text>`.
    Reason(String),
}

impl ParseError {
    /// An error at `position` saying the input there was unexpected and what was expected.
    pub(crate) fn expected(
        position: usize,
        message: impl Into<String>,
        expected: impl Into<String>,
    ) -> Self {
        Self {
            position,
            message: message.into(),
            detail: Some(Detail::Expected(expected.into())),
        }
    }

    /// An error at `position` naming the invalid input and the reason it is invalid.
    pub(crate) fn invalid(
        position: usize,
        message: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            position,
            message: message.into(),
            detail: Some(Detail::Reason(reason.into())),
        }
    }
}

/// Renders an optional [`Detail`] with its separator, so the error format string stays flat.
struct DetailSuffix<'a>(Option<&'a Detail>);

impl fmt::Display for DetailSuffix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => Ok(()),
            Some(Detail::Expected(text)) => write!(f, ", expected {text}"),
            Some(Detail::Reason(text)) => write!(f, ": {text}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_puts_the_position_between_message_and_detail() {
        let err = ParseError::expected(7, r#"unexpected "=""#, "a label key");
        assert_eq!(
            err.to_string(),
            r#"unexpected "=" at position 7, expected a label key"#
        );
        let err = ParseError::invalid(
            4,
            r#"invalid label value "x""#,
            "must be 63 characters or less",
        );
        assert_eq!(
            err.to_string(),
            r#"invalid label value "x" at position 4: must be 63 characters or less"#
        );
    }

    #[test]
    fn display_without_detail_ends_at_the_position() {
        let err = ParseError {
            position: 0,
            message: "bad".to_owned(),
            detail: None,
        };
        assert_eq!(err.to_string(), "bad at position 0");
    }
}
