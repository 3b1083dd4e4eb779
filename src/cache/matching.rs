//! How the cache evaluates label and field selectors against cached objects (the one place that
//! adapts `cache::selector` to the reader).

use std::collections::BTreeMap;

use kube::core::DynamicObject;

use super::error::{Error, Result};

/// A label selector as the cache uses it (interim, until `cache::selector` lands: equality,
/// inequality, existence and `in`/`notin` requirements).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// An error parsing a selector.
#[derive(Debug, thiserror::Error)]
#[error("invalid selector {selector:?}: {reason}")]
pub struct ParseError {
    selector: String,
    reason: &'static str,
}

fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

fn set_values(rest: &str, selector: &str) -> std::result::Result<Vec<String>, ParseError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or(ParseError {
            selector: selector.to_string(),
            reason: "expected (values)",
        })?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
}

impl LabelSelector {
    /// Parses a label selector string (`a=b,c!=d,e,!f,g in (x,y)`).
    ///
    /// # Errors
    /// On malformed input.
    pub fn parse(s: &str) -> std::result::Result<Self, ParseError> {
        let mut requirements = Vec::new();
        for part in split_top_level(s) {
            let req = if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                Requirement::NotIn(k.trim().into(), set_values(rest, s)?)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                Requirement::In(k.trim().into(), set_values(rest, s)?)
            } else if let Some(k) = part.strip_prefix('!') {
                Requirement::NotExists(k.trim().into())
            } else {
                Requirement::Exists(part.into())
            };
            requirements.push(req);
        }
        Ok(Self { requirements })
    }

    /// Whether the labels satisfy every requirement.
    #[must_use]
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
        })
    }
}

impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .requirements
            .iter()
            .map(|r| match r {
                Requirement::Equals(k, v) => format!("{k}={v}"),
                Requirement::NotEquals(k, v) => format!("{k}!={v}"),
                Requirement::Exists(k) => k.clone(),
                Requirement::NotExists(k) => format!("!{k}"),
                Requirement::In(k, vs) => format!("{k} in ({})", vs.join(",")),
                Requirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// A field selector as the cache uses it (interim, until `cache::selector` lands).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct FieldSelector {
    /// `(field, value, equal)`: `equal == false` means `!=`.
    requirements: Vec<(String, String, bool)>,
}

impl FieldSelector {
    /// Parses a field selector string (`a=b,c!=d`).
    ///
    /// # Errors
    /// On malformed input.
    pub fn parse(s: &str) -> std::result::Result<Self, ParseError> {
        let mut requirements = Vec::new();
        for part in split_top_level(s) {
            let req = if let Some((k, v)) = part.split_once("!=") {
                (k.trim().to_string(), v.trim().to_string(), false)
            } else if let Some((k, v)) = part.split_once("==") {
                (k.trim().to_string(), v.trim().to_string(), true)
            } else if let Some((k, v)) = part.split_once('=') {
                (k.trim().to_string(), v.trim().to_string(), true)
            } else {
                return Err(ParseError {
                    selector: s.to_string(),
                    reason: "expected field=value",
                });
            };
            requirements.push(req);
        }
        Ok(Self { requirements })
    }

    /// A selector `metadata.namespace!=a,metadata.namespace!=b` excluding the namespaces.
    #[must_use]
    pub fn excluding_namespaces<'a>(namespaces: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            requirements: namespaces
                .into_iter()
                .map(|ns| ("metadata.namespace".to_string(), ns.to_string(), false))
                .collect(),
        }
    }

    /// Both selectors' requirements (AND).
    #[must_use]
    pub fn and(mut self, other: &Self) -> Self {
        self.requirements.extend(other.requirements.iter().cloned());
        self
    }

    /// Whether the selector has no requirements.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether the object satisfies every requirement.
    #[must_use]
    pub fn matches(&self, obj: &DynamicObject) -> bool {
        self.requirements.iter().all(|(field, value, equal)| {
            let actual = field_value(obj, field);
            (actual.as_deref() == Some(value.as_str())) == *equal
        })
    }

    /// The `(field, value)` pairs when every requirement is an exact match.
    ///
    /// # Errors
    /// [`Error::NonExactFieldSelector`] otherwise.
    pub fn exact_requirements(&self) -> Result<Vec<(&str, &str)>> {
        self.requirements
            .iter()
            .map(|(f, v, equal)| {
                if *equal {
                    Ok((f.as_str(), v.as_str()))
                } else {
                    Err(Error::NonExactFieldSelector)
                }
            })
            .collect()
    }
}

impl std::fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .requirements
            .iter()
            .map(|(k, v, eq)| {
                if *eq {
                    format!("{k}={v}")
                } else {
                    format!("{k}!={v}")
                }
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// The value of a field path on a cached object, as a field selector compares it: strings as
/// they are, other scalars printed. `metadata.name` and `metadata.namespace` come from the typed
/// metadata, every other path from the object's remaining JSON.
#[must_use]
pub fn field_value(obj: &DynamicObject, path: &str) -> Option<String> {
    match path {
        "metadata.name" => return obj.metadata.name.clone(),
        "metadata.namespace" => return Some(obj.metadata.namespace.clone().unwrap_or_default()),
        _ => {}
    }
    let mut cur = &obj.data;
    for seg in path.split('.') {
        cur = cur.get(seg)?;
    }
    match cur {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Whether `obj` passes the list's label selector and exact field requirements.
#[must_use]
pub fn list_matches(
    obj: &DynamicObject,
    labels: Option<&LabelSelector>,
    fields: &[(&str, &str)],
) -> bool {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    if let Some(sel) = labels
        && !sel.matches(obj.metadata.labels.as_ref().unwrap_or(&EMPTY))
    {
        return false;
    }
    fields
        .iter()
        .all(|(f, v)| field_value(obj, f).as_deref() == Some(*v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_selectors_match_equality_existence_and_sets() {
        let sel = LabelSelector::parse("app=web,tier in (a,b),!legacy").unwrap();
        let mut labels = BTreeMap::from([
            ("app".to_string(), "web".to_string()),
            ("tier".into(), "a".into()),
        ]);
        assert!(sel.matches(&labels));
        labels.insert("legacy".into(), "1".into());
        assert!(!sel.matches(&labels));
        assert_eq!(sel.to_string(), "app=web,tier in (a,b),!legacy");
    }

    #[test]
    fn inequality_field_requirements_are_not_exact() {
        let sel = FieldSelector::parse("metadata.name=a,status.phase!=Running").unwrap();
        assert!(matches!(
            sel.exact_requirements(),
            Err(Error::NonExactFieldSelector)
        ));
        let exact = FieldSelector::parse("spec.nodeName==n1").unwrap();
        assert_eq!(
            exact.exact_requirements().unwrap(),
            vec![("spec.nodeName", "n1")]
        );
    }
}
