//! Checking a tool call's arguments against the tool's JSON Schema before anything runs.
//!
//! Like pi (TypeBox `Value.Convert`), obvious type slips are mended first: `"10"` for a number,
//! `"true"` for a boolean, `5` for a string; `null` for an optional field counts as absent. What
//! still does not fit becomes pi's message, `Validation failed for tool "read": …` followed by the
//! received arguments, so the model can correct its call.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::ToolError;

/// Parses `arguments` (an object, or an object sent as a JSON string) against `schema`, then
/// into `T`.
pub(crate) fn parse<T: DeserializeOwned>(
    tool: &str,
    schema: &Value,
    arguments: Value,
) -> Result<T, ToolError> {
    let received = arguments.clone();
    let mut value = match arguments {
        Value::Null => Value::Object(Map::new()),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(v @ Value::Object(_)) => v,
            _ => Value::String(s),
        },
        other => other,
    };
    let mut errors = Vec::new();
    check(schema, &mut value, "", &mut errors);
    if !errors.is_empty() {
        return Err(invalid(tool, &errors, &received));
    }
    serde_json::from_value(value)
        .map_err(|e| invalid(tool, &[("root".into(), e.to_string())], &received))
}

fn invalid(tool: &str, errors: &[(String, String)], received: &Value) -> ToolError {
    let list: Vec<String> = errors.iter().map(|(path, msg)| format!("  - {path}: {msg}")).collect();
    let received = serde_json::to_string_pretty(received).unwrap_or_default();
    ToolError::InvalidArguments(format!(
        "Validation failed for tool \"{tool}\":\n{}\n\nReceived arguments:\n{received}",
        list.join("\n")
    ))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Mends `value` toward `schema`'s type where the intent is plain, then records what still does
/// not fit.
fn check(schema: &Value, value: &mut Value, path: &str, errors: &mut Vec<(String, String)>) {
    let at = if path.is_empty() { "root".to_owned() } else { path.to_owned() };
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
    coerce(ty, value);
    let fits = match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.as_f64().is_some_and(|f| f.fract() == 0.0),
        "boolean" => value.is_boolean(),
        _ => true,
    };
    if !fits {
        errors.push((at, format!("Expected {ty}, received {}", describe(value))));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            let names: Vec<String> = allowed
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect();
            errors.push((at, format!("Expected one of: {}", names.join(", "))));
            return;
        }
    }
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            // An optional field sent as null is taken as not sent.
            map.retain(|k, v| !v.is_null() || required.contains(&k.as_str()));
            for key in &required {
                if !map.contains_key(*key) {
                    errors.push((join(path, key), "Required property is missing".into()));
                }
            }
            if let Some(props) = props {
                for (key, sub) in props {
                    if let Some(v) = map.get_mut(key) {
                        check(sub, v, &join(path, key), errors);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    check(item_schema, item, &join(path, &i.to_string()), errors);
                }
            }
        }
        _ => {}
    }
}

fn coerce(ty: &str, value: &mut Value) {
    let replacement = match (ty, &*value) {
        ("number" | "integer", Value::String(s)) => {
            let t = s.trim();
            if t.is_empty() {
                None
            } else if let Ok(i) = t.parse::<i64>() {
                Some(Value::from(i))
            } else {
                t.parse::<f64>().ok().filter(|f| f.is_finite()).map(Value::from)
            }
        }
        ("boolean", Value::String(s)) => match s.as_str() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        ("boolean", Value::Number(n)) => match n.as_u64() {
            Some(1) => Some(Value::Bool(true)),
            Some(0) => Some(Value::Bool(false)),
            _ => None,
        },
        ("string", Value::Number(n)) => Some(Value::String(n.to_string())),
        ("string", Value::Bool(b)) => Some(Value::String(b.to_string())),
        ("array", Value::String(s)) => {
            // Some models send arrays as JSON text (pi's edit tool mends its `edits` the same way).
            serde_json::from_str::<Value>(s).ok().filter(Value::is_array)
        }
        _ => None,
    };
    if let Some(r) = replacement {
        *value = r;
    }
}

/// A count-like number argument (`limit`, `offset`, `context`), as an integer ≥ 0. Fractions are
/// cut; negative values become 0.
pub(crate) fn count(n: Option<f64>) -> Option<usize> {
    n.map(|f| if f.is_finite() && f > 0.0 { f.floor().min(usize::MAX as f64) as usize } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    struct A {
        path: String,
        limit: Option<f64>,
        flag: Option<bool>,
    }

    fn schema() -> Value {
        json!({"type":"object","properties":{
            "path":{"type":"string"},"limit":{"type":"number"},"flag":{"type":"boolean"}},
            "required":["path"]})
    }

    #[test]
    fn strings_are_mended_into_numbers_and_booleans() {
        let a: A =
            parse("t", &schema(), json!({"path": 5, "limit": "10", "flag": "true"})).unwrap();
        assert_eq!((a.path.as_str(), a.limit, a.flag), ("5", Some(10.0), Some(true)));
    }

    #[test]
    fn null_optional_fields_are_absent_and_a_json_string_is_an_object() {
        let a: A = parse("t", &schema(), json!({"path": "x", "limit": null})).unwrap();
        assert_eq!(a.limit, None);
        let a: A = parse("t", &schema(), json!("{\"path\":\"y\"}")).unwrap();
        assert_eq!(a.path, "y");
    }

    #[test]
    fn misfits_become_pi_style_messages() {
        let err = parse::<A>("read", &schema(), json!({"limit": "many"})).unwrap_err().to_string();
        assert!(err.starts_with("Validation failed for tool \"read\":"), "{err}");
        assert!(err.contains("  - path: Required property is missing"), "{err}");
        assert!(err.contains("  - limit: Expected number, received string"), "{err}");
        assert!(err.contains("Received arguments:"), "{err}");
        let err = parse::<A>("read", &schema(), json!([1, 2])).unwrap_err().to_string();
        assert!(err.contains("root: Expected object"), "{err}");
    }

    #[test]
    fn counts_are_clamped() {
        assert_eq!(count(Some(-3.0)), Some(0));
        assert_eq!(count(Some(2.7)), Some(2));
        assert_eq!(count(None), None);
    }
}
