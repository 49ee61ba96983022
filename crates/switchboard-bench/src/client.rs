//! One virtual MCP client over Streamable HTTP: the handshake, `tools/call`, `DELETE`, and the
//! parsing of JSON and SSE answers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE};
use serde_json::{json, Value};

pub use crate::error::CallError;
use crate::sse::SseEvents;

/// The protocol revision the clients negotiate.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// The nodes a run talks to: one shared HTTP connection pool and a round-robin cursor, so
/// consecutive requests of all clients go to consecutive URLs (as a Service would spread them).
#[derive(Clone, Debug)]
pub struct Target {
    pub(crate) http: reqwest::Client,
    urls: Arc<Vec<String>>,
    next: Arc<AtomicUsize>,
    pub(crate) timeout: Duration,
}

impl Target {
    /// A pool with `TCP_NODELAY`, up to `pool` idle connections per host, and `timeout` on
    /// every request/response exchange (connect, headers and body). The reqwest client itself
    /// has no total timeout, so that long-lived SSE streams (the `events` mode) can be held.
    pub fn new(urls: Vec<String>, pool: usize, timeout: Duration) -> Result<Target, CallError> {
        assert!(!urls.is_empty(), "at least one URL");
        let http = reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(pool)
            .connect_timeout(timeout)
            .build()?;
        Ok(Target {
            http,
            urls: Arc::new(urls),
            next: Arc::new(AtomicUsize::new(0)),
            timeout,
        })
    }

    /// The URLs, in round-robin order.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    fn pick(&self) -> &str {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.urls.len();
        &self.urls[i]
    }

    /// POSTs one JSON-RPC message. With `id`, waits for the response with that id (a JSON body,
    /// or the SSE event carrying it); without, expects a 2xx and ignores the body.
    async fn post(
        &self,
        session: Option<&str>,
        body: &Value,
        id: Option<u64>,
    ) -> Result<(HeaderMap, Option<Value>), CallError> {
        let exchange = async {
            let mut req = self
                .http
                .post(self.pick())
                .header(CONTENT_TYPE, "application/json")
                .header(ACCEPT, "application/json, text/event-stream")
                .body(body.to_string());
            if let Some(sid) = session {
                req = req
                    .header("Mcp-Session-Id", sid)
                    .header("MCP-Protocol-Version", PROTOCOL_VERSION);
            }
            let resp = req.send().await?;
            let status = resp.status();
            if !status.is_success() {
                return Err(CallError::Http(status.as_u16()));
            }
            let headers = resp.headers().clone();
            let Some(id) = id else {
                return Ok((headers, None));
            };
            let is_sse = headers
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream"));
            let answer = if is_sse {
                let mut events = SseEvents::new(resp);
                loop {
                    let Some(event) = events.next().await? else {
                        return Err(CallError::Transport(
                            "SSE stream ended without the response".into(),
                        ));
                    };
                    if let Some(v) = answer_to(&event.data, id) {
                        break v;
                    }
                }
            } else {
                let bytes = resp.bytes().await?;
                let text = String::from_utf8_lossy(&bytes);
                answer_to(&text, id)
                    .ok_or_else(|| CallError::Transport(format!("not our response: {text}")))?
            };
            check(answer).map(|v| (headers, Some(v)))
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(CallError::Timeout),
        }
    }
}

/// `Err(JsonRpc)` for an error response or a tool result with `isError: true`, else the `result`.
fn check(answer: Value) -> Result<Value, CallError> {
    if let Some(err) = answer.get("error") {
        return Err(CallError::JsonRpc(err.clone()));
    }
    let result = answer.get("result").cloned().unwrap_or(Value::Null);
    if result.get("isError") == Some(&Value::Bool(true)) {
        return Err(CallError::JsonRpc(result));
    }
    Ok(result)
}

