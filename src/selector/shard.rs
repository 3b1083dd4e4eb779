//! Shard selectors (Kubernetes v1.36, KEP-5866 "server-side sharded list and watch"): which
//! hash ranges of an object field a list or watch selects.
//!
//! The wire form is the `shardSelector` query parameter, a small subset of CEL:
//!
//! ```text
//! shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')
//!   || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')
//! ```
//!
//! An object is selected when the 64-bit FNV-1a hash of the field's value lies in one of the
//! half-open ranges `[start, end)`. Followed from apimachinery `pkg/sharding` (`hash.go`,
//! `selector.go`: the hash, the comparison, the canonical string) and apiserver
//! `pkg/sharding/parser.go` (the grammar, the checks and their messages), Kubernetes v1.36:
//!
//! - the only function is `shardRange`, joined by `||`; anything else is refused;
//! - the field is `object.metadata.uid` or `object.metadata.namespace`, the same in every range;
//! - bounds are string literals (single or double quotes), `0x` and exactly 16 lowercase hex
//!   digits, or `0x10000000000000000` (2^64) as an end; `start < end`;
//! - the canonical form joins `shardRange(<field>, '<start>', '<end>')` with ` || `.
//!
//! The embedded API server filters with this module, and a manager that shards without server
//! support filters in the process with the same code, so both paths select the same objects;
//! the hash and the ranges are those of the hash space ([`super::space`]).
//!
//! ```
//! use informant::selector::{ShardKey, ShardSelector, fnv1a_64};
//!
//! let lower_half: ShardSelector =
//!     "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')".parse()?;
//! assert_eq!(lower_half.key(), ShardKey::Uid);
//! let uid = "7d0c1f5e-2b8a-4c3e-9f61-0a1b2c3d4e5f";
//! assert_eq!(lower_half.matches_value(uid), fnv1a_64(uid.as_bytes()) < 0x8000_0000_0000_0000);
//! # Ok::<(), informant::selector::ShardSelectorError>(())
//! ```

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use super::space::{HASH_SPACE_END, ShardKey, ShardRange, fnv1a_64};

/// Prints a bound as the wire form writes it: `0x` and 16 hex digits, or `0x10000000000000000`.
fn bound(value: u128) -> String {
    if value == HASH_SPACE_END {
        "0x10000000000000000".to_string()
    } else {
        format!("0x{value:016x}")
    }
}

/// A parsed shard selector: one key, one or more ranges (an object in any of them matches).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardSelector {
    key: ShardKey,
    ranges: Vec<ShardRange>,
}

/// Why a `shardSelector` string was refused; `Display` is apiserver's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShardSelectorError(String);

impl ShardSelectorError {
    fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl ShardSelector {
    /// A selector on `key` over `ranges` (kept in the given order, as the wire form is).
    ///
    /// # Errors
    ///
    /// When `ranges` is empty: a selector selects something.
    pub fn new(key: ShardKey, ranges: Vec<ShardRange>) -> Result<Self, ShardSelectorError> {
        if ranges.is_empty() {
            return Err(ShardSelectorError::new(
                "a shard selector needs at least one range",
            ));
        }
        Ok(Self { key, ranges })
    }

    /// Parses the wire form.
    ///
    /// # Errors
    ///
    /// With apiserver's message for each rule the string breaks (see the module docs).
    pub fn parse(input: &str) -> Result<Self, ShardSelectorError> {
        let input = input.trim();
        if input.is_empty() {
            return Err(ShardSelectorError::new(
                "empty shard selector is not allowed; omit the parameter for unfiltered lists",
            ));
        }
        let mut parser = Parser {
            chars: input.char_indices().peekable(),
            input,
        };
        let mut calls = vec![parser.call()?];
        loop {
            parser.skip_space();
            match parser.chars.peek() {
                None => break,
                Some((_, '|')) => {
                    parser.chars.next();
                    if parser.chars.next().map(|(_, c)| c) != Some('|') {
                        return Err(parser.syntax("expected '||'"));
                    }
                    calls.push(parser.call()?);
                }
                Some(&(at, c)) => {
                    return Err(parser.syntax(&format!(
                        "unexpected {c:?} at position {at}; ranges are joined by ||"
                    )));
                }
            }
        }
        let key = calls[0].0;
        if let Some((other, _)) = calls.iter().find(|(k, _)| *k != key) {
            return Err(ShardSelectorError::new(format!(
                "all shard ranges must use the same field, got {:?} and {:?}",
                key.path(),
                other.path()
            )));
        }
        Ok(Self {
            key,
            ranges: calls.into_iter().map(|(_, r)| r).collect(),
        })
    }

    /// The field the selector hashes.
    #[must_use]
    pub fn key(&self) -> ShardKey {
        self.key
    }

    /// The ranges, in the order written.
    #[must_use]
    pub fn ranges(&self) -> &[ShardRange] {
        &self.ranges
    }

    /// Whether a field value (the key's value of an object) is selected.
    #[must_use]
    pub fn matches_value(&self, value: &str) -> bool {
        let hash = fnv1a_64(value.as_bytes());
        self.ranges.iter().any(|r| r.contains(hash))
    }

    /// Whether `object` (JSON) is selected.
    #[must_use]
    pub fn matches_object(&self, object: &Value) -> bool {
        self.matches_value(self.key.value_of(object))
    }
}

impl fmt::Display for ShardSelector {
    /// The canonical form (apimachinery `shardSelector.String()`), as `ListMeta.shardInfo`
    /// echoes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, range) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '{}', '{}')",
                self.key.path(),
                bound(u128::from(range.start)),
                bound(range.end)
            )?;
        }
        Ok(())
    }
}

