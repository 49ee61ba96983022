//! `counter`: a small stateful Streamable HTTP MCP server (MCP 2025-11-25, basic/transports) for
//! the replica tests. Each replica keeps its own state per upstream session and shares nothing:
//! exactly what a session split over two replicas loses.
//!
//! - `initialize` mints `Mcp-Session-Id` `"<label>-g<generation>-<n>"`; a request with an unknown
//!   session id gets 404 (a JSON-RPC error body), one without a session id 400.
//! - tools: `increment` adds one to the session's count, `get` reads it; both answer the count as
//!   text and as `structuredContent` `{"count": n, "replica": "<label>"}`.
//! - GET opens the session's standalone stream; [`Replica::notify`] sends a notification on every
//!   open one. DELETE ends a session.
//! - knobs set at run time through [`Replica::state`] (a restarted replica starts with none):
//!   cookies on every POST answer ([`CounterState::set_cookies`]), a tool `slow` that answers
//!   only once released ([`CounterState::release_slow`]), forgetting every session while calls in flight
//!   still answer ([`CounterState::forget_sessions`]), a delayed GET answer
//!   ([`CounterState::set_get_delay`]), a stateless mode minting no session id
//!   ([`CounterState::set_stateless`]) and plain-text 404s as an ingress in front of it answers
//!   them ([`CounterState::plain_404_next`]).
//!
//! A replica runs on its own thread with its own tokio runtime, bound to a real loopback
//! address. [`Replica::stop`] drops that runtime, so every connection closes at once (as when a
//! process is killed); [`Replica::start_again`] starts a fresh replica (no sessions) on the same
//! address, as a restarted process.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// One HTTP request a replica received.
#[derive(Clone, Debug)]
pub struct Seen {
    /// `POST`, `GET` or `DELETE`.
    pub http: String,
    /// The JSON-RPC method (`""` without one).
    pub method: String,
    /// The `Mcp-Session-Id` it carried.
    pub session: Option<String>,
    /// The `Cookie` header it carried.
    pub cookie: Option<String>,
    /// What the replica answered.
    pub status: u16,
}

/// The state of one running replica.
#[derive(Default)]
pub struct CounterState {
    label: String,
    generation: u64,
    counts: Mutex<HashMap<String, u64>>,
    next: AtomicU64,
    streams: Mutex<Vec<(String, mpsc::Sender<String>)>>,
    opened: Mutex<Vec<(String, Instant)>>,
    seen: Mutex<Vec<Seen>>,
    knobs: Knobs,
}

/// What [`CounterState`]'s knobs are set to.
#[derive(Default)]
struct Knobs {
    /// `(count, bytes, rotate)` of the cookies set on every POST answer.
    cookies: Mutex<Option<(usize, usize, bool)>>,
    cookie_serial: AtomicU64,
    /// Calls of `slow` wait for this.
    release: tokio::sync::Notify,
    released: std::sync::atomic::AtomicBool,
    slow_waiting: AtomicU64,
    get_delay: Mutex<Duration>,
    stateless: std::sync::atomic::AtomicBool,
    plain_404: AtomicU64,
}

impl CounterState {
    /// Every request received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The sessions this replica minted that are still alive, with their counts.
    pub fn counts(&self) -> HashMap<String, u64> {
        self.counts.lock().unwrap().clone()
    }

    /// Each GET stream opened so far: its session and when.
    pub fn streams_opened(&self) -> Vec<(String, Instant)> {
        self.opened.lock().unwrap().clone()
    }

    /// How many GET streams are open now.
    pub fn open_streams(&self) -> usize {
        let mut streams = self.streams.lock().unwrap();
        streams.retain(|(_, tx)| !tx.is_closed());
        streams.len()
    }

    /// Every answer to a POST sets `count` cookies `c0`, `c1`, … whose values are `bytes` long;
    /// with `rotate`, every answer sets new values (so every answer changes the session's jar).
    pub fn set_cookies(&self, count: usize, bytes: usize, rotate: bool) {
        *self.knobs.cookies.lock().unwrap() = Some((count, bytes, rotate));
    }

    /// How many `slow` calls are waiting now.
    pub fn slow_waiting(&self) -> u64 {
        self.knobs.slow_waiting.load(Ordering::SeqCst)
    }

    /// Lets every waiting (and later) call of the tool `slow` answer `"slept"`; until then it
    /// waits.
    pub fn release_slow(&self) {
        self.knobs.released.store(true, Ordering::SeqCst);
        self.knobs.release.notify_waiters();
    }

    /// Forgets every session (later requests in them get 404); calls in flight still answer.
    pub fn forget_sessions(&self) {
        self.counts.lock().unwrap().clear();
    }

    /// Every GET is answered only after `delay`.
    pub fn set_get_delay(&self, delay: Duration) {
        *self.knobs.get_delay.lock().unwrap() = delay;
    }

    /// Stateless: `initialize` mints no `Mcp-Session-Id` and requests without one are served
    /// (one count per replica); GET answers 405.
    pub fn set_stateless(&self, stateless: bool) {
        self.knobs.stateless.store(stateless, Ordering::SeqCst);
        if stateless {
            self.counts
                .lock()
                .unwrap()
                .entry(String::new())
                .or_insert(0);
        }
    }

