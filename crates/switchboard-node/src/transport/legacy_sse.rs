//! The legacy HTTP+SSE transport, for clients of MCP 2024-11-05 (basic/transports, HTTP with SSE):
//! the client GETs an SSE endpoint, whose first event (`endpoint`) names the URI it then POSTs
//! every message to; everything the server sends arrives on that SSE stream as `message` events.
//!
//! The session lives in the store like a Streamable HTTP session, so the POSTs may land on any
//! node: the SSE connection is the session's standalone stream (`get`), held by the node the GET
//! reached, and every answer, notification and server-to-client request of the session is
//! appended to that stream's log, which the store delivers to the holder on whichever node it is
//! (the same path an upstream's unsolicited notifications take). Requests run through the same
//! machinery as Streamable HTTP POSTs ([`crate::exec::call::start_call`]);
//! client notifications and responses through [`post::deliver`], so `notifications/cancelled`
//! and answers to sampling reach the node that waits for them.
//!
//! GET on `transports.legacy_sse.sse_path`, outermost first (steps 1-2 are the router's, as on the endpoint):
//! 1. Origin/Host check → 403/421; 2. authorization when on → 401/403;
//! 3. Accept must allow `text/event-stream` → 406;
//! 4. a session is created (revision 2024-11-05 until `initialize` negotiates; bound to the
//!    request's principal) → 503 at the session cap;
//! 5. the standalone stream is claimed here and opened with [`pump::Framing::Legacy`]: first
//!    `event: endpoint` with `<legacy_messages_path>?sessionId=<id>` (the SDKs' convention, not
//!    spec text), then `event: message` per message, keep-alive comments, no event ids (the
//!    revision has no resumability).
//!
//! POST on `legacy_messages_path?sessionId=<id>` (steps 1-2 as above):
//! 3. `sessionId` missing or not one of ours → 400; Content-Type → 415; body size → 413; one
//!    JSON-RPC message (2024-11-05 has no batches) → 400 with a JSON-RPC error body;
//! 4. the session is loaded (and, for a request, the request registered in flight) in one store
//!    round trip → 404 when unknown, expired or another principal's;
//! 5. `initialize` records the negotiated revision and the client's capabilities; a request is
//!    started in its own task; a notification or response is delivered;
//! 6. 202 Accepted with no body: every answer travels on the SSE stream.
//!
//! A request whose node dies while it runs is answered on the SSE stream with -32004 by the node
//! holding the stream, at its next keep-alive once the dead node's heartbeat has lapsed
//! ([`crate::session::end_lost_requests`]); the request's registration carries a
//! [`StreamId::generate_standalone_answered`] id so that the same happens when a full session ends
//! it.
//!
//! When the SSE connection closes the session is not ended (POSTs may still be in flight): it
//! idles out like any session (`session.idle_ttl`), and the reaper or a DELETE on the endpoint ends it
//! cluster-wide. A client whose stream dropped must open a new one and initialize again (MCP
//! 2024-11-05 has no way to resume): the new GET makes a new session.

use axum::body::Body as HttpBody;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get as get_route, post as post_route, MethodRouter};
use axum::Extension;
use http::{HeaderMap, StatusCode, Uri};
use serde_json::{json, Value};
use switchboard_protocol::{codes, jsonrpc, Body, EventId, Message, RequestId, Revision};
use switchboard_protocol::{SessionId, StreamId};
use switchboard_store::SessionUpdate;

use crate::edge::body::BodyDeadline;
use crate::edge::error::HttpError;
use crate::edge::request_id::KnownId;
use crate::exec::call::{start_call, AnswerTo, Request, Started};
use crate::exec::traced::message_span;
use crate::state::App;
use crate::streams::pump::{self, Framing, OpenStream};
use crate::{edge::header_checks, session, telemetry, transport::streamable::post};
use tracing::Instrument;

/// The revision a legacy session has until `initialize` negotiates one.
const LEGACY_REVISION: Revision = Revision::V2024_11_05;

