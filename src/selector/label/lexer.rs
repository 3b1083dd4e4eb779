//! Splits a label selector into tokens with their character positions (apimachinery `Lexer`).

use std::fmt;

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// End of the input.
    End,
    /// `)`
    ClosePar,
    /// `,`
    Comma,
    /// `!` (does not exist)
    Not,
    /// `==`
    DoubleEquals,
    /// `=`
    Equals,
    /// `>`
    GreaterThan,
    /// A key or a value: a run of characters that are neither blank nor special.
    Identifier,
    /// The keyword `in`.
    In,
    /// `<`
    LessThan,
    /// `!=`
    NotEquals,
    /// The keyword `notin`.
    NotIn,
    /// `(`
    OpenPar,
}

/// A token, its text and where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Token {
    /// What the token is.
    pub kind: Kind,
    /// The token's text as written (empty for [`Kind::End`]).
    pub text: String,
    /// Offset of the token's first character, in characters.
    pub position: usize,
}

impl Token {
    /// The token's kind where a value is expected: the keywords `in` and `notin` are plain
    /// identifiers there (`x in (in)`, `notin=in`), as in upstream's `Values` parser context.
    pub fn kind_as_value(&self) -> Kind {
        match self.kind {
            Kind::In | Kind::NotIn => Kind::Identifier,
            other => other,
        }
    }
}

/// Describes the token for an error message: `"="`, or `end of input`.
impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind == Kind::End {
            f.write_str("end of input")
        } else {
            write!(f, "{:?}", self.text)
        }
    }
}

/// Blank characters between tokens (upstream `isWhitespace`).
fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

/// Characters that start an operator or punctuation token (upstream `isSpecialSymbol`).
fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

/// Tokenizes the whole input; the last token is always [`Kind::End`].
///
/// Upstream reads bytes and treats a NUL byte as the end of the input, silently ignoring what
/// follows; here NUL is an ordinary identifier character, so it is rejected by key or value
/// validation instead.
pub(super) fn tokenize(input: &str) -> Vec<Token> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    loop {
        while chars.get(i).copied().is_some_and(is_blank) {
            i += 1;
        }
        let Some(&c) = chars.get(i) else {
            tokens.push(Token {
                kind: Kind::End,
                text: String::new(),
                position: i,
            });
            return tokens;
        };
        let start = i;
        let kind = if is_special(c) {
            // The longest operator wins: `!=` and `==` are the only two-character ones.
            let next = chars.get(i + 1).copied();
            i += 1;
            match (c, next) {
                ('!', Some('=')) => {
                    i += 1;
                    Kind::NotEquals
                }
                ('=', Some('=')) => {
                    i += 1;
                    Kind::DoubleEquals
                }
                ('!', _) => Kind::Not,
                ('=', _) => Kind::Equals,
                ('(', _) => Kind::OpenPar,
                (')', _) => Kind::ClosePar,
                (',', _) => Kind::Comma,
                ('>', _) => Kind::GreaterThan,
                _ => Kind::LessThan,
            }
        } else {
            while chars
                .get(i)
                .copied()
                .is_some_and(|c| !is_special(c) && !is_blank(c))
            {
                i += 1;
            }
            Kind::Identifier
        };
        let text: String = chars[start..i].iter().collect();
        let kind = match (kind, text.as_str()) {
            (Kind::Identifier, "in") => Kind::In,
            (Kind::Identifier, "notin") => Kind::NotIn,
            (kind, _) => kind,
        };
        tokens.push(Token {
            kind,
            text,
            position: start,
        });
    }
}
