//! The task behind one WebSocket: client frames in, the session's standalone stream out, pings.
//!
//! Out: events of the session's standalone log, replayed after the client's last event id and
//! then live from the hub, in log order and exactly once (the same rules as the SSE pump,
//! [`crate::pump`]: skip anything at or before the last written position; a full queue re-reads
//! the log). In: each text frame is one JSON-RPC message, handled like a POST's (requests run in
//! their own task via [`crate::run::spawn`] and answer into the log; notifications and responses
//! go through [`crate::post::deliver`]). Frames that are not JSON get -32700 (id null) on the
//! socket; binary frames close it with 1003; a message over `max_body_bytes` closes it with 1009.
//! Pings go out every `keepalive_interval_ms`; two unanswered in a row close it with 4408.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use serde_json::Value;
use switchboard_protocol::ids::position_order;
use switchboard_protocol::{codes, jsonrpc, Body, EventId, RequestId, StreamId};
use switchboard_store::{InflightRequest, LoggedEvent, Replay};
use tokio::time::{interval, MissedTickBehavior};

use super::frame::{self, close};
use super::Attached;
use crate::error::HttpError;
use crate::hub::{Outbound, StreamEvent};
use crate::response::ResponseStream;
use crate::run::{self, Job};
use crate::state::App;
use crate::{post, pump, session};

/// How long a closing socket waits for the client's close frame before dropping the connection.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether the connection goes on.
enum Step {
    Continue,
    Stop,
}

struct Conn {
    app: App,
    ws: WebSocket,
    /// `None` until `initialize` on a new socket.
    session: Option<Attached>,
    /// Pings sent since the last pong.
    unanswered: u32,
}

