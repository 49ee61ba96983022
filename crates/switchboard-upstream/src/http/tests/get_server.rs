//! A hand-written Streamable HTTP server with a standalone GET stream (MCP 2025-11-25,
//! basic/transports, Listening for Messages from the Server): every message [`GetServer::push`]
//! gets the next event id `ev-<n>` and goes to every open GET stream of its session; a GET with
//! `Last-Event-ID: ev-<k>` first replays that session's messages after `k` (Resumability and
//! Redelivery). It counts open GET streams, records the `Last-Event-ID` and headers of every GET
//! and the responses POSTed back, answers `tools/call` with a JSON echo, and in `no_get` mode
//! answers every GET with 405.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

/// One GET the server received.
#[derive(Clone, Debug)]
pub(crate) struct Get {
    /// Lower-case header names to values.
    pub headers: HashMap<String, String>,
}

/// The server's state.
pub(crate) struct GetServer {
    no_get: bool,
    counter: AtomicU64,
    sessions: Mutex<HashSet<String>>,
    /// Every pushed message: (session, message), event id `ev-<index + 1>`.
    log: Mutex<Vec<(String, Value)>>,
    live: broadcast::Sender<(u64, String, Value)>,
    open: AtomicUsize,
    gets: Mutex<Vec<Get>>,
    answers: Mutex<Vec<(HashMap<String, String>, Value)>>,
    kick: Mutex<CancellationToken>,
}

impl GetServer {
    /// Pushes `message` on the GET stream of upstream session `session`.
    pub fn push(&self, session: &str, message: Value) {
        let mut log = self.log.lock().unwrap();
        log.push((session.to_owned(), message.clone()));
        let seq = log.len() as u64;
        let _ = self.live.send((seq, session.to_owned(), message));
    }

    /// The upstream sessions minted so far, in order.
    pub fn session(&self, n: u64) -> String {
        format!("g-{n}")
    }

    /// How many GET streams are open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Every GET received.
    pub fn gets(&self) -> Vec<Get> {
        self.gets.lock().unwrap().clone()
    }

    /// The JSON-RPC responses POSTed back, with their headers.
    pub fn answers(&self) -> Vec<(HashMap<String, String>, Value)> {
        self.answers.lock().unwrap().clone()
    }

    /// Closes every open GET stream (the client should reconnect).
    pub fn kick(&self) {
        let old = std::mem::take(&mut *self.kick.lock().unwrap());
        old.cancel();
    }

    /// Forgets every session (GETs and POSTs carrying one get 404).
    pub fn expire_all(&self) {
        self.sessions.lock().unwrap().clear();
    }
}

/// Serves a server; with `no_get` every GET gets 405.
pub(crate) async fn start(stop: &CancellationToken, no_get: bool) -> (Arc<GetServer>, String) {
    let server = Arc::new(GetServer {
        no_get,
        counter: AtomicU64::new(0),
        sessions: Mutex::default(),
        log: Mutex::default(),
        live: broadcast::channel(256).0,
        open: AtomicUsize::new(0),
        gets: Mutex::default(),
        answers: Mutex::default(),
        kick: Mutex::default(),
    });
    let router = axum::Router::new()
        .route("/mcp", axum::routing::any(handle))
        .with_state(server.clone());
    let url = format!("{}/mcp", super::serve(router, stop.clone()).await);
    (server, url)
}

async fn handle(
    State(server): State<Arc<GetServer>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let headers: HashMap<String, String> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let session = headers.get("mcp-session-id").cloned();
    let known = session
        .as_ref()
        .is_some_and(|s| server.sessions.lock().unwrap().contains(s));
    match method {
        Method::GET => {
            server.gets.lock().unwrap().push(Get {
                headers: headers.clone(),
            });
            if server.no_get {
                return StatusCode::METHOD_NOT_ALLOWED.into_response();
            }
            if !known {
                return super::session_not_found();
            }
            let after = headers
                .get("last-event-id")
                .and_then(|id| id.strip_prefix("ev-"))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            listen(&server, session.unwrap_or_default(), after)
        }
        Method::POST => {
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            post(&server, known, headers, body)
        }
        Method::DELETE => StatusCode::OK.into_response(),
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

fn post(
    server: &GetServer,
    known: bool,
    headers: HashMap<String, String>,
    body: Value,
) -> Response {
    let method = body.get("method").and_then(Value::as_str).unwrap_or("");
    if method == "initialize" {
        let sid = server.session(server.counter.fetch_add(1, Ordering::SeqCst));
        server.sessions.lock().unwrap().insert(sid.clone());
        let answer = json!({"jsonrpc": "2.0", "id": body["id"], "result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "get-server", "version": "0.1"}}});
        let mut response = json_response(answer);
        response
            .headers_mut()
            .insert("mcp-session-id", sid.parse().unwrap());
        return response;
    }
    if !known {
        return super::session_not_found();
    }
    if body.get("method").is_none() {
        server.answers.lock().unwrap().push((headers, body));
        return StatusCode::ACCEPTED.into_response();
    }
    if body.get("id").is_none() {
        return StatusCode::ACCEPTED.into_response();
    }
    let text = body["params"]["arguments"]["text"].clone();
    json_response(json!({"jsonrpc": "2.0", "id": body["id"],
        "result": {"content": [{"type": "text", "text": text}]}}))
}

/// A GET stream of `session`: messages after event `after`, then live ones, until the client
/// leaves or [`GetServer::kick`].
fn listen(server: &Arc<GetServer>, session: String, after: u64) -> Response {
    let mut live = server.live.subscribe();
    let backlog: Vec<(u64, Value)> = {
        let log = server.log.lock().unwrap();
        log.iter()
            .enumerate()
            .map(|(i, (s, m))| (i as u64 + 1, s, m))
            .filter(|(seq, s, _)| *seq > after && **s == session)
            .map(|(seq, _, m)| (seq, m.clone()))
            .collect()
    };
    let mut sent = backlog.last().map_or(after, |(seq, _)| *seq);
    let kick = server.kick.lock().unwrap().clone();
    let (tx, rx) = mpsc::channel::<String>(64);
    server.open.fetch_add(1, Ordering::SeqCst);
    let server = server.clone();
    tokio::spawn(async move {
        let _ = tx.send("retry: 100\n\n".to_owned()).await;
        for (seq, m) in backlog {
            let _ = tx.send(event(seq, &m)).await;
        }
        loop {
            tokio::select! {
                () = tx.closed() => break,
                () = kick.cancelled() => break,
                next = live.recv() => match next {
                    Ok((seq, s, m)) if s == session && seq > sent => {
                        sent = seq;
                        if tx.send(event(seq, &m)).await.is_err() {
                            break;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break,
                },
            }
        }
        server.open.fetch_sub(1, Ordering::SeqCst);
    });
    let body = Body::from_stream(ReceiverStream::new(rx).map(Ok::<_, Infallible>));
    ([("content-type", "text/event-stream")], body).into_response()
}

fn event(seq: u64, message: &Value) -> String {
    format!("id: ev-{seq}\ndata: {message}\n\n")
}

fn json_response(body: Value) -> Response {
    ([("content-type", "application/json")], body.to_string()).into_response()
}
