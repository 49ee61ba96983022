//! Checks before a stream is resumed from `Last-Event-ID` (MCP 2025-11-25, basic/transports,
//! Resumability and Redelivery), shared by a GET on the endpoint and a WebSocket resumed on
//! another node.

use switchboard_protocol::ids::position_order;
use switchboard_protocol::EventId;
use switchboard_store::Replay;

use crate::edge::error::HttpError;
use crate::state::App;

/// How far ahead of this node's clock an event position may be and still count as possibly sent
/// (positions come from Redis's clock).
const CLOCK_SKEW_MS: u64 = 60_000;

/// Refuses a `Last-Event-ID` that cannot be resumed before anything is claimed, so that a refused
/// resume never disturbs the connection holding the stream now: a stream this session does not
/// have (400), an id older than the retained log (410), an id of no event sent yet (400). Read
/// only: one replay page of one event, and a second one only when the id names the newest event
/// or none (to tell which).
pub(crate) async fn check_resumable(
    app: &App,
    sid: &str,
    stream: &str,
    after: &str,
) -> Result<(), HttpError> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    if position_order(after).0 > now_ms + CLOCK_SKEW_MS {
        return Err(HttpError::UnknownStream);
    }
    match app.store.replay(sid, stream, after, 1).await? {
        Replay::Events(events) if !events.is_empty() || after == EventId::START => return Ok(()),
        Replay::Events(_) => {}
        Replay::UnknownStream => return Err(HttpError::UnknownStream),
        Replay::Truncated { oldest } => return Err(HttpError::EventsTrimmed(oldest)),
    }
    // Nothing after `after`: it is the newest event's position, or no event's at all.
    let (ms, seq) = position_order(after);
    let before = match seq.checked_sub(1) {
        Some(s) => format!("{ms}-{s}"),
        None => format!("{}-{}", ms.saturating_sub(1), u64::MAX),
    };
    match app.store.replay(sid, stream, &before, 1).await? {
        Replay::Events(events) if events.first().is_some_and(|e| e.position == after) => Ok(()),
        _ => Err(HttpError::UnknownStream),
    }
}