/// Runs the connection until either side closes it; `attached` is the resumed session, with the
/// first page of its replay.
pub async fn run(app: App, ws: WebSocket, attached: Option<(Attached, Vec<LoggedEvent>)>) {
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

    async fn on_text(&mut self, text: &str) -> Step {
        match Body::parse(text.as_bytes()) {
            Err(e) => self.direct(None, e.code(), e.message().to_owned()).await,
            Ok(Body::Batch(_)) => {
                let why = "one JSON-RPC message per frame: batches are not accepted on a WebSocket";
                self.direct(None, codes::INVALID_REQUEST, why.to_owned())
                    .await
            }
            Ok(Body::Single(m)) => match (&self.session, m) {
                (None, switchboard_protocol::Message::Request { id, method, raw })
                    if method == "initialize" =>
                {
                    self.initialize(id, raw).await
                }
                (None, m) => {
                    let id = match &m {
                        switchboard_protocol::Message::Request { id, .. } => Some(id.clone()),
                        _ => None,
                    };
                    let why = "the first message on a new WebSocket must be initialize (or resume a session with Mcp-Session-Id)";
                    self.direct(id.as_ref(), codes::INVALID_REQUEST, why.to_owned())
                        .await
                }
                (Some(_), switchboard_protocol::Message::Request { id, method, raw }) => {
                    self.request(id, method, raw).await
                }
                (Some(s), m) => match post::deliver(&self.app, &s.record, m).await {
                    Ok(()) => Step::Continue,
                    Err(e) => self.failed(e).await,
                },
            },
        }
    }

    /// `initialize` on a new socket: creates the session like a POST would, attaches the socket
    /// to its standalone stream, and logs the answer there (so it carries an event id too).
    async fn initialize(&mut self, id: RequestId, raw: Value) -> Step {
        let created = crate::initialize::create(&self.app, &id, &raw).await;
        let (answer, sid) = match created {
            Ok((answer, Some(sid))) => (answer, sid),
            Ok((answer, None)) => return self.send_text(answer.to_string()).await,
            Err(e @ HttpError::AtCapacity { .. }) => {
                self.direct(Some(&id), e.code(), e.to_string()).await;
                return self
                    .close(close::TRY_AGAIN_LATER, "session limit reached")
                    .await;
            }
            Err(e) => return self.direct(Some(&id), e.code(), e.to_string()).await,
        };
        let attached = async {
            let record = session::load(&self.app, &sid, None)
                .await?
                .unwrap_or_else(|(r, _)| r);
            super::attach(&self.app, record, None).await
        };
        match attached.await {
            Ok((a, _)) => self.session = Some(a),
            Err(e) => return self.failed(e).await,
        }
        self.log(&frame::with_session_id(answer, sid.as_str()))
            .await
    }

    /// A request on an attached session: registered in flight up front (duplicate ids, the
    /// in-flight cap and cancellation from any node work as for POST), then run; everything it
    /// sends, its response included, goes to the standalone log.
    async fn request(&mut self, id: RequestId, method: String, raw: Value) -> Step {
        let Some(s) = self.session.as_mut() else {
            return Step::Continue;
        };
        let app = self.app.clone();
        let sid = s.record.id.clone();
        let key = id.key();
        let Some(cancel) = app.calls.try_start(&sid, &key) else {
            return self
                .log(&post::refusal(&id, session::Refusal::DuplicateId))
                .await;
        };
        let inflight = InflightRequest {
            request_key: key.clone(),
            stream: StreamId::generate().to_string(),
            node: app.node_id().to_owned(),
            holder: String::new(),
        };
        let sid_parsed = switchboard_protocol::SessionId::parse(&sid);
        let loaded = match sid_parsed {
            Some(p) => session::load(&app, &p, Some(&inflight)).await,
            None => Err(HttpError::UnknownSession),
        };
        let record = match loaded {
            Ok(Ok(record)) => record,
            Ok(Err((_, why))) => {
                app.calls.end(&sid, &key);
                return self.log(&post::refusal(&id, why)).await;
            }
            Err(e) => {
                app.calls.end(&sid, &key);
                return self.failed(e).await;
            }
        };
        s.record = record.clone();
        let response = ResponseStream::for_standalone(app.clone(), &sid, inflight);
        run::spawn(Job {
            app,
            session: record,
            id,
            method,
            raw,
            response: Arc::new(response),
            cancel,
        });
        Step::Continue
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

    /// A store or session failure while handling a frame: an ended session closes the socket
    /// (4404); anything else is reported as a JSON-RPC error and the socket stays.
    async fn failed(&mut self, e: HttpError) -> Step {
        if e == HttpError::UnknownSession {
            return self.close(close::SESSION_ENDED, "session not found").await;
        }
        self.direct(None, e.code(), e.to_string()).await
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
        self.send(Message::Ping(Default::default())).await
    }

    /// Writes one logged event unless the socket already has it.
    async fn write(&mut self, ev: StreamEvent) -> Step {
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

    async fn write_all(&mut self, events: Vec<LoggedEvent>) -> Step {
        for e in events {
            let ev = StreamEvent {
                position: e.position,
                data: e.data,
                end: e.end,
            };
            if let Step::Stop = self.write(ev).await {
                return Step::Stop;
            }
        }
        Step::Continue
    }

    /// Re-reads the log from the last written position, a page at a time.
    async fn catch_up(&mut self) -> Step {
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
    async fn log(&mut self, message: &Value) -> Step {
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
            Err(e) => self.failed(e.into()).await,
        }
    }

    /// A JSON-RPC error straight on the socket, not logged: the answer to a frame that has no
    /// place in the session (not JSON, no session yet, the store failing).
    async fn direct(&mut self, id: Option<&RequestId>, code: i64, message: String) -> Step {
        let error = jsonrpc::error_response(id, code, message, None);
        self.send_text(error.to_string()).await
    }

    async fn send_text(&mut self, text: String) -> Step {
        self.send(Message::Text(Utf8Bytes::from(text))).await
    }

    async fn send(&mut self, message: Message) -> Step {
        match self.ws.send(message).await {
            Ok(()) => Step::Continue,
            Err(_) => Step::Stop,
        }
    }

    async fn close(&mut self, code: u16, reason: &str) -> Step {
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
