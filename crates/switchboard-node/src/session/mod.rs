//! Reading the session a request names and checking it against the store.

pub mod initialize;
pub mod node_session;

use std::collections::HashMap;

use http::HeaderMap;
use switchboard_protocol::{codes, headers, jsonrpc, RequestId, Revision, SessionId};
use switchboard_store::{BeginOutcome, InflightEntry, InflightRequest, SessionRecord};

use crate::edge::error::HttpError;
use crate::state::App;
use crate::telemetry;

/// The `Mcp-Session-Id` header: 400 when absent; 404 when it cannot be one of ours (never touches
/// the store then).
pub fn session_id(h: &HeaderMap) -> Result<SessionId, HttpError> {
    let raw = h
        .get(headers::MCP_SESSION_ID)
        .ok_or(HttpError::MissingSession)?;
    raw.to_str()
        .ok()
        .and_then(SessionId::parse)
        .ok_or(HttpError::UnknownSession)
}

/// Why a request was not registered although its session exists.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NotAdmitted {
    /// A request with the same id is already in flight in the session (case C22).
    DuplicateId,
    /// The session already has `session.max_inflight` requests in flight.
    Busy,
}

/// What loading a session for a request found: the record, or the record and why the request is
/// refused.
pub type Loaded = Result<SessionRecord, (SessionRecord, NotAdmitted)>;

/// Loads and touches the session (one store round trip), registering `inflight` if given. A
/// request the store would not register comes back as `Ok(Err((record, why)))`.
pub async fn load(
    app: &App,
    sid: &SessionId,
    inflight: Option<&InflightRequest>,
) -> Result<Loaded, HttpError> {
    let outcome = app.store.begin(sid.as_str(), inflight).await?;
    if ended_lost_requests(app, sid, &outcome).await? {
        return loaded(app.store.begin(sid.as_str(), inflight).await?);
    }
    loaded(outcome)
}

/// The hot path: loads and touches the session and checks the request (duplicate id, in-flight
/// cap) without registering it, in one store round trip. The request registers later, only if
/// its answer is not ready at once (see `ResponseStream::register`).
pub async fn admit(app: &App, sid: &SessionId, request_key: &str) -> Result<Loaded, HttpError> {
    let outcome = app.store.check(sid.as_str(), request_key).await?;
    if ended_lost_requests(app, sid, &outcome).await? {
        return loaded(app.store.check(sid.as_str(), request_key).await?);
    }
    loaded(outcome)
}

/// The final event of a request lost with its dead node `node`: a JSON-RPC -32004 error response
/// to `request_key`'s id, telling the client to send the request again. A client resuming the
/// request's stream receives it.
pub fn lost_request_event(request_key: &str, node: &str) -> String {
    let id = RequestId::from_key(request_key);
    let msg = format!("the request was lost: node {node} running it stopped; send it again");
    jsonrpc::error_response(id.as_ref(), codes::REQUEST_ABORTED, msg, None).to_string()
}

/// A refusal may come from requests lost with a node that has died since: a session at
/// `session.max_inflight` full of them (they would hold their slots until the session ends),
/// or the request's id still held by one (it would be refused as a duplicate for the rest of the
/// session). Those are ended ([`end_lost_requests`]); `true` when one was (the caller asks
/// again). Only for the session's own principal; a duplicate held by a live node is left alone.
async fn ended_lost_requests(
    app: &App,
    sid: &SessionId,
    outcome: &BeginOutcome,
) -> Result<bool, HttpError> {
    let (record, holder) = match outcome {
        BeginOutcome::Busy(record) => (record, None),
        BeginOutcome::DuplicateId { record, node } => (record, Some(node)),
        _ => return Ok(false),
    };
    if !crate::edge::auth::may_use(&record.principal) {
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
        tracing::warn!(error = %e, session = %sid, "could not look for requests lost with a dead node");
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
    telemetry::request_aborted(sid, &entry.stream, &entry.node);
    Ok(())
}

fn loaded(outcome: BeginOutcome) -> Result<Loaded, HttpError> {
    let loaded = match outcome {
        BeginOutcome::Missing => return Err(HttpError::UnknownSession),
        BeginOutcome::Ready(r) => Ok(r),
        BeginOutcome::DuplicateId { record, .. } => Err((record, NotAdmitted::DuplicateId)),
        BeginOutcome::Busy(record) => Err((record, NotAdmitted::Busy)),
    };
    // A session bound to another principal is "not found", never revealed (C34; MCP 2025-11-25
    // security best practices, Session Hijacking), checked on the record loaded anyway.
    let (Ok(record) | Err((record, _))) = &loaded;
    if !crate::edge::auth::may_use(&record.principal) {
        return Err(HttpError::UnknownSession);
    }
    Ok(loaded)
}

/// A new session's record: revision `revision`, the client's `initialize` params (`null` until a
/// legacy SSE client sends them), bound to the request's principal ("anonymous" when
/// authorization is off, see [`crate::edge::auth`]), created now.
pub fn new_record(
    sid: &SessionId,
    revision: &str,
    initialize_params: std::sync::Arc<serde_json::Value>,
) -> SessionRecord {
    SessionRecord {
        id: sid.to_string(),
        revision: revision.to_owned(),
        initialize_params,
        initialized: false,
        log_level: None,
        subscriptions: Vec::new(),
        principal: crate::edge::auth::current_principal(),
        upstream_sessions: Default::default(),
        owners: Default::default(),
        created_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
    }
}

/// The session's revision, parsed (records only hold revisions we speak).
pub fn revision(record: &SessionRecord) -> Revision {
    Revision::parse(&record.revision).unwrap_or(Revision::LATEST)
}
