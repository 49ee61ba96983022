//! The answer channel of one POST request.
//!
//! A request is answered as plain JSON when its result is ready within `sse_after` and nothing
//! else was sent before it; otherwise as an SSE stream (MCP 2025-11-25, basic/transports, Sending
//! Messages item 5: the server chooses per request). Once streaming, every message is appended to
//! the stream's event log *before* it is handed to the connection, so a client whose connection
//! drops can resume on any node with `Last-Event-ID`. The request keeps running after a
//! disconnect (a disconnect is not a cancellation, item 6).
//!
//! A client whose `Accept` lacks `text/event-stream` (see [`crate::edge::header_checks`]) and a request of a
//! JSON-RPC batch are answered as one JSON body whatever the timing
//! ([`ResponseStream::new_json_only`], [`ResponseStream::for_batch`]): their notifications go to
//! the session's standalone stream, and server-to-client requests are refused.
//!
//! A transport with one stream per session (the WebSocket transport) answers on the
//! session's standalone stream instead ([`ResponseStream::for_standalone`]): every message of the
//! request, its response included, is appended to that log and reaches whichever connection holds
//! it, on any node.

use std::sync::Mutex;

use serde_json::Value;
use switchboard_protocol::StreamId;
use switchboard_store::InflightRequest;
use switchboard_upstream::PeerError;
use tokio::sync::oneshot;

use crate::state::App;
use crate::streams::hub::StreamEvent;
use crate::telemetry;
use switchboard_telemetry::trace::logged_session;

/// How the HTTP side answers, decided by the first thing the request produces.
#[derive(Debug)]
pub enum First {
    /// The response, to send as `application/json`.
    Json(Value),
    /// Something streamed first: answer with SSE.
    Stream,
}

enum Mode {
    Pending(Option<oneshot::Sender<First>>),
    Streaming,
    Done,
}

/// The answer channel of one POST request (one POST response stream).
///
/// The request is registered in flight in the store lazily ([`ResponseStream::register`]): an
/// answer ready at once goes out as JSON having cost the session one store round trip in all;
/// only a request that streams (or outlives `sse_after`) pays for its registration.
pub struct ResponseStream {
    app: App,
    sid: String,
    /// What registers the request: its id key, stream, this node and the holder token.
    inflight: InflightRequest,
    /// How the last registration went; `None` until one ran. A failed one is tried again by the
    /// next caller of [`ResponseStream::register`] (the store may be back by then).
    registered: tokio::sync::Mutex<Option<Registration>>,
    /// Whether a lazy registration may still start (see [`Gate`]).
    gate: Mutex<Gate>,
    sink: Sink,
    mode: Mutex<Mode>,
}

/// A lazy registration's state: a JSON answer that finishes first closes it, so a registration
/// started by the HTTP side's timer either runs before the answer's bookkeeping (which then
/// undoes it) or not at all.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Gate {
    Open,
    Started,
    Closed,
}

/// How a request's registration in flight went ([`ResponseStream::register`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registration {
    /// Registered: its stream's events are logged under an id any node can resume from, and
    /// reach their holder on any node.
    Registered,
    /// The session is gone (expired, deleted, reaped): nothing was registered, and nothing will
    /// be.
    SessionGone,
    /// Not registered: the store failed (Redis unreachable, a failover under way; tried again
    /// on the next event), or the answer already went out as JSON. No event of this stream may
    /// reach the client with an id: no node could resume from it.
    Failed,
}

/// Why an event of a request whose registration failed is not sent.
const UNREGISTERED: &str = "the request's stream could not be registered in the store";

/// Where a channel's messages go.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sink {
    /// The POST's own answer: JSON, or an SSE stream with its own log.
    Post,
    /// The POST's own answer, always one JSON body (the client accepts only JSON).
    JsonOnly,
    /// One answer inside a batch's JSON array.
    Batch,
    /// The session's standalone stream (its log is the only record; nothing is answered inline).
    Standalone,
}

impl ResponseStream {
    /// A channel in the pending state for a request admitted but not yet registered; the HTTP side
    /// waits on the returned receiver.
    pub fn new(
        app: App,
        sid: &str,
        inflight: InflightRequest,
    ) -> (ResponseStream, oneshot::Receiver<First>) {
        Self::build(app, sid, inflight, None, Sink::Post)
    }

