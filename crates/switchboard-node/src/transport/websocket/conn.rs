//! The task behind one WebSocket: the session's standalone stream out, pings, closing (client
//! frames in: `inbound`).
//!
//! Out: events of the session's standalone log, replayed after the client's last event id and
//! then live from the hub, in log order and exactly once (the same rules as the SSE pump,
//! [`crate::streams::pump`]: skip anything at or before the last written position; a full queue re-reads
//! the log). In: each text frame is one JSON-RPC message, handled like a POST's (requests run in
//! their own task via [`crate::exec::call::spawn`] and answer into the log; notifications and responses
//! go through [`crate::transport::streamable::post::deliver`]). Frames that are not JSON get -32700 (id null) on the
//! socket; binary frames close it with 1003; a message over `http.max_body` closes it with 1009.
//! Pings go out every `http.keepalive_interval`; two unanswered in a row close it with 4408.

use std::sync::atomic::Ordering;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use serde_json::Value;
use switchboard_protocol::ids::position_order;
use switchboard_protocol::{jsonrpc, EventId, RequestId, StreamId};
use switchboard_store::{LoggedEvent, Replay};
use tokio::time::{interval, MissedTickBehavior};

use super::frame::{self, close};
use super::Attached;
use crate::state::App;
use crate::streams::pump;
use switchboard_runtime::{Outbound, StreamEvent};

/// How long a closing socket waits for the client's close frame before dropping the connection.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether the connection goes on.
pub(super) enum Step {
    Continue,
    Stop,
}

pub(super) struct Conn {
    pub(super) app: App,
    pub(super) ws: WebSocket,
    /// `None` until `initialize` on a new socket.
    pub(super) session: Option<Attached>,
    /// Pings sent since the last pong.
    unanswered: u32,
}

/// Runs the connection until either side closes it; `attached` is the resumed session, with the
/// first page of its replay.
pub async fn serve_socket(app: App, ws: WebSocket, attached: Option<(Attached, Vec<LoggedEvent>)>) {
    let (session, replay) = match attached {
        Some((a, replay)) => (Some(a), replay),
        None => (None, Vec::new()),
    };
    let mut conn = Conn {
        app,
        ws,
        session,
        unanswered: 0,
    };
    let more = replay.len() >= pump::REPLAY_PAGE;
    if let Step::Continue = conn.write_all(replay).await {
        if !more || matches!(conn.catch_up().await, Step::Continue) {
            conn.serve().await;
        }
    }
    conn.cleanup().await;
}

impl Conn {
    async fn serve(&mut self) {
        let mut keepalive = interval(self.app.cfg.keepalive_interval);
        keepalive.set_missed_tick_behavior(MissedTickBehavior::Delay);
        keepalive.tick().await;
        loop {
            let lagged = self
                .session
                .as_ref()
                .is_some_and(|s| s.conn.lagged.swap(false, Ordering::SeqCst));
            if lagged {
                if let Step::Stop = self.catch_up().await {
                    return;
                }
            }
            let step = tokio::select! {
                frame = self.ws.recv() => self.on_frame(frame).await,
                out = outbound(&mut self.session) => self.on_outbound(out).await,
                _ = keepalive.tick() => self.ping().await,
                // Draining: the socket moves to another node at once, like standalone GET streams.
                _ = self.app.shutdown.cancelled() => self.close(close::GOING_AWAY, "node draining: resume on another node").await,
            };
            if let Step::Stop = step {
                return;
            }
        }
    }

    async fn on_frame(&mut self, frame: Option<Result<Message, axum::Error>>) -> Step {
        match frame {
            None | Some(Ok(Message::Close(_))) => Step::Stop,
            Some(Err(e)) => {
                let text = e.to_string();
                tracing::debug!(error = %text, "WebSocket read failed");
                if text.contains("Space limit") || text.contains("too long") {
                    let max = self.app.cfg.max_body_bytes;
                    let reason = format!("message larger than {max} bytes");
                    return self.close(close::TOO_BIG, &reason).await;
                }
                Step::Stop
            }
            Some(Ok(Message::Binary(_))) => {
                self.close(
                    close::UNSUPPORTED_DATA,
                    "binary frames are not supported: send each JSON-RPC message as a text frame",
                )
                .await
            }
            Some(Ok(Message::Pong(_))) => {
                self.unanswered = 0;
                Step::Continue
            }
            // Pings are answered by the socket itself.
            Some(Ok(Message::Ping(_))) => Step::Continue,
            Some(Ok(Message::Text(text))) => self.on_text(text.as_str()).await,
        }
    }

    async fn on_outbound(&mut self, out: Option<Outbound>) -> Step {
        match out {
            Some(Outbound::Event(ev)) => self.write(*ev).await,
            Some(Outbound::CatchUp) => Step::Continue,
            Some(Outbound::Close) | None => {
                if self.app.shutdown.is_cancelled() {
                    return self
                        .close(close::GOING_AWAY, "node draining: resume on another node")
                        .await;
                }
                let sid = self.session.as_ref().map(|s| s.record.id.clone());
                let alive = match sid {
                    Some(sid) => self.app.store.exists(&sid).await.unwrap_or(true),
                    None => false,
                };
                if alive {
                    self.close(
                        close::REPLACED,
                        "replaced by a newer connection of this session",
                    )
                    .await
                } else {
                    self.close(close::SESSION_ENDED, "session ended").await
                }
            }
        }
    }

