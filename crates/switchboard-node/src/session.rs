//! Reading the session a request names and checking it against the store.

use std::collections::HashMap;

use http::HeaderMap;
use switchboard_protocol::{codes, headers, jsonrpc, RequestId, Revision, SessionId};
use switchboard_store::{BeginOutcome, InflightRequest, SessionRecord};

use crate::error::HttpError;
use crate::state::App;

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
pub enum Refusal {
    /// A request with the same id is already in flight in the session (case C22).
    DuplicateId,
    /// The session already has `max_inflight_per_session` requests in flight.
    Busy,
}

/// What loading a session for a request found: the record, or the record and why the request is
/// refused.
pub type Loaded = Result<SessionRecord, (SessionRecord, Refusal)>;

/// Loads and touches the session (one store round trip), registering `inflight` if given. A
/// request the store would not register comes back as `Ok(Err((record, why)))`.
pub async fn load(
    app: &App,
    sid: &SessionId,
    inflight: Option<&InflightRequest>,
) -> Result<Loaded, HttpError> {
    let outcome = app.store.begin(sid.as_str(), inflight).await?;
    let key = inflight.map(|i| i.request_key.as_str());
    if forgot_lost_duplicate(app, sid, &outcome, key).await? {
        return loaded(app.store.begin(sid.as_str(), inflight).await?);
    }
    loaded(outcome)
}

/// The hot path: loads and touches the session and checks the request (duplicate id, in-flight
/// cap) without registering it, in one store round trip. The request registers later, only if
/// its answer is not ready at once (see `ResponseStream::register`).
pub async fn admit(app: &App, sid: &SessionId, request_key: &str) -> Result<Loaded, HttpError> {
    let outcome = app.store.check(sid.as_str(), request_key).await?;
    if forgot_lost_duplicate(app, sid, &outcome, Some(request_key)).await?
        || ended_lost_requests(app, sid, &outcome).await?
    {
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

/// A session at `max_inflight_per_session` may be full of requests whose nodes have died (they
/// would hold their slots until the session ends): each of those is ended with
/// [`lost_request_event`] in its stream. `true` when one was (the caller asks again). Only for
/// the session's own principal; each distinct node's liveness is one store round trip.
async fn ended_lost_requests(
    app: &App,
    sid: &SessionId,
    outcome: &BeginOutcome,
) -> Result<bool, HttpError> {
    let BeginOutcome::Busy(record) = outcome else {
        return Ok(false);
    };
    if !crate::auth::may_use(&record.principal) {
        return Ok(false);
    }
    let mut dead: HashMap<String, bool> = HashMap::new();
    let mut ended = false;
    for entry in app.store.in_flight(sid.as_str()).await? {
        let is_dead = match dead.get(&entry.node) {
            Some(d) => *d,
            None => {
                let d = !app.store.is_alive(&entry.node).await?;
                dead.insert(entry.node.clone(), d);
                d
            }
        };
        if !is_dead {
            continue;
        }
        let data = lost_request_event(&entry.request_key, &entry.node);
        let aborted = app
            .store
            .abort_running(sid.as_str(), &entry.stream, &entry.node, &data)
            .await?;
        if aborted.is_none() {
            // Not recorded as running there any more: only the in-flight entry is left.
            app.store
                .finish(sid.as_str(), &entry.request_key, None)
                .await?;
        }
        tracing::info!(session = %sid, request = %entry.request_key, node = %entry.node, "ended a request lost with its dead node: it held an in-flight slot");
        ended = true;
    }
    Ok(ended)
}

/// A request id still registered by a node that has died since was lost with that node (a client
/// resuming its POST stream is told so with -32004): its entry is forgotten so that the id can
/// be sent again, instead of being refused as a duplicate for the rest of the session. `true`
/// when an entry was forgotten (the caller asks again). Only for the session's own principal.
async fn forgot_lost_duplicate(
    app: &App,
    sid: &SessionId,
    outcome: &BeginOutcome,
    request_key: Option<&str>,
) -> Result<bool, HttpError> {
    let (BeginOutcome::DuplicateId { record, node }, Some(key)) = (outcome, request_key) else {
        return Ok(false);
    };
    if !crate::auth::may_use(&record.principal) || app.store.is_alive(node).await? {
        return Ok(false);
    }
    tracing::info!(session = %sid, request = key, node = %node, "forgot a request lost with its dead node");
    app.store.finish(sid.as_str(), key, None).await?;
    Ok(true)
}

fn loaded(outcome: BeginOutcome) -> Result<Loaded, HttpError> {
    let loaded = match outcome {
        BeginOutcome::Missing => return Err(HttpError::UnknownSession),
        BeginOutcome::Ready(r) => Ok(r),
        BeginOutcome::DuplicateId { record, .. } => Err((record, Refusal::DuplicateId)),
        BeginOutcome::Busy(record) => Err((record, Refusal::Busy)),
    };
    // A session bound to another principal is "not found", never revealed (C34; MCP 2025-11-25
    // security best practices, Session Hijacking), checked on the record loaded anyway.
    let (Ok(record) | Err((record, _))) = &loaded;
    if !crate::auth::may_use(&record.principal) {
        return Err(HttpError::UnknownSession);
    }
    Ok(loaded)
}

/// The session's revision, parsed (records only hold revisions we speak).
pub fn revision(record: &SessionRecord) -> Revision {
    Revision::parse(&record.revision).unwrap_or(Revision::LATEST)
}