/// The transport's two routes (`transports.legacy_sse.sse_path`: GET; `legacy_messages_path`: POST; any other
/// method gets axum's 405 with `Allow`), or none when either path is configured empty. The
/// router wraps them in the same Origin/Host and authorization layers as the MCP endpoint.
pub fn routes(app: &App) -> Vec<(String, MethodRouter<App>)> {
    let (sse, messages) = (&app.cfg.legacy_sse_path, &app.cfg.legacy_messages_path);
    if sse.is_empty() || messages.is_empty() {
        return Vec::new();
    }
    vec![
        (sse.clone(), get_route(open)),
        (messages.clone(), post_route(message)),
    ]
}

/// GET on the SSE path: a new session and its SSE stream.
pub async fn open(State(app): State<App>, headers: HeaderMap) -> Response {
    match open_stream(app, headers).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn open_stream(app: App, headers: HeaderMap) -> Result<Response, HttpError> {
    // Step 3: the client must take an event stream.
    header_checks::check_get(&headers)?;
    // Step 4: the session, with no `initialize` params yet (`null` until the client sends them).
    // Making it takes the principal's limit, as `initialize` does on the MCP endpoint.
    let principal = session::current_principal();
    crate::limits::admission::without_session(&app, &principal, "initialize", &Value::Null).await?;
    let sid = SessionId::generate();
    let record = session::new_record(&sid, LEGACY_REVISION.as_str(), Value::Null.into());
    session::initialize::created(&app, app.store.create_session(&record).await?)?;
    telemetry::session_created(sid.as_str(), LEGACY_REVISION.as_str());
    // Step 5: this connection holds the session's standalone stream; the store sends it every
    // event appended to that stream's log, from any node.
    let stream = StreamId::STANDALONE;
    let holder = app.new_holder();
    let conn = app.replica.hub.register(sid.as_str(), stream, &holder);
    if let Err(e) = app.store.claim(sid.as_str(), stream, &holder).await {
        app.replica.hub.unregister(sid.as_str(), stream, &holder);
        return Err(e.into());
    }
    let endpoint = format!("{}?sessionId={sid}", app.cfg.legacy_messages_path);
    let open = OpenStream {
        sid: sid.to_string(),
        stream: stream.to_owned(),
        holder,
        conn,
        replay: Vec::new(),
        after: EventId::START.to_owned(),
        watch: None,
        close_after_replay: false,
        resumed_at: None,
    };
    Ok(pump::open(&app, open, Framing::Legacy { endpoint }))
}

/// POST on the messages path: one client message, answered 202; replies go to the SSE stream.
pub async fn message(
    State(app): State<App>,
    uri: Uri,
    headers: HeaderMap,
    Extension(deadline): Extension<BodyDeadline>,
    Extension(known): Extension<KnownId>,
    body: HttpBody,
) -> Response {
    match accept_message(app, uri, headers, (body, deadline, known)).await {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(e) => e.into_response(),
    }
}

async fn accept_message(
    app: App,
    uri: Uri,
    headers: HeaderMap,
    body: (HttpBody, BodyDeadline, KnownId),
) -> Result<(), HttpError> {
    // Step 3: the session id, then the body: JSON, one message.
    let sid = session_param(&uri)?;
    header_checks::check_content_type(&headers)?;
    let Body::Single(m) = post::read_body(&app, body).await? else {
        return Err(HttpError::InvalidRequest(
            "JSON-RPC batches are not accepted on the HTTP+SSE transport (MCP 2024-11-05)".into(),
        ));
    };
    // Steps 4-5: one store round trip loads the session; then the message goes its way.
    match m {
        Message::Request { id, method, raw } if method == "initialize" => {
            initialize(&app, &sid, &id, &raw).await
        }
        Message::Request { id, method, raw } => {
            request(app, sid, Request::new(id, method, raw), &headers).await
        }
        other => {
            let record = session::load(&app, &sid, None)
                .await?
                .unwrap_or_else(|(r, _)| r);
            post::deliver(&app, &record, other).await
        }
    }
}

/// `?sessionId=<id>`: 400 when absent, given more than once (two ids: which session is meant is
/// ambiguous), or not shaped like one of our ids (the store is not touched then). Valid ids are
/// hex, so no percent-decoding is needed.
fn session_param(uri: &Uri) -> Result<SessionId, HttpError> {
    let mut values = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|pair| pair.strip_prefix("sessionId="));
    let value = values.next().ok_or_else(|| {
        HttpError::InvalidRequest("the sessionId query parameter is required".into())
    })?;
    if values.next().is_some() {
        return Err(HttpError::InvalidRequest(
            "the sessionId query parameter is given more than once".into(),
        ));
    }
    SessionId::parse(value).ok_or_else(|| {
        HttpError::InvalidRequest(format!("sessionId {value:?} is not a session id"))
    })
}

