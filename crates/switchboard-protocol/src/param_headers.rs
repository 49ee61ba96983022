//! Tool arguments mirrored into `Mcp-Param-{Name}` headers (MCP 2026-07-28,
//! basic/transports/streamable-http, Custom Headers from Tool Parameters; server/tools,
//! `x-mcp-header`).
//!
//! A tool's `inputSchema` may tag a property with `"x-mcp-header": "<Name>"`; clients then send
//! the argument's value in the header `Mcp-Param-<Name>` as well, so that intermediaries can
//! route on it without parsing the body. Rules kept here:
//! - a declaration is valid when its name is a non-empty RFC 9110 token, unique among the tool's
//!   declarations case-insensitively, on a property of type `string`, `integer` or `boolean`
//!   reached from the root only through `properties` (no `items`, composition or `$ref`);
//!   invalid declarations are ignored;
//! - the header value is the string itself (with the `=?base64?…?=` encoding when it is not
//!   plain ASCII, [`crate::header_value`]), the decimal integer (JavaScript safe range), or
//!   `true` / `false`;
//! - validation: an argument present and not null needs its header with an equal value
//!   (integers compared numerically); an argument absent or null needs none; a header whose
//!   argument is absent or null is a mismatch. Headers no declaration names pass (intermediaries
//!   forward them).

use serde_json::{Map, Value};

use crate::header_value;

/// The header name prefix, lower-case (HTTP header names compare case-insensitively).
pub const PREFIX: &str = "mcp-param-";

/// The largest integer a header may carry (JavaScript's `Number.MAX_SAFE_INTEGER`).
const MAX_SAFE: i64 = 9_007_199_254_740_991;

/// The JSON type of a mirrored property.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `"type": "string"`.
    Str,
    /// `"type": "integer"`.
    Int,
    /// `"type": "boolean"`.
    Bool,
}

/// One `x-mcp-header` declaration of a tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declaration {
    /// The `<Name>` of `Mcp-Param-<Name>`, as declared.
    pub name: String,
    /// The property path from the arguments object (`["options", "limit"]`).
    pub path: Vec<String>,
    /// The property's type.
    pub kind: Kind,
}

impl Declaration {
    /// The full header name, lower-case (`mcp-param-region`).
    pub fn header(&self) -> String {
        format!("{PREFIX}{}", self.name.to_ascii_lowercase())
    }

    /// The argument's value in `arguments`, if present and not null.
    pub fn value<'a>(&self, arguments: &'a Value) -> Option<&'a Value> {
        let mut v = arguments;
        for key in &self.path {
            v = v.get(key)?;
        }
        (!v.is_null()).then_some(v)
    }

    /// The header value for `value`, or `None` when it does not have the declared type.
    pub fn encode(&self, value: &Value) -> Option<String> {
        match (self.kind, value) {
            (Kind::Str, Value::String(s)) => Some(header_value::encode(s)),
            (Kind::Int, Value::Number(n)) => n
                .as_i64()
                .filter(|i| i.abs() <= MAX_SAFE)
                .map(|i| i.to_string()),
            (Kind::Bool, Value::Bool(b)) => Some(b.to_string()),
            _ => None,
        }
    }

    /// Whether the (decoded) header text `raw` carries `value`.
    fn matches(&self, value: &Value, raw: &str) -> bool {
        match (self.kind, value) {
            (Kind::Str, Value::String(s)) => s == raw,
            (Kind::Int, Value::Number(n)) => n
                .as_i64()
                .is_some_and(|i| raw.trim().parse::<i64>() == Ok(i)),
            (Kind::Bool, Value::Bool(b)) => raw == if *b { "true" } else { "false" },
            _ => false,
        }
    }
}

/// The valid declarations of a tool's `inputSchema`.
pub fn declarations(input_schema: &Value) -> Vec<Declaration> {
    let mut out = Vec::new();
    walk(input_schema, &mut Vec::new(), &mut out);
    let mut seen = std::collections::HashSet::new();
    let duplicated: std::collections::HashSet<String> = out
        .iter()
        .map(|d| d.name.to_ascii_lowercase())
        .filter(|n| !seen.insert(n.clone()))
        .collect();
    out.retain(|d| !duplicated.contains(&d.name.to_ascii_lowercase()));
    out
}

