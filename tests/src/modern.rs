//! Requests of the stateless revision, MCP 2026-07-28: the body with its `_meta`, the headers
//! that mirror it, and posting them.

use reqwest::Method;
use serde_json::{json, Value};

use crate::client::{Headers, McpClient, Reply};
use crate::msg;
use crate::sse::SseStream;

/// The stateless revision.
pub const V: &str = "2026-07-28";

/// A 2026-07-28 request: `params` plus `_meta` with the version, `caps` as the client
/// capabilities and a client info (members already in `params._meta` are kept).
pub fn request(id: impl Into<Value>, method: &str, params: Value, caps: Value) -> Value {
    let mut p = params;
    if !p.is_object() {
        p = json!({});
    }
    let meta = p["_meta"].as_object().cloned().unwrap_or_default();
    p["_meta"] = Value::Object(meta);
    p["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(V);
    p["_meta"]["io.modelcontextprotocol/clientCapabilities"] = caps;
    p["_meta"]["io.modelcontextprotocol/clientInfo"] =
        json!({"name": "stateless-test", "version": "0"});
    msg::request(id, method, p)
}

/// The headers a 2026-07-28 client sends for `method` (and `Mcp-Name: name` when given).
pub fn headers(method: &str, name: Option<&str>) -> Headers {
    let mut h = Headers::default()
        .set("Content-Type", "application/json")
        .set("Accept", "application/json, text/event-stream")
        .set("MCP-Protocol-Version", V)
        .set("Mcp-Method", method);
    if let Some(n) = name {
        h = h.set("Mcp-Name", n);
    }
    h
}

/// POSTs `body` with `h` to `url` on a fresh client.
pub async fn post(url: &str, h: &Headers, body: &Value) -> Reply {
    McpClient::new()
        .send(Method::POST, url, h, Some(body.to_string()))
        .await
}

/// POSTs a request built by [`request`] with the headers it needs (`Mcp-Name` from
/// `params.name` or `params.uri`).
pub async fn send(url: &str, body: &Value) -> Reply {
    let method = body["method"].as_str().expect("a request has a method");
    let name = body["params"]["name"]
        .as_str()
        .or_else(|| body["params"]["uri"].as_str());
    post(url, &headers(method, name), body).await
}

/// The `_meta` member of a listen stream's messages naming the `subscriptions/listen` request.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// POSTs `subscriptions/listen` for `filter` (its `notifications`) as request `id`, declaring no
/// client capabilities.
pub async fn listen(url: &str, id: &Value, filter: Value) -> Reply {
    let params = json!({"notifications": filter});
    let body = request(id.clone(), "subscriptions/listen", params, json!({}));
    post(url, &headers("subscriptions/listen", None), &body).await
}

/// The stream of a [`listen`] answered 200, after its acknowledgement (checked to be the first
/// message, naming `id`), and the filter the acknowledgement agreed to.
pub async fn acknowledged(reply: Reply, id: &Value) -> (SseStream, Value) {
    let mut stream = reply.sse();
    let wait = std::time::Duration::from_secs(10);
    let (_, first) = stream.next_message(wait).await.expect("acknowledgement");
    assert_eq!(
        first["method"], "notifications/subscriptions/acknowledged",
        "the first message: {first}"
    );
    assert_eq!(first["params"]["_meta"][SUBSCRIPTION_ID], *id, "{first}");
    (stream, first["params"]["notifications"].clone())
}
