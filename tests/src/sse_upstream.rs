//! A legacy HTTP+SSE MCP server (MCP 2024-11-05, basic/transports, HTTP with SSE), run inside the
//! test process, for the nodes' `kind = "sse"` upstreams: `GET /sse` opens a connection whose
//! first event is `endpoint` (`/messages?sessionId=L-<n>`); a POST there gets 202 and its answer
//! travels as a `message` event on that connection's stream; a POST naming no open connection
//! gets 404. One connection is one upstream session: what it was told by `initialize` lives and
//! dies with it.
//!
//! Tools: `echo {s}` (the text back, with the connection's id in `structuredContent.connection`),
//! `slow {seconds, tag}` (answers `tag` after `seconds`), `add {a, b}`, `whoami` (the `clientInfo`
//! the connection was initialized with). It counts open connections and keeps every `initialize`'s
//! params. Bound to a free port on 127.0.0.1; stopped when dropped.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The running server.
pub struct SseUpstream {
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

#[derive(Default)]
struct Shared {
    next: AtomicU64,
    open: AtomicUsize,
    /// Connection id → its stream's sender and the `clientInfo` it was initialized with.
    connections: Mutex<HashMap<String, Connection>>,
    initializes: Mutex<Vec<Value>>,
}

struct Connection {
    events: mpsc::Sender<String>,
    client_info: Value,
}

impl SseUpstream {
    /// Starts the server on a free loopback port.
    pub async fn start() -> SseUpstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared::default());
        let app = axum::Router::new()
            .route("/sse", axum::routing::get(open))
            .route("/messages", axum::routing::post(receive))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        SseUpstream { addr, shared, task }
    }

    /// The SSE endpoint, `http://127.0.0.1:<port>/sse`.
    pub fn url(&self) -> String {
        format!("http://{}/sse", self.addr)
    }

    /// How many connections (GET streams) are open now.
    pub fn open_connections(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }

    /// The params of every `initialize` received so far, in order.
    pub fn initializes(&self) -> Vec<Value> {
        self.shared.initializes.lock().clone()
    }
}

impl Drop for SseUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How often an open stream gets a comment line, so that a client that went away (its node
/// exited) is noticed by the failed write.
const KEEPALIVE: Duration = Duration::from_millis(200);

/// An open stream: forgets its connection when the client goes away (the body is dropped).
struct Stream {
    id: String,
    events: mpsc::Receiver<String>,
    keepalive: tokio::time::Interval,
    shared: Arc<Shared>,
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.shared.connections.lock().remove(&self.id);
        self.shared.open.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn open(State(shared): State<Arc<Shared>>) -> Response {
    let id = format!("L-{}", shared.next.fetch_add(1, Ordering::SeqCst));
    let (tx, rx) = mpsc::channel(64);
    let connection = Connection {
        events: tx,
        client_info: Value::Null,
    };
    shared.connections.lock().insert(id.clone(), connection);
    shared.open.fetch_add(1, Ordering::SeqCst);
    let endpoint = format!("event: endpoint\ndata: /messages?sessionId={id}\n\n");
    let first = futures::stream::once(async move { Ok::<_, Infallible>(Bytes::from(endpoint)) });
    let stream = Stream {
        id,
        events: rx,
        keepalive: tokio::time::interval(KEEPALIVE),
        shared,
    };
    let rest = futures::stream::unfold(stream, |mut stream| async move {
        let event = tokio::select! {
            event = stream.events.recv() => event?,
            _ = stream.keepalive.tick() => ": keep-alive\n\n".to_owned(),
        };
        Some((Ok::<_, Infallible>(Bytes::from(event)), stream))
    });
    let body = Body::from_stream(futures::StreamExt::chain(first, rest));
    let headers = [
        (header::CONTENT_TYPE, "text/event-stream"),
        (header::CACHE_CONTROL, "no-cache"),
    ];
    (headers, body).into_response()
}

async fn receive(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let id = query.get("sessionId").cloned().unwrap_or_default();
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let Some(events) = shared.connections.lock().get(&id).map(|c| c.events.clone()) else {
        return (StatusCode::NOT_FOUND, "no such connection").into_response();
    };
    if message["method"] == "initialize" {
        let params = message["params"].clone();
        let info = params["clientInfo"].clone();
        if let Some(c) = shared.connections.lock().get_mut(&id) {
            c.client_info = info;
        }
        shared.initializes.lock().push(params);
    }
    let has_id = message.get("id").is_some_and(|i| !i.is_null());
    if has_id && message.get("method").is_some() {
        tokio::spawn(async move {
            let response = answer(&shared, &id, &message).await;
            let event = format!("event: message\ndata: {response}\n\n");
            let _ = events.send(event).await;
        });
    }
    StatusCode::ACCEPTED.into_response()
}

/// The JSON-RPC response to one request on connection `id`.
async fn answer(shared: &Shared, id: &str, request: &Value) -> Value {
    let result = match request["method"].as_str().unwrap_or_default() {
        "initialize" => Ok(json!({
            "protocolVersion": "2024-11-05",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "legacy-fixture", "version": "1"}
        })),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": tools()})),
        "tools/call" => call(shared, id, &request["params"]).await,
        other => Err(json!({"code": -32601, "message": format!("method not found: {other}")})),
    };
    match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": request["id"], "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": request["id"], "error": error}),
    }
}

fn tools() -> Value {
    let schema = |props: Value| json!({"type": "object", "properties": props});
    json!([
        {"name": "echo", "inputSchema": schema(json!({"s": {"type": "string"}}))},
        {"name": "slow", "inputSchema": schema(json!({"seconds": {"type": "number"}, "tag": {"type": "string"}}))},
        {"name": "add", "inputSchema": schema(json!({"a": {"type": "number"}, "b": {"type": "number"}}))},
        {"name": "whoami", "inputSchema": schema(json!({}))},
    ])
}

async fn call(shared: &Shared, id: &str, params: &Value) -> Result<Value, Value> {
    let args = &params["arguments"];
    let text = |t: String| json!({"content": [{"type": "text", "text": t}]});
    match params["name"].as_str().unwrap_or_default() {
        "echo" => {
            let mut result = text(args["s"].as_str().unwrap_or_default().to_owned());
            result["structuredContent"] = json!({"connection": id});
            Ok(result)
        }
        "slow" => {
            let seconds = args["seconds"].as_f64().unwrap_or(0.0).clamp(0.0, 30.0);
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            Ok(text(args["tag"].as_str().unwrap_or_default().to_owned()))
        }
        "add" => {
            let sum = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
            Ok(text(sum.to_string()))
        }
        "whoami" => {
            let info = shared
                .connections
                .lock()
                .get(id)
                .map(|c| c.client_info.clone());
            Ok(text(info.unwrap_or_default().to_string()))
        }
        other => Err(json!({"code": -32602, "message": format!("unknown tool: {other}")})),
    }
}
