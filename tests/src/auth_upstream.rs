//! A small HTTP MCP server, run inside the test process, for the upstream-credential cases
//! (C33): it refuses every request with a fixed 401 or 403, or serves a minimal Streamable HTTP
//! MCP server (`initialize`, `tools/list`, `tools/call` of `echo`) to requests that carry one
//! expected `Authorization`. It records the headers of every request it gets. Bound to a free
//! port on 127.0.0.1; stopped when dropped.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

/// How the server answers.
#[derive(Clone, Debug)]
pub enum Policy {
    /// Every request, on any path and method, gets `status` with these `WWW-Authenticate`
    /// values (one header line each) and `body` (served as `application/json` when it parses as
    /// JSON, else as text).
    Refuse {
        /// 401 or 403 (or any other error status, e.g. 500).
        status: u16,
        /// The `WWW-Authenticate` lines.
        www_authenticate: Vec<String>,
        /// The body.
        body: String,
    },
    /// Requests whose `Authorization` is exactly this value are served; others get 401 with
    /// `WWW-Authenticate: Bearer realm="up"`.
    Require(String),
}

/// The running server.
pub struct AuthUpstream {
    addr: std::net::SocketAddr,
    seen: Arc<Mutex<Vec<HeaderMap>>>,
    task: JoinHandle<()>,
}

#[derive(Clone)]
struct Shared {
    policy: Policy,
    seen: Arc<Mutex<Vec<HeaderMap>>>,
}

impl AuthUpstream {
    /// Starts a server with `policy` on a free loopback port.
    pub async fn start(policy: Policy) -> AuthUpstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            policy,
            seen: seen.clone(),
        };
        let app = axum::Router::new().fallback(answer).with_state(shared);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        AuthUpstream { addr, seen, task }
    }

    /// The URL of `path` on this server (`/mcp`, `/sse`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Its address as an upstream error names it (`data.endpoint`), e.g. `127.0.0.1:40123`.
    pub fn endpoint(&self) -> String {
        self.addr.to_string()
    }

    /// The headers of every request received so far, in order.
    pub fn seen(&self) -> Vec<HeaderMap> {
        self.seen.lock().clone()
    }
}

impl Drop for AuthUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(
    State(shared): State<Shared>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    shared.seen.lock().push(headers.clone());
    match &shared.policy {
        Policy::Refuse {
            status,
            www_authenticate,
            body,
        } => refusal(*status, www_authenticate, body),
        Policy::Require(expected) => {
            let given = headers.get("authorization").map(HeaderValue::as_bytes);
            if given != Some(expected.as_bytes()) {
                let challenge = vec![r#"Bearer realm="up""#.to_owned()];
                return refusal(401, &challenge, "");
            }
            serve(&method, &body)
        }
    }
}

fn refusal(status: u16, www_authenticate: &[String], body: &str) -> Response {
    let status = StatusCode::from_u16(status).expect("a valid status");
    let mut resp = if serde_json::from_str::<Value>(body).is_ok() {
        let json = HeaderValue::from_static("application/json");
        (
            status,
            [(axum::http::header::CONTENT_TYPE, json)],
            body.to_owned(),
        )
            .into_response()
    } else {
        (status, body.to_owned()).into_response()
    };
    let name = HeaderName::from_static("www-authenticate");
    for value in www_authenticate {
        let value = HeaderValue::from_str(value).expect("a valid header value");
        resp.headers_mut().append(name.clone(), value);
    }
    resp
}

/// A minimal session-less Streamable HTTP MCP server: JSON answers, no GET stream.
fn serve(method: &Method, body: &[u8]) -> Response {
    if method == Method::GET {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    if method == Method::DELETE {
        return StatusCode::OK.into_response();
    }
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
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
            "serverInfo": {"name": "auth-upstream", "version": "0"},
        }),
        "tools/list" => json!({"tools": [{
            "name": "echo",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }]}),
        "tools/call" => json!({"content": [{
            "type": "text",
            "text": params["arguments"]["text"].as_str().unwrap_or_default(),
        }]}),
        other => {
            let error = json!({"code": -32601, "message": format!("method not found: {other}")});
            return axum::Json(json!({"jsonrpc": "2.0", "id": id, "error": error})).into_response();
        }
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}
