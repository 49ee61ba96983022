//! Reading the session a request names and checking it against the store.

use http::HeaderMap;
use switchboard_protocol::{headers, Revision, SessionId};
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

/// Loads and touches the session (one store round trip), registering `inflight` if given. A
/// duplicate in-flight id comes back as `Ok(Err(record))`.
pub async fn load(
    app: &App,
    sid: &SessionId,
    inflight: Option<&InflightRequest>,
) -> Result<Result<SessionRecord, SessionRecord>, HttpError> {
    match app.store.begin(sid.as_str(), inflight).await? {
        BeginOutcome::Missing => Err(HttpError::UnknownSession),
        BeginOutcome::Ready(r) => Ok(Ok(r)),
        BeginOutcome::DuplicateId { record, .. } => Ok(Err(record)),
    }
}

/// The session's revision, parsed (records only hold revisions we speak).
pub fn revision(record: &SessionRecord) -> Revision {
    Revision::parse(&record.revision).unwrap_or(Revision::LATEST)
}
