//! `initialize`: creates the session (MCP 2025-11-25, basic/lifecycle, Initialization).
//!
//! The revision is negotiated in the body: a revision we speak is echoed, anything else gets our
//! latest (Version Negotiation), so `MCP-Protocol-Version` on this request is not checked. A stale
//! `Mcp-Session-Id` sent along is ignored: `initialize` starts a fresh session; the id of a live
//! session is refused (400, -32600: that session is initialized already, and a client starts a
//! new one by sending `initialize` without the header, Session Management item 4). The params
//! must have the schema's types (`protocolVersion` a string, `capabilities` an object,
//! `clientInfo` an object with string `name` and `version`), else -32602. Nothing is stored
//! unless the request is valid and under the session cap.

use axum::response::Response;
use http::{HeaderValue, StatusCode};
use serde_json::{json, Value};
use switchboard_protocol::{codes, headers, jsonrpc, RequestId, Revision, SessionId};
use switchboard_store::CreateOutcome;

use crate::edge::error::HttpError;
use crate::edge::header_checks::Answers;
use crate::state::App;
use crate::telemetry;

/// Handles an `initialize` request on POST: the answer as JSON (as one SSE event for a client
/// that accepts only SSE, see [`crate::edge::header_checks`]), with `Mcp-Session-Id` when a session was made.
pub async fn start_session(
    app: &App,
    id: &RequestId,
    raw: &Value,
    answers: Answers,
) -> Result<Response, HttpError> {
    let (body, sid) = create(app, id, raw).await?;
    let mut resp = answers.ready(StatusCode::OK, body);
    if let Some(sid) = sid {
        let value =
            HeaderValue::from_str(sid.as_str()).map_err(|e| HttpError::Store(e.to_string()))?;
        resp.headers_mut().insert(headers::MCP_SESSION_ID, value);
    }
    Ok(resp)
}

/// Creates the session an `initialize` request asks for, whatever the transport: the JSON-RPC
/// answer, and the new session's id (`None` when the request was refused with a JSON-RPC error,
/// so no session exists). At the session cap: [`HttpError::AtCapacity`]; at the principal's
/// rate limit: [`HttpError::RateLimited`] (429).
pub async fn create(
    app: &App,
    id: &RequestId,
    raw: &Value,
) -> Result<(Value, Option<SessionId>), HttpError> {
    let params = raw.get("params").cloned().unwrap_or_else(|| json!({}));
    if let Some(why) = refused_params(app, &params) {
        let body = jsonrpc::error_response(Some(id), codes::INVALID_PARAMS, why, None);
        return Ok((body, None));
    }
    let principal = crate::session::current_principal();
    // Only the principal's limit applies to `initialize` (it is no `tools/call`).
    let no_params = &Value::Null;
    crate::limits::admission::without_session(app, &principal, "initialize", no_params).await?;
    let revision = Revision::negotiate(params.get("protocolVersion").and_then(Value::as_str));
    let sid = SessionId::generate();
    let record = crate::session::new_record(&sid, revision.as_str(), params.into());
    created(app, app.store.create_session(&record).await?)?;
    telemetry::session_created(sid.as_str(), revision.as_str());
    Ok((
        jsonrpc::result_response(id, result(app, revision)),
        Some(sid),
    ))
}

/// The refusal for a session the store did not create: 503 at `session.max_sessions`
/// ([`HttpError::AtCapacity`]), 429 at `session.max_sessions_per_principal`
/// ([`HttpError::TooManySessions`]). Shared by every transport that creates sessions.
pub(crate) fn created(app: &App, outcome: CreateOutcome) -> Result<(), HttpError> {
    let retry_after_secs = app.cfg.retry_after_secs;
    let refusal = match outcome {
        CreateOutcome::Created => return Ok(()),
        CreateOutcome::AtCapacity => HttpError::AtCapacity { retry_after_secs },
        CreateOutcome::PrincipalAtCapacity => HttpError::TooManySessions {
            limit: app.cfg.max_sessions_per_principal,
            retry_after_secs,
        },
    };
    let key = match &refusal {
        HttpError::TooManySessions { .. } => "session.max_sessions_per_principal",
        _ => "session.max_sessions",
    };
    telemetry::session_refused(key, refusal.status().as_u16());
    Err(refusal)
}

