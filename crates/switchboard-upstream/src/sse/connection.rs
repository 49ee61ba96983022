//! One legacy HTTP+SSE connection: the GET event stream held open in this process, and POSTs
//! to the endpoint it announced. Answers arrive on the stream and are matched to requests by id.
//!
//! Source: MCP 2024-11-05, basic/transports, HTTP with SSE: the server's first event is
//! `endpoint`, whose data is the URI for POSTs; server messages are SSE `message` events.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{json, Value};
use switchboard_protocol::Message;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::http::common::answer_server_request;
use crate::http::events::EventReader;
use crate::http::wire::{Wire, WireError};
use crate::upstream::ClientPeer;

/// How long POSTing the client's answer to a server-to-client request may take.
const ANSWER_POST_TIMEOUT: Duration = Duration::from_secs(30);

/// A request of ours waiting for its answer, with the client it belongs to.
struct Active {
    key: String,
    peer: Option<Arc<dyn ClientPeer>>,
    progress_token: Option<Value>,
    answer: Option<oneshot::Sender<Value>>,
}

/// State shared by the connection and its reader task.
struct Shared {
    name: String,
    post: Wire,
    active: Mutex<Vec<Active>>,
    /// The peer of the latest request: unrelated notifications go to its standalone stream.
    last_peer: Mutex<Option<Arc<dyn ClientPeer>>>,
    closed: CancellationToken,
    /// Set when the stream ended on an event over `max_message_bytes` (the limit, in bytes):
    /// the calls it fails say so.
    over_limit: Mutex<Option<usize>>,
}

/// One open legacy connection.
pub(super) struct Connection {
    shared: Arc<Shared>,
    reader: JoinHandle<()>,
    used: Mutex<Instant>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Closing the GET stream ends the legacy session at the server.
        self.reader.abort();
        self.shared.closed.cancel();
    }
}

impl Connection {
    /// GETs the SSE endpoint of `sse` and waits for its `endpoint` event. The POST URI is
    /// resolved against the SSE URL and must have the same origin (the configured headers may
    /// be credentials).
    pub async fn open(name: &str, sse: &Wire) -> Result<Connection, WireError> {
        let mut reader = sse.listen().await?;
        let endpoint = loop {
            match reader.next().await {
                Some(Ok(e)) if e.event.as_deref() == Some("endpoint") => break e.data,
                Some(Ok(_)) => continue,
                Some(Err(_)) if reader.over_limit().is_some() => {
                    let limit = reader.over_limit().unwrap_or_default();
                    return Err(WireError::TooLarge { at: None, limit });
                }
                Some(Err(e)) => {
                    return Err(WireError::other(format!("its SSE stream failed: {e}")))
                }
                None => {
                    return Err(WireError::other(
                        "its SSE stream ended before the endpoint event",
                    ))
                }
            }
        };
        let url = sse
            .url()
            .join(endpoint.trim())
            .map_err(|e| WireError::other(format!("invalid endpoint {endpoint:?}: {e}")))?;
        if url.origin() != sse.url().origin() {
            return Err(WireError::other(format!(
                "its endpoint {url} is on another origin than the SSE URL"
            )));
        }
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            post: sse.with_url(url),
            active: Mutex::default(),
            last_peer: Mutex::default(),
            closed: CancellationToken::new(),
            over_limit: Mutex::default(),
        });
        let reader = tokio::spawn(read_loop(shared.clone(), reader));
        Ok(Connection {
            shared,
            reader,
            used: Mutex::new(Instant::now()),
        })
    }

    /// Whether the SSE stream is still open.
    pub fn is_open(&self) -> bool {
        !self.shared.closed.is_cancelled()
    }

    /// When this connection was last used.
    pub fn last_used(&self) -> Instant {
        *self.used.lock()
    }

    /// POSTs request `message` (id `id`) and waits for its response on the stream.
    /// Notifications and server-to-client requests meanwhile go to `peer`.
    pub async fn request<M: serde::Serialize + ?Sized>(
        &self,
        what: &str,
        message: &M,
        id: &Value,
        peer: Option<Arc<dyn ClientPeer>>,
        progress_token: Option<Value>,
    ) -> Result<Value, WireError> {
        *self.used.lock() = Instant::now();
        let (tx, rx) = oneshot::channel();
        let key = id.to_string();
        if let Some(p) = &peer {
            *self.shared.last_peer.lock() = Some(p.clone());
        }
        self.shared.active.lock().push(Active {
            key: key.clone(),
            peer,
            progress_token,
            answer: Some(tx),
        });
        let _registered = Unregister {
            shared: &self.shared,
            key,
        };
        self.post(what, message).await?;
        tokio::select! {
            answer = rx => answer.map_err(|_| closed(&self.shared)),
            () = self.shared.closed.cancelled() => Err(closed(&self.shared)),
        }
    }

    /// POSTs a notification or response (`what`: its method, or `response`).
    pub async fn post<M: serde::Serialize + ?Sized>(
        &self,
        what: &str,
        message: &M,
    ) -> Result<(), WireError> {
        self.shared.post.post(what, message, None).await.map(|_| ())
    }
}

