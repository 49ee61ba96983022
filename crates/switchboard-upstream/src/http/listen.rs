//! One listener on the upstream's own GET stream for one client session: open it, pass its
//! notifications to the client's standalone stream, answer its server-to-client requests through
//! the client, remember where it stands (`Last-Event-ID`, stored cluster-wide), reconnect when it
//! ends.
//!
//! Sources: MCP 2025-11-25, basic/transports: Listening for Messages from the Server (the client
//! MAY issue an HTTP GET with `Accept: text/event-stream`; the server either returns
//! `text/event-stream` or 405 Method Not Allowed; the server MAY send requests and notifications
//! on it, which SHOULD be unrelated to any concurrently-running client request; either side MAY
//! close it at any time), Resumability and Redelivery (`id` on events, `Last-Event-ID` on the
//! resuming GET, `retry` before reconnecting) and Session Management (404 to a request carrying
//! the session id: the session is gone).
//!
//! Where it stands is stored under the lease name `"<upstream>#get"` in the client's session
//! record as `"<upstream Mcp-Session-Id> <last event id>"` (session ids are visible ASCII
//! without spaces, so the first space separates them; a value for another upstream session is
//! ignored). Writes are throttled to one per [`SAVE_EVERY`] plus one when the listener stops, so
//! a node that takes over after a crash may replay the events of up to that window; each is a
//! compare-and-set on the upstream session, so a listener of a superseded session writes nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use switchboard_protocol::Message;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::common::answer_server_request;
use super::events::EventReader;
use super::session::{lease_name, UpstreamSession};
use super::wire::{Opened, Wire, WireError};
use crate::upstream::{ClientPeer, SessionHandle};
use switchboard_telemetry::trace::logged_session;

/// How often at most the last event id is written to the session record.
pub(crate) const SAVE_EVERY: Duration = Duration::from_secs(1);
/// The first wait before reconnecting when the upstream sent no `retry`.
const BASE_DELAY: Duration = Duration::from_millis(500);
/// The longest wait before reconnecting, whatever `retry` the upstream sent.
const MAX_DELAY: Duration = Duration::from_secs(5);

/// The stored position of a GET stream: `"<upstream session id> <last event id>"`.
pub(crate) fn encode_position(upstream: &UpstreamSession, last_event_id: &str) -> String {
    format!("{} {last_event_id}", upstream.id.as_deref().unwrap_or(""))
}

/// The last event id stored for `upstream`'s GET stream, if `stored` belongs to that session.
pub(crate) fn decode_position(upstream: &UpstreamSession, stored: &str) -> Option<String> {
    let (sid, last) = stored.split_once(' ')?;
    (Some(sid) == upstream.id.as_deref() && !last.is_empty()).then(|| last.to_owned())
}

/// Why a listener stopped.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// Its cancel token fired (session ended, lease moved, shutdown).
    Cancelled,
    /// The upstream answered 405: it offers no GET stream.
    NotAllowed,
    /// The upstream answered 404: its session is gone; the next request initializes a new one.
    Gone,
}

/// A listener, ready to run.
pub(crate) struct Listener {
    /// The upstream's HTTP side.
    pub wire: Arc<Wire>,
    /// The upstream's name, for logs; `"<name>#get"` is the lease and the stored position.
    pub name: String,
    /// The upstream session whose GET stream this is.
    pub upstream: UpstreamSession,
    /// The client session (for storing the position).
    pub session: Arc<dyn SessionHandle>,
    /// The client's standalone stream.
    pub peer: Arc<dyn ClientPeer>,
    /// Stops the listener.
    pub cancel: CancellationToken,
    /// Where to resume from.
    pub last_event_id: Option<String>,
    /// Set when the upstream answers 405 (shared by every listener of the upstream).
    pub no_get: Arc<AtomicBool>,
    /// Set to `true` once the upstream answered the first GET, whatever it answered (the stream
    /// is open, 405, 404, an error): what a request that started the listener waits for.
    pub answered: tokio::sync::watch::Sender<bool>,
}

/// The position as last read and as last stored.
struct Position {
    last: Option<String>,
    saved: Option<String>,
    saved_at: Option<Instant>,
}

