//! GET on the MCP endpoint: open the standalone stream, or resume any stream of the session from
//! `Last-Event-ID` (MCP 2025-11-25, basic/transports, Listening for Messages and Resumability).
//!
//! - Without `Last-Event-ID`: the session's standalone stream. A newer GET replaces an older one
//!   on any node (the old connection ends), so each message goes to exactly one stream.
//! - With `Last-Event-ID`: the event id names its stream; only that stream of this session is
//!   replayed (never another stream's or another session's events), then it continues live. An id
//!   of no stream of this session is refused with 400, an id older than the retained log with 410.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::HeaderMap;
use switchboard_protocol::ids::position_order;
use switchboard_protocol::{headers, EventId, StreamId};
use switchboard_store::{Claim, LoggedEvent, Replay, SessionRecord};
use tracing::Instrument;

use crate::edge::error::HttpError;
use crate::session::{self, LoadedSession};
use crate::state::App;
use crate::streams::pump::{self, Framing, OpenStream};
use crate::streams::resume;
use crate::telemetry;

/// The GET handler.
pub async fn on_get(
    State(app): State<App>,
    LoadedSession(record): LoadedSession,
    headers: HeaderMap,
) -> Response {
    match get(app, record, headers).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn get(app: App, record: SessionRecord, headers: HeaderMap) -> Result<Response, HttpError> {
    let last = match crate::edge::header_checks::single(&headers, headers::LAST_EVENT_ID)? {
        None => None,
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(EventId::parse)
                .ok_or(HttpError::BadLastEventId)?,
        ),
    };
    match last {
        None => standalone(&app, &record).await,
        Some(id) => {
            // The resumption's span (its store calls, the replay's read, under it), continuing
            // the client's `traceparent`.
            let span = tracing::info_span!(
                target: switchboard_telemetry::trace::TARGET,
                "resume",
                otel.name = "GET resume",
                otel.kind = "server",
                mcp.session.id = switchboard_telemetry::trace::session_hash(record.id.as_str()),
            );
            let parent = switchboard_telemetry::trace::client_parent(
                Some(&headers),
                &serde_json::Value::Null,
            );
            switchboard_telemetry::trace::set_parent(&span, parent);
            resume(&app, &record, id).instrument(span).await
        }
    }
}

async fn standalone(app: &App, record: &SessionRecord) -> Result<Response, HttpError> {
    let sid = record.id.as_str();
    let stream = StreamId::STANDALONE;
    let holder = app.new_holder();
    let conn = app.replica.hub.register(sid, stream, &holder);
    let last_position = match app.store.claim(sid, stream, &holder).await {
        Ok(Claim::Claimed { last_position, .. }) => last_position,
        Ok(Claim::Unknown) => None,
        Err(e) => {
            app.replica.hub.unregister(sid, stream, &holder);
            return Err(e.into());
        }
    };
    let after = last_position.unwrap_or_else(|| EventId::START.to_owned());
    let priming = session::revision(record)
        .primes_streams()
        .then(|| format!("{stream}_{after}"));
    let open = OpenStream {
        sid: sid.to_owned(),
        stream: stream.to_owned(),
        holder,
        conn,
        replay: Vec::new(),
        after,
        watch: None,
        close_after_replay: false,
        resumed_at: None,
    };
    Ok(pump::open(app, open, Framing::EventIds { priming }))
}

async fn resume(app: &App, record: &SessionRecord, id: EventId) -> Result<Response, HttpError> {
    let started = std::time::Instant::now();
    let sid = record.id.as_str();
    let stream = id.stream.to_string();
    if let Err(e) = resume::check_resumable(app, sid, &stream, &id.position).await {
        if matches!(e, HttpError::UnknownStream | HttpError::EventsTrimmed(_)) {
            telemetry::replay_miss(sid, &e.to_string());
        }
        return Err(e);
    }
    let holder = app.new_holder();
    let conn = app.replica.hub.register(sid, &stream, &holder);
    let prepared = prepare_resume(app, sid, &stream, &holder, &id.position).await;
    let (replay, watch, close_after_replay) = match prepared {
        Ok(p) => p,
        Err(e) => {
            app.replica.hub.unregister(sid, &stream, &holder);
            let _ = app.store.release(sid, &stream, &holder).await;
            if matches!(e, HttpError::UnknownStream | HttpError::EventsTrimmed(_)) {
                telemetry::replay_miss(sid, &e.to_string());
            }
            return Err(e);
        }
    };
    telemetry::stream_resumed(sid, &stream, replay.len());
    // Primed like a fresh stream, with the id resumed from: a client cut off before the next
    // event still holds a position to resume from (MCP 2025-11-25, basic/transports,
    // Resumability; without it the TypeScript SDK reconnects with no `Last-Event-ID`).
    let priming = session::revision(record)
        .primes_streams()
        .then(|| format!("{stream}_{}", id.position));
    let open = OpenStream {
        sid: sid.to_owned(),
        stream,
        holder,
        conn,
        replay,
        after: id.position,
        watch,
        close_after_replay,
        resumed_at: Some(started),
    };
    Ok(pump::open(app, open, Framing::EventIds { priming }))
}

type Prepared = (
    Vec<LoggedEvent>,
    Option<switchboard_store::RunningRequest>,
    bool,
);

/// Claim first (so live events come to us), then see who runs the request, then read the log
/// (both in one round trip, the running entry no later than the log): an end event written
/// after the `running` check is then either in the replay or delivered live.
async fn prepare_resume(
    app: &App,
    sid: &str,
    stream: &str,
    holder: &str,
    after: &str,
) -> Result<Prepared, HttpError> {
    let last_position = match app.store.claim(sid, stream, holder).await? {
        Claim::Unknown => return Err(HttpError::UnknownStream),
        Claim::Claimed { last_position, .. } => last_position,
    };
    let newest = last_position
        .as_deref()
        .map(position_order)
        .unwrap_or((0, 0));
    if position_order(after) > newest {
        // An id from the future was never sent on this stream: refuse it rather than wait
        // silently past every event up to it.
        return Err(HttpError::UnknownStream);
    }
    let standalone = stream == StreamId::STANDALONE;
    let (running, page) = if standalone {
        let page = app.store.replay(sid, stream, after, pump::REPLAY_PAGE);
        (None, page.await?)
    } else {
        let both = app
            .store
            .running_and_replay(sid, stream, after, pump::REPLAY_PAGE);
        both.await?
    };
    let events = match page {
        Replay::Events(events) => events,
        Replay::UnknownStream => return Err(HttpError::UnknownStream),
        Replay::Truncated { oldest } => return Err(HttpError::EventsTrimmed(oldest)),
    };
    let ended = events.iter().any(|e| e.end);
    let close_after_replay = !standalone && (ended || running.is_none());
    let watch = running.filter(|r| r.node != app.node_id());
    Ok((events, watch, close_after_replay))
}
