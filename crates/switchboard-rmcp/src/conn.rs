//! The task behind one open SSE connection: its priming event, the events it replays from the
//! log, then live events (from this replica's recorders, or from other replicas over the bus),
//! and, for a resumed POST stream whose request runs on another replica, that replica's
//! liveness, so that a dead replica's request ends with error -32004 instead of a hang.
//!
//! Every event carries its log position; the task remembers the last one it sent and skips
//! anything at or before it, so an event that comes both live and from the log is sent once.
//! Event ids are `<stream>_<position>` (switchboard-protocol's [`EventId`]): `Last-Event-ID`
//! alone names the stream to resume and where (MCP 2025-11-25, basic/transports,
//! Resumability), and it is only honoured inside the session whose `Mcp-Session-Id` comes with it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::model::{ServerJsonRpcMessage, ServerNotification};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use switchboard_protocol::ids::position_order;
use switchboard_protocol::{codes, jsonrpc, EventId, RequestId, StreamId};
use switchboard_store::{LoggedEvent, Replay, RunningRequest};
use switchboard_telemetry::trace::logged_session;
use tokio::sync::mpsc;
use tokio::time::{interval, MissedTickBehavior};
use tokio_stream::wrappers::ReceiverStream;

use crate::hub::{ConnHandle, Outbound, StreamEvent};
use crate::node::{Appending, Node};

/// Events read from a log per store round trip: a long log is paged, never loaded whole.
pub(crate) const REPLAY_PAGE: usize = 256;
/// Messages queued between a connection task and rmcp's SSE writer.
const OUT_QUEUE: usize = 16;
/// How long a closing connection waits for the store to release its stream.
const RELEASE_LIMIT: Duration = Duration::from_secs(5);

/// What to open.
pub(crate) struct Open {
    /// Session id.
    pub sid: String,
    /// Stream id.
    pub stream: String,
    /// This connection's holder token.
    pub holder: String,
    /// Its hub registration.
    pub handle: ConnHandle,
    /// Send a priming event first (a fresh stream): its id names this position.
    pub priming: bool,
    /// Events to send before live ones (a resumption's first page).
    pub replay: Vec<LoggedEvent>,
    /// The position the client already has (`0-0` for none).
    pub after: String,
    /// The stream's request runs on another replica: watch that replica.
    pub watch: Option<RunningRequest>,
    /// Nothing comes after the log (the request is over): end once it is sent.
    pub close_after_replay: bool,
}

/// Starts the connection task; the stream rmcp writes to the client.
pub(crate) fn spawn(node: Arc<Node>, open: Open) -> ReceiverStream<ServerSseMessage> {
    let (out, rx) = mpsc::channel(OUT_QUEUE);
    let task = Conn {
        last: open.after.clone(),
        node: node.clone(),
        open,
        out,
    };
    node.tasks.spawn(task.run());
    ReceiverStream::new(rx)
}

struct Conn {
    node: Arc<Node>,
    open: Open,
    last: String,
    out: mpsc::Sender<ServerSseMessage>,
}

/// Whether the connection goes on.
enum Step {
    Continue,
    Stop,
}

impl Conn {
    async fn run(mut self) {
        if let Step::Continue = self.start().await {
            if !self.open.close_after_replay {
                self.live().await;
            }
        }
        self.cleanup().await;
    }

    async fn start(&mut self) -> Step {
        if self.open.priming {
            let id = EventId::new(self.stream_id(), self.last.clone()).to_string();
            let priming = ServerSseMessage::priming(id, self.node.config.sse_retry);
            if self.out.send(priming).await.is_err() {
                return Step::Stop;
            }
        }
        let replay = std::mem::take(&mut self.open.replay);
        let full = replay.len() >= REPLAY_PAGE;
        for event in replay {
            if let Step::Stop = self.write(event.into()).await {
                return Step::Stop;
            }
        }
        if full {
            return self.catch_up().await;
        }
        Step::Continue
    }

