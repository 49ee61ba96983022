//! What a child writes on stdout, routed (MCP 2025-11-25, basic/transports, stdio).
//!
//! - A response to one of our requests goes to the call waiting for it.
//! - `notifications/progress` goes to the call whose progress token it carries, on that call's
//!   stream (`ClientPeer::notify`); in shared mode the token is mapped back to the client's.
//! - `notifications/message` (logging) goes, per session, to the one call in flight when there
//!   is exactly one (a stdio child cannot say which request a log line belongs to), else to the
//!   session's standalone stream.
//! - Any other notification (`list_changed`, `resources/updated`, …) goes, per session, to the
//!   standalone stream through the last client peer seen for the session. In shared mode,
//!   logging and these go where `shared` says (case C23).
//! - `notifications/cancelled` cancels the child's own request being answered by a client.
//! - A request from the child: before the handshake is finished only `ping` is answered, anything
//!   else gets -32600 (case C21, step 6: only pings and logging are expected before
//!   `initialized`). `ping` is always answered by us: we are the child's client. Other requests
//!   (`sampling/createMessage`, `elicitation/create`, `roots/list`) are sent to the client through
//!   the peer of the call most plausibly related (see [`carrier`]), and its answer is written back
//!   with the child's original id.
//! - A line that is not JSON-RPC is logged (cut to 200 bytes) and skipped (case C28).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::{json, Value};
use switchboard_protocol::{codes, Message, RequestId};
use tokio::io::{AsyncRead, BufReader};

use super::conn::{error_object, response, unavailable, Conn};
use super::framing::{decode, truncate, Decoded, FrameError, LineReader};
use crate::http::common::too_large;
use crate::upstream::{ClientPeer, PeerError, RpcError};
use switchboard_telemetry::trace::logged_session;

/// How much of a skipped line is logged.
const LOGGED_NOISE: usize = 200;

/// Reads the child's stdout until it closes, routing every message; then fires
/// [`Conn::stdout_done`]. A line longer than `max_line` fails the calls in flight and stops the
/// child, since the stream cannot be resynchronised.
pub(crate) async fn run(conn: Arc<Conn>, stdout: impl AsyncRead + Unpin, max_line: usize) {
    let mut reader = LineReader::new(BufReader::with_capacity(64 * 1024, stdout), max_line);
    loop {
        match reader.next_line().await {
            Ok(Some(line)) => handle_line(&conn, line).await,
            Ok(None) => break,
            Err(FrameError::TooLong(max)) => {
                tracing::warn!(upstream = %conn.upstream, session = %logged_session(&conn.label), max, "child wrote a stdout line longer than the limit; stopping it");
                conn.overflowed.store(true, Ordering::Release);
                conn.fail_calls(too_large(
                    &conn.upstream,
                    "max_line_bytes",
                    max,
                    None,
                    "its process was stopped",
                ));
                conn.stop.cancel();
                break;
            }
            Err(FrameError::Io(e)) => {
                tracing::warn!(upstream = %conn.upstream, session = %logged_session(&conn.label), error = %e, "reading the child's stdout failed");
                break;
            }
        }
    }
    conn.stdout_done.cancel();
}

async fn handle_line(conn: &Arc<Conn>, line: Vec<u8>) {
    match decode(line) {
        Decoded::Json(value) => match Message::classify(value) {
            Ok(message) => dispatch(conn, message).await,
            Err(reason) => {
                tracing::warn!(upstream = %conn.upstream, session = %logged_session(&conn.label), reason, "skipped a stdout line that is not a JSON-RPC message")
            }
        },
        Decoded::Noise(text) => {
            tracing::warn!(upstream = %conn.upstream, session = %logged_session(&conn.label), line = %truncate(&text, LOGGED_NOISE), "skipped a stdout line that is not JSON-RPC")
        }
        Decoded::BadUtf8(value) => {
            tracing::warn!(upstream = %conn.upstream, session = %logged_session(&conn.label), "skipped a stdout line that is not valid UTF-8");
            let id = value
                .as_ref()
                .filter(|v| v.get("method").is_none())
                .and_then(|v| v.get("id"))
                .and_then(Value::as_u64);
            if let Some(id) = id {
                conn.answer(
                    id,
                    Err(unavailable(format!(
                        "upstream `{}` answered with invalid UTF-8",
                        conn.upstream
                    ))),
                );
            }
        }
    }
}

async fn dispatch(conn: &Arc<Conn>, message: Message) {
    match message {
        Message::Response { id, raw } => on_response(conn, id, raw),
        Message::Notification { method, raw } => on_notification(conn, &method, raw).await,
        Message::Request { id, method, raw } => on_request(conn, id, &method, raw),
    }
}

fn on_response(conn: &Conn, id: Option<RequestId>, raw: Value) {
    let Some(our_id) = id.as_ref().and_then(|i| i.0.as_u64()) else {
        tracing::warn!(upstream = %conn.upstream, session = %logged_session(&conn.label), message = %truncate(&raw.to_string(), LOGGED_NOISE), "child sent a response to no request of ours");
        return;
    };
    let outcome = match raw.get("error") {
        Some(error) => Err(RpcError {
            code: error
                .get("code")
                .and_then(Value::as_i64)
                .unwrap_or(codes::INTERNAL_ERROR),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("error without a message")
                .to_owned(),
            data: error.get("data").cloned(),
        }),
        None => Ok(raw.get("result").cloned().unwrap_or(Value::Null)),
    };
    if !conn.answer(our_id, outcome) {
        tracing::debug!(upstream = %conn.upstream, session = %logged_session(&conn.label), id = our_id, "late answer from the child (the call was cancelled or timed out)");
    }
}

