//! The node's side of a held SSE stream: its framing. The task behind the stream (replay, live
//! events, the log re-read at each keep-alive, a dead node's request ended) is the replica
//! runtime's ([`switchboard_runtime::pump`]); this module writes what it hands over as SSE bytes
//! into the response body: the opening (a legacy stream's `endpoint` event, the priming event),
//! events with their ids (or legacy `message` events), pages of replayed events as one body
//! chunk, and keep-alive comments.

use bytes::{Bytes, BytesMut};
use switchboard_protocol::StreamId;
use switchboard_runtime::pump::{Closing, Pump, Sink, Step, StreamTiming};
use switchboard_runtime::StreamEvent;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use switchboard_runtime::pump::{OpenStream, REPLAY_PAGE};

use crate::state::App;
use crate::streams::sse;

/// Messages a page's chunk finds still queued for the response body at most (it waits for the
/// rest to be taken): a replaying connection holds a page being read and at most this many
/// written but unsent, however slow its client, while the next page is read as the previous one
/// goes out.
const PAGES_QUEUED: usize = 1;

/// An event whose data is larger than this goes out in three pieces (its fields, its data as it
/// is, the blank line), so that a large answer is not copied into its frame (case C48).
const FRAMED_APART: usize = 64 * 1024;

/// How a connection writes its events.
#[derive(Clone, Debug, PartialEq)]
pub enum Framing {
    /// Streamable HTTP: every event carries its `id` (its stream and log position); first a
    /// priming event with this id, if any (clients that negotiated 2025-11-25 or later).
    EventIds {
        /// The priming event's id.
        priming: Option<String>,
    },
    /// The legacy HTTP+SSE transport (MCP 2024-11-05, basic/transports, HTTP with SSE): first an
    /// `endpoint` event whose data is this URI (where the client POSTs), then each message as an
    /// `event: message` without an id.
    Legacy {
        /// The POST URI announced in the `endpoint` event.
        endpoint: String,
    },
}

/// Starts the stream's task and returns the SSE response it feeds.
pub fn open(app: &App, s: OpenStream, framing: Framing) -> axum::response::Response {
    let (tx, rx) = mpsc::channel(64);
    let stream = StreamId::parse(&s.stream).unwrap_or_else(StreamId::standalone);
    let sink = SseSink {
        app: app.clone(),
        sid: s.sid.clone(),
        id_prefix: format!("{stream}_"),
        out: tx,
        framing,
    };
    let timing = StreamTiming {
        recheck: app.cfg.keepalive_interval,
        liveness_check: app.cfg.liveness_check_interval,
    };
    // Draining: the standalone stream moves to another node at once; a POST stream stays until
    // its request answers (or the drain deadline ends the process).
    let closing = Closing {
        draining: app.shutdown.clone(),
        stopped: CancellationToken::new(),
    };
    tokio::spawn(Pump::new(app.clone(), s, sink, timing, closing).run());
    sse::response(rx, &[])
}

/// The SSE response body of one held stream.
struct SseSink {
    app: App,
    sid: String,
    out: mpsc::Sender<Bytes>,
    framing: Framing,
    /// `<stream>_`: how every event id of this stream begins (the log position follows).
    id_prefix: String,
}

impl SseSink {
    async fn send(&self, bytes: Bytes) -> Step {
        match self.out.send(bytes).await {
            Ok(()) => Step::Continue,
            Err(_) => Step::Stop,
        }
    }

    /// Appends the SSE frame of one event to `buf`.
    fn frame(&self, buf: &mut BytesMut, position: &str, data: &str) {
        match self.framing {
            Framing::EventIds { .. } => sse::push_event(buf, &self.id_prefix, position, data),
            Framing::Legacy { .. } => sse::push_named(buf, "message", data),
        }
    }

    /// Queues a page's chunk once at most [`PAGES_QUEUED`] messages are still waiting for the
    /// body (the queue's other slots are reserved, then given back).
    async fn send_page(&self, chunk: Bytes) -> Step {
        let room = self.out.max_capacity().saturating_sub(PAGES_QUEUED).max(1);
        match self.out.reserve_many(room).await {
            Ok(mut permits) => {
                if let Some(permit) = permits.next() {
                    permit.send(chunk);
                }
                Step::Continue
            }
            Err(_) => Step::Stop,
        }
    }
}

impl Sink for SseSink {
    async fn open(&mut self) -> Step {
        match &self.framing {
            Framing::Legacy { endpoint } => self.send(sse::named("endpoint", endpoint)).await,
            Framing::EventIds { priming: Some(id) } => {
                self.send(sse::priming(id, self.app.cfg.sse_retry_ms)).await
            }
            Framing::EventIds { priming: None } => Step::Continue,
        }
    }

    async fn event(&mut self, event: StreamEvent) -> Step {
        if event.data.len() > FRAMED_APART {
            let head = match self.framing {
                Framing::EventIds { .. } => {
                    format!("id: {}{}\ndata: ", self.id_prefix, event.position)
                }
                Framing::Legacy { .. } => "event: message\ndata: ".to_owned(),
            };
            for piece in [
                Bytes::from(head),
                Bytes::from(event.data),
                Bytes::from_static(b"\n\n"),
            ] {
                if self.send(piece).await == Step::Stop {
                    return Step::Stop;
                }
            }
            return Step::Continue;
        }
        let mut frame = BytesMut::new();
        self.frame(&mut frame, &event.position, &event.data);
        self.send(frame.freeze()).await
    }

    async fn page(&mut self, events: Vec<StreamEvent>) -> Step {
        let fields = self.id_prefix.len().max("message".len()) + sse::EVENT_OVERHEAD;
        let size = events
            .iter()
            .map(|e| fields + e.position.len() + e.data.len())
            .sum();
        let mut chunk = BytesMut::with_capacity(size);
        for e in &events {
            self.frame(&mut chunk, &e.position, &e.data);
        }
        self.send_page(chunk.freeze()).await
    }

    /// The keep-alive comment; at a periodic re-read of a legacy SSE stream, first the answers of
    /// requests lost with their dead nodes (their client reads only this stream and cannot resume
    /// a request's own), so a legacy client hears of such a loss within
    /// `http.keepalive_interval` after the node's heartbeat lapsed.
    async fn keepalive(&mut self, at_recheck: bool) -> Step {
        if at_recheck && matches!(self.framing, Framing::Legacy { .. }) {
            switchboard_runtime::lost::end_lost_requests_logged(self.app.as_ref(), &self.sid).await;
        }
        self.send(sse::keepalive()).await
    }

    async fn closed(&self) {
        self.out.closed().await;
    }
}
