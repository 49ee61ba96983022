//! The WebSocket transport: one MCP session over one socket (GET on `transports.websocket.path`, `/ws` by
//! default; empty turns it off).
//!
//! MCP has no official WebSocket transport (MCP 2025-11-25 defines stdio and Streamable HTTP and
//! allows custom transports, basic/transports, Custom Transports). This one follows RFC 6455
//! (framing, ping/pong, close codes), JSON-RPC 2.0 (one message per text frame, no batches) and
//! MCP 2025-11-25 semantics (lifecycle, sessions, cancellation, server-to-client requests), with
//! the same session core as Streamable HTTP:
//!
//! - The upgrade must offer the subprotocol `mcp` (`Sec-WebSocket-Protocol: mcp`), which the
//!   answer selects; without it: 400, and a GET that is no upgrade gets 426, each with a JSON-RPC
//!   error body. Origin/Host checks and the optional bearer-token check run on the upgrade request
//!   like on `/mcp` (see `crate::app`).
//! - A new socket's first message must be `initialize`: it creates the session exactly as a POST
//!   would ([`crate::session::initialize::create`]); the answer's `result._meta["io.switchboard/sessionId"]`
//!   names it.
//! - The socket holds the session's standalone stream (`get`): every server-to-client message
//!   (responses, notifications, server requests such as sampling) is appended to that stream's
//!   event log and reaches the socket from there through the bus and the hub, wherever it was
//!   produced. Each carries its event id in `_meta["io.switchboard/eventId"]` (see [`frame::tag`]),
//!   ignorable by clients that do not resume.
//! - Resuming: a new upgrade on any node with `Mcp-Session-Id` and `Last-Event-ID` (headers, or
//!   the query parameters `session_id` and `last_event_id` for browsers, which cannot set
//!   headers) replays the log after that id, then goes live; the previous socket of the session
//!   is closed (4409). Unknown session: 404; an id of another stream or from the future: 400; an
//!   id older than the kept log: 410 — all before upgrading. With a session id but no event id the
//!   socket starts at the log's newest event (like a GET without `Last-Event-ID`).
//! - Closing a socket does not end the session (it may be resumed until `session.idle_ttl` after its
//!   last request); sessions end through DELETE on the MCP endpoint, expiry or the reaper, which
//!   close the socket with 4404.
//!
//! Modules: [`frame`] (event ids, close codes), [`conn`] (the connection task: the log out,
//! pings, closing), `inbound` (client frames in).

pub mod conn;
pub mod frame;
mod inbound;

use std::collections::HashMap;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use http::{header, HeaderMap, HeaderValue, StatusCode};
use switchboard_protocol::ids::position_order;
use switchboard_protocol::{codes, headers, jsonrpc, EventId, SessionId, StreamId};
use switchboard_store::{Claim, LoggedEvent, Replay, SessionRecord};

use crate::edge::error::HttpError;
use crate::state::App;
use crate::{session, streams::pump, telemetry};
use switchboard_runtime::ConnHandle;

/// The subprotocol a client must offer.
pub const SUBPROTOCOL: &str = "mcp";

/// Query parameter standing in for `Mcp-Session-Id`.
pub const SESSION_QUERY: &str = "session_id";

/// Query parameter standing in for `Last-Event-ID`.
pub const LAST_EVENT_QUERY: &str = "last_event_id";

/// The upgrade handler.
pub async fn on_upgrade(
    State(app): State<App>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let Ok(ws) = ws else {
        return upgrade_required();
    };
    match upgrade(app, &query, &headers, ws).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn upgrade(
    app: App,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    ws: WebSocketUpgrade,
) -> Result<Response, HttpError> {
    if !ws.requested_protocols().any(|p| p == SUBPROTOCOL) {
        return Err(HttpError::InvalidRequest(
            "the WebSocket subprotocol `mcp` is required (Sec-WebSocket-Protocol: mcp)".into(),
        ));
    }
    let param = |name: &str, query_name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or("\u{0}").to_owned())
            .or_else(|| query.get(query_name).cloned())
    };
    let sid = param(headers::MCP_SESSION_ID, SESSION_QUERY);
    let last = param(headers::LAST_EVENT_ID, LAST_EVENT_QUERY);
    let attached = match (sid, last) {
        (None, None) => None,
        (None, Some(_)) => {
            return Err(HttpError::InvalidRequest(
                "Last-Event-ID needs Mcp-Session-Id".into(),
            ))
        }
        (Some(sid), last) => {
            let sid = SessionId::parse(&sid).ok_or(HttpError::UnknownSession)?;
            let last = match last {
                None => None,
                Some(l) => Some(EventId::parse(&l).ok_or(HttpError::BadLastEventId)?),
            };
            let record = session::load(&app, &sid, None)
                .await?
                .unwrap_or_else(|(r, _)| r);
            Some(attach(&app, record, last).await?)
        }
    };
    let principal = crate::session::current();
    let max = app.cfg.max_body_bytes;
    let release = attached
        .as_ref()
        .map(|(a, _)| (a.record.id.clone(), a.holder.clone()));
    let failed_app = app.clone();
    Ok(ws
        .protocols([SUBPROTOCOL])
        .max_message_size(max)
        .max_frame_size(max)
        .on_failed_upgrade(move |e| {
            tracing::debug!(error = %e, "WebSocket upgrade failed");
            if let Some((sid, holder)) = release {
                tokio::spawn(async move {
                    let _ = failed_app
                        .store
                        .release(&sid, StreamId::STANDALONE, &holder)
                        .await;
                });
            }
        })
        .on_upgrade(move |socket| {
            // The upgraded socket runs in its own task: carry the request's principal into it.
            crate::session::with_principal(principal, conn::serve_socket(app, socket, attached))
        }))
}

