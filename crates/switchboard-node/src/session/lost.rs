//! Requests lost with a dead node: ended with -32004 when they hold a session's slots or ids,
//! or when a legacy SSE stream's keep-alive looks for them.

use std::collections::HashMap;

use switchboard_protocol::SessionId;
use switchboard_store::{BeginOutcome, InflightEntry};

use crate::edge::error::HttpError;
use crate::state::App;
use switchboard_telemetry::trace::logged_session;

pub use switchboard_runtime::liveness::lost_request_event;

/// A refusal may come from requests lost with a node that has died since: a session at
/// `session.max_inflight` full of them (they would hold their slots until the session ends),
/// or the request's id still held by one (it would be refused as a duplicate for the rest of the
/// session). Those are ended ([`end_lost_requests`]); `true` when one was (the caller asks
/// again). Only for the session's own principal; a duplicate held by a live node is left alone.
pub(super) async fn ended_lost_requests(
    app: &App,
    sid: &SessionId,
    outcome: &BeginOutcome,
) -> Result<bool, HttpError> {
    let (record, holder) = match outcome {
        BeginOutcome::Busy(record) => (record, None),
        BeginOutcome::DuplicateId { record, node } => (record, Some(node)),
        _ => return Ok(false),
    };
    if !crate::session::may_use(&record.principal) {
        return Ok(false);
    }
    if let Some(node) = holder {
        if node == app.node_id() || app.store.is_alive(node).await? {
            return Ok(false);
        }
    }
    Ok(end_lost_requests(app, sid.as_str(), holder.map(String::as_str)).await? > 0)
}

/// Ends every request of the session registered in flight on a node that has died: each gets
/// [`lost_request_event`] as the final event of its stream (a request answered on the session's
/// standalone stream, sent on the legacy HTTP+SSE transport or over a WebSocket, gets it there,
/// the only stream its client reads: see `abort_running`), and its in-flight entry is removed.
/// `known_dead` is a node the caller has just found dead (not asked again). Returns how many
/// entries of dead nodes it found (ended here, or meanwhile by another node). One store round
/// trip to list them, one per distinct other node to ask its liveness, one per request ended
/// (two when another node ended it first).
pub async fn end_lost_requests(
    app: &App,
    sid: &str,
    known_dead: Option<&str>,
) -> Result<usize, HttpError> {
    let mut dead: HashMap<String, bool> = known_dead
        .map(|n| (n.to_owned(), true))
        .into_iter()
        .collect();
    let mut ended = 0;
    for entry in app.store.in_flight(sid).await? {
        if entry.node == app.node_id() {
            continue;
        }
        let is_dead = match dead.get(&entry.node) {
            Some(d) => *d,
            None => {
                let d = !app.store.is_alive(&entry.node).await?;
                dead.insert(entry.node.clone(), d);
                d
            }
        };
        if is_dead {
            end_lost_request(app, sid, &entry).await?;
            ended += 1;
        }
    }
    Ok(ended)
}

/// [`end_lost_requests`] from a stream's periodic work: failures are logged, not returned.
pub async fn end_lost_requests_logged(app: &App, sid: &str) {
    if let Err(e) = end_lost_requests(app, sid, None).await {
        tracing::warn!(error = %e, session = %logged_session(sid), "could not look for requests lost with a dead node");
    }
}

/// Ends one request lost with its dead node (see [`end_lost_requests`]); when it has already
/// ended (another node got there first), only removes its entry if that is still as listed.
async fn end_lost_request(app: &App, sid: &str, entry: &InflightEntry) -> Result<(), HttpError> {
    let data = lost_request_event(&entry.request_key, &entry.node);
    let aborted = app
        .store
        .abort_running(sid, &entry.stream, &entry.node, &data)
        .await?;
    if aborted.is_none() {
        // Ended meanwhile (here or by another node): drop the entry only if it is still the one
        // listed; the client may already have sent the id again.
        app.store.forget_in_flight(sid, entry).await?;
        return Ok(());
    }
    switchboard_runtime::liveness::count_aborted(sid, &entry.stream, &entry.node);
    Ok(())
}
