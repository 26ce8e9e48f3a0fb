//! Deterministic tool-call arguments that satisfy the tool's JSON Schema, so SDKs that
//! validate arguments (Vercel `ai` with a zod schema) accept the lab's call.
//!
//! Invariants: the same schema always gives the same value; every declared property gets a
//! value (required or not) of its declared type (`enum`/`const` → its first value, `anyOf` /
//! `oneOf` / a type list → the first non-null choice); recursion stops at depth 6 with `{}`;
//! a schema without properties gives `{}`. String values name their property
//! (`"lab-<name>"`) so a truncated argument string is recognisable.

use serde_json::{Map, Value, json};

const MAX_DEPTH: usize = 6;

/// A value for `schema` (a JSON Schema object), as compact JSON text.
pub fn arguments(schema: &Value) -> String {
    let v = match value(schema, "value", 0) {
        v @ Value::Object(_) => v,
        // Tool arguments are always an object.
        _ => Value::Object(Map::new()),
    };
    v.to_string()
}

fn value(schema: &Value, name: &str, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::Object(Map::new());
    }
    let Some(s) = schema.as_object() else {
        return json!(format!("lab-{name}"));
    };
    if let Some(c) = s.get("const") {
        return c.clone();
    }
    if let Some(first) = s
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(choice) = s
            .get(key)
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| !is_null_type(c)))
        {
            return value(choice, name, depth + 1);
        }
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if s.contains_key("properties") => "object",
        _ => "string",
    };
    match ty {
        "object" => {
            let mut out = Map::new();
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, sub) in props {
                    out.insert(k.clone(), value(sub, k, depth + 1));
                }
            }
            Value::Object(out)
        }
        "array" => {
            let item = s.get("items").map(|i| value(i, name, depth + 1));
            let min = s
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .clamp(1, 3);
            match item {
                Some(i) => Value::Array(vec![i; min as usize]),
                None => Value::Array(Vec::new()),
            }
        }
        "integer" => json!(bounded(s, 3.0).round() as i64),
        "number" => json!(bounded(s, 2.5)),
        "boolean" => json!(true),
        "null" => Value::Null,
        _ => json!(format!("lab-{name}")),
    }
}

fn is_null_type(s: &Value) -> bool {
    s.get("type").and_then(Value::as_str) == Some("null")
}

/// `preferred`, moved inside `minimum`/`maximum` when the schema bounds it.
fn bounded(s: &Map<String, Value>, preferred: f64) -> f64 {
    let mut v = preferred;
    if let Some(min) = s.get("minimum").and_then(Value::as_f64) {
        v = v.max(min);
    }
    if let Some(max) = s.get("maximum").and_then(Value::as_f64) {
        v = v.min(max);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_property_gets_a_value_of_its_type() {
        let schema = json!({"type":"object","properties":{
            "city":{"type":"string"},"days":{"type":"integer","minimum":5},
            "unit":{"type":"string","enum":["celsius","fahrenheit"]},
            "detail":{"type":["boolean","null"]},
            "tags":{"type":"array","items":{"type":"string"}},
            "at":{"type":"object","properties":{"lat":{"type":"number"}}},
            "maybe":{"anyOf":[{"type":"null"},{"type":"integer"}]}},
            "required":["city"],"additionalProperties":false});
        let v: Value = serde_json::from_str(&arguments(&schema)).expect("JSON");
        assert_eq!(
            v,
            json!({"city":"lab-city","days":5,"unit":"celsius","detail":true,
                   "tags":["lab-tags"],"at":{"lat":2.5},"maybe":3})
        );
    }

    #[test]
    fn a_schema_without_properties_or_no_schema_gives_an_empty_object() {
        assert_eq!(arguments(&json!({"type":"object","properties":{}})), "{}");
        assert_eq!(arguments(&json!({})), "{}");
        assert_eq!(arguments(&json!("nonsense")), "{}");
    }

    #[test]
    fn deep_schemas_stop_at_the_depth_bound() {
        let mut s = json!({"type":"string"});
        for _ in 0..50 {
            s = json!({"type":"object","properties":{"n": s}});
        }
        let text = arguments(&s);
        assert!(text.matches('{').count() <= MAX_DEPTH + 2, "{text}");
    }
}
