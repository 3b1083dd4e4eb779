//! The label selector grammar of apimachinery `labels.Parse`, as a recursive descent.
//!
//! It reads the tokens of [`super::lexer`]; errors name the offending token and its position.
//!
//! ```text
//! <selector>     ::= "" | <requirement> | <requirement> "," <selector>
//! <requirement>  ::= "!" KEY | KEY [ <set-based> | <exact-match> ]
//! <set-based>    ::= ("in" | "notin") "(" <values> ")"
//! <values>       ::= "" | VALUE | <values> "," <values>
//! <exact-match>  ::= ("=" | "==" | "!=" | ">" | "<") [ VALUE ]
//! ```
//!
//! Where a value is expected, `in` and `notin` are plain identifiers. Empty values are allowed
//! (`x=`, `x in (a,)`, `x in ()`).

use super::lexer::{Kind, Token, tokenize};
use super::requirement::{Operator, Requirement, check_integer, validate_key, validate_value};
use super::upstream;
use crate::selector::ParseError;

/// What is expected after a key when it is not followed by `,` or the end.
const EXPECTED_OPERATOR: &str = r#"an operator ("in", "notin", "=", "==", "!=", ">" or "<")"#;

/// Why a selector did not parse: this crate's error, and, when the grammar is what failed, the
/// message apimachinery's `labels.Parse` gives for the same input (what kube-apiserver answers;
/// k8s.io/apimachinery `pkg/labels/selector.go`, `Parser.parse` and the functions it calls).
#[derive(Debug)]
pub(super) struct Failure {
    /// This crate's error: what, where, and what was expected.
    pub error: ParseError,
    /// apimachinery's message, when known.
    pub upstream: Option<String>,
}

impl From<ParseError> for Failure {
    fn from(error: ParseError) -> Self {
        Self {
            error,
            upstream: None,
        }
    }
}

/// Parses a whole label selector into requirements sorted by key (stable, so requirements on the
/// same key keep their written order).
pub(super) fn parse(input: &str) -> Result<Vec<Requirement>, Failure> {
    let mut parser = Parser {
        tokens: tokenize(input),
        next: 0,
    };
    let mut requirements = Vec::new();
    loop {
        let token = parser.peek();
        match token.kind_as_value() {
            Kind::End => break,
            Kind::Identifier | Kind::Not => {
                // Upstream wraps what fails inside a requirement.
                requirements.push(parser.requirement().map_err(|mut f| {
                    f.upstream = f
                        .upstream
                        .map(|u| format!("unable to parse requirement: {u}"));
                    f
                })?);
                let token = parser.advance();
                match token.kind_as_value() {
                    Kind::End => break,
                    Kind::Comma => {
                        let after = parser.peek();
                        if !matches!(after.kind_as_value(), Kind::Identifier | Kind::Not) {
                            return Err(unexpected(
                                after,
                                r#"a label key or "!" after ",""#,
                                ", expected: identifier after ','",
                            ));
                        }
                    }
                    _ => {
                        let negated = requirements
                            .last()
                            .is_some_and(|r: &Requirement| r.operator() == Operator::DoesNotExist);
                        let expected = if negated {
                            r#""," or end of input ("!key" takes no operator or values)"#
                        } else {
                            r#""," or end of input"#
                        };
                        return Err(unexpected(
                            &token,
                            expected,
                            ", expected: ',' or 'end of string'",
                        ));
                    }
                }
            }
            _ => {
                return Err(unexpected(
                    token,
                    r#"a label key or "!""#,
                    ", expected: !, identifier, or 'end of string'",
                ));
            }
        }
    }
    requirements.sort_by(|a, b| a.key().cmp(b.key()));
    Ok(requirements)
}

/// An error saying `token` was not what the grammar allows at its position: `expected` in this
/// crate's words, `upstream` what follows `found '<token>'` in apimachinery's.
fn unexpected(token: &Token, expected: &str, upstream: &str) -> Failure {
    Failure {
        error: ParseError::expected(token.position, format!("unexpected {token}"), expected),
        upstream: Some(format!("found '{}'{upstream}", token.text)),
    }
}

/// The tokens and a cursor over them.
struct Parser {
    /// All tokens; the last is [`Kind::End`].
    tokens: Vec<Token>,
    /// Index of the next token to consume.
    next: usize,
}

impl Parser {
    /// The next token, without consuming it.
    fn peek(&self) -> &Token {
        &self.tokens[self.next.min(self.tokens.len() - 1)]
    }

    /// Consumes and returns the next token; keeps returning the end token once there.
    fn advance(&mut self) -> Token {
        let token = self.peek().clone();
        if self.next < self.tokens.len() - 1 {
            self.next += 1;
        }
        token
    }

