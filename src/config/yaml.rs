//! The one place YAML is read and written (`serde_yaml`, as `DESIGN.md` names it), so the crate
//! can be swapped here alone.

use serde::Serialize;
use serde_json::Value;

/// Parses one YAML document into a JSON value; the error message has line and column.
pub(crate) fn parse(text: &str) -> Result<Value, String> {
    serde_yaml::from_str::<Value>(text).map_err(|e| e.to_string())
}

/// Renders a value as YAML.
pub(crate) fn render<T: Serialize>(value: &T) -> Result<String, serde_yaml::Error> {
    serde_yaml::to_string(value)
}