    /// The next `n` POSTs carrying a session id are answered `404 page not found` as plain text
    /// (what an ingress answers while it has no route), without reaching the server.
    pub fn plain_404_next(&self, n: u64) {
        self.knobs.plain_404.store(n, Ordering::SeqCst);
    }

    /// Whether this POST gets a plain-text 404 (and counts it).
    fn takes_plain_404(&self, method: &Method, session: Option<&str>) -> bool {
        if *method != Method::POST || session.is_none() {
            return false;
        }
        let left = &self.knobs.plain_404;
        left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Waits while `slow` calls are held.
    async fn slow(&self) {
        self.knobs.slow_waiting.fetch_add(1, Ordering::SeqCst);
        loop {
            let released = self.knobs.release.notified();
            if self.knobs.released.load(Ordering::SeqCst) {
                break;
            }
            released.await;
        }
        self.knobs.slow_waiting.fetch_sub(1, Ordering::SeqCst);
    }

    /// Adds the configured cookies to a POST answer.
    fn add_cookies(&self, response: &mut Response) {
        let Some((count, bytes, rotate)) = *self.knobs.cookies.lock().unwrap() else {
            return;
        };
        let serial = if rotate {
            self.knobs.cookie_serial.fetch_add(1, Ordering::SeqCst)
        } else {
            0
        };
        for i in 0..count {
            let value = format!("{}{serial:x}{i:x}", self.label);
            let value = format!("{value:x<bytes$}");
            let cookie = format!("c{i}={value}; Path=/");
            if let Ok(v) = cookie.parse() {
                response.headers_mut().append("set-cookie", v);
            }
        }
    }
}

/// A running (or stopped) replica.
pub struct Replica {
    addr: SocketAddr,
    label: String,
    generation: u64,
    state: Arc<CounterState>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Replica {
    /// Starts a replica called `label` on `addr` (a loopback address; port 0 picks a free one).
    /// Panics when the address cannot be bound.
    pub fn start(addr: SocketAddr, label: &str) -> Replica {
        Replica::try_start(addr, label, 0).unwrap_or_else(|e| panic!("counter on {addr}: {e}"))
    }

    /// [`Replica::start`], with the bind error instead of a panic.
    pub fn try_start(addr: SocketAddr, label: &str, generation: u64) -> Result<Replica, String> {
        let state = Arc::new(CounterState {
            label: label.to_owned(),
            generation,
            ..CounterState::default()
        });
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let served = state.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("counter runtime");
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::bind(addr).await {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let bound = listener.local_addr().map_err(|e| e.to_string());
                let _ = ready_tx.send(bound);
                let router = axum::Router::new()
                    .route("/mcp", axum::routing::any(handle))
                    .with_state(served);
                tokio::select! {
                    _ = axum::serve(listener, router) => {}
                    _ = stop_rx => {}
                }
            });
            // Dropping the runtime drops every connection task: their sockets close at once.
            drop(runtime);
        });
        let ready = ready_rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|e| format!("no start signal: {e}"))?;
        let addr = ready?;
        Ok(Replica {
            addr,
            label: label.to_owned(),
            generation,
            state,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Its label (the `replica` of its answers).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The state of the current run.
    pub fn state(&self) -> Arc<CounterState> {
        self.state.clone()
    }

    /// Sends `message` on every open GET stream; returns on how many.
    pub fn notify(&self, message: &Value) -> usize {
        let event = format!("data: {message}\n\n");
        let streams = self.state.streams.lock().unwrap();
        streams
            .iter()
            .filter(|(_, tx)| tx.try_send(event.clone()).is_ok())
            .count()
    }

    /// Stops it: the listener and every connection close at once; its sessions are gone.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    /// Stops it (if running) and starts a fresh one on the same address: no session survives.
    pub fn start_again(&mut self) {
        self.stop();
        let generation = self.generation + 1;
        let mut last = String::new();
        for _ in 0..100 {
            match Replica::try_start(self.addr, &self.label, generation) {
                Ok(fresh) => {
                    // The old value (stopped already) drops here.
                    *self = fresh;
                    return;
                }
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("counter could not bind {} again: {last}", self.addr);
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Binds `n` replicas on `127.0.0.(first)`, `127.0.0.(first+1)`, … with one port free on all of
/// them, labelled `r0`, `r1`, …
pub fn replicas_on_one_port(first: u8, n: u8) -> Vec<Replica> {
    for _attempt in 0..20 {
        let probe = std::net::TcpListener::bind((std::net::Ipv4Addr::new(127, 0, 0, first), 0))
            .expect("bind a loopback port");
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        let mut out = Vec::new();
        for i in 0..n {
            let addr = SocketAddr::from(([127, 0, 0, first + i], port));
            match Replica::try_start(addr, &format!("r{i}"), 0) {
                Ok(r) => out.push(r),
                Err(_) => break,
            }
        }
        if out.len() == n as usize {
            return out;
        }
    }
    panic!(
        "no port free on 127.0.0.{first}..{} for {n} replicas",
        first + n - 1
    );
}

async fn handle(
    State(state): State<Arc<CounterState>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let rpc = body
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let session = header("mcp-session-id");
    let response = if state.takes_plain_404(&method, session.as_deref()) {
        (
            StatusCode::NOT_FOUND,
            [("content-type", "text/plain; charset=utf-8")],
            "404 page not found\n",
        )
            .into_response()
    } else {
        let mut response = answer(&state, &method, &rpc, session.as_deref(), &body).await;
        if method == Method::POST {
            state.add_cookies(&mut response);
        }
        response
    };
    state.seen.lock().unwrap().push(Seen {
        http: method.to_string(),
        method: rpc,
        session,
        cookie: header("cookie"),
        status: response.status().as_u16(),
    });
    response
}

async fn answer(
    state: &Arc<CounterState>,
    method: &Method,
    rpc: &str,
    session: Option<&str>,
    body: &Value,
) -> Response {
    if *method == Method::POST && rpc == "initialize" {
        return initialize(state, body);
    }
    let stateless = state.knobs.stateless.load(Ordering::SeqCst);
    let sid = match session {
        Some(sid) => sid,
        None if stateless => "",
        None => return error(StatusCode::BAD_REQUEST, "missing Mcp-Session-Id"),
    };
    if !state.counts.lock().unwrap().contains_key(sid) {
        return error(StatusCode::NOT_FOUND, "Session not found");
    }
    match *method {
        Method::GET if stateless => StatusCode::METHOD_NOT_ALLOWED.into_response(),
        Method::GET => {
            let delay = *state.knobs.get_delay.lock().unwrap();
            tokio::time::sleep(delay).await;
            open_stream(state, sid)
        }
        Method::DELETE => {
            state.counts.lock().unwrap().remove(sid);
            StatusCode::OK.into_response()
        }
        Method::POST if body.get("id").is_none() => StatusCode::ACCEPTED.into_response(),
        Method::POST if body["params"]["name"] == "slow" => {
            state.slow().await;
            let result = json!({"content": [{"type": "text", "text": "slept"}]});
            json_response(json!({"jsonrpc": "2.0", "id": body["id"], "result": result}))
        }
        Method::POST => json_response(call(state, sid, rpc, body)),
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

fn initialize(state: &CounterState, body: &Value) -> Response {
    let stateless = state.knobs.stateless.load(Ordering::SeqCst);
    let n = state.next.fetch_add(1, Ordering::SeqCst);
    let sid = format!("{}-g{}-{n}", state.label, state.generation);
    if !stateless {
        state.counts.lock().unwrap().insert(sid.clone(), 0);
    }
    let asked = body["params"]["protocolVersion"].as_str().unwrap_or("");
    let revision = if ["2025-03-26", "2025-06-18", "2025-11-25"].contains(&asked) {
        asked
    } else {
        "2025-11-25"
    };
    let result = json!({"protocolVersion": revision,
        "capabilities": {"tools": {}, "logging": {}},
        "serverInfo": {"name": "counter", "version": "1"}});
    let mut response = json_response(json!({"jsonrpc": "2.0", "id": body["id"], "result": result}));
    if !stateless {
        response
            .headers_mut()
            .insert("mcp-session-id", sid.parse().unwrap());
    }
    response
}

fn call(state: &CounterState, sid: &str, rpc: &str, body: &Value) -> Value {
    let id = &body["id"];
    let result = match rpc {
        "tools/list" => json!({"tools": [
            {"name": "increment", "inputSchema": {"type": "object"}},
            {"name": "get", "inputSchema": {"type": "object"}}]}),
        "tools/call" => {
            let mut counts = state.counts.lock().unwrap();
            let count = counts.entry(sid.to_owned()).or_default();
            match body["params"]["name"].as_str() {
                Some("increment") => *count += 1,
                Some("get") => {}
                other => {
                    return json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32602, "message": format!("unknown tool {other:?}")}})
                }
            }
            json!({"content": [{"type": "text", "text": count.to_string()}],
                "structuredContent": {"count": *count, "replica": state.label}})
        }
        _ => json!({}),
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn open_stream(state: &CounterState, sid: &str) -> Response {
    let (tx, rx) = mpsc::channel::<String>(64);
    let _ = tx.try_send(": open\n\n".to_owned());
    state.streams.lock().unwrap().push((sid.to_owned(), tx));
    state
        .opened
        .lock()
        .unwrap()
        .push((sid.to_owned(), Instant::now()));
    let body = Body::from_stream(tokio_stream_of(rx).map(Ok::<_, Infallible>));
    ([("content-type", "text/event-stream")], body).into_response()
}

/// The receiver as a stream of SSE chunks.
fn tokio_stream_of(rx: mpsc::Receiver<String>) -> impl futures::Stream<Item = String> {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|s| (s, rx)) })
}

fn error(status: StatusCode, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null,
        "error": {"code": -32001, "message": message}});
    (
        status,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn json_response(body: Value) -> Response {
    ([("content-type", "application/json")], body.to_string()).into_response()
}
