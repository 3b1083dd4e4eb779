//! Lexer cases: `TestLexer`, `TestLexerSequence` and `TestParserLookahead`.

use crate::selector::label::lexer::{Kind, tokenize};

// Ports `TestLexer` (pkg/labels/selector_test.go): the first token of each input and its text.
// Lexing returns the longest valid token; non-special characters are part of an identifier.
const LEXER: &[(&str, Kind)] = &[
    ("", Kind::End),
    (",", Kind::Comma),
    ("notin", Kind::NotIn),
    ("in", Kind::In),
    ("=", Kind::Equals),
    ("==", Kind::DoubleEquals),
    (">", Kind::GreaterThan),
    ("<", Kind::LessThan),
    ("!", Kind::Not),
    ("!=", Kind::NotEquals),
    ("(", Kind::OpenPar),
    (")", Kind::ClosePar),
    ("~", Kind::Identifier),
    ("||", Kind::Identifier),
];

#[test]
fn lexer_reads_the_longest_token() {
    for (input, kind) in LEXER {
        let tokens = tokenize(input);
        assert_eq!(tokens[0].kind, *kind, "input {input:?}");
        assert_eq!(tokens[0].text, *input, "input {input:?}");
    }
}

// Ports `TestLexerSequence` and `TestParserLookahead` (pkg/labels/selector_test.go): the token
// kinds of each input, ending with the end token.
const LEXER_SEQUENCE: &[(&str, &[Kind])] = &[
    (
        "key in ( value )",
        &[
            Kind::Identifier,
            Kind::In,
            Kind::OpenPar,
            Kind::Identifier,
            Kind::ClosePar,
        ],
    ),
    (
        "key notin ( value )",
        &[
            Kind::Identifier,
            Kind::NotIn,
            Kind::OpenPar,
            Kind::Identifier,
            Kind::ClosePar,
        ],
    ),
    (
        "key in ( value1, value2 )",
        &[
            Kind::Identifier,
            Kind::In,
            Kind::OpenPar,
            Kind::Identifier,
            Kind::Comma,
            Kind::Identifier,
            Kind::ClosePar,
        ],
    ),
    ("key", &[Kind::Identifier]),
    ("!key", &[Kind::Not, Kind::Identifier]),
    ("()", &[Kind::OpenPar, Kind::ClosePar]),
    ("", &[]),
    (
        "x in (),y",
        &[
            Kind::Identifier,
            Kind::In,
            Kind::OpenPar,
            Kind::ClosePar,
            Kind::Comma,
            Kind::Identifier,
        ],
    ),
    (
        "== != (), = notin",
        &[
            Kind::DoubleEquals,
            Kind::NotEquals,
            Kind::OpenPar,
            Kind::ClosePar,
            Kind::Comma,
            Kind::Equals,
            Kind::NotIn,
        ],
    ),
    (
        "key>2",
        &[Kind::Identifier, Kind::GreaterThan, Kind::Identifier],
    ),
    (
        "key<1",
        &[Kind::Identifier, Kind::LessThan, Kind::Identifier],
    ),
];

#[test]
fn lexer_splits_sequences_into_the_upstream_tokens() {
    for (input, expected) in LEXER_SEQUENCE {
        let kinds: Vec<Kind> = tokenize(input).iter().map(|t| t.kind).collect();
        let mut want = expected.to_vec();
        want.push(Kind::End);
        assert_eq!(kinds, want, "input {input:?}");
    }
}

#[test]
fn lexer_records_character_positions() {
    let positions: Vec<usize> = tokenize("é in (a,b)").iter().map(|t| t.position).collect();
    assert_eq!(positions, [0, 2, 5, 6, 7, 8, 9, 10]);
}