impl Listener {
    /// Runs until cancelled, 405 or 404; reconnects after every other end of the stream.
    pub async fn run(self) -> End {
        let sid = self.session.session_id().to_owned();
        let mut position = Position {
            saved: self.last_event_id.clone(),
            last: self.last_event_id.clone(),
            saved_at: None,
        };
        let mut tasks = JoinSet::new();
        let mut retry: Option<u64> = None;
        let mut failures: u32 = 0;
        let mut unconfirmed = false;
        let end = loop {
            let opened = tokio::select! {
                () = self.cancel.cancelled() => break End::Cancelled,
                opened = self.wire.open_stream(&self.upstream, position.last.as_deref()) => opened,
            };
            self.answered.send_replace(true);
            if !matches!(opened, Err(WireError::Gone { .. })) {
                unconfirmed = false;
            }
            match opened {
                Ok(Opened::NotAllowed) => {
                    self.no_get.store(true, Ordering::SeqCst);
                    tracing::info!(upstream = %self.name, "the upstream offers no GET stream (405); not listening for its unsolicited messages");
                    break End::NotAllowed;
                }
                // Maybe not the server's (see `super::loss`): confirmed once, like a request.
                Err(WireError::Gone {
                    json_rpc: false, ..
                }) if !unconfirmed => {
                    unconfirmed = true;
                    tokio::select! {
                        () = self.cancel.cancelled() => break End::Cancelled,
                        () = tokio::time::sleep(super::loss::CONFIRM_AFTER) => continue,
                    }
                }
                Err(WireError::Gone { .. }) => break End::Gone,
                Err(WireError::Unreachable {
                    pinned: Some(addr), ..
                }) if self.wire.endpoint_gone(addr).await => {
                    tracing::info!(upstream = %self.name, session = %logged_session(&sid), endpoint = %addr,
                        "the upstream session's endpoint refuses connections and no longer resolves; not listening on it");
                    break End::Gone;
                }
                Err(WireError::Refused { at, refusal }) => {
                    // No client request waits on this stream: the refusal can only be logged
                    // (warned once per run, the same text a request would get).
                    failures += 1;
                    let error =
                        super::exchange::credentials_refused(&self.name, *refusal, Some(&at));
                    if failures == 1 {
                        tracing::warn!(upstream = %self.name, session = %logged_session(&sid), error = %error.message, data = ?error.data, "could not open the upstream's GET stream");
                    } else {
                        tracing::debug!(upstream = %self.name, session = %logged_session(&sid), error = %error.message, "could not open the upstream's GET stream");
                    }
                }
                Err(e) => {
                    failures += 1;
                    tracing::info!(upstream = %self.name, session = %logged_session(&sid), error = ?e, "could not open the upstream's GET stream");
                }
                Ok(Opened::Stream(reader)) => {
                    tracing::debug!(upstream = %self.name, session = %logged_session(&sid), last_event_id = ?position.last, "listening on the upstream's GET stream");
                    let got = tokio::select! {
                        () = self.cancel.cancelled() => break End::Cancelled,
                        got = self.read(reader, &mut tasks, &mut retry, &mut position) => got,
                    };
                    failures = if got { 0 } else { failures + 1 };
                }
            }
            let delay = reconnect_delay(retry, failures);
            tokio::select! {
                () = self.cancel.cancelled() => break End::Cancelled,
                () = tokio::time::sleep(delay) => {}
            }
        };
        tasks.abort_all();
        if end != End::Gone {
            self.save(&mut position, true).await;
        }
        tracing::debug!(upstream = %self.name, session = %logged_session(&sid), end = ?end, "stopped listening on the upstream's GET stream");
        end
    }

    /// Reads events until the stream ends or fails; returns whether any message arrived.
    async fn read(
        &self,
        mut reader: EventReader,
        tasks: &mut JoinSet<()>,
        retry: &mut Option<u64>,
        position: &mut Position,
    ) -> bool {
        let mut got = false;
        loop {
            let next = tokio::select! {
                next = reader.next() => next,
                Some(_) = tasks.join_next() => continue,
            };
            let event = match next {
                Some(Ok(event)) => event,
                Some(Err(e)) => {
                    match reader.over_limit() {
                        Some(limit) => {
                            let error = super::common::too_large(
                                &self.name,
                                "max_message_bytes",
                                limit,
                                None,
                                "the GET stream was closed",
                            );
                            tracing::warn!(upstream = %self.name, error = %error.message, "the upstream's GET stream failed");
                        }
                        None => {
                            tracing::debug!(upstream = %self.name, error = e, "the upstream's GET stream failed")
                        }
                    }
                    return got;
                }
                None => return got,
            };
            if event.retry.is_some() {
                *retry = event.retry;
            }
            if event.is_message() {
                got = true;
                match serde_json::from_str::<Value>(&event.data) {
                    Ok(Value::Array(items)) => {
                        for item in items {
                            self.handle(item, tasks).await;
                        }
                    }
                    Ok(one) => self.handle(one, tasks).await,
                    Err(e) => {
                        tracing::warn!(upstream = %self.name, error = %e, "skipped an SSE event that is not JSON")
                    }
                }
            }
            if event.id.is_some() {
                position.last = event.id;
                self.save(position, false).await;
            }
        }
    }