fn walk(schema: &Value, path: &mut Vec<String>, out: &mut Vec<Declaration>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, prop) in props {
        path.push(key.clone());
        if let Some(name) = prop.get("x-mcp-header").and_then(Value::as_str) {
            let kind = match prop.get("type").and_then(Value::as_str) {
                Some("string") => Some(Kind::Str),
                Some("integer") => Some(Kind::Int),
                Some("boolean") => Some(Kind::Bool),
                _ => None,
            };
            if let (Some(kind), true) = (kind, is_token(name)) {
                out.push(Declaration {
                    name: name.to_owned(),
                    path: path.clone(),
                    kind,
                });
            }
        }
        walk(prop, path, out);
        path.pop();
    }
}

/// An RFC 9110 token.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The `Mcp-Param-*` headers a client sends for `arguments` (name lower-case, value).
pub fn headers_for(decls: &[Declaration], arguments: &Value) -> Vec<(String, String)> {
    decls
        .iter()
        .filter_map(|d| Some((d.header(), d.encode(d.value(arguments)?)?)))
        .collect()
}

/// Checks the `Mcp-Param-*` headers a request carried (`sent`: lower-case name → raw value)
/// against its `arguments`. `Err` names the first mismatch.
pub fn check(
    decls: &[Declaration],
    arguments: &Value,
    sent: &Map<String, Value>,
) -> Result<(), String> {
    for d in decls {
        let header = d.header();
        let raw = sent.get(&header).and_then(Value::as_str);
        match (d.value(arguments), raw) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(format!(
                    "Mcp-Param-{} is sent but its argument is absent or null",
                    d.name
                ))
            }
            (Some(_), None) => return Err(format!("Mcp-Param-{} is required", d.name)),
            (Some(v), Some(raw)) => {
                let decoded = header_value::decode(raw.as_bytes())
                    .map_err(|_| format!("Mcp-Param-{} is not a readable value", d.name))?;
                if !d.matches(v, &decoded) {
                    return Err(format!(
                        "Mcp-Param-{} {raw:?} differs from the argument {v}",
                        d.name
                    ));
                }
            }
        }
    }
    Ok(())
}

/// What is known of the tools' declarations: learned from `tools/list` results, by tool name.
/// Callers fetch the list when [`ToolHeaders::stale`] says so.
#[derive(Default)]
pub struct ToolHeaders {
    inner: parking_lot::RwLock<Known>,
}

#[derive(Default)]
struct Known {
    tools: std::collections::HashMap<String, Vec<Declaration>>,
    refreshed: Option<std::time::Instant>,
}

