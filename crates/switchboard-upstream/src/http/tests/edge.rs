//! A tiny hand-written Streamable HTTP server for edge cases. It negotiates 2025-06-18 whatever
//! the client asks (to check which revision we send afterwards), sets the cookie `SRV=e1` on
//! `initialize` (as a balancer with cookie affinity would), records every HTTP request, and
//! answers `tools/call` by tool name:
//! - `echo`: a JSON answer whose text is `arguments.text` and whose `structuredContent.id` is
//!   the JSON-RPC id it received;
//! - `sse_echo`: an SSE answer (priming event, a progress notification, the result);
//! - `hang`: an SSE answer that never ends;
//! - `ask`: sends `sampling/createMessage` with id `"up-7"` on the stream and answers with the
//!   JSON response the client POSTed back;
//! - `break`: an event with id `e-1` and `retry: 50`, then the connection closes; a GET with
//!   `Last-Event-ID: e-1` delivers the result.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

/// One HTTP request the server received.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    /// `POST`, `GET` or `DELETE`.
    pub http: String,
    /// The JSON-RPC method, `"response"` for a response, `""` without a body.
    pub method: String,
    /// Lower-case header names to values.
    pub headers: HashMap<String, String>,
    /// The body (null when empty).
    pub body: Value,
}

/// The server's state.
#[derive(Default)]
pub(crate) struct Edge {
    log: Mutex<Vec<Seen>>,
    sessions: Mutex<HashSet<String>>,
    counter: AtomicU64,
    stateless: bool,
    forgetful: AtomicBool,
    answers_400: AtomicBool,
    answers: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    held: Mutex<Vec<mpsc::Sender<String>>>,
    broken: Mutex<Option<Value>>,
}

impl Edge {
    /// Every request received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }

    /// The requests received with this JSON-RPC method.
    pub fn seen_method(&self, method: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.method == method)
            .collect()
    }

    /// Forgets every session (as after a restart): requests carrying one get 404.
    pub fn expire_all(&self) {
        self.sessions.lock().unwrap().clear();
    }

    /// Answer an unknown session with 400 and the TypeScript SDK's JSON-RPC error body instead of
    /// the spec's 404.
    pub fn unknown_session_is_400(&self) {
        self.answers_400.store(true, Ordering::SeqCst);
    }

    /// From now on, forget each session right after `initialize` (every request gets 404).
    pub fn forget_always(&self) {
        self.forgetful.store(true, Ordering::SeqCst);
    }
}

/// Serves an edge server; `stateless` servers mint no session id.
pub(crate) async fn start(stop: &CancellationToken, stateless: bool) -> (Arc<Edge>, String) {
    let edge = Arc::new(Edge {
        stateless,
        ..Edge::default()
    });
    let router = axum::Router::new()
        .route("/mcp", axum::routing::any(handle))
        .with_state(edge.clone());
    let url = format!("{}/mcp", super::serve(router, stop.clone()).await);
    (edge, url)
}

