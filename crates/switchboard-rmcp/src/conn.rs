//! Library mode's side of a held stream: what rmcp's SSE writer receives. The task behind the
//! stream (its replay, live events, the log re-read every `log_recheck_interval`, a dead
//! replica's request ended) is the replica runtime's ([`switchboard_runtime::pump`]); this module
//! turns each event into rmcp's [`ServerSseMessage`].
//!
//! Event ids are `<stream>_<position>` (switchboard-protocol's [`EventId`]): `Last-Event-ID`
//! alone names the stream to resume and where (MCP 2025-11-25, basic/transports,
//! Resumability), and it is only honoured inside the session whose `Mcp-Session-Id` comes with it.

use std::sync::{Arc, Weak};

use rmcp::model::{ServerJsonRpcMessage, ServerNotification};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use switchboard_protocol::{codes, jsonrpc, EventId, RequestId, StreamId};
use switchboard_runtime::pump::{Closing, OpenStream, Pump, Sink, Step, StreamTiming};
use switchboard_runtime::StreamEvent;
use switchboard_telemetry::trace::logged_session;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::node::{Appending, Node};

/// Messages queued between a connection task and rmcp's SSE writer.
const OUT_QUEUE: usize = 16;

/// Starts the stream's task; `priming`: a fresh stream, whose first message is a priming event
/// naming its position. Returns the stream rmcp writes to the client.
pub(crate) fn spawn(
    node: Arc<Node>,
    open: OpenStream,
    priming: bool,
) -> ReceiverStream<ServerSseMessage> {
    let (out, rx) = mpsc::channel(OUT_QUEUE);
    let stream = StreamId::parse(&open.stream).unwrap_or_else(StreamId::standalone);
    let priming = priming.then(|| EventId::new(stream.clone(), open.after.clone()).to_string());
    let sink = RmcpSink {
        sid: open.sid.clone(),
        stream,
        priming,
        retry: node.config.sse_retry,
        out,
    };
    let config = &node.config;
    let timing = StreamTiming {
        recheck: config.log_recheck_interval,
        liveness_check: config.liveness_check_interval,
    };
    let closing = Closing {
        draining: node.draining.clone(),
        stopped: node.stopped.clone(),
    };
    let pump = Pump::new(node.clone(), open, sink, timing, closing);
    node.tasks.spawn(pump.run());
    ReceiverStream::new(rx)
}

/// rmcp's SSE writer for one held stream.
struct RmcpSink {
    sid: String,
    stream: StreamId,
    /// The priming event's id, for a fresh stream.
    priming: Option<String>,
    retry: std::time::Duration,
    out: mpsc::Sender<ServerSseMessage>,
}

impl Sink for RmcpSink {
    async fn open(&mut self) -> Step {
        let Some(id) = self.priming.take() else {
            return Step::Continue;
        };
        match self
            .out
            .send(ServerSseMessage::priming(id, self.retry))
            .await
        {
            Ok(()) => Step::Continue,
            Err(_) => Step::Stop,
        }
    }

    /// Sends one event; the end event of a request its client cancelled ([`NO_ANSWER`]) is not
    /// sent but ends the stream.
    async fn event(&mut self, event: StreamEvent) -> Step {
        if event.end && event.data == NO_ANSWER {
            return Step::Stop;
        }
        match serde_json::from_str::<ServerJsonRpcMessage>(&event.data) {
            Ok(message) => {
                let id = EventId::new(self.stream.clone(), event.position).to_string();
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
                tracing::warn!(error = %e, session = %logged_session(&self.sid), "a logged event does not parse as a server message; skipped");
            }
        }
        Step::Continue
    }

    async fn page(&mut self, events: Vec<StreamEvent>) -> Step {
        for event in events {
            if let Step::Stop = self.event(event).await {
                return Step::Stop;
            }
        }
        Step::Continue
    }

    /// Nothing: rmcp's writer sends its own keep-alives.
    async fn keepalive(&mut self, _at_recheck: bool) -> Step {
        Step::Continue
    }

    async fn closed(&self) {
        self.out.closed().await;
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
            node.replica
                .hub
                .close(&self.sid, &self.stream, &self.holder);
        }
    }
}
