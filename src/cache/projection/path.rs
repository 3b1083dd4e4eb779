//! The path syntax of field projections: `spec.containers[*].image`, `data["config.yaml"]`.

use std::fmt;
use std::hash::{Hash, Hasher};

/// One step of a [`ObjectPath`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Step {
    /// A field (or map key) by name.
    Field(String),
    /// Every element of a list, or every value of a map (`[*]`).
    Each,
}

/// A parsed field path (`spec.containers[*].image`).
#[derive(Clone, Debug)]
pub struct ObjectPath {
    text: String,
    steps: Vec<Step>,
}

impl PartialEq for ObjectPath {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for ObjectPath {}

impl Hash for ObjectPath {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl fmt::Display for ObjectPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Why a path is not a field path: the character (1-based) where reading stopped and what was
/// expected there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathError {
    /// The 1-based character position of the problem (0 for the path as a whole).
    pub position: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.position == 0 {
            f.write_str(&self.message)
        } else {
            write!(f, "at character {}: {}", self.position, self.message)
        }
    }
}

impl std::error::Error for PathError {}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '$'
}

impl ObjectPath {
    /// Parses `text` in the syntax of [`crate::cache::projection`].
    ///
    /// # Errors
    ///
    /// A [`PathError`] naming the first character that does not fit.
    pub fn parse(text: &str) -> Result<Self, PathError> {
        let chars: Vec<char> = text.chars().collect();
        if chars.is_empty() {
            return Err(PathError {
                position: 0,
                message: "empty path".into(),
            });
        }
        let err = |at: usize, message: &str| PathError {
            position: at + 1,
            message: message.into(),
        };
        let mut steps = Vec::new();
        let mut i = 0;
        let name = |i: &mut usize| -> Option<String> {
            let start = *i;
            while *i < chars.len() && is_name_char(chars[*i]) {
                *i += 1;
            }
            (*i > start).then(|| chars[start..*i].iter().collect())
        };
        match name(&mut i) {
            Some(first) => steps.push(Step::Field(first)),
            None => return Err(err(i, "expected a field name")),
        }
        while i < chars.len() {
            match chars[i] {
                '.' => {
                    i += 1;
                    match name(&mut i) {
                        Some(field) => steps.push(Step::Field(field)),
                        None => return Err(err(i, "expected a field name after '.'")),
                    }
                }
                '[' => {
                    i += 1;
                    match chars.get(i) {
                        Some('*') => {
                            i += 1;
                            steps.push(Step::Each);
                        }
                        Some('"') => {
                            i += 1;
                            let start = i;
                            while i < chars.len() && chars[i] != '"' {
                                i += 1;
                            }
                            if i == chars.len() {
                                return Err(err(start - 1, "unterminated '\"'"));
                            }
                            if i == start {
                                return Err(err(i, "expected a key inside '[\"…\"]'"));
                            }
                            steps.push(Step::Field(chars[start..i].iter().collect()));
                            i += 1;
                        }
                        _ => return Err(err(i, "expected '*' or '\"key\"' after '['")),
                    }
                    if chars.get(i) != Some(&']') {
                        return Err(err(i, "expected ']'"));
                    }
                    i += 1;
                }
                _ => return Err(err(i, "expected '.', '[' or the end of the path")),
            }
        }
        Ok(Self {
            text: text.to_owned(),
            steps,
        })
    }

    /// The path's steps.
    #[must_use]
    pub(crate) fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The path as written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> ObjectPath {
        ObjectPath::parse(text).unwrap()
    }

    #[test]
    fn the_syntax_reads_fields_lists_and_quoted_keys() {
        assert_eq!(
            path("spec.containers[*].image").steps(),
            [
                Step::Field("spec".into()),
                Step::Field("containers".into()),
                Step::Each,
                Step::Field("image".into())
            ]
        );
        assert_eq!(
            path("data[\"config.yaml\"]").steps(),
            [
                Step::Field("data".into()),
                Step::Field("config.yaml".into())
            ]
        );
    }

    #[test]
    fn bad_paths_name_the_character_and_what_was_expected() {
        for (text, position, message) in [
            ("", 0, "empty path"),
            (".spec", 1, "expected a field name"),
            ("spec.", 6, "expected a field name after '.'"),
            ("spec..x", 6, "expected a field name after '.'"),
            ("spec[0]", 6, "expected '*' or '\"key\"' after '['"),
            ("spec[*", 7, "expected ']'"),
            ("data[\"a", 6, "unterminated '\"'"),
            ("data[\"\"]", 7, "expected a key inside '[\"…\"]'"),
            (
                "spec containers",
                5,
                "expected '.', '[' or the end of the path",
            ),
        ] {
            let error = ObjectPath::parse(text).unwrap_err();
            assert_eq!(
                (error.position, error.message.as_str()),
                (position, message),
                "{text}"
            );
        }
    }
}