/// The JSON-RPC response with id `id` in one JSON text (a message or a batch), if it is there.
/// Requests and notifications the server sends on the stream are skipped.
pub fn answer_to(text: &str, id: u64) -> Option<Value> {
    let value: Value = serde_json::from_str(text).ok()?;
    let is_ours = |m: &Value| {
        m.get("id").and_then(Value::as_u64) == Some(id)
            && m.get("method").is_none()
            && (m.get("result").is_some() || m.get("error").is_some())
    };
    match value {
        Value::Array(batch) => batch.into_iter().find(is_ours),
        m if is_ours(&m) => Some(m),
        _ => None,
    }
}

/// One MCP session: created by [`McpClient::connect`], then used for calls.
#[derive(Debug)]
pub struct McpClient {
    pub(crate) target: Target,
    session: String,
    pub(crate) next_id: u64,
}

impl McpClient {
    /// `initialize` (protocol [`PROTOCOL_VERSION`], no client capabilities) then
    /// `notifications/initialized`, each to the next URL of the round robin.
    pub async fn connect(target: &Target) -> Result<McpClient, CallError> {
        McpClient::connect_with(target, json!({})).await
    }

    /// [`McpClient::connect`] declaring `capabilities` (e.g. `{"sampling": {}}`).
    pub async fn connect_with(
        target: &Target,
        capabilities: Value,
    ) -> Result<McpClient, CallError> {
        let init = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": capabilities,
                "clientInfo": {"name": "switchboard-bench", "version": env!("CARGO_PKG_VERSION")}
            }
        });
        let (headers, _) = target.post(None, &init, Some(0)).await?;
        let session = headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| CallError::Transport("no Mcp-Session-Id on initialize".into()))?
            .to_owned();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        target.post(Some(&session), &initialized, None).await?;
        Ok(McpClient {
            target: target.clone(),
            session,
            next_id: 1,
        })
    }

    /// The session id from `Mcp-Session-Id`.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// `tools/call` of `tool` with `arguments`; the call's `result` on success.
    pub async fn call_tool(&mut self, tool: &str, arguments: &Value) -> Result<Value, CallError> {
        let id = self.next_id;
        self.next_id += 1;
        let body = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}
        });
        let (_, result) = self
            .target
            .post(Some(&self.session), &body, Some(id))
            .await?;
        Ok(result.unwrap_or(Value::Null))
    }

    /// One JSON-RPC request `method` with `params` (e.g. `tools/list`); its `result`.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, CallError> {
        let id = self.next_id;
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let (_, result) = self
            .target
            .post(Some(&self.session), &body, Some(id))
            .await?;
        Ok(result.unwrap_or(Value::Null))
    }

    /// Ends the session with `DELETE`.
    pub async fn close(self) -> Result<(), CallError> {
        let t = &self.target;
        let req = t
            .http
            .delete(t.pick())
            .header("Mcp-Session-Id", &self.session)
            .header("MCP-Protocol-Version", PROTOCOL_VERSION);
        let resp = match tokio::time::timeout(t.timeout, req.send()).await {
            Ok(r) => r?,
            Err(_) => return Err(CallError::Timeout),
        };
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(CallError::Http(resp.status().as_u16()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_our_response_and_skips_the_rest() {
        let datas = [
            "",
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":6,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#,
        ];
        let found: Vec<Value> = datas.iter().filter_map(|d| answer_to(d, 7)).collect();
        assert_eq!(
            found,
            vec![json!({"jsonrpc":"2.0","id":7,"result":{"content":[]}})]
        );
        assert!(answer_to("not json", 7).is_none());
        let batch =
            r#"[{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","id":7,"error":{"code":-1}}]"#;
        assert_eq!(answer_to(batch, 7).unwrap()["error"]["code"], -1);
    }

    #[test]
    fn errors_and_tool_errors_are_jsonrpc_errors() {
        assert!(matches!(
            check(json!({"id":1,"error":{"code":-32601}})),
            Err(CallError::JsonRpc(_))
        ));
        assert!(matches!(
            check(json!({"id":1,"result":{"isError":true}})),
            Err(CallError::JsonRpc(_))
        ));
        assert_eq!(
            check(json!({"id":1,"result":{"x":1}})).unwrap(),
            json!({"x":1})
        );
    }
}
