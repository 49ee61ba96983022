//! The task behind one open SSE connection: priming, replayed events, live events, keep-alives,
//! and — for a resumed POST stream whose request runs on another node — watching that node's
//! liveness so a dead node's request ends with a JSON-RPC error instead of a hang.
//!
//! Ordering and exactly-once: events carry their log position; the pump keeps the last position
//! it wrote and skips anything at or before it (a live event that the replay already covered). A
//! full queue flags the connection as lagged and the pump re-reads the log from its position.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::HeaderValue;
use switchboard_protocol::ids::position_order;
use switchboard_protocol::StreamId;
use switchboard_store::{LoggedEvent, Replay, RunningRequest, StoreResult};
use tokio::sync::mpsc;
use tokio::time::{interval, MissedTickBehavior};

use crate::state::App;
use crate::streams::hub::{ConnHandle, Outbound, StreamEvent};
use crate::streams::sse;
use crate::telemetry;
use switchboard_telemetry::trace::logged_session;

/// Events read from a log per store round trip (a resumed or lagging connection pages through
/// the log instead of loading it whole). A page is written as one body chunk.
pub const REPLAY_PAGE: usize = 256;

/// Messages a page's chunk finds still queued for the response body at most (it waits for the
/// rest to be taken): a replaying connection holds a page being read and at most this many
/// written but unsent, however slow its client, while the next page is read as the previous one
/// goes out.
const PAGES_QUEUED: usize = 1;

/// How long a connection's catch-up retries a failing store before it closes the connection
/// ([`Pump::catch_up`]).
const CATCH_UP_RETRY: Duration = Duration::from_secs(5);

/// What to open.
pub struct OpenStream {
    /// Session id.
    pub sid: String,
    /// Stream id.
    pub stream: String,
    /// This connection's holder token.
    pub holder: String,
    /// The hub registration made for it.
    pub conn: ConnHandle,
    /// A priming event id to send first (clients that negotiated 2025-11-25 or later).
    pub priming: Option<String>,
    /// Events to write before live ones (a resumption).
    pub replay: Vec<LoggedEvent>,
    /// The position the client already has (its `Last-Event-ID`), or `0-0`.
    pub after: String,
    /// The request of this POST stream runs on another node: watch it.
    pub watch: Option<RunningRequest>,
    /// Nothing more will come after the replay (the request is over): close after it.
    pub close_after_replay: bool,
    /// When the client's `Last-Event-ID` resumption began: the replay's size and duration are
    /// counted (`switchboard_resume_replay_events`, `…_duration_seconds`) once it is written.
    pub resumed_at: Option<std::time::Instant>,
}

/// How a connection writes its events.
#[derive(Clone, Debug, PartialEq)]
pub enum Framing {
    /// Streamable HTTP: every event carries its `id` (its stream and log position).
    EventIds,
    /// The legacy HTTP+SSE transport (MCP 2024-11-05, basic/transports, HTTP with SSE): first an
    /// `endpoint` event whose data is this URI (where the client POSTs), then each message as an
    /// `event: message` without an id.
    Legacy {
        /// The POST URI announced in the `endpoint` event.
        endpoint: String,
    },
}