impl FromStr for ShardSelector {
    type Err = ShardSelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// A recursive-descent reader of the CEL subset: `shardRange(path, 'lit', 'lit')`.
struct Parser<'a> {
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    input: &'a str,
}

impl Parser<'_> {
    fn syntax(&self, message: &str) -> ShardSelectorError {
        ShardSelectorError::new(format!("CEL parse error: {message} in {:?}", self.input))
    }

    fn skip_space(&mut self) {
        while self.chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
    }

    fn ident(&mut self) -> String {
        let mut out = String::new();
        while let Some((_, c)) = self
            .chars
            .next_if(|(_, c)| c.is_ascii_alphanumeric() || *c == '_')
        {
            out.push(c);
        }
        out
    }

    /// One argument: a dotted path or a string literal, kept as written for the checks.
    fn argument(&mut self) -> Result<Argument, ShardSelectorError> {
        self.skip_space();
        match self.chars.peek().copied() {
            Some((_, quote @ ('\'' | '"'))) => {
                self.chars.next();
                let mut text = String::new();
                loop {
                    match self.chars.next() {
                        Some((_, c)) if c == quote => return Ok(Argument::Literal(text)),
                        Some((_, '\\')) => {
                            return Err(self.syntax("escapes are not allowed in a bound"));
                        }
                        Some((_, c)) => text.push(c),
                        None => return Err(self.syntax("unterminated string literal")),
                    }
                }
            }
            Some((_, c)) if c.is_ascii_alphabetic() || c == '_' => {
                let mut path = self.ident();
                while self.chars.next_if(|(_, c)| *c == '.').is_some() {
                    path.push('.');
                    path.push_str(&self.ident());
                }
                Ok(Argument::Path(path))
            }
            Some((_, c)) if c.is_ascii_digit() => {
                while self
                    .chars
                    .next_if(|(_, c)| c.is_ascii_alphanumeric())
                    .is_some()
                {}
                Ok(Argument::Number)
            }
            Some((at, c)) => Err(self.syntax(&format!("unexpected {c:?} at position {at}"))),
            None => Err(self.syntax("unexpected end of input")),
        }
    }

    /// `shardRange(path, start, end)`.
    fn call(&mut self) -> Result<(ShardKey, ShardRange), ShardSelectorError> {
        self.skip_space();
        let name = self.ident();
        if name.is_empty() {
            return Err(match self.chars.peek() {
                Some(&(at, c)) => self.syntax(&format!("unexpected {c:?} at position {at}")),
                None => self.syntax("unexpected end of input"),
            });
        }
        self.skip_space();
        if self.chars.peek().map(|(_, c)| *c) != Some('(') {
            return Err(ShardSelectorError::new(format!(
                "unexpected expression {name:?}; expected shardRange() call or || operator"
            )));
        }
        self.chars.next();
        let mut args = Vec::new();
        self.skip_space();
        if self.chars.next_if(|(_, c)| *c == ')').is_none() {
            loop {
                args.push(self.argument()?);
                self.skip_space();
                match self.chars.next() {
                    Some((_, ',')) => {}
                    Some((_, ')')) => break,
                    Some((at, c)) => {
                        return Err(self.syntax(&format!(
                            "expected ',' or ')' at position {at}, found {c:?}"
                        )));
                    }
                    None => return Err(self.syntax("missing ')'")),
                }
            }
        }
        if name != "shardRange" {
            return Err(ShardSelectorError::new(format!(
                "unsupported function {name:?}; only shardRange() and || are allowed"
            )));
        }
        let [field, start, end] = <[Argument; 3]>::try_from(args).map_err(|args| {
            ShardSelectorError::new(format!(
                "shardRange() requires exactly 3 arguments, got {}",
                args.len()
            ))
        })?;
        let key = match field {
            Argument::Path(path) => match path.as_str() {
                "object.metadata.uid" => ShardKey::Uid,
                "object.metadata.namespace" => ShardKey::Namespace,
                _ => {
                    return Err(ShardSelectorError::new(format!(
                        "unsupported field path {path:?}; supported: object.metadata.uid, object.metadata.namespace"
                    )));
                }
            },
            Argument::Literal(_) | Argument::Number => {
                return Err(ShardSelectorError::new(
                    "shardRange() first argument: expected field path (e.g. object.metadata.uid)",
                ));
            }
        };
        let start = hex_bound(start, "hexStart")?;
        let end = hex_bound(end, "hexEnd")?;
        let range = u64::try_from(start)
            .ok()
            .and_then(|start| ShardRange::new(start, end))
            .ok_or_else(|| {
                ShardSelectorError::new(format!(
                    "shard range start {} must be less than end {}",
                    bound(start),
                    bound(end)
                ))
            })?;
        Ok((key, range))
    }
}

