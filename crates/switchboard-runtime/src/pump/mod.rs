//! The task behind one held stream, the same for the gateway node and library mode: the
//! replay its client asked for, then live events, a re-read of the log at each
//! [`StreamTiming::recheck`], and, for a resumed POST stream whose request runs on another
//! replica, that replica's liveness, so that a dead replica's request ends with -32004 instead
//! of a hang. How events are framed is the host's [`Sink`].
//!
//! Ordering and exactly-once: events carry their log position; the pump keeps the last position
//! it wrote and skips anything at or before it (a live event the replay already covered). A full
//! hub queue flags the connection as lagged and the pump re-reads the log from its position.
//!
//! Why the periodic re-read: live events ride the bus, whose doorbells can be missed (a
//! subscription lost without a disconnection the replica noticed). Events found that way are
//! written (logged at debug level: most are only a doorbell still on its way), so an event the
//! bus dropped reaches its client within one [`StreamTiming::recheck`]. A store error skips the
//! re-read until the next tick; a log that is gone or trimmed past the stream's position closes
//! the stream, as a catch-up does.

pub mod sink;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBuilder};
use switchboard_protocol::ids::position_order;
use switchboard_protocol::StreamId;
use switchboard_store::{LoggedEvent, Replay, RunningRequest, StoreResult};
use switchboard_telemetry::trace::logged_session;
use tokio::time::{interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

pub use sink::{Sink, Step};

use crate::hub::{ConnHandle, Outbound, StreamEvent};
use crate::liveness::{is_dead, lost_request_event};
use crate::replica::Replica;

/// Events read from a log per store round trip (a resumed or lagging connection pages through
/// the log instead of loading it whole).
pub const REPLAY_PAGE: usize = 256;

/// How long a connection's catch-up retries a failing store before it closes the connection.
const CATCH_UP_RETRY: Duration = Duration::from_secs(5);

/// How long a closing connection waits for the store to release its stream.
const RELEASE_LIMIT: Duration = Duration::from_secs(5);

/// The periods of a held stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamTiming {
    /// Between two re-reads of the log (each after the sink's keep-alive).
    pub recheck: Duration,
    /// Between two checks of the replica running a watched request ([`OpenStream::watch`]).
    pub liveness_check: Duration,
}

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
    /// Events to write before live ones (a resumption's first page).
    pub replay: Vec<LoggedEvent>,
    /// The position the client already has (its `Last-Event-ID`), or `0-0`.
    pub after: String,
    /// The request of this POST stream runs on another replica: watch it.
    pub watch: Option<RunningRequest>,
    /// Nothing more will come after the replay (the request is over): close after it.
    pub close_after_replay: bool,
    /// When the client's `Last-Event-ID` resumption began: the replay's size and duration are
    /// counted (`switchboard_resume_replay_events`, `…_duration_seconds`) once it is written.
    pub resumed_at: Option<Instant>,
}

/// When a stream closes besides its own end.
#[derive(Clone, Debug, Default)]
pub struct Closing {
    /// The replica drains: a standalone stream closes (its client reopens it elsewhere); a POST
    /// stream stays until its request answers.
    pub draining: CancellationToken,
    /// The replica stops: every stream closes.
    pub stopped: CancellationToken,
}

/// One held stream's task; [`Pump::run`] runs it to its end and releases the stream.
pub struct Pump<R: Replica, S: Sink> {
    replica: Arc<R>,
    s: OpenStream,
    sink: S,
    timing: StreamTiming,
    closing: Closing,
    last: String,
    written: usize,
}

impl<R: Replica, S: Sink> Pump<R, S> {
    /// The task of stream `s`, writing to `sink`.
    pub fn new(
        replica: Arc<R>,
        s: OpenStream,
        sink: S,
        timing: StreamTiming,
        closing: Closing,
    ) -> Self {
        Pump {
            last: s.after.clone(),
            replica,
            s,
            sink,
            timing,
            closing,
            written: 0,
        }
    }

