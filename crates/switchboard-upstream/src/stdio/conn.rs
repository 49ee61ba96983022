//! [`Conn`]: the JSON-RPC connection to one running child: our requests in flight, the child's
//! requests being answered by a client, and the client peers that receive the child's
//! notifications.
//!
//! Our request ids are a per-child counter (`1`, `2`, …). The client's id never reaches the
//! child, so two sessions, or two requests of one session that reuse an id, never receive each
//! other's answers (case C22); in shared mode the counter is what makes ids unique across the
//! sessions using the child (case C03).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use switchboard_protocol::codes;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::attached::Attached;
use super::stderr::Tail;
use crate::upstream::{ClientPeer, RpcError};
use switchboard_telemetry::trace::logged_session;

/// How many messages may wait for the child to read its stdin.
const OUTBOX: usize = 64;

/// A client request being carried to the child.
#[derive(Clone)]
pub(crate) struct Call {
    /// The way back to the client that sent it.
    pub(crate) peer: Arc<dyn ClientPeer>,
    /// The client session it belongs to.
    pub(crate) session: String,
    /// `params._meta.progressToken` as the client sent it.
    pub(crate) client_token: Option<Value>,
    /// The progress token the child sees (the client's, or in shared mode one of ours).
    pub(crate) child_token: Option<Value>,
}

/// One of our requests waiting for the child's answer.
struct Pending {
    tx: oneshot::Sender<Result<Value, RpcError>>,
    /// `None` for our own requests (`initialize`).
    call: Option<Call>,
}

#[derive(Default)]
struct State {
    /// Why the child is gone, once it is.
    closed: Option<RpcError>,
    /// Our requests in flight, by our id.
    pending: HashMap<u64, Pending>,
    /// The child's requests being answered by a client, by the child's id (`RequestId::key`).
    server_requests: HashMap<String, CancellationToken>,
}

/// Names and signals of one child's connection, shared by its tasks.
pub(crate) struct Conn {
    /// The upstream's configured name.
    pub(crate) upstream: Arc<str>,
    /// The client session the child serves, or `shared` / `probe`.
    pub(crate) label: String,
    /// The child's process id.
    pub(crate) pid: Option<u32>,
    /// When it was started.
    pub(crate) started_at: std::time::SystemTime,
    /// When it was started, for measuring how long it ran.
    pub(crate) started: Instant,
    /// Set when we stopped it for reasons of ours (session ended, shutdown), as opposed to it
    /// exiting on its own or being stopped for a fault of its own (a stdout line over the
    /// limit).
    pub(crate) stopped_by_us: AtomicBool,
    /// Set when it was stopped for a stdout line over `max_line_bytes`: a fault of one message
    /// (a large result), which after the handshake fails the calls in flight but is no failed
    /// start (see `restarts`).
    pub(crate) overflowed: AtomicBool,
    /// One child for all sessions: rewrite progress tokens, drop unattributable notifications.
    pub(crate) shared: bool,
    outbox: mpsc::Sender<Map<String, Value>>,
    state: Mutex<State>,
    next_id: AtomicU64,
    /// Set once `notifications/initialized` is queued.
    ready: AtomicBool,
    /// Fired when the child is gone and every call has been failed.
    pub(crate) gone: CancellationToken,
    /// Asks the supervisor to stop the child (close stdin, SIGTERM, SIGKILL).
    pub(crate) stop: CancellationToken,
    /// Asks the writer to close the child's stdin.
    pub(crate) close_stdin: CancellationToken,
    /// Fired when the stdout reader has finished.
    pub(crate) stdout_done: CancellationToken,
    /// The last client peer of the session (per-session mode), for standalone notifications.
    session_peer: Mutex<Option<Arc<dyn ClientPeer>>>,
    /// The sessions attached to the upstream's shared child (used in shared mode).
    pub(crate) attached: Arc<Attached>,
    /// The child's last stderr lines.
    pub(crate) stderr_tail: Tail,
}

impl Conn {
    /// A connection and the receiving end of its outbox (for the stdin writer).
    pub(crate) fn new(
        upstream: Arc<str>,
        label: String,
        pid: Option<u32>,
        shared: bool,
        attached: Arc<Attached>,
    ) -> (Arc<Conn>, mpsc::Receiver<Map<String, Value>>) {
        let (outbox, rx) = mpsc::channel(OUTBOX);
        let conn = Conn {
            upstream,
            label,
            pid,
            started_at: std::time::SystemTime::now(),
            started: Instant::now(),
            stopped_by_us: AtomicBool::new(false),
            overflowed: AtomicBool::new(false),
            shared,
            outbox,
            state: Mutex::default(),
            next_id: AtomicU64::new(1),
            ready: AtomicBool::new(false),
            gone: CancellationToken::new(),
            stop: CancellationToken::new(),
            close_stdin: CancellationToken::new(),
            stdout_done: CancellationToken::new(),
            session_peer: Mutex::new(None),
            attached,
            stderr_tail: Tail::default(),
        };
        (Arc::new(conn), rx)
    }

