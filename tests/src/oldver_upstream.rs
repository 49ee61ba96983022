//! The `oldver` fixture of case C46: a Streamable HTTP MCP upstream, run inside the test
//! process, that answers every `initialize` with `protocolVersion: "2025-06-18"` whatever the
//! client asked, and answers with constructs of that revision that older ones lack: its tool
//! `mix` returns a text block, a `resource_link`, an `audio` block and `structuredContent`
//! (MCP 2025-06-18, schema.ts `CallToolResult`); its `tools/list` entry carries `title`,
//! `outputSchema`, `annotations` and `_meta`; its `initialize` result declares `completions`
//! and a `serverInfo.title`. Plain JSON answers, no upstream session id. Bound to a free port
//! on 127.0.0.1; stopped when dropped.

use axum::body::Bytes;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::task::JoinHandle;

/// The revision the fixture answers `initialize` with, whatever was asked.
pub const REVISION: &str = "2025-06-18";

/// The running server.
pub struct OldverUpstream {
    addr: std::net::SocketAddr,
    task: JoinHandle<()>,
}

impl OldverUpstream {
    /// Starts the server on a free loopback port.
    pub async fn start() -> OldverUpstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let app = axum::Router::new().fallback(answer);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        OldverUpstream { addr, task }
    }

    /// The URL of its MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for OldverUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The `mix` tool's result: text, a `resource_link`, audio, and `structuredContent`.
pub fn mix_result() -> Value {
    json!({
        "content": [
            {"type": "text", "text": "{\"answer\":42}"},
            {"type": "resource_link", "uri": "file:///project/report.txt", "name": "report.txt",
             "description": "the weekly report", "mimeType": "text/plain"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
        ],
        "structuredContent": {"answer": 42},
        "isError": false,
    })
}

async fn answer(method: Method, body: Bytes) -> Response {
    if method == Method::DELETE {
        return StatusCode::OK.into_response();
    }
    if method != Method::POST {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Some(id) = message
        .get("id")
        .filter(|_| message.get("method").is_some())
    else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match message["method"].as_str().unwrap_or_default() {
        "initialize" => json!({
            "protocolVersion": REVISION,
            "capabilities": {"tools": {}, "completions": {}},
            "serverInfo": {"name": "oldver", "title": "Old Version", "version": "1"},
        }),
        "tools/list" => json!({"tools": [{
            "name": "mix",
            "title": "Mixed content",
            "description": "text, a resource link, audio and structured content",
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {"answer": {"type": "integer"}}},
            "annotations": {"readOnlyHint": true},
            "_meta": {"example.com/x": 1},
        }]}),
        "tools/call" => mix_result(),
        "ping" => json!({}),
        other => {
            let error = json!({"code": -32601, "message": format!("method not found: {other}")});
            return axum::Json(json!({"jsonrpc": "2.0", "id": id, "error": error})).into_response();
        }
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}
