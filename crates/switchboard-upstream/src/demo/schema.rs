//! The JSON Schema subset the demo tools declare, and a checker for it.
//!
//! Each tool's `inputSchema` is the single source of truth: `tools/list` publishes it and
//! `tools/call` checks arguments against it. Supported keywords: an object with `properties`,
//! `required` and `additionalProperties: false`; per property `type` (`string`, `number`,
//! `integer`), `minimum`, `maximum`, `enum` and `default`. Anything else is not checked.

use serde_json::{Map, Value};

/// Checks `args` against `schema` and returns them with the defaults of absent properties filled
/// in. The error is a sentence naming the offending argument.
pub(super) fn validate(
    schema: &Value,
    args: &Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        if let Some(unknown) = args.keys().find(|k| !properties.contains_key(*k)) {
            let expected: Vec<&str> = properties.keys().map(String::as_str).collect();
            return Err(format!(
                "unknown argument `{unknown}` (expected: {})",
                if expected.is_empty() {
                    "none".to_owned()
                } else {
                    expected.join(", ")
                }
            ));
        }
    }
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if let Some(missing) = required
        .iter()
        .filter_map(Value::as_str)
        .find(|k| !args.contains_key(*k))
    {
        return Err(format!("missing required argument `{missing}`"));
    }
    let mut out = args.clone();
    for (key, property) in properties {
        match args.get(key) {
            Some(value) => check_property(key, property, value)?,
            None => {
                if let Some(default) = property.get("default") {
                    out.insert(key.clone(), default.clone());
                }
            }
        }
    }
    Ok(out)
}

/// Checks one argument against its property schema.
fn check_property(key: &str, property: &Value, value: &Value) -> Result<(), String> {
    let expected = property
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("any");
    let type_ok = match expected {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => as_integer(value).is_some(),
        _ => true,
    };
    if !type_ok {
        return Err(format!(
            "argument `{key}` must be {}, got {value}",
            article(expected)
        ));
    }
    if let Some(choices) = property.get("enum").and_then(Value::as_array) {
        if !choices.contains(value) {
            let list: Vec<String> = choices.iter().map(Value::to_string).collect();
            return Err(format!(
                "argument `{key}` must be one of {}, got {value}",
                list.join(", ")
            ));
        }
    }
    if let Some(x) = value.as_f64() {
        if let Some(min) = property
            .get("minimum")
            .filter(|m| m.as_f64().is_some_and(|m| x < m))
        {
            return Err(format!(
                "argument `{key}` must be at least {min}, got {value}"
            ));
        }
        if let Some(max) = property
            .get("maximum")
            .filter(|m| m.as_f64().is_some_and(|m| x > m))
        {
            return Err(format!(
                "argument `{key}` must be at most {max}, got {value}"
            ));
        }
    }
    Ok(())
}

/// "a string", "an integer", …
fn article(kind: &str) -> String {
    match kind {
        "integer" => "an integer".to_owned(),
        other => format!("a {other}"),
    }
}

/// A JSON number with no fractional part (`5` and `5.0` both count, as in JSON Schema).
pub(super) fn as_integer(value: &Value) -> Option<i64> {
    if let Some(i) = value.as_i64() {
        return Some(i);
    }
    let f = value.as_f64()?;
    // Beyond 2^53 an f64 no longer holds every integer; such values are not exact inputs.
    (f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0).then_some(f as i64)
}

/// A validated string argument ("" if absent, which validation rules out for required ones).
pub(super) fn str_arg<'a>(args: &'a Map<String, Value>, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// A validated non-negative integer argument (0 if absent or negative, which the schemas rule out).
pub(super) fn count_arg(args: &Map<String, Value>, key: &str) -> u64 {
    args.get(key)
        .and_then(as_integer)
        .and_then(|i| u64::try_from(i).ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "n": {"type": "integer", "minimum": 0, "maximum": 10, "default": 5},
                "x": {"type": "number"},
                "level": {"type": "string", "enum": ["info", "error"]}
            },
            "required": ["text"],
            "additionalProperties": false
        })
    }

    fn check(args: Value) -> Result<Map<String, Value>, String> {
        validate(&schema(), args.as_object().unwrap())
    }

    #[test]
    fn fills_defaults_and_keeps_given_values() {
        let out = check(json!({"text": "hi", "x": 1.5})).unwrap();
        assert_eq!(Value::Object(out), json!({"text": "hi", "x": 1.5, "n": 5}));
        assert_eq!(check(json!({"text": "hi", "n": 7})).unwrap()["n"], 7);
    }

    #[test]
    fn rejects_what_the_schema_rules_out() {
        assert_eq!(
            check(json!({})).unwrap_err(),
            "missing required argument `text`"
        );
        assert!(check(json!({"text": 1}))
            .unwrap_err()
            .contains("`text` must be a string"));
        assert!(check(json!({"text": "a", "n": 1.5}))
            .unwrap_err()
            .contains("must be an integer"));
        assert!(check(json!({"text": "a", "n": 11}))
            .unwrap_err()
            .contains("at most 10"));
        assert!(check(json!({"text": "a", "n": -1}))
            .unwrap_err()
            .contains("at least 0"));
        assert!(check(json!({"text": "a", "x": "1"}))
            .unwrap_err()
            .contains("must be a number"));
        assert!(check(json!({"text": "a", "level": "loud"}))
            .unwrap_err()
            .contains("one of \"info\", \"error\""));
        assert!(check(json!({"text": "a", "nn": 1}))
            .unwrap_err()
            .contains("unknown argument `nn`"));
    }

    #[test]
    fn integers_may_be_written_as_whole_floats() {
        assert_eq!(as_integer(&json!(5.0)), Some(5));
        assert_eq!(as_integer(&json!(-3)), Some(-3));
        assert_eq!(as_integer(&json!(5.5)), None);
        assert_eq!(as_integer(&json!(1e300)), None);
        assert_eq!(as_integer(&json!("5")), None);
        assert_eq!(
            count_arg(&check(json!({"text": "a", "n": 3.0})).unwrap(), "n"),
            3
        );
    }
}