    /// Whether the child is still usable.
    pub(crate) fn alive(&self) -> bool {
        !self.gone.is_cancelled() && self.state.lock().closed.is_none()
    }

    /// Whether the handshake is complete (`notifications/initialized` sent).
    pub(crate) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Sends `notifications/initialized` and marks the child ready for requests.
    pub(crate) async fn finish_handshake(&self) -> Result<(), RpcError> {
        self.send(notification("notifications/initialized", Value::Null))
            .await?;
        self.ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Why the child is gone (or a generic error when it is not known yet).
    pub(crate) fn failure(&self) -> RpcError {
        self.state
            .lock()
            .closed
            .clone()
            .unwrap_or_else(|| unavailable(format!("upstream `{}` is not running", self.upstream)))
    }

    /// Queues one message for the child's stdin.
    pub(crate) async fn send(&self, message: Map<String, Value>) -> Result<(), RpcError> {
        self.outbox.send(message).await.map_err(|_| self.failure())
    }

    /// Queues one message without waiting (a cancellation notice); dropped when the child is gone.
    pub(crate) fn send_later(&self, message: Map<String, Value>) {
        let outbox = self.outbox.clone();
        tokio::spawn(async move {
            let _ = outbox.send(message).await;
        });
    }

    /// Remembers the client peer of the latest request of the session (per-session mode).
    pub(crate) fn set_session_peer(&self, peer: Arc<dyn ClientPeer>) {
        *self.session_peer.lock() = Some(peer);
    }

    /// The client peer of the latest request of the session, if any.
    pub(crate) fn session_peer(&self) -> Option<Arc<dyn ClientPeer>> {
        self.session_peer.lock().clone()
    }

    /// Passes a notification of the child to the client through `peer`: on the stream of the
    /// call the peer belongs to, or on the session's standalone stream. Not delivered (the
    /// stream is gone) is logged only.
    pub(crate) async fn deliver(
        &self,
        peer: &Arc<dyn ClientPeer>,
        message: Value,
        standalone: bool,
    ) {
        let sent = if standalone {
            peer.notify_standalone(message).await
        } else {
            peer.notify(message).await
        };
        if let Err(e) = sent {
            tracing::debug!(upstream = %self.upstream, session = %logged_session(&self.label), error = %e, "notification not delivered");
        }
    }

    /// Sends `method` to the child and waits for its answer, until `deadline` or `cancel`.
    ///
    /// `call` is the client request this carries (`None` for our own `initialize`). On cancel or
    /// timeout the child is sent `notifications/cancelled` with our id (MCP 2025-11-25,
    /// basic/utilities/cancellation), except for `initialize`, which must not be cancelled.
    pub(crate) async fn request(
        &self,
        method: &str,
        params: Value,
        call: Option<Call>,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let notify_on_abandon = call.is_some();
        let (tx, rx) = oneshot::channel();
        let (params, call) = self.rewrite_token(id, params, call);
        {
            let mut state = self.state.lock();
            if let Some(e) = &state.closed {
                return Err(e.clone());
            }
            state.pending.insert(id, Pending { tx, call });
        }
        let mut message = Map::new();
        message.insert("jsonrpc".into(), "2.0".into());
        message.insert("id".into(), id.into());
        message.insert("method".into(), method.into());
        if !params.is_null() {
            message.insert("params".into(), params);
        }
        let exchange = async {
            self.send(message).await?;
            rx.await.unwrap_or_else(|_| Err(self.failure()))
        };
        tokio::select! {
            answer = exchange => answer,
            _ = cancel.cancelled() => {
                self.abandon(id, notify_on_abandon, "cancelled by the client");
                Err(RpcError::new(codes::REQUEST_ABORTED, "request cancelled"))
            }
            _ = tokio::time::sleep_until(deadline) => {
                self.abandon(id, notify_on_abandon, "timed out");
                Err(RpcError::new(
                    codes::UPSTREAM_TIMEOUT,
                    format!("upstream `{}` did not answer {method} in time", self.upstream),
                ))
            }
        }
    }

    /// In shared mode, replaces the client's progress token with one unique on this child (two
    /// sessions may use the same token); per-session, the token passes unchanged.
    fn rewrite_token(
        &self,
        id: u64,
        mut params: Value,
        call: Option<Call>,
    ) -> (Value, Option<Call>) {
        let Some(mut call) = call else {
            return (params, None);
        };
        if let Some(token) = params.pointer_mut("/_meta/progressToken") {
            call.client_token = Some(token.clone());
            if self.shared {
                *token = json!(format!("switchboard-{id}"));
            }
            call.child_token = Some(token.clone());
        }
        (params, Some(call))
    }

    /// Forgets request `id`; tells the child it was cancelled when it still was in flight.
    fn abandon(&self, id: u64, notify: bool, reason: &str) {
        let was_pending = self.state.lock().pending.remove(&id).is_some();
        if was_pending && notify {
            let params = json!({"requestId": id, "reason": reason});
            self.send_later(notification("notifications/cancelled", params));
        }
    }

    /// Delivers the child's answer to our request `id`; `false` when nobody waits for it.
    pub(crate) fn answer(&self, id: u64, outcome: Result<Value, RpcError>) -> bool {
        match self.state.lock().pending.remove(&id) {
            Some(p) => {
                let _ = p.tx.send(outcome);
                true
            }
            None => false,
        }
    }

    /// The call in flight whose child-side progress token is `token`.
    pub(crate) fn call_with_token(&self, token: &Value) -> Option<Call> {
        let state = self.state.lock();
        let mut calls: Vec<(&u64, &Call)> = state
            .pending
            .iter()
            .filter_map(|(id, p)| Some((id, p.call.as_ref()?)))
            .filter(|(_, c)| c.child_token.as_ref() == Some(token))
            .collect();
        calls.sort_by_key(|(id, _)| std::cmp::Reverse(**id));
        calls.first().map(|(_, c)| (*c).clone())
    }

    /// The client calls in flight, most recent first.
    pub(crate) fn calls(&self) -> Vec<Call> {
        let state = self.state.lock();
        let mut calls: Vec<(u64, Call)> = state
            .pending
            .iter()
            .filter_map(|(id, p)| Some((*id, p.call.clone()?)))
            .collect();
        calls.sort_by_key(|(id, _)| std::cmp::Reverse(*id));
        calls.into_iter().map(|(_, c)| c).collect()
    }

    /// Registers a child request being answered by a client; `None` when the child is gone.
    pub(crate) fn begin_server_request(&self, key: String) -> Option<CancellationToken> {
        let mut state = self.state.lock();
        if state.closed.is_some() {
            return None;
        }
        let token = CancellationToken::new();
        state.server_requests.insert(key, token.clone());
        Some(token)
    }

    /// Forgets a child request (answered or cancelled).
    pub(crate) fn end_server_request(&self, key: &str) {
        self.state.lock().server_requests.remove(key);
    }

    /// The child cancelled its request `key` (`notifications/cancelled`).
    pub(crate) fn cancel_server_request(&self, key: &str) -> bool {
        match self.state.lock().server_requests.remove(key) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// The child is gone: every call in flight fails with `error` (the first reason given wins),
    /// every client request on its behalf is abandoned, and [`Conn::gone`] fires.
    pub(crate) fn fail_all(&self, error: RpcError) {
        self.fail_calls(error);
        let requests: Vec<_> = self
            .state
            .lock()
            .server_requests
            .drain()
            .map(|(_, t)| t)
            .collect();
        for token in requests {
            token.cancel();
        }
        self.gone.cancel();
    }

    /// Records why the child is unusable without waiting for it to exit (fatal framing error);
    /// calls in flight fail at once.
    pub(crate) fn fail_calls(&self, error: RpcError) {
        let pending = {
            let mut state = self.state.lock();
            let error = state.closed.get_or_insert(error).clone();
            state
                .pending
                .drain()
                .map(|(_, p)| (p, error.clone()))
                .collect::<Vec<_>>()
        };
        for (p, error) in pending {
            let _ = p.tx.send(Err(error));
        }
    }
}

/// A JSON-RPC notification as a map (what the writer takes).
pub(crate) fn notification(method: &str, params: Value) -> Map<String, Value> {
    let mut message = Map::new();
    message.insert("jsonrpc".into(), "2.0".into());
    message.insert("method".into(), method.into());
    if !params.is_null() {
        message.insert("params".into(), params);
    }
    message
}

/// A JSON-RPC response to the child's request `id` (its original id), with `result` or `error`.
pub(crate) fn response(id: Value, outcome: Result<Value, Value>) -> Map<String, Value> {
    let mut message = Map::new();
    message.insert("jsonrpc".into(), "2.0".into());
    message.insert("id".into(), id);
    match outcome {
        Ok(result) => message.insert("result".into(), result),
        Err(error) => message.insert("error".into(), error),
    };
    message
}

/// A JSON-RPC error object.
pub(crate) fn error_object(code: i64, message: impl Into<String>) -> Value {
    json!({"code": code, "message": message.into()})
}

/// -32006: the upstream failed or is unreachable.
pub(crate) fn unavailable(message: String) -> RpcError {
    RpcError::new(codes::UPSTREAM_UNAVAILABLE, message)
}