    /// `"!" KEY` or `KEY [operator values]`.
    fn requirement(&mut self) -> Result<Requirement, Failure> {
        let mut key = self.advance();
        let negated = key.kind_as_value() == Kind::Not;
        if negated {
            key = self.advance();
        }
        if key.kind_as_value() != Kind::Identifier {
            return Err(unexpected(&key, "a label key", ", expected: identifier"));
        }
        validate_key(&key.text).map_err(|reason| Failure {
            error: ParseError::invalid(
                key.position,
                format!("invalid label key {:?}", key.text),
                reason,
            ),
            upstream: upstream::key_error(&key.text),
        })?;
        let follows = self.peek();
        let at_end = matches!(follows.kind_as_value(), Kind::End | Kind::Comma);
        // "!key" takes no operator: what follows is checked after the requirement, as upstream
        // does.
        if negated {
            return Ok(Requirement::from_validated(
                key.text,
                Operator::DoesNotExist,
                Vec::new(),
            ));
        }
        if at_end {
            return Ok(Requirement::from_validated(
                key.text,
                Operator::Exists,
                Vec::new(),
            ));
        }
        let operator_token = self.advance();
        let operator = match operator_token.kind {
            Kind::In => Operator::In,
            Kind::NotIn => Operator::NotIn,
            Kind::Equals => Operator::Equals,
            Kind::DoubleEquals => Operator::DoubleEquals,
            Kind::NotEquals => Operator::NotEquals,
            Kind::GreaterThan => Operator::GreaterThan,
            Kind::LessThan => Operator::LessThan,
            _ => {
                return Err(unexpected(
                    &operator_token,
                    EXPECTED_OPERATOR,
                    ", expected: in, notin, =, ==, !=, gt, lt",
                ));
            }
        };
        let values = match operator {
            Operator::In | Operator::NotIn => self.value_set()?,
            _ => vec![self.exact_value()?],
        };
        // The values are checked once the requirement's grammar is complete, as upstream's
        // parser hands them to `NewRequirement`.
        if let Err(error) = check_values(&operator_token, operator, &values) {
            let mut set: Vec<String> = values.into_iter().map(|(value, _)| value).collect();
            set.sort();
            set.dedup();
            return Err(Failure {
                error,
                upstream: upstream::values_error(&key.text, operator, &set),
            });
        }
        let values = values.into_iter().map(|(value, _)| value).collect();
        Ok(Requirement::from_validated(key.text, operator, values))
    }

    /// `"(" values ")"` after `in` or `notin`: each value with its position.
    fn value_set(&mut self) -> Result<Vec<(String, usize)>, Failure> {
        let open = self.advance();
        if open.kind_as_value() != Kind::OpenPar {
            // Upstream's message has no comma here.
            return Err(unexpected(&open, r#""(""#, " expected: '('"));
        }
        let first = self.peek();
        match first.kind_as_value() {
            Kind::ClosePar => {
                let position = self.advance().position;
                Ok(vec![(String::new(), position)])
            }
            Kind::Identifier | Kind::Comma => {
                let values = self.value_list()?;
                // `value_list` stops only in front of `)`.
                self.advance();
                Ok(values)
            }
            _ => Err(unexpected(
                first,
                r#"a value, "," or ")""#,
                ", expected: ',', ')' or identifier",
            )),
        }
    }

    /// Comma-separated values, each possibly empty, up to (not including) `)`.
    fn value_list(&mut self) -> Result<Vec<(String, usize)>, Failure> {
        let mut values = Vec::new();
        loop {
            let token = self.advance();
            match token.kind_as_value() {
                Kind::Identifier => {
                    values.push((token.text, token.position));
                    let after = self.peek();
                    match after.kind_as_value() {
                        Kind::Comma => {}
                        Kind::ClosePar => return Ok(values),
                        _ => {
                            return Err(unexpected(
                                after,
                                r#""," or ")""#,
                                ", expected: ',' or ')'",
                            ));
                        }
                    }
                }
                Kind::Comma => {
                    // Commas delimit possibly empty values: `(,a)`, `(a,)` and `(a,,b)` all hold "".
                    if values.is_empty() {
                        values.push((String::new(), token.position));
                    }
                    let next = self.peek();
                    let empty = (String::new(), next.position);
                    match next.kind_as_value() {
                        Kind::ClosePar => {
                            values.push(empty);
                            return Ok(values);
                        }
                        Kind::Comma => values.push(empty),
                        _ => {}
                    }
                }
                _ => {
                    return Err(unexpected(
                        &token,
                        r#"a value or ",""#,
                        ", expected: ',', or identifier",
                    ));
                }
            }
        }
    }

    /// The single, possibly empty, value after `=`, `==`, `!=`, `>` or `<`, with its position.
    fn exact_value(&mut self) -> Result<(String, usize), Failure> {
        let token = self.peek();
        if matches!(token.kind_as_value(), Kind::End | Kind::Comma) {
            return Ok((String::new(), token.position));
        }
        let token = self.advance();
        if token.kind_as_value() != Kind::Identifier {
            return Err(unexpected(&token, "a value", ", expected: identifier"));
        }
        Ok((token.text, token.position))
    }
}

/// This crate's error for the first value of a requirement that breaks a rule, in written
/// order: a `>`/`<` value that is not an integer, then a value that is not a label value.
fn check_values(
    operator_token: &Token,
    operator: Operator,
    values: &[(String, usize)],
) -> Result<(), ParseError> {
    for (value, position) in values {
        if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
            check_integer(operator, value).map_err(|_| {
                ParseError::invalid(
                    *position,
                    format!("invalid value {value:?} for {:?}", operator_token.text),
                    "must be an integer",
                )
            })?;
        }
        validate_value(value).map_err(|reason| {
            ParseError::invalid(*position, format!("invalid label value {value:?}"), reason)
        })?;
    }
    Ok(())
}
