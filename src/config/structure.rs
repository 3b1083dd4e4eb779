//! Checks a document's structure against the CRD's own `OpenAPI` schema before it is
//! deserialized: unknown fields (with a did-you-mean) and wrong types, every one reported with
//! its path, instead of serde's first error.
//!
//! Offending values are removed (object fields, all optional) or replaced by an empty value of
//! the right type (list items and map values, so indices stay stable), so the rest of the
//! document can still be deserialized and validated, and every error is reported in one pass.
//! Missing required fields below the root are filled with an empty value too: validation
//! reports them with a field-specific fix.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

use super::error::{FieldError, FieldPath};
use crate::suggest::closest;

/// Walks `value` against `schema`, appending one error per problem to `out`. Returns false
/// if `value` itself is unusable and the caller must remove or replace it.
pub(crate) fn check(
    value: &mut Value,
    schema: &JSONSchemaProps,
    path: &FieldPath,
    out: &mut Vec<FieldError>,
) -> bool {
    if value.is_null() {
        if schema.nullable == Some(true) {
            return true;
        }
        out.push(FieldError::new(
            path,
            format!(
                "must be {}, found nothing; give it a value or remove the field",
                expected(schema)
            ),
        ));
        return false;
    }
    if schema.x_kubernetes_preserve_unknown_fields == Some(true) {
        return true;
    }
    let Some(ty) = schema.type_.as_deref() else {
        return true;
    };
    let type_ok = match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        _ => true,
    };
    if !type_ok {
        out.push(FieldError::new(path, type_mismatch(ty, value)));
        return false;
    }
    match value {
        Value::Object(map) => check_object(map, schema, path, out),
        Value::Array(items) => {
            if let Some(JSONSchemaPropsOrArray::Schema(item_schema)) = &schema.items {
                for (i, item) in items.iter_mut().enumerate() {
                    if !check(item, item_schema, &path.index(i), out) {
                        *item = empty_of(item_schema);
                    }
                }
            }
            true
        }
        Value::Number(n) => check_range(n, schema, path, out),
        _ => true,
    }
}

fn check_object(
    map: &mut serde_json::Map<String, Value>,
    schema: &JSONSchemaProps,
    path: &FieldPath,
    out: &mut Vec<FieldError>,
) -> bool {
    if let Some(props) = &schema.properties {
        if !path.segments().is_empty() {
            for name in schema.required.iter().flatten() {
                if let (false, Some(prop)) = (map.contains_key(name), props.get(name)) {
                    map.insert(name.clone(), empty_of(prop));
                }
            }
        }
        let keys: Vec<String> = map.keys().cloned().collect();
        for key in keys {
            let field_path = path.field(&key);
            if let Some(prop) = props.get(&key) {
                let keep = map
                    .get_mut(&key)
                    .is_some_and(|v| check(v, prop, &field_path, out));
                if !keep {
                    map.remove(&key);
                }
            } else {
                out.push(FieldError::new(
                    &field_path,
                    unknown_field(&key, props.keys()),
                ));
                map.remove(&key);
            }
        }
    } else if let Some(JSONSchemaPropsOrBool::Schema(value_schema)) = &schema.additional_properties
    {
        for (key, v) in map.iter_mut() {
            if !check(v, value_schema, &path.key(key), out) {
                *v = empty_of(value_schema);
            }
        }
    }
    true
}

fn check_range(
    n: &serde_json::Number,
    schema: &JSONSchemaProps,
    path: &FieldPath,
    out: &mut Vec<FieldError>,
) -> bool {
    let Some(v) = n.as_f64() else { return true };
    if let Some(min) = schema.minimum.filter(|min| v < *min) {
        out.push(FieldError::new(
            path,
            format!("must be at least {min}, found {n}; set it to {min} or more, or remove it to use the default"),
        ));
        return false;
    }
    let max = schema.maximum.or(match schema.format.as_deref() {
        Some("uint32") => Some(f64::from(u32::MAX)),
        Some("int32") => Some(f64::from(i32::MAX)),
        _ => None,
    });
    if let Some(max) = max.filter(|max| v > *max) {
        out.push(FieldError::new(
            path,
            format!("must be at most {max}, found {n}; use a smaller value"),
        ));
        return false;
    }
    true
}

fn expected(schema: &JSONSchemaProps) -> &'static str {
    match schema.type_.as_deref() {
        Some("object") => "a mapping",
        Some("array") => "a list",
        Some("string") => "a string",
        Some("boolean") => "true or false",
        Some("integer") => "a whole number",
        Some("number") => "a number",
        _ => "a value",
    }
}

fn found(value: &Value) -> String {
    match value {
        Value::Null => "nothing".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "a mapping".to_owned(),
    }
}

fn type_mismatch(ty: &str, value: &Value) -> String {
    let (want, fix) = match (ty, value) {
        ("string", _) => ("a string", "quote the value"),
        ("integer", Value::String(_)) => ("a whole number", "write the number without quotes"),
        ("integer", _) => ("a whole number", "write a whole number such as 25"),
        ("number", _) => ("a number", "write the number without quotes"),
        ("boolean", _) => ("true or false", "write true or false without quotes"),
        ("array", _) => (
            "a list",
            "write a list such as [a, b] or one `- item` per line",
        ),
        ("object", _) => (
            "a mapping",
            "write `key: value` pairs, or {} for the defaults",
        ),
        _ => ("a different type", "see `kubectl explain cacheconfig.spec`"),
    };
    format!("must be {want}, found {}; {fix}", found(value))
}

fn empty_of(schema: &JSONSchemaProps) -> Value {
    match schema.type_.as_deref() {
        Some("object") => {
            let props = schema.properties.as_ref();
            Value::Object(
                schema
                    .required
                    .iter()
                    .flatten()
                    .filter_map(|name| Some((name.clone(), empty_of(props?.get(name)?))))
                    .collect(),
            )
        }
        Some("array") => Value::Array(Vec::new()),
        Some("string") => Value::String(String::new()),
        Some("boolean") => Value::Bool(false),
        Some("integer" | "number") => Value::from(0),
        _ => Value::Null,
    }
}

/// The message for an unknown field: the closest known name if one is close, else the list.
pub(crate) fn unknown_field<'a>(
    key: &str,
    known: impl Iterator<Item = &'a String> + Clone,
) -> String {
    if let Some(best) = closest(key, known.clone()) {
        format!("unknown field; did you mean {best:?}?")
    } else {
        let names: Vec<&str> = known.map(String::as_str).collect();
        format!(
            "unknown field; remove it (known fields: {})",
            names.join(", ")
        )
    }
}