    async fn live(&mut self) {
        let config = &self.node.config;
        let mut recheck = interval(config.log_recheck_interval);
        recheck.set_missed_tick_behavior(MissedTickBehavior::Delay);
        recheck.tick().await;
        let mut liveness = interval(config.liveness_check_interval);
        liveness.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let standalone = self.open.stream == StreamId::STANDALONE;
        let (draining, stopped) = (self.node.draining.clone(), self.node.stopped.clone());
        loop {
            if self.open.handle.lagged.swap(false, Ordering::SeqCst) {
                if let Step::Stop = self.catch_up().await {
                    return;
                }
            }
            let step = tokio::select! {
                m = self.open.handle.rx.recv() => match m {
                    Some(Outbound::Event(event)) => self.write(*event).await,
                    Some(Outbound::CatchUp) => Step::Continue,
                    Some(Outbound::Close) | None => Step::Stop,
                },
                _ = recheck.tick() => self.catch_up().await,
                _ = liveness.tick(), if self.open.watch.is_some() => self.check_running().await,
                () = self.out.closed() => Step::Stop,
                // Draining: the standalone stream moves to another replica at once; a POST
                // stream stays until its request answers.
                () = draining.cancelled(), if standalone => Step::Stop,
                () = stopped.cancelled() => Step::Stop,
            };
            if let Step::Stop = step {
                return;
            }
        }
    }

    fn stream_id(&self) -> StreamId {
        StreamId::parse(&self.open.stream).unwrap_or_else(StreamId::standalone)
    }

    /// Sends one event unless it is at or before the last one sent; stops after an end event.
    async fn write(&mut self, event: StreamEvent) -> Step {
        if position_order(&event.position) <= position_order(&self.last) {
            return Step::Continue;
        }
        self.last = event.position.clone();
        if event.end && event.data == NO_ANSWER {
            return Step::Stop;
        }
        match serde_json::from_str::<ServerJsonRpcMessage>(&event.data) {
            Ok(message) => {
                let id = EventId::new(self.stream_id(), event.position).to_string();
                if self
                    .out
                    .send(ServerSseMessage::new(id, message))
                    .await
                    .is_err()
                {
                    return Step::Stop;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, session = %logged_session(&self.open.sid), "a logged event does not parse as a server message; skipped");
            }
        }
        if event.end {
            Step::Stop
        } else {
            Step::Continue
        }
    }

    /// Re-reads the log after the last event sent, a page at a time, until it is exhausted. A
    /// store error leaves it for the next recheck.
    async fn catch_up(&mut self) -> Step {
        let node = self.node.clone();
        loop {
            let page = node
                .store
                .replay(&self.open.sid, &self.open.stream, &self.last, REPLAY_PAGE)
                .await;
            match page {
                Ok(Replay::Events(events)) => {
                    let full = events.len() >= REPLAY_PAGE;
                    for event in events {
                        if let Step::Stop = self.write(event.into()).await {
                            return Step::Stop;
                        }
                    }
                    if !full {
                        return Step::Continue;
                    }
                }
                // A fresh POST stream whose request has logged nothing yet.
                Ok(Replay::UnknownStream)
                    if self.last == EventId::START && self.open.stream != StreamId::STANDALONE =>
                {
                    return Step::Continue;
                }
                Ok(other) => {
                    tracing::warn!(session = %logged_session(&self.open.sid), stream = %self.open.stream, ?other, "connection cannot catch up; closing it");
                    return Step::Stop;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "connection cannot read its log now; next recheck tries again");
                    return Step::Continue;
                }
            }
        }
    }

    /// The stream's request runs on another replica: if that replica is dead, its request ends
    /// with error -32004 (logged as the stream's last event, so every resumer sees it).
    async fn check_running(&mut self) -> Step {
        let Some(run) = self.open.watch.clone() else {
            return Step::Continue;
        };
        if !self.node.is_dead(&run.node).await {
            return Step::Continue;
        }
        let store = &self.node.store;
        self.open.watch = None;
        let data = aborted_answer(
            &run.request_key,
            &format!("replica {} running it stopped", run.node),
        );
        let (sid, stream) = (&self.open.sid, &self.open.stream);
        match store.abort_running(sid, stream, &run.node, &data).await {
            Ok(Some(appended)) => {
                let event = StreamEvent {
                    position: appended.position,
                    data,
                    end: true,
                };
                self.write(event).await
            }
            // It finished meanwhile: its end event is in the log.
            Ok(None) => self.catch_up().await,
            Err(e) => {
                tracing::warn!(error = %e, "could not end the request of a dead replica");
                Step::Continue
            }
        }
    }

    async fn cleanup(self) {
        let Conn {
            node, open, out, ..
        } = self;
        let Open {
            sid,
            stream,
            holder,
            handle,
            ..
        } = open;
        drop(handle);
        drop(out);
        let release = node.store.release(&sid, &stream, &holder);
        match tokio::time::timeout(RELEASE_LIMIT, release).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "could not release a stream"),
            Err(_) => tracing::debug!("releasing a stream timed out"),
        }
    }
}