impl ToolHeaders {
    /// A complete list was fetched: replaces what was known with `tools` (the `tools` arrays
    /// of every page).
    pub fn replace<'a>(&self, tools: impl IntoIterator<Item = &'a Value>) {
        let mut known = self.inner.write();
        known.tools = tools
            .into_iter()
            .filter_map(|t| {
                let name = t.get("name")?.as_str()?.to_owned();
                let schema = t.get("inputSchema").unwrap_or(&Value::Null);
                Some((name, declarations(schema)))
            })
            .collect();
        known.refreshed = Some(std::time::Instant::now());
    }

    /// The declarations of `tool`, `None` when the tool is not known.
    pub fn get(&self, tool: &str) -> Option<Vec<Declaration>> {
        let known = self.inner.read();
        known.tools.get(tool).cloned()
    }

    /// Whether the list must be fetched before `tool` can be checked: never fetched, or `tool`
    /// unknown and the list older than `min_age` (so an unknown name does not fetch on every
    /// call). A list that is merely old ([`ToolHeaders::stale`]) can still be used meanwhile.
    pub fn needed(&self, tool: &str, min_age: std::time::Duration) -> bool {
        let known = self.inner.read();
        match known.refreshed {
            None => true,
            Some(at) => !known.tools.contains_key(tool) && at.elapsed() > min_age,
        }
    }

    /// Whether the list should be fetched before `tool` is used: never fetched, older than
    /// `max_age`, or `tool` unknown and the list older than `min_age` (so an unknown name does
    /// not fetch on every call).
    pub fn stale(
        &self,
        tool: &str,
        min_age: std::time::Duration,
        max_age: std::time::Duration,
    ) -> bool {
        let known = self.inner.read();
        let Some(at) = known.refreshed else {
            return true;
        };
        let age = at.elapsed();
        age > max_age || (!known.tools.contains_key(tool) && age > min_age)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limit": {"type": "integer", "x-mcp-header": "Limit"},
            "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
            "ratio": {"type": "number", "x-mcp-header": "Ratio"},
            "bad name": {"type": "string", "x-mcp-header": "a b"},
            "list": {"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}},
            "options": {"type": "object", "properties": {
                "shard": {"type": "integer", "x-mcp-header": "Shard"}
            }},
            "twice1": {"type": "string", "x-mcp-header": "Twice"},
            "twice2": {"type": "string", "x-mcp-header": "twice"}
        }})
    }

    fn sent(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect()
    }

    #[test]
    fn only_valid_declarations_count() {
        let names: Vec<String> = declarations(&schema())
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(names, ["Region", "Limit", "Dry-Run", "Shard"]);
    }

    #[test]
    fn headers_mirror_arguments_and_are_checked_both_ways() {
        let d = declarations(&schema());
        let args = json!({"region": "eu-west", "limit": 5, "dry": false,
                          "options": {"shard": 3}, "other": "x"});
        let h = headers_for(&d, &args);
        assert_eq!(
            h,
            [
                ("mcp-param-region".to_string(), "eu-west".to_string()),
                ("mcp-param-limit".into(), "5".into()),
                ("mcp-param-dry-run".into(), "false".into()),
                ("mcp-param-shard".into(), "3".into()),
            ]
        );
        let mut ok: Map<String, Value> = h.into_iter().map(|(k, v)| (k, json!(v))).collect();
        assert_eq!(check(&d, &args, &ok), Ok(()));
        ok.insert("mcp-param-limit".into(), json!(" 05"));
        assert_eq!(
            check(&d, &args, &ok),
            Ok(()),
            "integers compare numerically"
        );
        ok.insert("mcp-param-unknown".into(), json!("anything"));
        assert_eq!(check(&d, &args, &ok), Ok(()), "unknown headers pass");
        ok.insert("mcp-param-region".into(), json!("us-east"));
        assert!(check(&d, &args, &ok).unwrap_err().contains("Region"));
        let missing = sent(&[("mcp-param-limit", "5"), ("mcp-param-dry-run", "false")]);
        assert!(check(&d, &args, &missing).unwrap_err().contains("required"));
        let none = json!({"region": null});
        assert_eq!(check(&d, &none, &sent(&[])), Ok(()));
        let extra = sent(&[("mcp-param-region", "eu-west")]);
        assert!(check(&d, &none, &extra).unwrap_err().contains("absent"));
    }

    #[test]
    fn the_known_list_is_replaced_and_goes_stale() {
        use std::time::Duration;
        let known = ToolHeaders::default();
        let (short, long) = (Duration::from_secs(5), Duration::from_secs(60));
        assert!(known.stale("q", short, long), "never fetched");
        let list = [
            json!({"name": "q", "inputSchema": schema()}),
            json!({"name": "plain"}),
        ];
        known.replace(list.iter());
        assert!(!known.stale("q", short, long));
        assert!(!known.stale("unknown", short, long), "fetched just now");
        assert!(known.stale("unknown", Duration::ZERO, long));
        assert!(
            !known.needed("q", Duration::ZERO),
            "known tools need no fetch"
        );
        assert!(known.needed("unknown", Duration::ZERO));
        assert!(!known.needed("unknown", short), "not again within min_age");
        assert!(
            known.stale("q", short, Duration::ZERO),
            "old, though usable"
        );
        assert_eq!(known.get("q").map(|d| d.len()), Some(4));
        assert_eq!(known.get("plain"), Some(vec![]));
        assert_eq!(known.get("unknown"), None);
    }

    #[test]
    fn non_ascii_strings_use_the_base64_form() {
        let d = declarations(&schema());
        let args = json!({"region": "zürich"});
        let h = headers_for(&d, &args);
        assert!(h[0].1.starts_with("=?base64?"), "{h:?}");
        let sent: Map<String, Value> = h.into_iter().map(|(k, v)| (k, json!(v))).collect();
        assert_eq!(check(&d, &args, &sent), Ok(()));
        let unsafe_int = json!({"limit": 9_007_199_254_740_993_i64});
        assert!(headers_for(&d, &unsafe_int).is_empty());
    }
}