/// A socket attached to its session's standalone stream.
pub struct Attached {
    /// The session as last loaded.
    pub record: SessionRecord,
    /// This connection's holder token.
    pub holder: String,
    /// Its hub registration (live events, close signals).
    pub conn: ConnHandle,
    /// The newest log position written to the socket (or that the client had).
    pub last: String,
}

/// Makes a new holder the connection of the session's standalone stream (the previous one, on
/// any node, is closed) and reads the log after `last` (the first page; the connection pages on).
/// Without `last` the socket starts at the log's newest event. As on GET streams (see
/// `crate::transport::streamable::get`): an id of another stream or from the future is 400, a trimmed one 410.
pub async fn attach(
    app: &App,
    record: SessionRecord,
    last: Option<EventId>,
) -> Result<(Attached, Vec<LoggedEvent>), HttpError> {
    let sid = record.id.clone();
    let stream = StreamId::STANDALONE;
    if last.as_ref().is_some_and(|l| !l.stream.is_standalone()) {
        telemetry::replay_miss(
            &sid,
            "a WebSocket resumes only its session's standalone stream",
        );
        return Err(HttpError::UnknownStream);
    }
    let resuming = last.is_some();
    if let Some(last) = &last {
        if let Err(e) =
            crate::streams::resume::check_resumable(app, &sid, stream, &last.position).await
        {
            if matches!(e, HttpError::UnknownStream | HttpError::EventsTrimmed(_)) {
                telemetry::replay_miss(&sid, &e.to_string());
            }
            return Err(e);
        }
    }
    let holder = app.new_holder();
    let conn = app.replica.hub.register(&sid, stream, &holder);
    let read = async {
        let newest = match app.store.claim(&sid, stream, &holder).await? {
            Claim::Claimed { last_position, .. } => last_position,
            Claim::Unknown => return Err(HttpError::UnknownStream),
        };
        let newest = newest.unwrap_or_else(|| EventId::START.to_owned());
        let Some(last) = last else {
            return Ok((newest, Vec::new()));
        };
        if position_order(&last.position) > position_order(&newest) {
            return Err(HttpError::UnknownStream);
        }
        match app
            .store
            .replay(&sid, stream, &last.position, pump::REPLAY_PAGE)
            .await?
        {
            Replay::Events(events) => Ok((last.position, events)),
            Replay::UnknownStream => Err(HttpError::UnknownStream),
            Replay::Truncated { oldest } => Err(HttpError::EventsTrimmed(oldest)),
        }
    };
    match read.await {
        Ok((after, replay)) => {
            if resuming {
                telemetry::stream_resumed(&sid, stream, replay.len());
            }
            let attached = Attached {
                record,
                holder,
                conn,
                last: after,
            };
            Ok((attached, replay))
        }
        Err(e) => {
            drop(conn);
            let _ = app.store.release(&sid, stream, &holder).await;
            if matches!(e, HttpError::UnknownStream | HttpError::EventsTrimmed(_)) {
                telemetry::replay_miss(&sid, &e.to_string());
            }
            Err(e)
        }
    }
}

/// 426 for a GET that is not a WebSocket upgrade, naming what to send.
fn upgrade_required() -> Response {
    let body = jsonrpc::error_response(
        None,
        codes::INVALID_REQUEST,
        "Upgrade Required: this path serves MCP over WebSocket (Upgrade: websocket, Sec-WebSocket-Protocol: mcp)",
        None,
    );
    let mut resp = (StatusCode::UPGRADE_REQUIRED, axum::Json(body)).into_response();
    resp.headers_mut()
        .insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    resp
}