async fn handle(
    State(edge): State<Arc<Edge>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let rpc = match body.get("method").and_then(Value::as_str) {
        Some(m) => m.to_owned(),
        None if body.is_null() => String::new(),
        None => "response".to_owned(),
    };
    let headers: HashMap<String, String> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    edge.log.lock().unwrap().push(Seen {
        http: method.to_string(),
        method: rpc.clone(),
        headers: headers.clone(),
        body: body.clone(),
    });
    let session = headers.get("mcp-session-id").cloned();
    match method {
        Method::DELETE => {
            let known = session.is_some_and(|s| edge.sessions.lock().unwrap().remove(&s));
            if known {
                StatusCode::OK
            } else {
                StatusCode::NOT_FOUND
            }
            .into_response()
        }
        Method::GET => match headers.get("last-event-id").map(String::as_str) {
            Some("e-1") => {
                let id = edge.broken.lock().unwrap().clone().unwrap_or_default();
                let done = result(
                    &id,
                    json!({"content": [{"type": "text", "text": "resumed"}]}),
                );
                sse(vec![event(Some("e-2"), &done)])
            }
            _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
        },
        Method::POST => post(&edge, &rpc, session, body).await,
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

async fn post(edge: &Arc<Edge>, rpc: &str, session: Option<String>, body: Value) -> Response {
    if rpc == "initialize" {
        return initialize(edge, &body);
    }
    if !edge.stateless {
        let Some(sid) = session else {
            return StatusCode::BAD_REQUEST.into_response();
        };
        let mut sessions = edge.sessions.lock().unwrap();
        let forget = edge.forgetful.load(Ordering::SeqCst) && rpc != "notifications/initialized";
        if !sessions.contains(&sid) || (forget && sessions.remove(&sid)) {
            if edge.answers_400.load(Ordering::SeqCst) {
                let body = serde_json::json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"}});
                return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
            }
            return super::session_not_found();
        }
    }
    if rpc == "response" {
        let id = body["id"].as_str().unwrap_or_default().to_owned();
        if let Some(tx) = edge.answers.lock().unwrap().remove(&id) {
            let _ = tx.send(body);
        }
        return StatusCode::ACCEPTED.into_response();
    }
    if body.get("id").is_none() {
        return StatusCode::ACCEPTED.into_response();
    }
    let id = body["id"].clone();
    match rpc {
        "tools/call" => tool(edge, &id, &body["params"]),
        _ => json_response(result(&id, json!({"tools": []}))),
    }
}

fn initialize(edge: &Edge, body: &Value) -> Response {
    let answer = result(
        &body["id"],
        json!({"protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}, "logging": {}},
            "serverInfo": {"name": "edge", "version": "0.1"}}),
    );
    let mut response = json_response(answer);
    // As a balancer with cookie affinity would (HAProxy `cookie SRV insert`).
    response
        .headers_mut()
        .insert("set-cookie", "SRV=e1; path=/; HttpOnly".parse().unwrap());
    if !edge.stateless {
        let sid = format!("edge-{}", edge.counter.fetch_add(1, Ordering::SeqCst));
        edge.sessions.lock().unwrap().insert(sid.clone());
        response
            .headers_mut()
            .insert("mcp-session-id", sid.parse().unwrap());
    }
    response
}

fn tool(edge: &Arc<Edge>, id: &Value, params: &Value) -> Response {
    let args = &params["arguments"];
    match params["name"].as_str().unwrap_or_default() {
        "echo" => json_response(result(
            id,
            json!({"content": [{"type": "text", "text": args["text"]}], "structuredContent": {"id": id}}),
        )),
        "sse_echo" => {
            let token = params
                .pointer("/_meta/progressToken")
                .cloned()
                .unwrap_or(Value::Null);
            let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1, "total": 1}});
            let done = result(
                id,
                json!({"content": [{"type": "text", "text": args["text"]}]}),
            );
            sse(vec![
                "id: p-0\ndata:\n\n".to_owned(),
                event(None, &progress),
                event(None, &done),
            ])
        }
        "hang" => {
            let (tx, rx) = mpsc::channel(4);
            edge.held.lock().unwrap().push(tx);
            stream(rx)
        }
        "ask" => ask(edge, id.clone()),
        "break" => {
            *edge.broken.lock().unwrap() = Some(id.clone());
            let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "b", "progress": 1}});
            sse(vec![
                "retry: 50\n\n".to_owned(),
                event(Some("e-1"), &progress),
            ])
        }
        other => json_response(json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32602, "message": format!("unknown tool {other}")}})),
    }
}

/// Sends a sampling request on the stream and finishes with the client's answer.
fn ask(edge: &Arc<Edge>, id: Value) -> Response {
    let (tx, rx) = mpsc::channel(4);
    let (answer_tx, answer_rx) = oneshot::channel();
    edge.answers
        .lock()
        .unwrap()
        .insert("up-7".to_owned(), answer_tx);
    let request = json!({"jsonrpc": "2.0", "id": "up-7", "method": "sampling/createMessage",
        "params": {"messages": [], "maxTokens": 5}});
    tokio::spawn(async move {
        let _ = tx.send(event(None, &request)).await;
        if let Ok(answer) = answer_rx.await {
            let text = answer.to_string();
            let done = result(&id, json!({"content": [{"type": "text", "text": text}]}));
            let _ = tx.send(event(None, &done)).await;
        }
    });
    stream(rx)
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn event(id: Option<&str>, message: &Value) -> String {
    match id {
        Some(id) => format!("id: {id}\ndata: {message}\n\n"),
        None => format!("data: {message}\n\n"),
    }
}

fn json_response(body: Value) -> Response {
    ([("content-type", "application/json")], body.to_string()).into_response()
}

fn sse(events: Vec<String>) -> Response {
    let (tx, rx) = mpsc::channel(events.len().max(1));
    for e in events {
        tx.try_send(e).unwrap();
    }
    stream(rx)
}

fn stream(rx: mpsc::Receiver<String>) -> Response {
    let body = Body::from_stream(ReceiverStream::new(rx).map(Ok::<_, Infallible>));
    ([("content-type", "text/event-stream")], body).into_response()
}
