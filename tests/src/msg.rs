//! JSON-RPC messages the cases send (`INIT`, `INITED`, `CALL(...)` of `cases/README.md`).

use serde_json::{json, Value};

/// `initialize` with id 1, the given revision and client capabilities.
pub fn init(revision: &str, capabilities: Value) -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": revision,
            "capabilities": capabilities,
            "clientInfo": {"name": "replay", "version": "0"}
        }
    })
}

/// `notifications/initialized`.
pub fn inited() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

/// A request with `id`, `method` and `params`.
pub fn request(id: impl Into<Value>, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params})
}

/// A request without params.
pub fn bare(id: impl Into<Value>, method: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id.into(), "method": method})
}

/// A notification.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// `tools/call` of tool `name` with `args`.
pub fn call(id: impl Into<Value>, name: &str, args: Value) -> Value {
    request(id, "tools/call", json!({"name": name, "arguments": args}))
}

/// `tools/call` carrying `params._meta.progressToken`.
pub fn call_with_progress(id: impl Into<Value>, name: &str, args: Value, token: &str) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": name, "arguments": args, "_meta": {"progressToken": token}}),
    )
}

/// A client's response to a server-to-client request.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// `notifications/cancelled` for request `id`.
pub fn cancelled(id: impl Into<Value>) -> Value {
    notification(
        "notifications/cancelled",
        json!({"requestId": id.into(), "reason": "test"}),
    )
}

/// The client capabilities that allow every server-to-client request.
pub fn all_client_capabilities() -> Value {
    json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}})
}

/// The concatenated `text` of every content item of a `tools/call` result (or the whole result as
/// JSON text when it has no content array).
pub fn result_text(response: &Value) -> String {
    let result = &response["result"];
    match result["content"].as_array() {
        Some(items) => items
            .iter()
            .filter_map(|c| c["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        None => result.to_string(),
    }
}
