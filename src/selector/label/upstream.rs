//! apimachinery's words for a key or value `labels.Parse` refuses, as kube-apiserver answers a
//! list with that `labelSelector`: the field errors of `validateLabelKey` and
//! `NewRequirement` (k8s.io/apimachinery `pkg/labels/selector.go`), with the details of
//! `content.IsLabelKey` and `content.IsLabelValue` (`pkg/api/validate/content/kube.go`,
//! `dns.go`, `errors.go`), printed as `field.Error` and `errors.Aggregate` print them
//! (`pkg/util/validation/field/errors.go`, `pkg/util/errors/errors.go`).
//!
//! The messages are upstream's to the character (its double spaces in `(e.g. 'MyName',  or
//! ...` included), so a client that matches on kube-apiserver's text matches ours; this
//! crate's own messages ([`super::requirement`]) say the same in its own words.

use std::fmt::Write as _;

use super::requirement::{Operator, is_dns1123_subdomain, is_label_name};

/// `labelKeyFmt` (content/kube.go).
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
/// `labelKeyErrMsg` (content/kube.go).
const LABEL_KEY_ERR_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
/// `labelKeyMaxLength` and `LabelValueMaxLength` (content/kube.go), in bytes.
const LABEL_MAX_BYTES: usize = 63;
/// `labelValueFmt` (content/kube.go).
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
/// `labelValueErrMsg` (content/kube.go).
const LABEL_VALUE_ERR_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
/// `dns1123SubdomainFmt` (content/dns.go).
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
/// `dns1123SubdomainErrorMsg` (content/dns.go).
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
/// `DNS1123SubdomainMaxLength` (content/dns.go), in bytes.
const DNS1123_SUBDOMAIN_MAX_BYTES: usize = 253;

/// `content.RegexError`.
fn regex_error(message: &str, regex: &str, examples: &[&str]) -> String {
    let mut out = format!("{message} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        let _ = write!(out, "'{example}', ");
    }
    let _ = write!(out, "regex used for validation is '{regex}')");
    out
}

/// `content.MaxLenError`.
fn max_len_error(bytes: usize) -> String {
    format!("must be no more than {bytes} bytes")
}

/// `content.IsLabelKey`: every rule `key` breaks.
pub(super) fn label_key_errors(key: &str) -> Vec<String> {
    let name_regex = || {
        regex_error(
            LABEL_KEY_ERR_MSG,
            LABEL_KEY_FMT,
            &["MyName", "my.name", "123-abc"],
        )
    };
    let mut errors = Vec::new();
    let name = match key.split('/').collect::<Vec<_>>().as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                if prefix.len() > DNS1123_SUBDOMAIN_MAX_BYTES {
                    errors.push(format!(
                        "prefix part {}",
                        max_len_error(DNS1123_SUBDOMAIN_MAX_BYTES)
                    ));
                }
                if !is_dns1123_subdomain(prefix) {
                    let rule = regex_error(
                        DNS1123_SUBDOMAIN_ERR_MSG,
                        DNS1123_SUBDOMAIN_FMT,
                        &["example.com"],
                    );
                    errors.push(format!("prefix part {rule}"));
                }
            }
            *name
        }
        _ => {
            return vec![format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                name_regex()
            )];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > LABEL_MAX_BYTES {
        errors.push(format!("name part {}", max_len_error(LABEL_MAX_BYTES)));
    }
    if !is_label_name(name) {
        errors.push(format!("name part {}", name_regex()));
    }
    errors
}

/// `content.IsLabelValue`: every rule `value` breaks.
pub(super) fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_MAX_BYTES {
        errors.push(max_len_error(LABEL_MAX_BYTES));
    }
    if !value.is_empty() && !is_label_name(value) {
        errors.push(regex_error(
            LABEL_VALUE_ERR_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

/// A `field.Invalid` error as `field.Error.Error()` prints it for a string value.
fn invalid(field: &str, value: &str, detail: &str) -> String {
    format!("{field}: Invalid value: {}: {detail}", go_quote(value))
}

/// What `validateLabelKey(key, nil)` says of an invalid key in `labels.Parse` (the parser's
/// path is nil, printed `<nil>`), or `None` for a valid key.
pub(super) fn key_error(key: &str) -> Option<String> {
    let errors = label_key_errors(key);
    (!errors.is_empty()).then(|| invalid("<nil>", key, &errors.join("; ")))
}

/// What `NewRequirement` says of the values of a parsed requirement on a valid `key`, or
/// `None` when it accepts them. `values` as the parser collects them: a set, listed sorted.
pub(super) fn values_error(key: &str, operator: Operator, values: &[String]) -> Option<String> {
    let mut errors = Vec::new();
    if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
        for (i, value) in values.iter().enumerate() {
            if value.parse::<i64>().is_err() {
                errors.push(invalid(
                    &format!("values[{i}]"),
                    value,
                    "for 'Gt', 'Lt' operators, the value must be an integer",
                ));
            }
        }
    }
    for (i, value) in values.iter().enumerate() {
        let broken = label_value_errors(value);
        if !broken.is_empty() {
            errors.push(invalid(
                &format!("values[{i}][{key}]"),
                value,
                &broken.join("; "),
            ));
        }
    }
    aggregate(errors)
}

/// `errors.NewAggregate(errs).Error()`: one error as itself, several deduplicated in `[a, b]`.
fn aggregate(mut errors: Vec<String>) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    errors.retain(|e| seen.insert(e.clone()));
    match errors.len() {
        0 => None,
        1 => errors.pop(),
        _ => Some(format!("[{}]", errors.join(", "))),
    }
}

/// Go's `%q` of a string (`strconv.Quote`): `\"` and `\\`, the C escapes, `\xNN` for other
/// ASCII control bytes, `\uNNNN` / `\UNNNNNNNN` for other control characters. Go also escapes
/// the code points its `unicode.IsPrint` rejects (format characters, unassigned ones); those
/// are printed as they are here.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_quote_escapes_as_go_does() {
        assert_eq!(go_quote("x@"), r#""x@""#);
        assert_eq!(go_quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(go_quote("\t\n\u{1}\u{7f}é"), r#""\t\n\x01\x7fé""#);
        assert_eq!(go_quote("\u{85}"), r#""\u0085""#);
    }

    #[test]
    fn an_aggregate_of_one_is_itself_and_of_several_is_bracketed_without_repeats() {
        assert_eq!(aggregate(vec![]), None);
        assert_eq!(aggregate(vec!["a".into()]).as_deref(), Some("a"));
        assert_eq!(
            aggregate(vec!["a".into(), "b".into(), "a".into()]).as_deref(),
            Some("[a, b]")
        );
        assert_eq!(
            aggregate(vec!["a".into(), "a".into()]).as_deref(),
            Some("a")
        );
    }
}
