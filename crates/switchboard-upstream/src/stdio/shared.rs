//! Where a shared child's notifications go (case C23), when they are not progress (which goes
//! to the call whose token it carries) or a cancellation:
//!
//! - `notifications/tools/list_changed`, `prompts/list_changed`, `resources/list_changed`: to
//!   every session attached to the child here ([`super::attached`]), on its standalone stream.
//! - `notifications/resources/updated`: to the sessions that subscribed to its `uri` through
//!   this child, on their standalone streams.
//! - `notifications/message`: with no call in flight, to every attached session's standalone
//!   stream; with the calls in flight all of one session, to that call's stream when there is one,
//!   else to that session's standalone stream; with calls of several sessions in flight nobody can
//!   tell whose it is, so it is dropped. Each session's peer applies its own log level.
//! - anything else: it cannot be attributed to a session, so it is dropped.
//!
//! Dropped notifications are counted ([`super::StdioUpstream::dropped_notifications`]) and
//! logged. Broadcasts go out at most [`BROADCAST_CONCURRENCY`] sessions at a time; the child's
//! stdout is read on once every session has been told.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;

use super::conn::Conn;
use crate::upstream::ClientPeer;
use switchboard_telemetry::trace::logged_session;

/// How many sessions' standalone streams one broadcast writes to at once.
pub(crate) const BROADCAST_CONCURRENCY: usize = 64;

/// Routes one notification of a shared child (see the module doc).
pub(crate) async fn route(conn: &Conn, method: &str, raw: Value) {
    match method {
        "notifications/tools/list_changed"
        | "notifications/prompts/list_changed"
        | "notifications/resources/list_changed" => {
            broadcast(conn, method, conn.attached.peers(), raw).await
        }
        "notifications/resources/updated" => {
            let uri = raw.pointer("/params/uri").and_then(Value::as_str);
            let subscribers = uri
                .map(|u| conn.attached.subscribers(u))
                .unwrap_or_default();
            broadcast(conn, method, subscribers, raw).await
        }
        "notifications/message" => log_message(conn, raw).await,
        _ => dropped(conn, method, "it belongs to no session"),
    }
}

async fn log_message(conn: &Conn, raw: Value) {
    let method = "notifications/message";
    let calls = conn.calls();
    let Some(first) = calls.first() else {
        return broadcast(conn, method, conn.attached.peers(), raw).await;
    };
    if calls.iter().any(|c| c.session != first.session) {
        return dropped(conn, method, "calls of several sessions are in flight");
    }
    if let [only] = calls.as_slice() {
        return conn.deliver(&only.peer, raw, false).await;
    }
    match conn.attached.peer(&first.session) {
        Some(peer) => conn.deliver(&peer, raw, true).await,
        None => dropped(conn, method, "its session has no standalone stream here"),
    }
}

async fn broadcast(
    conn: &Conn,
    method: &str,
    peers: Vec<(String, Arc<dyn ClientPeer>)>,
    raw: Value,
) {
    if peers.is_empty() {
        return dropped(
            conn,
            method,
            "no session attached to the child here wants it",
        );
    }
    let sessions = peers.len();
    futures::stream::iter(peers)
        .for_each_concurrent(BROADCAST_CONCURRENCY, |(sid, peer)| {
            let raw = raw.clone();
            async move {
                if let Err(e) = peer.notify_standalone(raw).await {
                    tracing::debug!(upstream = %conn.upstream, session = %logged_session(&sid), error = %e, "notification of the shared child not delivered");
                }
            }
        })
        .await;
    tracing::debug!(upstream = %conn.upstream, method, sessions, "shared child's notification sent to its sessions");
}

fn dropped(conn: &Conn, method: &str, reason: &str) {
    let dropped = conn.attached.dropped.fetch_add(1, Ordering::Relaxed) + 1;
    tracing::info!(upstream = %conn.upstream, method, reason, dropped, "shared child's notification dropped");
}