/// Why `initialize` `params` are refused with -32602, if they are: not an object, larger than
/// `session.max_initialize_params` (they are kept in the session record for its life), or not
/// of the schema's types ([`invalid_params`]). Shared by every transport.
pub(crate) fn refused_params(app: &App, params: &Value) -> Option<String> {
    if !params.is_object() {
        return Some("initialize params must be an object".into());
    }
    let max = app.cfg.max_initialize_params_bytes;
    let bytes = params.to_string().len();
    if bytes > max {
        return Some(format!(
            "initialize params are {bytes} bytes, over session.max_initialize_params ({max} bytes)"
        ));
    }
    invalid_params(params).map(str::to_owned)
}

/// What is wrong with `initialize` params (an object) by the schema (MCP 2025-11-25,
/// `InitializeRequest`: `protocolVersion`, `capabilities`, `clientInfo` with `name` and
/// `version`), if anything.
fn invalid_params(params: &Value) -> Option<&'static str> {
    let info = params.get("clientInfo");
    if !params.get("protocolVersion").is_some_and(Value::is_string) {
        Some("initialize params.protocolVersion must be a string")
    } else if !params.get("capabilities").is_some_and(Value::is_object) {
        Some("initialize params.capabilities must be an object")
    } else if !info.is_some_and(Value::is_object) {
        Some("initialize params.clientInfo must be an object")
    } else if !info
        .and_then(|i| i.get("name"))
        .is_some_and(Value::is_string)
    {
        Some("initialize params.clientInfo.name must be a string")
    } else if !info
        .and_then(|i| i.get("version"))
        .is_some_and(Value::is_string)
    {
        Some("initialize params.clientInfo.version must be a string")
    } else {
        None
    }
}

/// Refuses an `initialize` that names a live session in `Mcp-Session-Id` (400, -32600 with the
/// request's id); one naming no session (stale, malformed) passes, to start a fresh one.
///
/// # Errors
/// [`HttpError::InvalidMessage`] for a live session; a store failure while looking it up.
pub async fn refuse_live_session(
    app: &App,
    h: &http::HeaderMap,
    id: &RequestId,
) -> Result<(), HttpError> {
    if !h.contains_key(headers::MCP_SESSION_ID) {
        return Ok(());
    }
    let Ok(sid) = crate::session::session_id(h) else {
        return Ok(());
    };
    match crate::session::load(app, &sid, None).await {
        Err(HttpError::UnknownSession) => Ok(()),
        Err(other) => Err(other),
        Ok(_) => Err(HttpError::InvalidMessage {
            reason: "this session is already initialized; send initialize without \
                     Mcp-Session-Id to start a new one"
                .into(),
            id: id.0.clone(),
        }),
    }
}

/// What the server offers, shared by `initialize` (MCP 2025-11-25, basic/lifecycle) and
/// `server/discover` (MCP 2026-07-28, server/discover): the upstream's (aggregated)
/// capabilities, server info and instructions.
pub(crate) struct Offer {
    pub(crate) capabilities: Value,
    pub(crate) server_info: Value,
    pub(crate) instructions: Option<String>,
}

/// The upstream's current [`Offer`], as the request's principal may see it: under a policy,
/// the members it may not use are left out of the capabilities and instructions
/// ([`switchboard_upstream::Upstream::capabilities_for`]).
pub(crate) fn offer(app: &App) -> Offer {
    let up = &app.upstream;
    let principal = crate::session::current();
    Offer {
        capabilities: up.capabilities_for(&principal),
        server_info: up.server_info(),
        instructions: up.instructions_for(&principal),
    }
}

/// The `initialize` result for `revision` (MCP 2025-11-25, basic/lifecycle, Initialization).
pub(crate) fn result(app: &App, revision: Revision) -> Value {
    let offer = offer(app);
    let mut result = json!({
        "protocolVersion": revision.as_str(),
        "capabilities": offer.capabilities,
        "serverInfo": offer.server_info,
    });
    if let Some(text) = offer.instructions {
        result["instructions"] = Value::String(text);
    }
    // The merged capabilities and serverInfo, as the client's revision defines them
    // (docs/revisions.md).
    switchboard_protocol::shaping::initialize_result(revision, &mut result);
    result
}