async fn on_notification(conn: &Arc<Conn>, method: &str, mut raw: Value) {
    match method {
        "notifications/progress" => {
            let token = raw.pointer("/params/progressToken").cloned();
            let Some(call) = token.and_then(|t| conn.call_with_token(&t)) else {
                tracing::debug!(upstream = %conn.upstream, session = %logged_session(&conn.label), "progress for no call in flight dropped");
                return;
            };
            if let (Some(slot), Some(client)) = (
                raw.pointer_mut("/params/progressToken"),
                call.client_token.clone(),
            ) {
                *slot = client;
            }
            conn.deliver(&call.peer, raw, false).await;
        }
        "notifications/cancelled" => {
            let key = raw
                .pointer("/params/requestId")
                .map(|id| RequestId(id.clone()).key());
            if let Some(key) = key {
                conn.cancel_server_request(&key);
            }
        }
        _ if conn.shared => super::shared::route(conn, method, raw).await,
        "notifications/message" => {
            let calls = conn.calls();
            match calls.as_slice() {
                [only] => conn.deliver(&only.peer, raw, false).await,
                _ => standalone(conn, raw).await,
            }
        }
        _ => standalone(conn, raw).await,
    }
}

/// Sends a notification to the session's standalone stream through its last client peer.
async fn standalone(conn: &Conn, raw: Value) {
    match conn.session_peer() {
        Some(peer) => conn.deliver(&peer, raw, true).await,
        None => {
            tracing::debug!(upstream = %conn.upstream, session = %logged_session(&conn.label), "notification before any client request; dropped")
        }
    }
}

fn on_request(conn: &Arc<Conn>, id: RequestId, method: &str, raw: Value) {
    if method == "ping" {
        conn.send_later(response(id.0, Ok(json!({}))));
        return;
    }
    if !conn.is_ready() {
        let error = error_object(
            codes::INVALID_REQUEST,
            format!("{method} sent before the initialization finished (only ping and logging are allowed)"),
        );
        conn.send_later(response(id.0, Err(error)));
        return;
    }
    let peer = match carrier(conn) {
        Ok(peer) => peer,
        Err(reason) => {
            tracing::info!(upstream = %conn.upstream, session = %logged_session(&conn.label), method, reason, "child request refused");
            let error = error_object(codes::INTERNAL_ERROR, format!("{method}: {reason}"));
            conn.send_later(response(id.0, Err(error)));
            return;
        }
    };
    let Some(cancelled) = conn.begin_server_request(id.key()) else {
        return;
    };
    let params = raw.get("params").cloned().unwrap_or_else(|| json!({}));
    let conn = conn.clone();
    let method = method.to_owned();
    tokio::spawn(async move {
        let answer = tokio::select! {
            answer = peer.request(&method, params) => answer,
            _ = cancelled.cancelled() => return,
        };
        conn.end_server_request(&id.key());
        let outcome = match answer {
            Ok(whole) => client_answer(whole),
            Err(e) => Err(peer_error(&e)),
        };
        let _ = conn.send(response(id.0, outcome)).await;
    });
}

/// The client peer that carries a request from the child: per session, the most recent call in
/// flight, else the session's last peer (whose stream may have ended: then the node fails the
/// request at once). In shared mode, the most recent call when all calls in flight belong to one
/// session; with none, or several sessions' calls in flight, nobody can tell whose it is, so it
/// is refused.
fn carrier(conn: &Conn) -> Result<Arc<dyn ClientPeer>, &'static str> {
    let calls = conn.calls();
    if conn.shared {
        let Some(first) = calls.first() else {
            return Err("no client request is in flight on the shared child");
        };
        if calls.iter().any(|c| c.session != first.session) {
            return Err("requests of several sessions are in flight on the shared child");
        }
        return Ok(first.peer.clone());
    }
    match calls.first() {
        Some(call) => Ok(call.peer.clone()),
        None => conn
            .session_peer()
            .ok_or("no client request has reached this child yet"),
    }
}

/// The `result` (or `error`) of the client's whole JSON-RPC response.
fn client_answer(whole: Value) -> Result<Value, Value> {
    let Value::Object(mut whole) = whole else {
        return Err(error_object(
            codes::INTERNAL_ERROR,
            "the client's answer was not an object",
        ));
    };
    if let Some(result) = whole.remove("result") {
        return Ok(result);
    }
    match whole.remove("error") {
        Some(error) => Err(error),
        None => Err(error_object(
            codes::INTERNAL_ERROR,
            "the client's answer had no result",
        )),
    }
}

/// The JSON-RPC error written to the child when the client could not answer.
fn peer_error(e: &PeerError) -> Value {
    match e {
        PeerError::MissingCapability(_) | PeerError::Unreachable(_) => {
            error_object(codes::METHOD_NOT_FOUND, e.to_string())
        }
        _ => error_object(codes::INTERNAL_ERROR, e.to_string()),
    }
}
