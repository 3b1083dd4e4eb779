//! Field selector lexing: split terms on unescaped commas, split at the operator, escape values.
//!
//! Values escape `\`, `,` and `=` with a backslash (apimachinery `fields.EscapeValue`).

use crate::selector::ParseError;

/// The operators a term may use, in the order they are tried at each position: `==` before `=`
/// so that `a==b` does not leave `=b` as the value (apimachinery `termOperators`).
const TERM_OPERATORS: [&str; 3] = ["!=", "==", "="];

/// Splits a selector on commas not preceded by a backslash, keeping escapes as written. Each term
/// comes with the character offset where it starts. The empty selector has no terms; otherwise
/// empty terms are kept (apimachinery `splitTerms`).
pub(super) fn split_terms(selector: &str) -> Vec<(&str, usize)> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let (mut start_byte, mut start_char) = (0, 0);
    let mut escaped = false;
    for (char_index, (byte_index, c)) in selector.char_indices().enumerate() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push((&selector[start_byte..byte_index], start_char));
            start_byte = byte_index + 1;
            start_char = char_index + 1;
        }
    }
    terms.push((&selector[start_byte..], start_char));
    terms
}

/// Splits a term at the first operator: field, operator, raw (still escaped) value, and the
/// character offset of the value within the term (apimachinery `splitTerm`). The field is taken
/// literally; it has no escaping.
pub(super) fn split_term(term: &str) -> Option<(&str, &'static str, &str, usize)> {
    for (char_index, (byte_index, _)) in term.char_indices().enumerate() {
        let rest = &term[byte_index..];
        if let Some(op) = TERM_OPERATORS.into_iter().find(|op| rest.starts_with(op)) {
            return Some((
                &term[..byte_index],
                op,
                &rest[op.len()..],
                char_index + op.len(),
            ));
        }
    }
    None
}

/// Escapes a literal value for a field selector: `\` → `\\`, `,` → `\,`, `=` → `\=`
/// (apimachinery `fields.EscapeValue`).
#[must_use]
pub fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Undoes [`escape_value`] (apimachinery `fields.UnescapeValue`). `offset` is the character
/// position of `raw` in the whole selector, used for errors.
///
/// # Errors
///
/// An escape other than `\\`, `\,` and `\=`, a trailing lone backslash, or an unescaped `=` or
/// `,`.
pub(super) fn unescape_value(raw: &str, offset: usize) -> Result<String, ParseError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().enumerate();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, escaped @ ('\\' | ',' | '='))) => out.push(escaped),
                other => {
                    let mut sequence = String::from('\\');
                    if let Some((_, c)) = other {
                        sequence.push(c);
                    }
                    return Err(ParseError::invalid(
                        offset + i,
                        format!("invalid escape sequence \"{sequence}\""),
                        r#"a field value may only escape "\", "," and "=" with a backslash"#,
                    ));
                }
            },
            ',' | '=' => {
                return Err(ParseError::expected(
                    offset + i,
                    format!("unexpected \"{c}\" in a field value"),
                    format!("\"\\{c}\" (escape it with a backslash)"),
                ));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}
