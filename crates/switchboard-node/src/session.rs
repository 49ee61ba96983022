//! Reading the session a request names and checking it against the store.

use http::HeaderMap;
use switchboard_protocol::{headers, Revision, SessionId};
use switchboard_store::{BeginOutcome, InflightRequest, SessionRecord};

use crate::error::HttpError;
use crate::guard;
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

/// Loads and touches the session (one store round trip), registering `inflight` if given, and
/// checks `MCP-Protocol-Version` against the negotiated revision. A duplicate in-flight id comes
/// back as `Ok(Err(record))`.
pub async fn load(
    app: &App,
    sid: &SessionId,
    version: Option<Revision>,
    inflight: Option<&InflightRequest>,
) -> Result<Result<SessionRecord, SessionRecord>, HttpError> {
    let (record, duplicate) = match app.store.begin(sid.as_str(), inflight).await? {
        BeginOutcome::Missing => return Err(HttpError::UnknownSession),
        BeginOutcome::Ready(r) => (r, false),
        BeginOutcome::DuplicateId { record, .. } => (record, true),
    };
    if let Err(e) = guard::check_version_matches(version, &record.revision) {
        if let (Some(i), false) = (inflight, duplicate) {
            let _ = app
                .store
                .finish(sid.as_str(), &i.request_key, Some(&i.stream))
                .await;
        }
        return Err(e);
    }
    Ok(if duplicate { Err(record) } else { Ok(record) })
}

/// The session's revision, parsed (records only hold revisions we speak).
pub fn revision(record: &SessionRecord) -> Revision {
    Revision::parse(&record.revision).unwrap_or(Revision::LATEST)
}