    /// Writes the sink's opening, the replay, then live events until the stream ends, the client
    /// goes away or the replica closes it; then unregisters the connection and releases the
    /// stream in the store.
    pub async fn run(mut self) {
        if let Step::Continue = self.start().await {
            if !self.s.close_after_replay {
                self.live().await;
            }
        }
        self.cleanup().await;
    }

    async fn start(&mut self) -> Step {
        if let Step::Stop = self.sink.open().await {
            return Step::Stop;
        }
        let replay = std::mem::take(&mut self.s.replay);
        let more = replay.len() >= REPLAY_PAGE;
        if let Step::Stop = self.write_all(replay).await {
            return Step::Stop;
        }
        if more {
            if let Step::Stop = self.catch_up().await {
                return Step::Stop;
            }
        }
        if let Some(at) = self.s.resumed_at.take() {
            let m = switchboard_telemetry::metrics::get();
            m.replay_events.observe(self.written as f64);
            m.replay_duration.observe(at.elapsed().as_secs_f64());
        }
        Step::Continue
    }

    async fn live(&mut self) {
        let mut recheck = interval(self.timing.recheck);
        recheck.set_missed_tick_behavior(MissedTickBehavior::Delay);
        recheck.tick().await;
        let mut liveness = interval(self.timing.liveness_check);
        liveness.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let standalone = self.s.stream == StreamId::STANDALONE;
        let Closing { draining, stopped } = self.closing.clone();
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
                _ = recheck.tick() => self.recheck().await,
                _ = liveness.tick(), if self.s.watch.is_some() => self.check_running().await,
                () = self.sink.closed() => Step::Stop,
                () = draining.cancelled(), if standalone => Step::Stop,
                () = stopped.cancelled() => Step::Stop,
            };
            if let Step::Stop = step {
                return;
            }
        }
    }

    /// The sink's keep-alive, then one re-read of the log (see the module doc).
    async fn recheck(&mut self) -> Step {
        if let Step::Stop = self.sink.keepalive(true).await {
            return Step::Stop;
        }
        let before = self.last.clone();
        let Some(page) = self.read_log().await else {
            return Step::Stop;
        };
        let events = match page {
            Ok(Replay::Events(events)) => events,
            Ok(other) => return self.not_events(other),
            // The next recheck tries again.
            Err(_) => return Step::Continue,
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

    /// Writes one live event unless it is at or before the last one written; stops after an
    /// end event.
    async fn write(&mut self, ev: StreamEvent) -> Step {
        if position_order(&ev.position) <= position_order(&self.last) {
            return Step::Continue;
        }
        let (position, end) = (ev.position.clone(), ev.end);
        if let Step::Stop = self.sink.event(ev).await {
            return Step::Stop;
        }
        self.last = position;
        if end {
            Step::Stop
        } else {
            Step::Continue
        }
    }

    /// Writes a page of logged events: those after the last written position, in order, up to
    /// an end event (which stops the stream, as in [`Self::write`]).
    async fn write_all(&mut self, events: Vec<LoggedEvent>) -> Step {
        self.written += events.len();
        let mut last = position_order(&self.last);
        let mut page = Vec::with_capacity(events.len());
        for e in events {
            let order = position_order(&e.position);
            if order <= last {
                continue;
            }
            last = order;
            let end = e.end;
            page.push(StreamEvent::from(e));
            if end {
                break;
            }
        }
        let Some(newest) = page.last() else {
            return Step::Continue;
        };
        let (newest, end) = (newest.position.clone(), newest.end);
        if let Step::Stop = self.sink.page(page).await {
            return Step::Stop;
        }
        self.last = newest;
        if end {
            Step::Stop
        } else {
            Step::Continue
        }
    }

    /// Re-reads the log from the last written position, a page at a time, until it is exhausted.
    /// A store failure is retried for up to [`CATCH_UP_RETRY`] in all (a Redis that just came back
    /// answers `LOADING` while it reads its AOF; a Cluster failover answers `MOVED` for a moment),
    /// the sink's keep-alive sent meanwhile, before the connection is closed for its client to
    /// resume elsewhere: a stream that has written no event id yet could not be resumed at all.
    async fn catch_up(&mut self) -> Step {
        let deadline = tokio::time::Instant::now() + CATCH_UP_RETRY;
        // 100 ms, doubling with jitter; the deadline ends the retries.
        let mut pauses = ExponentialBuilder::new()
            .with_jitter()
            .with_factor(2.0)
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(CATCH_UP_RETRY)
            .without_max_times()
            .build();
        let mut pause = pauses.next().unwrap_or(CATCH_UP_RETRY);
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
                Ok(other) => return self.not_events(other),
                Err(e) if tokio::time::Instant::now() + pause < deadline => {
                    tracing::debug!(error = %e, retry_in = ?pause, "connection cannot read the event log; retrying");
                    if let Step::Stop = self.sink.keepalive(false).await {
                        return Step::Stop;
                    }
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = self.replica.until_cut_off() => return Step::Stop,
                    }
                    pause = pauses.next().unwrap_or(CATCH_UP_RETRY);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "connection cannot read the event log; closing it");
                    return Step::Stop;
                }
            }
        }
    }

    /// A read of the log that found no events to write: a POST stream opened while the store
    /// could not register it, or whose request has logged nothing yet, goes on (there is nothing
    /// to catch up on); any other stream is closed (its log is gone, or trimmed past what it
    /// wrote: its client hears why when it resumes).
    fn not_events(&self, other: Replay) -> Step {
        let fresh_post = self.last == "0-0" && self.s.stream != StreamId::STANDALONE;
        if matches!(other, Replay::UnknownStream) && fresh_post {
            return Step::Continue;
        }
        tracing::warn!(session = %logged_session(&self.s.sid), stream = %self.s.stream, ?other, "connection cannot catch up; closing it");
        Step::Stop
    }

    /// The next page of the log from the last written position, or `None` once the replica is
    /// cut off ([`Replica::until_cut_off`]; the connection then closes: its client resumes on
    /// another replica). A silent store held a read for up to 5 s, and with it the close.
    async fn read_log(&self) -> Option<StoreResult<Replay>> {
        let store = self.replica.store();
        tokio::select! {
            page = store.replay(&self.s.sid, &self.s.stream, &self.last, REPLAY_PAGE) => Some(page),
            () = self.replica.until_cut_off() => None,
        }
    }

    /// The request of this stream runs on another replica: once that one is dead
    /// ([`is_dead`]), its request ends with -32004, logged as the stream's last event (so every
    /// resumer sees it).
    async fn check_running(&mut self) -> Step {
        let Some(run) = self.s.watch.clone() else {
            return Step::Continue;
        };
        if !is_dead(&*self.replica, &run.node).await {
            return Step::Continue;
        }
        self.s.watch = None;
        let data = lost_request_event(&run.request_key, &run.node);
        let (sid, stream) = (&self.s.sid, &self.s.stream);
        let store = self.replica.store();
        match store.abort_running(sid, stream, &run.node, &data).await {
            Ok(Some(appended)) => {
                crate::liveness::count_aborted(sid, stream, &run.node);
                let event = StreamEvent {
                    position: appended.position,
                    data,
                    end: true,
                };
                self.write(event).await
            }
            // It finished meanwhile: its end event arrives (or is in the log).
            Ok(None) => self.catch_up().await,
            Err(e) => {
                tracing::warn!(error = %e, "could not end the request of a dead replica");
                Step::Continue
            }
        }
    }

    async fn cleanup(self) {
        let Pump {
            replica, s, sink, ..
        } = self;
        let OpenStream {
            sid,
            stream,
            holder,
            conn,
            ..
        } = s;
        drop(conn);
        // The client's stream ends first: the release below can wait on a silent store.
        drop(sink);
        let release = replica.store().release(&sid, &stream, &holder);
        match tokio::time::timeout(RELEASE_LIMIT, release).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "could not release a stream"),
            Err(_) => tracing::debug!("releasing a stream timed out"),
        }
    }
}