/// Starts the connection task and returns the SSE response it feeds.
pub fn open(
    app: &App,
    s: OpenStream,
    extra: &[(&'static str, HeaderValue)],
) -> axum::response::Response {
    open_framed(app, s, extra, Framing::EventIds)
}

/// [`open`] with the given framing.
pub fn open_framed(
    app: &App,
    s: OpenStream,
    extra: &[(&'static str, HeaderValue)],
    framing: Framing,
) -> axum::response::Response {
    let (tx, rx) = mpsc::channel(64);
    let stream = StreamId::parse(&s.stream).unwrap_or_else(StreamId::standalone);
    let pump = Pump {
        app: app.clone(),
        id_prefix: format!("{stream}_"),
        last: s.after.clone(),
        out: tx,
        s,
        framing,
        written: 0,
    };
    tokio::spawn(pump.stream());
    sse::response(rx, extra)
}

struct Pump {
    app: App,
    s: OpenStream,
    last: String,
    out: mpsc::Sender<Bytes>,
    framing: Framing,
    /// `<stream>_`: how every event id of this stream begins (the log position follows).
    id_prefix: String,
    /// Logged events written so far.
    written: usize,
}

enum Step {
    Continue,
    Stop,
}

impl Pump {
    async fn stream(mut self) {
        if let Framing::Legacy { endpoint } = &self.framing {
            if let Step::Stop = self.send(sse::named("endpoint", endpoint)).await {
                return self.cleanup().await;
            }
        }
        if let Some(id) = self.s.priming.take() {
            if self
                .out
                .send(sse::priming(&id, self.app.cfg.sse_retry_ms))
                .await
                .is_err()
            {
                return self.cleanup().await;
            }
        }
        let replay = std::mem::take(&mut self.s.replay);
        let more = replay.len() >= REPLAY_PAGE;
        if let Step::Stop = self.write_all(replay).await {
            return self.cleanup().await;
        }
        if more {
            if let Step::Stop = self.catch_up().await {
                return self.cleanup().await;
            }
        }
        if let Some(at) = self.s.resumed_at.take() {
            let m = switchboard_telemetry::metrics::get();
            m.replay_events.observe(self.written as f64);
            m.replay_duration.observe(at.elapsed().as_secs_f64());
        }
        if !self.s.close_after_replay {
            self.live().await;
        }
        self.cleanup().await
    }

    async fn live(&mut self) {
        let mut keepalive = interval(self.app.cfg.keepalive_interval);
        keepalive.set_missed_tick_behavior(MissedTickBehavior::Delay);
        keepalive.tick().await;
        let mut liveness = interval(self.app.cfg.liveness_check_interval);
        liveness.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            if self.s.conn.lagged.swap(false, Ordering::SeqCst) {
                if let Step::Stop = self.catch_up().await {
                    return;
                }
            }
            let step = tokio::select! {
                m = self.s.conn.rx.recv() => match m {
                    Some(Outbound::Event(ev)) => self.write(*ev).await,
                    Some(Outbound::CatchUp) => Step::Continue,
                    Some(Outbound::Close) | None => Step::Stop,
                },
                _ = keepalive.tick() => self.keepalive().await,
                _ = liveness.tick(), if self.s.watch.is_some() => self.check_running().await,
                _ = self.out.closed() => Step::Stop,
                // Draining: the standalone stream moves to another node at once; a POST stream
                // stays until its request answers (or the drain deadline ends the process).
                _ = self.app.shutdown.cancelled(), if self.s.stream == StreamId::STANDALONE => Step::Stop,
            };
            if let Step::Stop = step {
                return;
            }
        }
    }

    /// The keep-alive comment; on a legacy SSE stream, first the answers of requests lost with
    /// their dead nodes (their client reads only this stream and cannot resume a request's own),
    /// so a legacy client hears of such a loss within `http.keepalive_interval` after the node's
    /// heartbeat lapsed.
    ///
    /// Every stream also re-reads its log then, after the comment, once: the bus is at-most-once
    /// pub/sub, and a subscription lost without a disconnection this node noticed (seen through
    /// Redis Cluster failovers) would otherwise hold events back for good. Events found that way
    /// are written (logged at debug level: most are only a publish still on its way), so an
    /// event the bus dropped reaches its client within one `http.keepalive_interval`. A store
    /// error skips the re-read until the next tick; it neither delays the comment nor closes the
    /// stream.
    async fn keepalive(&mut self) -> Step {
        if matches!(self.framing, Framing::Legacy { .. }) {
            crate::session::end_lost_requests_logged(&self.app, &self.s.sid).await;
        }
        if let Step::Stop = self.send(sse::keepalive()).await {
            return Step::Stop;
        }
        let before = self.last.clone();
        let Some(page) = self.read_log().await else {
            return Step::Stop;
        };
        let Ok(Replay::Events(events)) = page else {
            return Step::Continue;
        };
        let more = events.len() >= REPLAY_PAGE;
        if let Step::Stop = self.write_all(events).await {
            return Step::Stop;
        }
        if self.last != before {
            tracing::debug!(session = %logged_session(&self.s.sid), stream = %self.s.stream, from = %before, to = %self.last, "events of a held stream not delivered by the bus (yet); written from its log");
        }
        if more {
            return self.catch_up().await;
        }
        Step::Continue
    }

    async fn send(&self, bytes: Bytes) -> Step {
        match self.out.send(bytes).await {
            Ok(()) => Step::Continue,
            Err(_) => Step::Stop,
        }
    }

    /// Appends the SSE frame of one event to `buf`.
    fn frame(&self, buf: &mut BytesMut, position: &str, data: &str) {
        match self.framing {
            Framing::EventIds => sse::push_event(buf, &self.id_prefix, position, data),
            Framing::Legacy { .. } => sse::push_named(buf, "message", data),
        }
    }

    async fn write(&mut self, ev: StreamEvent) -> Step {
        if position_order(&ev.position) <= position_order(&self.last) {
            return Step::Continue;
        }
        let mut frame = BytesMut::new();
        self.frame(&mut frame, &ev.position, &ev.data);
        if let Step::Stop = self.send(frame.freeze()).await {
            return Step::Stop;
        }
        self.last = ev.position;
        if ev.end {
            Step::Stop
        } else {
            Step::Continue
        }
    }

    /// Writes a page of logged events as one body chunk: those after the last written position,
    /// in order, up to an end event (which stops the stream, as in [`Self::write`]).
    async fn write_all(&mut self, events: Vec<LoggedEvent>) -> Step {
        self.written += events.len();
        let fields = self.id_prefix.len().max("message".len()) + sse::EVENT_OVERHEAD;
        let size = events
            .iter()
            .map(|e| fields + e.position.len() + e.data.len())
            .sum();
        let mut chunk = BytesMut::with_capacity(size);
        let mut last = position_order(&self.last);
        let (mut newest, mut end) = (None, false);
        for e in events {
            let order = position_order(&e.position);
            if order <= last {
                continue;
            }
            self.frame(&mut chunk, &e.position, &e.data);
            last = order;
            end = e.end;
            newest = Some(e.position);
            if end {
                break;
            }
        }
        let Some(newest) = newest else {
            return Step::Continue;
        };
        if let Step::Stop = self.send_page(chunk.freeze()).await {
            return Step::Stop;
        }
        self.last = newest;
        if end {
            Step::Stop
        } else {
            Step::Continue
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

    /// Re-reads the log from the last written position, a page at a time, until it is exhausted.
    /// A store failure is retried for up to [`CATCH_UP_RETRY`] in all (a Redis that just came back
    /// answers `LOADING` while it reads its AOF; a Cluster failover answers `MOVED` for a moment)
    /// before the connection is closed for its client to resume elsewhere: a stream that has
    /// written no event id yet could not be resumed at all.
    async fn catch_up(&mut self) -> Step {
        let deadline = tokio::time::Instant::now() + CATCH_UP_RETRY;
        let mut pause = Duration::from_millis(100);
        loop {
            let Some(page) = self.read_log().await else {
                return Step::Stop;
            };
            match page {
                Ok(Replay::Events(events)) => {
                    let full = events.len() >= REPLAY_PAGE;
                    if let Step::Stop = self.write_all(events).await {
                        return Step::Stop;
                    }
                    if !full {
                        return Step::Continue;
                    }
                }
                // A POST stream opened while the store could not register it (it was sent no
                // event id, see `transport::streamable::post`) is unknown until its next event
                // registers it: nothing of it is logged yet, so there is nothing to catch up on.
                Ok(Replay::UnknownStream)
                    if self.last == "0-0" && self.s.stream != StreamId::STANDALONE =>
                {
                    return Step::Continue;
                }
                Ok(other) => {
                    tracing::warn!(session = %logged_session(&self.s.sid), stream = %self.s.stream, ?other, "connection cannot catch up; closing it");
                    return Step::Stop;
                }
                Err(e) if tokio::time::Instant::now() + pause < deadline => {
                    tracing::debug!(error = %e, retry_in = ?pause, "connection cannot read the event log; retrying");
                    // The client hears from the stream while it waits (a keep-alive comment).
                    if let Step::Stop = self.send(sse::keepalive()).await {
                        return Step::Stop;
                    }
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = self.app.until_fenced() => return Step::Stop,
                    }
                    pause *= 2;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "connection cannot read the event log; closing it");
                    return Step::Stop;
                }
            }
        }
    }

    /// The next page of the log from the last written position, or `None` once this node is
    /// fenced (the connection then closes: its client resumes on another node). A store that
    /// went silent held a read for up to 5 s, and with it the fence's close: in the chaos
    /// suite's partition a stream of the cut-off node ended 5 s after the fence.
    async fn read_log(&self) -> Option<StoreResult<Replay>> {
        tokio::select! {
            page = self.app.store.replay(&self.s.sid, &self.s.stream, &self.last, REPLAY_PAGE) => Some(page),
            () = self.app.until_fenced() => None,
        }
    }

    /// The request of this stream runs elsewhere: if its node is dead, end it with an error.
    async fn check_running(&mut self) -> Step {
        let Some(run) = self.s.watch.clone() else {
            return Step::Continue;
        };
        let store = &self.app.store;
        match store.is_alive(&run.node).await {
            Ok(true) | Err(_) => return Step::Continue,
            Ok(false) => {}
        }
        let data = crate::session::lost_request_event(&run.request_key, &run.node);
        self.s.watch = None;
        match store
            .abort_running(&self.s.sid, &self.s.stream, &run.node, &data)
            .await
        {
            Ok(Some(appended)) => {
                telemetry::request_aborted(&self.s.sid, &self.s.stream, &run.node);
                self.write(StreamEvent {
                    position: appended.position,
                    data,
                    end: true,
                })
                .await
            }
            // Finished meanwhile: its end event arrives (or is in the log).
            Ok(None) => self.catch_up().await,
            Err(e) => {
                tracing::warn!(error = %e, "could not abort a request of a dead node");
                Step::Continue
            }
        }
    }

    async fn cleanup(self) {
        let app = self.app;
        app.hub
            .unregister(&self.s.sid, &self.s.stream, &self.s.holder);
        // The client's stream ends first: the release below can wait up to 5 s on a silent
        // store, and the client held on to a stream the fence had closed for that long.
        drop(self.out);
        if let Err(e) = app
            .store
            .release(&self.s.sid, &self.s.stream, &self.s.holder)
            .await
        {
            tracing::debug!(error = %e, "could not release a stream");
        }
    }
}