    /// One message from the GET stream. Notifications are passed on here, one after the other,
    /// so they reach the standalone stream in the order they came; requests are answered in the
    /// background (the client may take long).
    async fn handle(&self, raw: Value, tasks: &mut JoinSet<()>) {
        match Message::classify(raw) {
            Ok(Message::Notification { method, raw }) => {
                // `notifications/cancelled` names the upstream's own requests, which the client
                // never saw under those ids.
                if method == "notifications/cancelled" {
                    return;
                }
                if let Err(e) = self.peer.notify(raw).await {
                    tracing::debug!(upstream = %self.name, method, error = %e, "could not pass a notification to the client");
                }
            }
            Ok(Message::Request { method, raw, .. }) => {
                let (peer, wire) = (self.peer.clone(), self.wire.clone());
                let (upstream, name) = (self.upstream.clone(), self.name.clone());
                tasks.spawn(async move {
                    let answer = answer_server_request(&*peer, &raw).await;
                    if let Err(e) = wire.post("response", &answer, Some(&upstream)).await {
                        tracing::warn!(upstream = name, method, error = ?e, "could not return the client's answer to the upstream");
                    }
                });
            }
            Ok(Message::Response { .. }) => {
                tracing::debug!(upstream = %self.name, "ignored a response on the GET stream");
            }
            Err(e) => {
                tracing::warn!(upstream = %self.name, error = e, "skipped an invalid JSON-RPC message")
            }
        }
    }

    /// Stores the position when it changed and [`SAVE_EVERY`] passed (or always with `force`).
    async fn save(&self, position: &mut Position, force: bool) {
        let Some(last) = position.last.clone() else {
            return;
        };
        let due = position
            .saved_at
            .is_none_or(|at| at.elapsed() >= SAVE_EVERY);
        if position.saved.as_ref() == Some(&last) || !(force || due) {
            return;
        }
        let value = encode_position(&self.upstream, &last);
        // Only while the record still holds this upstream session: a listener of a superseded
        // one must not overwrite the position of the new one's stream.
        let entries = vec![(lease_name(&self.name), Some(value))];
        let expected = self.upstream.encode();
        match self
            .session
            .swap_upstream_sessions(&self.name, Some(&expected), entries)
            .await
        {
            Ok(true) => {
                position.saved = Some(last);
                position.saved_at = Some(Instant::now());
            }
            Ok(false) => {
                tracing::debug!(upstream = %self.name, "not storing the GET stream's position: its upstream session was replaced");
                position.saved = Some(last);
                position.saved_at = Some(Instant::now());
            }
            Err(e) => {
                tracing::debug!(upstream = %self.name, error = e, "could not store the GET stream's last event id")
            }
        }
    }
}

/// The wait before reconnecting: from the upstream's `retry` (or [`BASE_DELAY`]), growing with
/// the failures in a row, jittered, never more than [`MAX_DELAY`] (see [`super::backoff`]).
fn reconnect_delay(retry: Option<u64>, failures: u32) -> Duration {
    let base = retry.map(Duration::from_millis).unwrap_or(BASE_DELAY);
    super::backoff::reconnect_delay(base, MAX_DELAY, failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_belong_to_one_upstream_session() {
        let s = UpstreamSession::new(Some("u-1".into()), "2025-11-25".into());
        let other = UpstreamSession::new(Some("u-2".into()), "2025-11-25".into());
        let stored = encode_position(&s, "ev 7");
        assert_eq!(stored, "u-1 ev 7");
        assert_eq!(decode_position(&s, &stored).as_deref(), Some("ev 7"));
        assert_eq!(decode_position(&other, &stored), None);
        assert_eq!(decode_position(&s, "garbage"), None);
    }

    #[test]
    fn delays_grow_and_are_capped() {
        let first = reconnect_delay(None, 0);
        assert!(first >= BASE_DELAY && first < BASE_DELAY * 2, "{first:?}");
        let second = reconnect_delay(Some(100), 1);
        let ms = Duration::from_millis;
        assert!(second >= ms(200) && second < ms(400), "{second:?}");
        assert!(reconnect_delay(None, 30) <= MAX_DELAY);
        assert!(reconnect_delay(None, 30) >= MAX_DELAY / 2);
        assert!(reconnect_delay(Some(60_000), 0) <= MAX_DELAY);
    }
}
