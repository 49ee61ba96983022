//! Whether a stream can be resumed from a `Last-Event-ID` (MCP 2025-11-25, basic/transports,
//! Resumability and Redelivery), checked before anything is claimed, so that a refused resume
//! never takes the stream from the connection holding it now: the one rule of both hosts (the
//! node's GET and WebSocket, library mode's GET).

use switchboard_protocol::ids::position_order;
use switchboard_protocol::EventId;
use switchboard_store::{Replay, Store, StoreError};

/// How far ahead of this replica's clock an event position may be and still count as possibly
/// sent (positions come from Redis's clock).
pub const CLOCK_SKEW_MS: u64 = 60_000;

/// Why a stream cannot be resumed from a position.
#[derive(Debug)]
pub enum NotResumable {
    /// The session has no such stream, or the position is of no event sent on it (a made-up id,
    /// one from the future).
    Unknown,
    /// The position is older than the retained log, whose oldest kept event is this one.
    Trimmed(String),
    /// The store failed.
    Store(StoreError),
}

impl From<StoreError> for NotResumable {
    fn from(e: StoreError) -> NotResumable {
        NotResumable::Store(e)
    }
}

/// Checks that `stream` of session `sid` can be resumed after log position `after` (see
/// [`NotResumable`]). Read only: one replay page of one event, and a second one only when the
/// position names the newest event or none (to tell which).
///
/// # Errors
/// [`NotResumable`].
pub async fn check_resumable(
    store: &dyn Store,
    sid: &str,
    stream: &str,
    after: &str,
) -> Result<(), NotResumable> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    if position_order(after).0 > now_ms.saturating_add(CLOCK_SKEW_MS) {
        return Err(NotResumable::Unknown);
    }
    match store.replay(sid, stream, after, 1).await? {
        Replay::Events(events) if !events.is_empty() || after == EventId::START => return Ok(()),
        Replay::Events(_) => {}
        Replay::UnknownStream => return Err(NotResumable::Unknown),
        Replay::Truncated { oldest } => return Err(NotResumable::Trimmed(oldest)),
    }
    // Nothing after `after`: it is the newest event's position, or no event's at all.
    let (ms, seq) = position_order(after);
    let before = match seq.checked_sub(1) {
        Some(s) => format!("{ms}-{s}"),
        None => format!("{}-{}", ms.saturating_sub(1), u64::MAX),
    };
    match store.replay(sid, stream, &before, 1).await? {
        Replay::Events(events) if events.first().is_some_and(|e| e.position == after) => Ok(()),
        _ => Err(NotResumable::Unknown),
    }
}
