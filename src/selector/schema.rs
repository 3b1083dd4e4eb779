//! JSON schemas for selectors, so CRD types can hold them: both are strings on the wire.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use super::{FieldSelector, LabelSelector};

/// A string in label selector syntax, inlined so generated CRDs stay structural (no `$ref`).
impl JsonSchema for LabelSelector {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "LabelSelectorString".into()
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "A label selector in kubectl syntax, e.g. `app=web,tier in (api,web),!canary`; empty selects everything.",
        })
    }
}

/// A string in field selector syntax, inlined so generated CRDs stay structural (no `$ref`).
impl JsonSchema for FieldSelector {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "FieldSelectorString".into()
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "A field selector in kubectl syntax, e.g. `metadata.name=web,status.phase!=Running`; `\\`, `,` and `=` in values are escaped with a backslash; empty selects everything.",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(JsonSchema)]
    #[allow(dead_code, reason = "only its schema is used")]
    struct Spec {
        labels: LabelSelector,
        fields: Option<FieldSelector>,
    }

    #[test]
    fn selectors_are_inline_string_schemas() {
        let schema = schemars::schema_for!(Spec).to_value();
        assert_eq!(schema["properties"]["labels"]["type"], "string");
        assert_eq!(
            schema["properties"]["fields"]["type"],
            serde_json::json!(["string", "null"])
        );
        assert!(schema.get("$defs").is_none(), "{schema}");
    }
}