    async fn ping(&mut self) -> Step {
        if self.unanswered >= 2 {
            return self
                .close(
                    close::KEEPALIVE_TIMEOUT,
                    "two keep-alive pings went unanswered",
                )
                .await;
        }
        self.unanswered += 1;
        // Requests of this session that ran on a node that has died since (the socket was there
        // and came back here) are answered with -32004 in the log, and so on this socket.
        if let Some(s) = &self.session {
            switchboard_runtime::lost::end_lost_requests_logged(self.app.as_ref(), &s.record.id)
                .await;
        }
        self.send(Message::Ping(Default::default())).await
    }

    /// Writes one logged event unless the socket already has it.
    pub(super) async fn write(&mut self, ev: StreamEvent) -> Step {
        let Some(s) = self.session.as_mut() else {
            return Step::Continue;
        };
        if position_order(&ev.position) <= position_order(&s.last) {
            return Step::Continue;
        }
        let id = EventId::new(StreamId::standalone(), ev.position.clone());
        s.last = ev.position;
        self.send_text(frame::tag(&ev.data, &id.to_string())).await
    }

    pub(super) async fn write_all(&mut self, events: Vec<LoggedEvent>) -> Step {
        for e in events {
            if let Step::Stop = self.write(e.into()).await {
                return Step::Stop;
            }
        }
        Step::Continue
    }

    /// Re-reads the log from the last written position, a page at a time.
    pub(super) async fn catch_up(&mut self) -> Step {
        loop {
            let Some(s) = self.session.as_ref() else {
                return Step::Continue;
            };
            let page = self
                .app
                .store
                .replay(
                    &s.record.id,
                    StreamId::STANDALONE,
                    &s.last,
                    pump::REPLAY_PAGE,
                )
                .await;
            match page {
                Ok(Replay::Events(events)) => {
                    let full = events.len() >= pump::REPLAY_PAGE;
                    if let Step::Stop = self.write_all(events).await {
                        return Step::Stop;
                    }
                    if !full {
                        return Step::Continue;
                    }
                }
                Ok(other) => {
                    tracing::warn!(?other, "WebSocket cannot catch up with its log; closing it");
                    return self.close(close::SESSION_ENDED, "events lost").await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "WebSocket cannot read its log; closing it");
                    return self.close(close::GOING_AWAY, "store unavailable").await;
                }
            }
        }
    }

    /// Appends a message to the session's standalone log; it reaches the socket from there.
    pub(super) async fn log(&mut self, message: &Value) -> Step {
        let Some(s) = self.session.as_ref() else {
            return self.send_text(message.to_string()).await;
        };
        let sid = s.record.id.clone();
        let appended = self
            .app
            .store
            .append(&sid, StreamId::STANDALONE, &message.to_string(), false)
            .await;
        match appended {
            Ok(a) if a.is_stored() => Step::Continue,
            Ok(_) => self.close(close::SESSION_ENDED, "session ended").await,
            Err(e) => {
                // The message answers a request (an `initialize`, a refusal): the error does.
                let id = message.get("id").filter(|v| !v.is_null());
                let id = id.map(|v| RequestId(v.clone()));
                self.failed(e.into(), id.as_ref()).await
            }
        }
    }

    /// A JSON-RPC error straight on the socket, not logged: the answer to a frame that has no
    /// place in the session (not JSON, no session yet, the store failing).
    pub(super) async fn direct(
        &mut self,
        id: Option<&RequestId>,
        code: i64,
        message: String,
    ) -> Step {
        let error = jsonrpc::error_response(id, code, message, None);
        self.send_text(error.to_string()).await
    }

    pub(super) async fn send_text(&mut self, text: String) -> Step {
        self.send(Message::Text(Utf8Bytes::from(text))).await
    }

    pub(super) async fn send(&mut self, message: Message) -> Step {
        match self.ws.send(message).await {
            Ok(()) => Step::Continue,
            Err(_) => Step::Stop,
        }
    }

    pub(super) async fn close(&mut self, code: u16, reason: &str) -> Step {
        let frame = CloseFrame {
            code,
            reason: Utf8Bytes::from(reason.to_owned()),
        };
        if self.ws.send(Message::Close(Some(frame))).await.is_ok() {
            // RFC 6455 §7.1.1: the server closes TCP after the client's close reply, so the client
            // reads the close frame rather than a reset; a client that never replies gets
            // CLOSE_GRACE.
            let reply = async {
                while let Some(Ok(m)) = self.ws.recv().await {
                    if let Message::Close(_) = m {
                        return;
                    }
                }
            };
            let _ = tokio::time::timeout(CLOSE_GRACE, reply).await;
        }
        Step::Stop
    }

    async fn cleanup(self) {
        let Some(s) = self.session else {
            return;
        };
        let sid = &s.record.id;
        self.app
            .replica
            .hub
            .unregister(sid, StreamId::STANDALONE, &s.holder);
        if let Err(e) = self
            .app
            .store
            .release(sid, StreamId::STANDALONE, &s.holder)
            .await
        {
            tracing::debug!(error = %e, "could not release a WebSocket's stream");
        }
    }
}

/// The next message for the attached socket; never resolves before `initialize`.
async fn outbound(session: &mut Option<Attached>) -> Option<Outbound> {
    match session {
        Some(s) => s.conn.rx.recv().await,
        None => std::future::pending().await,
    }
}