/// The logged final event of a request its client cancelled: it ends the stream for every reader
/// and is never sent (MCP 2025-11-25, basic/utilities/cancellation: the server should not answer
/// a cancelled request).
pub(crate) const NO_ANSWER: &str = r#"{"switchboard":"cancelled: no answer"}"#;

/// The JSON-RPC error that ends a request which will not answer: -32004 (this project's "did
/// not finish"; MCP defines no code for it) with `why`.
pub(crate) fn aborted_answer(request_key: &str, why: &str) -> String {
    let id = RequestId::from_key(request_key);
    let message = format!("the request was not finished: {why}; send it again");
    jsonrpc::error_response(id.as_ref(), codes::REQUEST_ABORTED, message, None).to_string()
}

/// The POST stream of the request being handled, as a request extension
/// (`context.extensions.get::<ResponseStream>()` in a handler). With it a handler can:
///
/// - send a notification on its own request's stream ([`ResponseStream::notify`]): rmcp puts only
///   progress notifications there and every other notification (log messages, say) on the
///   session's standalone stream, which a client may not have open yet;
/// - close the stream before it answers ([`ResponseStream::close`]; MCP 2025-11-25,
///   basic/transports, Resumability: the server may close a stream at any time; SEP-1699). The
///   call goes on and logs its answer; the client resumes with `Last-Event-ID` on any replica
///   and receives what it missed.
#[derive(Clone, Debug)]
pub struct ResponseStream {
    node: Weak<Node>,
    sid: String,
    stream: String,
    holder: String,
}

impl ResponseStream {
    pub(crate) fn new(node: &Arc<Node>, sid: &str, stream: &str, holder: &str) -> ResponseStream {
        ResponseStream {
            node: Arc::downgrade(node),
            sid: sid.to_owned(),
            stream: stream.to_owned(),
            holder: holder.to_owned(),
        }
    }

    /// Logs `notification` as the stream's next event (one round trip) and delivers it to
    /// whichever replica holds the stream. Messages the handler sends through rmcp afterwards
    /// (its answer included) come after it; ones it sent through rmcp just before may still be
    /// on their way and come after it too.
    ///
    /// A failing store (a Redis promotion) is tried again until it answers, with one append id,
    /// so the notification is logged once, as the recorder does for rmcp's own messages.
    ///
    /// # Errors
    /// The replica is stopping, the notification does not encode, or the store kept failing
    /// (for `idle_ttl`, or until the replica stopped): the notification is lost, and a client
    /// reading the stream sees no sign of it; a handler that cannot afford the gap should end
    /// its call with an error.
    pub async fn notify(&self, notification: ServerNotification) -> Result<(), crate::Error> {
        let node = self
            .node
            .upgrade()
            .ok_or_else(|| crate::Error::Internal("the replica has stopped".into()))?;
        let message = ServerJsonRpcMessage::notification(notification);
        let data = serde_json::to_string(&message)?;
        match node.append(&self.sid, &self.stream, data).await {
            Appending::Lost => Err(crate::Error::Internal(
                "the notification was lost: the store kept failing".into(),
            )),
            Appending::Logged | Appending::SessionGone => Ok(()),
        }
    }

    /// Ends the client's connection of this stream now (after its priming event, which carries
    /// the id to resume from). Does nothing once the client has resumed it elsewhere.
    pub fn close(&self) {
        if let Some(node) = self.node.upgrade() {
            node.hub.close(&self.sid, &self.stream, &self.holder);
        }
    }
}
