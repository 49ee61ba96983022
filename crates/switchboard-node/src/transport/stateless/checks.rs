//! The checks a 2026-07-28 request passes before it runs, in order (MCP 2026-07-28,
//! basic/transports, Protocol Version Header, Standard Request Headers, Server Validation; basic,
//! `_meta`; basic/versioning):
//! 1. `MCP-Protocol-Version` present and equal to `_meta`'s version (else -32020);
//! 2. that version served statelessly (else -32022 with `data.supported`/`data.requested`);
//! 3. `Mcp-Method` equal to `method` (-32020);
//! 4. `Mcp-Name` equal to `params.name` (`tools/call`, `prompts/get`) or `params.uri`
//!    (`resources/read`), after decoding `=?base64?…?=` (-32020);
//! 5. `_meta` client capabilities present (-32602), a valid `logLevel` when given (-32602);
//! 6. the method is one we serve in this era (404, -32601).
//!
//! `Mcp-Param-*` of `tools/call` are checked after these, against the tool's `x-mcp-header`
//! declarations (the `params` module); headers no declaration names are accepted, as
//! intermediaries must forward them.

use http::HeaderMap;
use serde_json::Value;
use switchboard_protocol::{header_value, headers, meta, Revision};

use super::refusal::Refusal;
use switchboard_protocol::logging::is_log_level;

/// What the checks read from a valid request.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// The client's capabilities for this request.
    pub capabilities: Value,
    /// The lowest level of `notifications/message` to send; `None`: send none.
    pub log_level: Option<String>,
    /// The client's `Implementation`, when given (advisory only).
    pub client_info: Value,
}

/// The methods served on the stateless path. `server/discover` is answered by the node, the
/// rest by the upstream, `subscriptions/listen` by the `listen` module. `ping`, `logging/setLevel`,
/// `initialize` and `resources/subscribe` are gone in 2026-07-28. The tasks extension's methods
/// are answered by the node (the `tasks` module); its `tasks/result` and `tasks/list` are gone.
pub const METHODS: [&str; 13] = [
    "server/discover",
    "subscriptions/listen",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "tasks/get",
    "tasks/cancel",
    "tasks/update",
];

/// The `params` member `Mcp-Name` mirrors for `method`, if any.
pub fn name_member(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        // Tasks extension (1.7.3): the task id is the routing key.
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

/// Runs checks 1–6 on a request with `method` and `params` (`Value::Null` when absent).
pub fn check(h: &HeaderMap, method: &str, params: &Value) -> Result<Checked, Refusal> {
    let meta = params.get("_meta").filter(|m| m.is_object());
    let version = meta
        .and_then(|m| m.get(meta::PROTOCOL_VERSION))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            Refusal::InvalidParams(format!("_meta[\"{}\"] is required", meta::PROTOCOL_VERSION))
        })?;
    let pv = header(h, headers::MCP_PROTOCOL_VERSION)?;
    if pv != version {
        return Err(Refusal::HeaderMismatch(format!(
            "MCP-Protocol-Version {pv:?} differs from _meta version {version:?}"
        )));
    }
    if Revision::parse_stateless(version).is_none() {
        return Err(Refusal::UnsupportedVersion(version.to_owned()));
    }
    let mcp_method = header(h, headers::MCP_METHOD)?;
    if mcp_method != method {
        return Err(Refusal::HeaderMismatch(format!(
            "Mcp-Method {mcp_method:?} differs from method {method:?}"
        )));
    }
    if let Some(member) = name_member(method) {
        let name = header(h, headers::MCP_NAME)?;
        if params.get(member).and_then(Value::as_str) != Some(name.as_str()) {
            return Err(Refusal::HeaderMismatch(format!(
                "Mcp-Name {name:?} differs from params.{member}"
            )));
        }
    }
    let meta = meta.unwrap_or(&Value::Null);
    let capabilities = meta
        .get(meta::CLIENT_CAPABILITIES)
        .filter(|c| c.is_object())
        .cloned()
        .ok_or_else(|| {
            Refusal::InvalidParams(format!(
                "_meta[\"{}\"] is required (an object)",
                meta::CLIENT_CAPABILITIES
            ))
        })?;
    let log_level = match meta.get(meta::LOG_LEVEL) {
        None => None,
        Some(Value::String(l)) if is_log_level(l) => Some(l.clone()),
        Some(other) => {
            return Err(Refusal::InvalidParams(format!(
                "invalid log level: {other}"
            )));
        }
    };
    if !METHODS.contains(&method) {
        return Err(Refusal::UnknownMethod(method.to_owned()));
    }
    Ok(Checked {
        capabilities,
        log_level,
        client_info: meta.get(meta::CLIENT_INFO).cloned().unwrap_or_default(),
    })
}

/// A required header, decoded: missing or undecodable is a mismatch.
fn header(h: &HeaderMap, name: &str) -> Result<String, Refusal> {
    let raw = h
        .get(name)
        .ok_or_else(|| Refusal::HeaderMismatch(format!("the {name} header is required")))?;
    if h.get_all(name).iter().nth(1).is_some() {
        // A balancer may route on one copy and the body say another: refuse the ambiguity.
        return Err(Refusal::HeaderMismatch(format!(
            "the {name} header is sent more than once"
        )));
    }
    header_value::decode(raw.as_bytes())
        .map_err(|e| Refusal::HeaderMismatch(format!("the {name} header is invalid: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use serde_json::json;

    fn hm(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn params(extra: Value) -> Value {
        let mut p = json!({"_meta": {
            meta::PROTOCOL_VERSION: "2026-07-28",
            meta::CLIENT_CAPABILITIES: {},
        }});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    }

    const OK: [(&str, &str); 3] = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "=?base64?ZWNobw==?="),
    ];

    #[test]
    fn a_valid_call_passes_with_a_base64_name() {
        let c = check(&hm(&OK), "tools/call", &params(json!({"name": "echo"}))).unwrap();
        assert_eq!(c.log_level, None);
    }

    #[test]
    fn each_rule_refuses_with_its_code() {
        let p = params(json!({"name": "echo"}));
        let code = |h: &[(&'static str, &str)], method: &str, p: &Value| {
            check(&hm(h), method, p).unwrap_err().code()
        };
        assert_eq!(code(&OK[1..], "tools/call", &p), -32020);
        assert_eq!(code(&[OK[0], OK[1]], "tools/call", &p), -32020);
        assert_eq!(
            code(
                &[OK[0], ("mcp-method", "tools/list"), OK[2]],
                "tools/call",
                &p
            ),
            -32020
        );
        assert_eq!(
            code(
                &[OK[0], OK[1], ("mcp-name", "=?base64?!!?=")],
                "tools/call",
                &p
            ),
            -32020
        );
        let mut old = p.clone();
        old["_meta"][meta::PROTOCOL_VERSION] = json!("2025-11-25");
        let h = [("mcp-protocol-version", "2025-11-25"), OK[1], OK[2]];
        assert_eq!(code(&h, "tools/call", &old), -32022);
        let mut bare = p.clone();
        bare["_meta"]
            .as_object_mut()
            .unwrap()
            .remove(meta::CLIENT_CAPABILITIES);
        assert_eq!(code(&OK, "tools/call", &bare), -32602);
        let h = [OK[0], ("mcp-method", "ping")];
        let e = check(&hm(&h), "ping", &params(json!({}))).unwrap_err();
        assert_eq!((e.status().as_u16(), e.code()), (404, -32601));
    }
}
