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
//!
//! A message the store cannot take (a Redis promotion, a restart) is tried again until the
//! call's deadline, one message at a time in order ([`crate::exec::outage`]).

use std::sync::Arc;

use parking_lot::Mutex;

use serde_json::Value;
use switchboard_protocol::StreamId;
use switchboard_store::{InflightRequest, StoreError};
use switchboard_upstream::PeerError;
use tokio::sync::oneshot;

use crate::exec::outage::{self, Deadline, Sequence};
use crate::state::App;
use crate::telemetry;
use switchboard_runtime::{Outbound, StreamEvent};
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
    /// The call's messages (this channel's, and those its peer sends to the standalone
    /// stream), logged in order until the call's deadline.
    sequence: Arc<Sequence>,
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

/// Which log a message goes to.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Log {
    /// The request's own stream.
    Own,
    /// The session's standalone stream.
    Standalone,
}

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
        *rs.mode.lock() = Mode::Streaming;
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
        let sequence = Arc::new(Sequence::new(Deadline::of_call(&app)));
        let rs = ResponseStream {
            app,
            sid: sid.to_owned(),
            inflight,
            registered: tokio::sync::Mutex::new(registered),
            gate: Mutex::new(Gate::Open),
            sink,
            mode: Mutex::new(Mode::Pending(Some(tx))),
            sequence,
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
            let mut gate = self.gate.lock();
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
        let mut mode = self.mode.lock();
        if let Mode::Pending(_) = *mode {
            *mode = Mode::Streaming;
            return true;
        }
        false
    }

    /// Sends a request or notification on this stream (switching to SSE if still pending),
    /// after the messages sent before it, logged first (tried again through a store outage until
    /// the call's deadline, [`crate::exec::outage`]).
    pub async fn send(&self, message: &Value) -> Result<(), PeerError> {
        if let Some(why) = self.refuses_requests() {
            if message.get("id").is_some() {
                return Err(PeerError::Unreachable(why.to_owned()));
            }
            let method = message.get("method").and_then(Value::as_str);
            telemetry::notification_rerouted(&self.sid, method.unwrap_or("?"));
            return self.log(message.to_string(), Log::Standalone).await;
        }
        {
            let mut mode = self.mode.lock();
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
        self.log(message.to_string(), Log::Own).await
    }

    /// Logs a message that is not the stream's last ([`Sequence::log`]).
    async fn log(&self, data: String, to: Log) -> Result<(), PeerError> {
        let once = switchboard_store::rules::new_append_id();
        let logged = self
            .sequence
            .log(false, || self.log_once(&data, false, &once, to))
            .await;
        match logged {
            Ok(true) => Ok(()),
            Ok(false) => Err(PeerError::Cancelled),
            Err(why) => {
                tracing::warn!(session = %logged_session(&self.sid), error = %why, "a message of a call could not be logged before the call's deadline; the call ends");
                Err(PeerError::Delivery(why))
            }
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

    /// Sends the final response (the store error instead once a message of the call was given
    /// up, [`crate::exec::outage`]): as the JSON answer when still pending, else as the stream's
    /// last event. Then records the end of the request (idle clock restarts).
    pub async fn finish(&self, response: Value) {
        let response = self.answer_of(response);
        // The answer moves to the JSON side when it is still pending (not copied: an answer may
        // be megabytes, issue 34), else it is the stream's last event.
        let streamed = {
            let mut mode = self.mode.lock();
            let prev = std::mem::replace(&mut *mode, Mode::Done);
            match prev {
                Mode::Pending(mut tx) => {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(First::Json(response));
                    }
                    None
                }
                Mode::Streaming => Some(response),
                Mode::Done => return,
            }
        };
        let store = &self.app.store;
        let key = &self.inflight.request_key;
        match streamed {
            None => self.settle_json().await,
            Some(response) => {
                self.append_final(response).await;
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
            let mut mode = self.mode.lock();
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
            _ => self.app.replica.hub.detach(sid, stream, holder),
        };
        let Some(conn) = detached else {
            self.finish(response).await;
            return end.await;
        };
        *self.mode.lock() = Mode::Done;
        self.register().await;
        let data = response.to_string();
        let logged = self.app.store.append(sid, stream, &data, true).await;
        end.await;
        let position = match logged {
            Ok(appended) => appended.position,
            Err(e) => {
                tracing::warn!(error = %e, session = %logged_session(sid), "could not log the final response of a session that ends");
                // Past any position the connection has written: ends its stream all the same.
                switchboard_runtime::hub::PAST_THE_LOG.to_owned()
            }
        };
        let event = switchboard_runtime::Outbound::Event(Box::new(StreamEvent {
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
            let mut gate = self.gate.lock();
            if *gate == Gate::Open {
                *gate = Gate::Closed;
            }
            *gate == Gate::Started
        };
        // A registration holding the lock is under way.
        started || self.registered.try_lock().map_or(true, |r| r.is_some())
    }

    /// The final response must reach the log, or the client's stream would wait forever: it is
    /// tried after the stream's other messages until the call's deadline, registering the
    /// request first if that failed so far ([`crate::exec::outage`]). Every attempt carries one
    /// append id: a failed one may have stored the response all the same (too few replicas
    /// confirmed it, or the reply was lost), and the next must not log it a second time. Not
    /// logged by the deadline, it is written straight to the stream's connection when that is
    /// open here, past the log (the client reads it; a resume elsewhere cannot). When a message
    /// of the call was given up already (the response is then the store error, see
    /// [`ResponseStream::finish`]), it is written so first, as the store just kept failing, and
    /// tried in the log once for a client that resumes elsewhere.
    async fn append_final(&self, response: Value) {
        let data = switchboard_protocol::jsonrpc::to_text(&response);
        drop(response);
        let written = self.sequence.lost().is_some();
        if written {
            self.write_unlogged(data.clone()).await;
        }
        let once = switchboard_store::rules::new_append_id();
        let logged = self
            .sequence
            .log(true, || self.log_once(&data, true, &once, Log::Own))
            .await;
        let why = match logged {
            Ok(true) => return,
            Ok(false) => {
                tracing::warn!(session = %logged_session(&self.sid), "the session ended before a final response could be logged; closing its stream");
                let (stream, holder) = (&self.inflight.stream, &self.inflight.holder);
                return self.app.replica.hub.close(&self.sid, stream, holder);
            }
            Err(why) => why,
        };
        tracing::error!(session = %logged_session(&self.sid), error = %why, "could not log a final response before the call's deadline; written to its connection here, if open, unlogged");
        if !written {
            self.write_unlogged(data).await;
        }
    }

    /// The call's answer: `response`, or the store error once one of its messages was given up
    /// ([`crate::exec::outage`]: an answer after a gap would hide the gap).
    fn answer_of(&self, response: Value) -> Value {
        match self.sequence.lost() {
            Some(why) => outage::store_unreachable(&response["id"], why),
            None => response,
        }
    }

    /// Writes the stream's final event straight to its connection when that is open here (the
    /// store could not log it), past the log ([`switchboard_runtime::hub::PAST_THE_LOG`]), and takes
    /// the connection out of the hub.
    async fn write_unlogged(&self, data: String) {
        let (stream, holder) = (&self.inflight.stream, &self.inflight.holder);
        let Some(conn) = self.app.replica.hub.detach(&self.sid, stream, holder) else {
            return;
        };
        let event = Outbound::Event(Box::new(StreamEvent {
            position: switchboard_runtime::hub::PAST_THE_LOG.to_owned(),
            data,
            end: true,
        }));
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), conn.send(event)).await;
    }

    /// One attempt to log `data` with append id `once`
    /// ([`switchboard_store::EventLog::append_once`]): on this request's stream (registered
    /// first; a registration that fails is an error, so that no event carries an id no node
    /// could resume from) and handed to its connection when that is here, or on the session's
    /// standalone stream (`to`, or every message of a standalone-sink channel; it never ends),
    /// whose events the store delivers itself (one ordered path for every writer). `Ok(false)`:
    /// the session is gone.
    async fn log_once(
        &self,
        data: &str,
        end: bool,
        once: &str,
        to: Log,
    ) -> Result<bool, StoreError> {
        let (sid, store) = (self.sid.as_str(), &self.app.store);
        if to == Log::Standalone || self.sink == Sink::Standalone {
            let stream = StreamId::STANDALONE;
            let appended = store.append_once(sid, stream, data, false, once).await;
            return appended.map(|_| true);
        }
        match self.register().await {
            Registration::Registered => {}
            Registration::SessionGone => return Ok(false),
            Registration::Failed => return Err(StoreError::Backend(UNREGISTERED.into())),
        }
        let stream = &self.inflight.stream;
        let appended = store.append_once(sid, stream, data, end, once).await?;
        let holder = match appended.holder {
            Some(holder) => Some(holder),
            None if appended.is_stored()
                && self
                    .app
                    .replica
                    .hub
                    .holds(sid, stream, &self.inflight.holder) =>
            {
                self.registration_lost(end).await;
                Some(self.inflight.holder.clone())
            }
            None => None,
        };
        if let Some(holder) = holder.filter(|h| self.app.is_local(h)) {
            let ev = StreamEvent {
                position: appended.position,
                data: data.to_owned(),
                end,
            };
            self.app.replica.hub.deliver(sid, stream, &holder, ev);
        }
        Ok(true)
    }

    /// The store knows no holder of this request's stream although its connection is still here:
    /// a failover lost the writes that registered it (a graceful Sentinel failover, or one with
    /// `redis.min_replicas_acked = 0`, can lose the old primary's last writes). The event is
    /// handed to the connection all the same (it is logged), and, unless it ends the stream, the
    /// request is registered again, so that later events, a cancellation and a resumption find
    /// it. (Before, its client waited for events that no node delivered.)
    async fn registration_lost(&self, end: bool) {
        tracing::warn!(session = %logged_session(&self.sid), stream = %self.inflight.stream, "the store lost this request's registration (a failover lost a write): registering it again");
        if end {
            return;
        }
        if let Err(e) = self.app.store.register(&self.sid, &self.inflight).await {
            tracing::warn!(error = %e, session = %logged_session(&self.sid), "could not register a request in flight again");
        }
    }

    /// The call's messages in order ([`Sequence`]): its peer logs the ones for the session's
    /// standalone stream through it too, so a message given up anywhere ends the call with the
    /// store error.
    pub(crate) fn sequence(&self) -> Arc<Sequence> {
        self.sequence.clone()
    }
}