    /// Like [`ResponseStream::new`] for a client that accepts only `application/json`: the
    /// answer is always [`First::Json`]; notifications go to the session's standalone stream and
    /// server-to-client requests are refused ([`crate::edge::header_checks::JSON_ONLY_REQUESTS`]). Registered
    /// lazily like any request (the HTTP side calls [`ResponseStream::register`] once the answer
    /// takes longer than `sse_after`).
    pub fn new_json_only(
        app: App,
        sid: &str,
        inflight: InflightRequest,
    ) -> (ResponseStream, oneshot::Receiver<First>) {
        Self::build(app, sid, inflight, None, Sink::JsonOnly)
    }

    /// A channel for one request of a JSON-RPC batch (MCP 2025-03-26), registered in flight up
    /// front: the answer is always JSON, notifications the request sends go to the session's
    /// standalone stream, and server-to-client requests fail, since a batch answer has no stream
    /// to carry them.
    pub fn for_batch(
        app: App,
        sid: &str,
        inflight: InflightRequest,
    ) -> (ResponseStream, oneshot::Receiver<First>) {
        Self::build(
            app,
            sid,
            inflight,
            Some(Registration::Registered),
            Sink::Batch,
        )
    }

    /// A channel for a request registered in flight up front whose messages, response included,
    /// are appended to the session's standalone stream (`inflight.stream` only names the request's
    /// registration, removed when it finishes). The store delivers standalone events to the
    /// stream's holder on whichever node it is.
    pub fn for_standalone(app: App, sid: &str, inflight: InflightRequest) -> ResponseStream {
        let (rs, _) = Self::build(
            app,
            sid,
            inflight,
            Some(Registration::Registered),
            Sink::Standalone,
        );
        *rs.lock() = Mode::Streaming;
        rs
    }

    fn build(
        app: App,
        sid: &str,
        inflight: InflightRequest,
        registered: Option<Registration>,
        sink: Sink,
    ) -> (ResponseStream, oneshot::Receiver<First>) {
        let (tx, rx) = oneshot::channel();
        let rs = ResponseStream {
            app,
            sid: sid.to_owned(),
            inflight,
            registered: tokio::sync::Mutex::new(registered),
            gate: Mutex::new(Gate::Open),
            sink,
            mode: Mutex::new(Mode::Pending(Some(tx))),
        };
        (rs, rx)
    }

    /// Registers the request in flight (concurrent callers wait for the first; once it took, or
    /// found the session gone, that answer stands): from then on a duplicate id is refused and
    /// `notifications/cancelled` reaches it from every node, it counts against
    /// `session.max_inflight`, and its stream's events reach the connection holding it. Every
    /// event is appended only once this is [`Registration::Registered`], so none can miss its
    /// holder and none carries an id no node knows. A store failure is logged and tried again by
    /// the next caller (registering twice is harmless: the store's entries are keyed by the
    /// request and its stream).
    pub async fn register(&self) -> Registration {
        {
            let mut gate = self.gate.lock().unwrap_or_else(|p| p.into_inner());
            match *gate {
                Gate::Closed => return Registration::Failed,
                Gate::Open => *gate = Gate::Started,
                Gate::Started => {}
            }
        }
        let mut registered = self.registered.lock().await;
        if let Some(done @ (Registration::Registered | Registration::SessionGone)) = *registered {
            return done;
        }
        let outcome = match self.app.store.register(&self.sid, &self.inflight).await {
            Ok(true) => Registration::Registered,
            Ok(false) => Registration::SessionGone,
            Err(e) => {
                tracing::warn!(error = %e, session = %logged_session(&self.sid), "could not register a request in flight");
                Registration::Failed
            }
        };
        *registered = Some(outcome);
        outcome
    }

    /// How the last registration went, without trying one (`None`: none ran yet). Waits for a
    /// registration under way.
    pub async fn registration(&self) -> Option<Registration> {
        *self.registered.lock().await
    }

    /// The HTTP side gave up waiting for a quick answer: from now on, stream. `false` when the
    /// first item is already decided (read it from the receiver).
    pub fn switch_to_stream(&self) -> bool {
        let mut mode = self.lock();
        if let Mode::Pending(_) = *mode {
            *mode = Mode::Streaming;
            return true;
        }
        false
    }