/// `initialize` on a session the GET made: negotiates the revision like the endpoint's
/// `initialize` (MCP 2024-11-05, basic/lifecycle, Version Negotiation), records it with the
/// client's params (capabilities, clientInfo), and answers on the SSE stream.
async fn initialize(
    app: &App,
    sid: &SessionId,
    id: &RequestId,
    raw: &Value,
) -> Result<(), HttpError> {
    let record = session::load(app, sid, None)
        .await?
        .unwrap_or_else(|(r, _)| r);
    let params = raw.get("params").cloned().unwrap_or_else(|| json!({}));
    let refused = if !record.initialize_params.is_null() {
        Some((
            codes::INVALID_REQUEST,
            "this session is already initialized".to_owned(),
        ))
    } else {
        crate::session::initialize::refused_params(app, &params)
            .map(|why| (codes::INVALID_PARAMS, why))
    };
    if let Some((code, message)) = refused {
        return to_stream(
            app,
            sid,
            jsonrpc::error_response(Some(id), code, message, None),
        )
        .await;
    }
    // Not counted toward the rate limits: the GET that made the session took the principal's
    // limit, as the endpoint's `initialize` does, once per session.
    let revision = Revision::negotiate(params.get("protocolVersion").and_then(Value::as_str));
    let update = SessionUpdate::Initialize {
        revision: revision.to_string(),
        params,
    };
    if !app.store.update(sid.as_str(), update).await? {
        return Err(HttpError::UnknownSession);
    }
    let result = crate::session::initialize::result(app, revision);
    to_stream(app, sid, jsonrpc::result_response(id, result)).await
}

/// A request: the session loaded and its principal checked, then the request admitted and
/// registered in flight ([`start_call`]: its rate limits are taken there, so a duplicate id or a
/// request past a limit is refused and `notifications/cancelled` finds it from any node), then
/// run in its own task; its messages and its response go to the SSE stream.
async fn request(
    app: App,
    sid: SessionId,
    request: Request,
    headers: &HeaderMap,
) -> Result<(), HttpError> {
    let span = message_span(
        Some(headers),
        &request.raw,
        &request.method,
        Some(sid.as_str()),
        None,
    );
    // The session and its principal first, with nothing registered and no limit taken: a
    // stranger's request must leave no trace in the session (not even an in-flight entry).
    let record = session::load(&app, &sid, None)
        .instrument(span.clone())
        .await?
        .unwrap_or_else(|(r, _)| r);
    span.record("mcp.protocol.version", record.revision.as_str());
    match start_call(&app, &record, request, AnswerTo::Standalone, span).await? {
        Started::Refused(answer) => to_stream(&app, &sid, answer).await,
        Started::Running(_) => Ok(()),
    }
}

/// Appends one message to the session's SSE stream (the store delivers it to the holder).
async fn to_stream(app: &App, sid: &SessionId, message: Value) -> Result<(), HttpError> {
    app.store
        .append(
            sid.as_str(),
            StreamId::STANDALONE,
            &message.to_string(),
            false,
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_param_rules() {
        let sid = SessionId::generate();
        let uri: Uri = format!("/messages?x=1&sessionId={sid}").parse().unwrap();
        assert_eq!(session_param(&uri).unwrap(), sid);
        for bad in [
            "/messages",
            "/messages?session=1",
            "/messages?sessionId=nope",
            &format!("/messages?sessionId={sid}&sessionId={sid}"),
            &format!("/messages?sessionId={sid}&sessionId=a"),
        ] {
            let e = session_param(&bad.parse().unwrap()).unwrap_err();
            assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{bad}");
        }
    }
}
