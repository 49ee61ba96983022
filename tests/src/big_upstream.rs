//! A Streamable HTTP MCP upstream, run inside the test process, whose `big` tool answers with a
//! result of any size (issue 16, "Memory"): the body is written in 64 KiB chunks as the node reads
//! it, never built in memory, as one JSON body (`{"bytes": n}`) or as one SSE event
//! (`{"bytes": n, "sse": true}`), after `delay_ms` (default 0). It counts the bytes it handed to the socket, so a test can tell
//! the node stopped reading. Bound to a free port on 127.0.0.1; stopped when dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

/// Size of each chunk of the big answer.
const CHUNK: usize = 64 * 1024;

/// The running server.
pub struct BigUpstream {
    addr: std::net::SocketAddr,
    written: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl BigUpstream {
    /// Starts the server on a free loopback port.
    pub async fn start() -> BigUpstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let written = Arc::new(AtomicU64::new(0));
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(written.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        BigUpstream {
            addr,
            written,
            task,
        }
    }

    /// The URL of its MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Bytes of big answers taken by the server's connections so far (handed to hyper to write;
    /// at most one chunk ahead of the socket).
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

impl Drop for BigUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(State(written): State<Arc<AtomicU64>>, method: Method, body: Bytes) -> Response {
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
    let params = &message["params"];
    let result = match message["method"].as_str().unwrap_or_default() {
        "initialize" => json!({
            "protocolVersion": params["protocolVersion"].as_str().unwrap_or("2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "big-upstream", "version": "0"},
        }),
        "tools/list" => json!({"tools": [{
            "name": "big",
            "inputSchema": {"type": "object", "properties": {
                "bytes": {"type": "integer"}, "sse": {"type": "boolean"},
                "delay_ms": {"type": "integer"}}},
        }]}),
        "tools/call" => {
            let bytes = params["arguments"]["bytes"].as_u64().unwrap_or(0);
            let sse = params["arguments"]["sse"].as_bool().unwrap_or(false);
            let delay = params["arguments"]["delay_ms"].as_u64().unwrap_or(0);
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
            return big(id, bytes, sse, written);
        }
        other => {
            let error = json!({"code": -32601, "message": format!("method not found: {other}")});
            return axum::Json(json!({"jsonrpc": "2.0", "id": id, "error": error})).into_response();
        }
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

/// A `tools/call` answer whose text is `bytes` × `x`, streamed.
fn big(id: &Value, bytes: u64, sse: bool, written: Arc<AtomicU64>) -> Response {
    let head =
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":""#);
    let tail = r#""}]}}"#.to_owned();
    let (head, tail, kind) = if sse {
        (
            format!("event: message\ndata: {head}"),
            format!("{tail}\n\n"),
            "text/event-stream",
        )
    } else {
        (head, tail, "application/json")
    };
    let chunk = Bytes::from(vec![b'x'; CHUNK]);
    let full = bytes / CHUNK as u64;
    let rest = usize::try_from(bytes % CHUNK as u64).expect("a chunk fits usize");
    let body = futures::stream::iter(
        std::iter::once(Bytes::from(head))
            .chain(std::iter::repeat_n(
                chunk.clone(),
                usize::try_from(full).unwrap_or(usize::MAX),
            ))
            .chain(std::iter::once(chunk.slice(..rest)))
            .chain(std::iter::once(Bytes::from(tail))),
    )
    .map(move |b| {
        written.fetch_add(b.len() as u64, Ordering::Relaxed);
        Ok::<_, std::convert::Infallible>(b)
    });
    ([(header::CONTENT_TYPE, kind)], Body::from_stream(body)).into_response()
}
