//! The headers that name a request's session: `Mcp-Session-Id`, and with it the format of
//! `MCP-Protocol-Version`. Touches no store.

use http::HeaderMap;
use switchboard_protocol::{headers, SessionId};

use crate::edge::error::HttpError;

/// The `Mcp-Session-Id` header: 400 when absent or sent twice; 404 when it cannot be one of ours
/// (never touches the store then).
pub fn session_id(h: &HeaderMap) -> Result<SessionId, HttpError> {
    let raw = crate::edge::header_checks::single(h, headers::MCP_SESSION_ID)?
        .ok_or(HttpError::MissingSession)?;
    raw.to_str()
        .ok()
        .and_then(SessionId::parse)
        .ok_or(HttpError::UnknownSession)
}

/// The headers of a request to an existing session: `Mcp-Session-Id` ([`session_id`]: 400 when
/// absent, 404 when malformed), then the format of `MCP-Protocol-Version` (400; MCP 2025-11-25,
/// basic/transports, Protocol Version Header). Touches no store.
pub fn named(h: &HeaderMap) -> Result<SessionId, HttpError> {
    let sid = session_id(h)?;
    crate::edge::header_checks::protocol_version(h)?;
    Ok(sid)
}