/// Why a call waiting on the connection got no answer: an event over the limit, or the end of
/// the stream.
fn closed(shared: &Shared) -> WireError {
    match *shared.over_limit.lock() {
        Some(limit) => WireError::TooLarge { at: None, limit },
        None => WireError::other("its SSE connection closed before the answer"),
    }
}

/// Removes a request from the active list when its call ends, however it ends.
struct Unregister<'a> {
    shared: &'a Shared,
    key: String,
}

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        self.shared.active.lock().retain(|a| a.key != self.key);
    }
}

/// Reads the stream until it ends, then marks the connection closed (failing waiting calls).
async fn read_loop(shared: Arc<Shared>, mut reader: EventReader) {
    while let Some(next) = reader.next().await {
        let event = match next {
            Ok(e) => e,
            Err(e) => {
                tracing::info!(
                    upstream = shared.name,
                    error = e,
                    "the legacy SSE stream failed"
                );
                *shared.over_limit.lock() = reader.over_limit();
                break;
            }
        };
        if !event.is_message() {
            continue;
        }
        match serde_json::from_str::<Value>(&event.data) {
            Ok(value) => handle(&shared, value).await,
            Err(e) => {
                tracing::warn!(upstream = shared.name, error = %e, "skipped an SSE event that is not JSON")
            }
        }
    }
    tracing::info!(upstream = shared.name, "the legacy SSE connection closed; the next request opens a new one (state inside the old one is lost)");
    shared.closed.cancel();
}

/// One message from the stream.
async fn handle(shared: &Arc<Shared>, raw: Value) {
    match Message::classify(raw) {
        Ok(Message::Response { id: Some(id), raw }) => {
            let key = id.key();
            let sender = shared
                .active
                .lock()
                .iter_mut()
                .find(|a| a.key == key)
                .and_then(|a| a.answer.take());
            match sender {
                Some(tx) => drop(tx.send(raw)),
                None => tracing::debug!(
                    upstream = shared.name,
                    id = key,
                    "ignored a response to no waiting request"
                ),
            }
        }
        Ok(Message::Response { id: None, raw }) => {
            tracing::warn!(upstream = shared.name, response = %raw, "the upstream sent an error without an id");
        }
        Ok(Message::Notification { method, raw }) => notify(shared, &method, raw).await,
        Ok(Message::Request { method, raw, .. }) => answer(shared, &method, raw),
        Err(e) => tracing::warn!(
            upstream = shared.name,
            error = e,
            "skipped an invalid JSON-RPC message"
        ),
    }
}

/// The peer a message belongs to. The legacy transport has a single stream, so a message is
/// matched by its progress token when it has one, else to the oldest running request.
fn route(shared: &Shared, progress_token: Option<&Value>) -> Option<Arc<dyn ClientPeer>> {
    let active = shared.active.lock();
    let with_peer = || active.iter().filter(|a| a.peer.is_some());
    progress_token
        .and_then(|t| with_peer().find(|a| a.progress_token.as_ref() == Some(t)))
        .or_else(|| with_peer().next())
        .and_then(|a| a.peer.clone())
}

/// Passes a notification on: to the request it relates to, else to the client's standalone
/// stream. The upstream's own `notifications/cancelled` is dropped (its ids are not the
/// client's).
async fn notify(shared: &Shared, method: &str, raw: Value) {
    if method == "notifications/cancelled" {
        return;
    }
    let token = raw.pointer("/params/progressToken");
    let delivered = match route(shared, token) {
        Some(peer) => peer.notify(raw).await,
        None => {
            let last = shared.last_peer.lock().clone();
            match last {
                Some(peer) => peer.notify_standalone(raw).await,
                None => return,
            }
        }
    };
    if let Err(e) = delivered {
        tracing::debug!(upstream = shared.name, method, error = %e, "could not pass a notification to the client");
    }
}

/// Asks the client (in the background) and POSTs its answer with the upstream's id. With no
/// request running, a `ping` is answered here and anything else refused.
fn answer(shared: &Arc<Shared>, method: &str, raw: Value) {
    let shared = shared.clone();
    let method = method.to_owned();
    tokio::spawn(async move {
        let id = raw.get("id").cloned().unwrap_or(Value::Null);
        let reply = match route(&shared, None) {
            Some(peer) => answer_server_request(&*peer, &raw).await,
            None if method == "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            None => json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": switchboard_protocol::codes::INVALID_REQUEST,
                "message": "no client request is running to carry this request"}}),
        };
        match tokio::time::timeout(
            ANSWER_POST_TIMEOUT,
            shared.post.post("response", &reply, None),
        )
        .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(upstream = shared.name, method, error = ?e, "could not return the client's answer to the upstream")
            }
            Err(_) => tracing::warn!(
                upstream = shared.name,
                method,
                "returning the client's answer to the upstream timed out"
            ),
        }
    });
}