/// A call argument as written: a dotted path, a string literal, or a bare number (CEL's
/// `0x00` without quotes, which a bound must not be).
enum Argument {
    Path(String),
    Literal(String),
    Number,
}

/// A bound: a string literal `0x` + 16 lowercase hex digits, or `0x10000000000000000`.
fn hex_bound(argument: Argument, name: &str) -> Result<u128, ShardSelectorError> {
    let Argument::Literal(s) = argument else {
        return Err(ShardSelectorError::new(format!(
            "{name} must be a string literal (e.g. '0xff')"
        )));
    };
    let Some(hex) = s.strip_prefix("0x") else {
        return Err(ShardSelectorError::new(format!(
            "{name} must have '0x' prefix, got {s:?}"
        )));
    };
    if hex.is_empty() {
        return Err(ShardSelectorError::new(format!(
            "{name}: hex value is required after '0x'"
        )));
    }
    if hex.len() > 17 {
        return Err(ShardSelectorError::new(format!(
            "{name}: hex value too long ({} chars, max 17): {hex:?}",
            hex.len()
        )));
    }
    if let Some(c) = hex
        .chars()
        .find(|c| !(c.is_ascii_digit() || ('a'..='f').contains(c)))
    {
        return Err(ShardSelectorError::new(format!(
            "{name}: invalid hex character {:?} in {s:?}",
            c.to_string()
        )));
    }
    if hex.len() == 17 {
        if s != "0x10000000000000000" {
            return Err(ShardSelectorError::new(format!(
                "{name}: 17-digit hex value must be '0x10000000000000000' (2^64), got {s:?}"
            )));
        }
        return Ok(HASH_SPACE_END);
    }
    if hex.len() != 16 {
        let padded = format!("0x{hex:0>16}");
        return Err(ShardSelectorError::new(format!(
            "{name} must be a 0x-prefixed 16-digit hex value, got {s:?} (did you mean {padded:?}?)"
        )));
    }
    u128::from_str_radix(hex, 16).map_err(|e| ShardSelectorError::new(format!("{name}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// apiserver `pkg/sharding/parser_test.go`'s accepted inputs, in the quoted CEL form.
    #[test]
    fn the_upstream_accepted_forms_parse_and_print_canonically() {
        let cases = [
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
            ),
            (
                "shardRange(object.metadata.uid,\"0x0000000000000000\",'0x10000000000000000')",
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')",
            ),
            (
                "  shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')   ||shardRange( object.metadata.namespace ,'0x8000000000000000','0x9000000000000000')",
                "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x9000000000000000')",
            ),
        ];
        for (input, canonical) in cases {
            let selector = ShardSelector::parse(input).unwrap();
            assert_eq!(selector.to_string(), canonical, "{input}");
            assert_eq!(ShardSelector::parse(canonical).unwrap(), selector);
        }
    }

    /// The refusals of apiserver `pkg/sharding/parser.go`, each with its message.
    #[test]
    fn the_upstream_refusals_have_their_messages() {
        let uid = "object.metadata.uid";
        let cases = [
            (
                "",
                "empty shard selector is not allowed; omit the parameter for unfiltered lists",
            ),
            (
                &format!("shardRange({uid}, '0000000000000000', '0x8000000000000000')") as &str,
                "hexStart must have '0x' prefix, got \"0000000000000000\"",
            ),
            (
                &format!("shardRange({uid}, '0x', '0x8000000000000000')"),
                "hexStart: hex value is required after '0x'",
            ),
            (
                &format!("shardRange({uid}, '0x000000000000000000', '0x80')"),
                "hexStart: hex value too long (18 chars, max 17): \"000000000000000000\"",
            ),
            (
                &format!("shardRange({uid}, '0x0g', '0x80')"),
                "hexStart: invalid hex character \"g\" in \"0x0g\"",
            ),
            (
                &format!("shardRange({uid}, '0x00', '0x8000000000000000')"),
                "hexStart must be a 0x-prefixed 16-digit hex value, got \"0x00\" (did you mean \"0x0000000000000000\"?)",
            ),
            (
                &format!("shardRange({uid}, '0x0000000000000000', '0x20000000000000000')"),
                "hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got \"0x20000000000000000\"",
            ),
            (
                &format!("shardRange({uid}, '0x8000000000000000', '0x8000000000000000')"),
                "shard range start 0x8000000000000000 must be less than end 0x8000000000000000",
            ),
            (
                &format!("shardRange({uid}, '0x9000000000000000', '0x8000000000000000')"),
                "shard range start 0x9000000000000000 must be less than end 0x8000000000000000",
            ),
            (
                "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
                "unsupported field path \"object.metadata.name\"; supported: object.metadata.uid, object.metadata.namespace",
            ),
            (
                &format!("invalidFunc({uid}, '0x0000000000000000', '0x8000000000000000')"),
                "unsupported function \"invalidFunc\"; only shardRange() and || are allowed",
            ),
            (
                &format!("shardRange({uid}, '0x0000000000000000')"),
                "shardRange() requires exactly 3 arguments, got 2",
            ),
            (
                &format!("shardRange({uid}, 0x00, '0x8000000000000000')"),
                "hexStart must be a string literal (e.g. '0xff')",
            ),
            (
                &format!(
                    "shardRange({uid}, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"
                ),
                "all shard ranges must use the same field, got \"object.metadata.uid\" and \"object.metadata.namespace\"",
            ),
        ];
        for (input, message) in cases {
            assert_eq!(
                ShardSelector::parse(input).unwrap_err().to_string(),
                message,
                "{input}"
            );
        }
        // The upper-case digits apimachinery refuses, and syntax CEL refuses.
        for input in [
            "shardRange(object.metadata.uid, '0x000000000000000A', '0x8000000000000000')",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') |",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') && x",
            "shardRange",
            "'0x00'",
        ] {
            assert!(ShardSelector::parse(input).is_err(), "{input}");
        }
    }

    #[test]
    fn complementary_ranges_partition_every_value_and_match_the_hash() {
        let lower =
            ShardSelector::new(ShardKey::Uid, vec![ShardRange::new(0, 1 << 63).unwrap()]).unwrap();
        let upper = ShardSelector::new(
            ShardKey::Uid,
            vec![ShardRange::new(1 << 63, HASH_SPACE_END).unwrap()],
        )
        .unwrap();
        for i in 0..1_000 {
            let uid = format!("uid-{i}");
            let object = json!({"metadata": {"uid": uid, "namespace": "x"}});
            assert_ne!(lower.matches_object(&object), upper.matches_object(&object));
            assert_eq!(
                lower.matches_value(&uid),
                fnv1a_64(uid.as_bytes()) < (1 << 63)
            );
        }
        let everything = ShardSelector::new(ShardKey::Namespace, vec![ShardRange::all()]).unwrap();
        assert!(
            everything.matches_object(&json!({"metadata": {}})),
            "a cluster-scoped object"
        );
        assert_eq!(
            everything.to_string(),
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')"
        );
    }
}