    /// Sends a request or notification on this stream (switching to SSE if still pending).
    pub async fn send(&self, message: &Value) -> Result<(), PeerError> {
        if let Some(why) = self.refuses_requests() {
            if message.get("id").is_some() {
                return Err(PeerError::Unreachable(why.to_owned()));
            }
            let method = message.get("method").and_then(Value::as_str);
            telemetry::notification_rerouted(&self.sid, method.unwrap_or("?"));
            return self.append_standalone(message.to_string(), None).await;
        }
        {
            let mut mode = self.lock();
            match &mut *mode {
                Mode::Pending(tx) => {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(First::Stream);
                    }
                    *mode = Mode::Streaming;
                }
                Mode::Streaming => {}
                Mode::Done => return Err(PeerError::Cancelled),
            }
        }
        self.registered_or_fail().await?;
        self.append(message.to_string(), false, None).await
    }

    /// [`ResponseStream::register`], as a delivery error when it did not take: an event appended
    /// to a stream no node knows would carry an id no client could resume from.
    async fn registered_or_fail(&self) -> Result<(), PeerError> {
        match self.register().await {
            Registration::Registered => Ok(()),
            Registration::SessionGone => Err(PeerError::Cancelled),
            Registration::Failed => Err(PeerError::Delivery(UNREGISTERED.into())),
        }
    }

    /// Why no server-to-client request can be sent on this channel, if none can: it answers
    /// with one JSON body, which has no room for one.
    pub fn refuses_requests(&self) -> Option<&'static str> {
        match self.sink {
            Sink::JsonOnly => Some(crate::edge::header_checks::JSON_ONLY_REQUESTS),
            Sink::Batch => Some(
                "this call is part of a JSON-RPC batch, whose answer has no stream on which a \
                 request could be sent to the client",
            ),
            Sink::Post | Sink::Standalone => None,
        }
    }

    /// Sends the final response: as the JSON answer when still pending, else as the stream's last
    /// event. Then records the end of the request (idle clock restarts).
    pub async fn finish(&self, response: Value) {
        let json = {
            let mut mode = self.lock();
            let prev = std::mem::replace(&mut *mode, Mode::Done);
            match prev {
                Mode::Pending(mut tx) => {
                    Some(tx.take().map(|tx| tx.send(First::Json(response.clone()))))
                }
                Mode::Streaming => None,
                Mode::Done => return,
            }
        };
        let store = &self.app.store;
        let key = &self.inflight.request_key;
        match json {
            Some(_) => self.settle_json().await,
            None => {
                self.append_final(response.to_string()).await;
                // A standalone-sink request's own stream was only its registration: drop it.
                let registration = (self.sink == Sink::Standalone).then_some(&self.inflight.stream);
                if let Err(e) = store
                    .finish(&self.sid, key, registration.map(|s| s.as_str()))
                    .await
                {
                    tracing::warn!(error = %e, session = %logged_session(&self.sid), "could not record the end of a request");
                }
            }
        }
    }

    /// The store's bookkeeping after a JSON answer went out.
    async fn settle_json(&self) {
        // Answered at once and never registered: nothing to undo in the store (the session was
        // touched when the request was admitted).
        if !self.close_registration() {
            return;
        }
        // A registration under way is waited for, so its entry is the one removed.
        self.register().await;
        let key = &self.inflight.request_key;
        let stream = Some(self.inflight.stream.as_str());
        if let Err(e) = self.app.store.finish(&self.sid, key, stream).await {
            tracing::warn!(error = %e, session = %logged_session(&self.sid), "could not record the end of a request");
        }
    }

    /// Sends the final response of a request whose session ends with it (an upstream asked, see
    /// [`switchboard_upstream::SessionHandle::end_session`]), so that the session is unknown to
    /// every node (404) before the client can read the response: a request the client sends
    /// after reading it cannot be admitted anywhere (and then cancelled by the end). `end` ends
    /// the session.
    ///
    /// - A JSON answer (the HTTP handler on this node waits for it): `end`, then the answer.
    /// - A streamed answer whose connection is on this node: the connection is taken out of the
    ///   hub (so the end of the session does not close it first), the answer is logged (while the
    ///   session still exists, for its position), then `end`, then the answer is written to the
    ///   connection directly. A connection that fell behind re-reads the log, which is gone by
    ///   then: it closes without the answer.
    /// - Otherwise (the stream is held on another node since the client resumed it there, or the
    ///   answer goes to the standalone stream): the answer through the store, then `end`.
    pub async fn finish_ending<F>(&self, response: Value, end: F)
    where
        F: std::future::Future<Output = ()>,
    {
        let pending = {
            let mut mode = self.lock();
            match &mut *mode {
                // Done from now on: the HTTP side can no longer switch to a stream meanwhile.
                Mode::Pending(tx) => {
                    let tx = tx.take();
                    *mode = Mode::Done;
                    Some(tx)
                }
                Mode::Streaming => None,
                Mode::Done => return,
            }
        };
        if let Some(tx) = pending {
            end.await;
            if let Some(tx) = tx {
                let _ = tx.send(First::Json(response));
            }
            return self.settle_json().await;
        }
        let (sid, stream, holder) = (&self.sid, &self.inflight.stream, &self.inflight.holder);
        let detached = match self.sink {
            Sink::Standalone => None,
            _ => self.app.hub.detach(sid, stream, holder),
        };
        let Some(conn) = detached else {
            self.finish(response).await;
            return end.await;
        };
        *self.lock() = Mode::Done;
        self.register().await;
        let data = response.to_string();
        let logged = self.app.store.append(sid, stream, &data, true).await;
        end.await;
        let position = match logged {
            Ok(appended) => appended.position,
            Err(e) => {
                tracing::warn!(error = %e, session = %logged_session(sid), "could not log the final response of a session that ends");
                // Past any position the connection has written: ends its stream all the same.
                crate::streams::hub::PAST_THE_LOG.to_owned()
            }
        };
        let event = crate::streams::hub::Outbound::Event(Box::new(StreamEvent {
            position,
            data,
            end: true,
        }));
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), conn.send(event)).await;
    }

    /// Closes a lazy registration that has not started; `true` when the request is (or is being)
    /// registered, so that its end must be recorded.
    fn close_registration(&self) -> bool {
        let started = {
            let mut gate = self.gate.lock().unwrap_or_else(|p| p.into_inner());
            if *gate == Gate::Open {
                *gate = Gate::Closed;
            }
            *gate == Gate::Started
        };
        // A registration holding the lock is under way.
        started || self.registered.try_lock().map_or(true, |r| r.is_some())
    }

    /// The final response must reach the log, or the client's stream would wait forever: retry
    /// through a store outage (0.5 s, 1 s, 2 s, 4 s, 8 s), registering the request first if that
    /// failed so far; if it still fails, close the local connection so the client sees the
    /// stream end and can resume or retry. Every attempt carries one append id: a failed one may
    /// have stored the response all the same (too few replicas confirmed it, or the reply was
    /// lost), and the next must not log it a second time.
    async fn append_final(&self, data: String) {
        let once = switchboard_store::rules::new_append_id();
        let mut delay = std::time::Duration::from_millis(500);
        for attempt in 1..=6 {
            let appended = match self.register().await {
                Registration::Registered => self.append(data.clone(), true, Some(&once)).await,
                Registration::Failed => Err(PeerError::Delivery(UNREGISTERED.into())),
                Registration::SessionGone => {
                    tracing::warn!(session = %logged_session(&self.sid), "the session ended before a final response could be logged; closing its stream");
                    break;
                }
            };
            match appended {
                Ok(()) => return,
                Err(e) if attempt < 6 => {
                    tracing::warn!(error = %e, session = %logged_session(&self.sid), attempt, "could not log a final response; retrying");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                Err(e) => {
                    tracing::error!(error = %e, session = %logged_session(&self.sid), "could not log a final response; closing its stream")
                }
            }
        }
        self.app
            .hub
            .close(&self.sid, &self.inflight.stream, &self.inflight.holder);
    }

    /// Appends to this request's stream; with `once`, as [`switchboard_store::EventLog::append_once`] with that id.
    async fn append(&self, data: String, end: bool, once: Option<&str>) -> Result<(), PeerError> {
        if self.sink == Sink::Standalone {
            return self.append_standalone(data, once).await;
        }
        let (sid, stream) = (&self.sid, &self.inflight.stream);
        let appended = match once {
            Some(id) => {
                self.app
                    .store
                    .append_once(sid, stream, &data, end, id)
                    .await
            }
            None => self.app.store.append(sid, stream, &data, end).await,
        };
        let appended = appended.map_err(|e| PeerError::Delivery(e.to_string()))?;
        if let Some(holder) = appended.holder {
            if self.app.is_local(&holder) {
                let ev = StreamEvent {
                    position: appended.position,
                    data,
                    end,
                };
                self.app
                    .hub
                    .deliver(&self.sid, &self.inflight.stream, &holder, ev);
            }
        }
        Ok(())
    }

    /// Appends to the session's standalone stream. It never ends, and the store itself delivers
    /// its events to the holder (local or not) through the bus, one ordered path for every
    /// writer.
    async fn append_standalone(&self, data: String, once: Option<&str>) -> Result<(), PeerError> {
        let (sid, stream) = (&self.sid, StreamId::STANDALONE);
        let appended = match once {
            Some(id) => {
                self.app
                    .store
                    .append_once(sid, stream, &data, false, id)
                    .await
            }
            None => self.app.store.append(sid, stream, &data, false).await,
        };
        appended
            .map(|_| ())
            .map_err(|e| PeerError::Delivery(e.to_string()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Mode> {
        self.mode.lock().unwrap_or_else(|p| p.into_inner())
    }
}
