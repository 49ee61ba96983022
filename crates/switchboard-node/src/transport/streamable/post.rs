//! POST on the MCP endpoint: one JSON-RPC message (or, under 2025-03-26, a batch).
//!
//! Order of checks: a body that declares more than `http.max_body` (413, the edge's layer 1) →
//! Content-Type (415) → Accept (406; which answer forms it allows, see
//! [`crate::edge::header_checks`]; both in the edge's layer 5) → a body that turns out longer
//! (413) or is not in within `http.body_read_timeout` of its head (408) → JSON-RPC parse (400)
//! → era: no `Mcp-Session-Id` and a 2026-07-28 revision → the stateless path
//! ([`crate::transport::stateless`]) → `initialize` (no session needed) → session id (400/404)
//! → `MCP-Protocol-Version` (400) → session load and admission, one store round trip →
//! [`start_call`] (initialized, progress token, duplicate id running here, C22) → answer.
//! A request whose answer streams registers in flight before its first event (one more round
//! trip, paid only by requests that do not answer at once).
//! Source: MCP 2025-11-25, basic/transports, Sending Messages to the Server.

use axum::body::Body as HttpBody;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use http::{HeaderMap, StatusCode};
use serde_json::Value;
use switchboard_protocol::{codes, Body, Message, RequestId, SessionId};
use switchboard_store::{Routed, SessionRecord, SessionUpdate};
use tracing::{Instrument, Span};

use crate::edge::body::BodyDeadline;
use crate::edge::error::HttpError;
use crate::edge::header_checks::Answers;
use crate::edge::request_id::KnownId;
use crate::exec::answer_form::Waited;
use crate::exec::call::{refusal, start_call, Answer, AnswerTo, Request, Started};
use crate::exec::response::{First, Registration, ResponseStream};
use crate::exec::session_handle::NodeSession;
use crate::exec::traced::{message_span, observed};
use crate::session;
use crate::state::App;
use crate::streams::pump::{self, Framing, OpenStream};
use crate::telemetry;
use switchboard_telemetry::trace::logged_session;

/// The POST handler.
pub async fn on_post(
    State(app): State<App>,
    Extension(answers): Extension<Answers>,
    Extension(deadline): Extension<BodyDeadline>,
    Extension(known): Extension<KnownId>,
    headers: HeaderMap,
    body: HttpBody,
) -> Response {
    match post(app, headers, answers, (body, deadline, known)).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// Reads a POSTed body and parses its JSON-RPC (400 with -32700 or -32600). Shared by this
/// endpoint and the legacy transport's message endpoint. The edge limits the body
/// (`crate::app`, layer 1): a body that declares more gets 413 before it is read, one that
/// turns out longer while it is read fails here with 413 too, and one not in by `deadline`
/// (`http.body_read_timeout` after its head) with 408 ([`crate::edge::body`]). A request's id
/// goes into `known`, so that every refusal of it from here on answers with it (JSON-RPC 2.0
/// §5, [`crate::edge::request_id`]).
pub(crate) async fn read_body(
    app: &App,
    (body, deadline, known): (HttpBody, BodyDeadline, KnownId),
) -> Result<Body, HttpError> {
    let bytes = crate::edge::body::collect(body, deadline, app.cfg.max_body_bytes).await?;
    let parsed = Body::parse(&bytes).map_err(|e| match (e.code(), e.id()) {
        (codes::PARSE_ERROR, _) => HttpError::Parse(e.message().to_owned()),
        (_, Some(id)) => HttpError::InvalidMessage {
            reason: e.message().to_owned(),
            id: id.0.clone(),
        },
        (_, None) => HttpError::InvalidRequest(e.message().to_owned()),
    })?;
    known.read(&parsed);
    Ok(parsed)
}

async fn post(
    app: App,
    headers: HeaderMap,
    answers: Answers,
    body: (HttpBody, BodyDeadline, KnownId),
) -> Result<Response, HttpError> {
    let parsed = read_body(&app, body).await?;
    if crate::edge::header_checks::is_modern(&headers, &parsed) {
        if let Body::Single(message) = parsed {
            let method = message.method().unwrap_or("").to_owned();
            let revision = Some("2026-07-28");
            let span = message_span(Some(&headers), message.raw(), &method, None, revision);
            let served =
                crate::transport::stateless::serve_request(&app, &headers, message, answers);
            // Boxed, as every branch but a session's single request below: the request
            // future's size is the largest branch's, and the router moves it whole into its
            // box once per request.
            let response = Box::pin(observed(&method, span, served)).await;
            return Ok(response);
        }
    }
    let sessionless = !headers.contains_key(switchboard_protocol::headers::MCP_SESSION_ID);
    if matches!(parsed, Body::Batch(_))
        && sessionless
        && crate::edge::header_checks::stateless_header(&headers)
    {
        return Err(HttpError::InvalidRequest(
            "JSON-RPC batches are not allowed under protocol version 2026-07-28: one message per POST".into(),
        ));
    }
    if let Body::Single(Message::Request { id, method, raw }) = &parsed {
        if method == "initialize" {
            Box::pin(crate::session::initialize::refuse_live_session(
                &app, &headers, id,
            ))
            .await?;
            let span = message_span(Some(&headers), raw, method, None, None);
            let start = crate::session::initialize::start_session(&app, id, raw, answers);
            return Box::pin(observed(method, span, start)).await;
        }
    }
    if parsed
        .messages()
        .iter()
        .any(|m| m.method() == Some("initialize"))
    {
        return Err(HttpError::InvalidRequest(
            "initialize must be a single request, not part of a batch or a notification".into(),
        ));
    }
    let sid = session::named(&headers)?;
    match parsed {
        Body::Single(Message::Request { id, method, raw }) => {
            // The revision is the session's, recorded once it is loaded (`request`).
            let span = message_span(Some(&headers), &raw, &method, Some(sid.as_str()), None);
            let request = request(
                app,
                sid,
                Request::new(id, method, raw),
                answers,
                span.clone(),
            );
            request.instrument(span).await
        }
        Body::Single(m) => Box::pin(accept_only(app, sid, vec![m], false, &headers)).await,
        Body::Batch(msgs) if !msgs.iter().any(Message::is_request) => {
            Box::pin(accept_only(app, sid, msgs, true, &headers)).await
        }
        Body::Batch(msgs) => Box::pin(batch(app, sid, msgs, answers, &headers)).await,
    }
}

/// A single request: admitted (one store round trip), started ([`start_call`]), answered as
/// JSON or SSE as `answers` allows. It is registered in flight only when its answer streams or
/// takes longer than `sse_after` (see [`ResponseStream`]).
async fn request(
    app: App,
    sid: SessionId,
    request: Request,
    answers: Answers,
    span: Span,
) -> Result<Response, HttpError> {
    let key = request.id.key();
    let admitted = session::admit(
        &app,
        &sid,
        session::Admit::Check(&key),
        &request.method,
        &request.raw,
    );
    let record = match admitted.await? {
        Ok(r) => r,
        Err((_, why)) => return Ok(answers.ready(StatusCode::OK, refusal(&request.id, why))),
    };
    let revision = session::revision(&record);
    span.record("mcp.protocol.version", record.revision.as_str());
    let running = match start_call(&app, &record, request, AnswerTo::Post(answers), span).await? {
        Started::Refused(answer) => return Ok(answers.ready(StatusCode::OK, answer)),
        Started::Running(running) => running,
    };
    let Answer::Post {
        mut first,
        stream,
        holder,
        conn,
    } = running.answer
    else {
        unreachable!("a request started for a POST answers through Answer::Post")
    };
    match decide(&app, &running.response, &mut first, answers).await {
        Some(First::Json(v)) => {
            app.replica.hub.unregister(sid.as_str(), &stream, &holder);
            Ok(json_ok(v))
        }
        Some(First::Stream) => {
            // The priming event's id, `<stream>_0-0`, is only given once the stream is
            // registered: a stream the store does not know could never be resumed from it (a
            // resume would be refused as naming no stream of this session). Unregistered (the
            // store failed), the stream opens without one; its later events register it first,
            // or fail.
            let registration = running.response.registration().await;
            if registration == Some(Registration::SessionGone) {
                app.replica.hub.unregister(sid.as_str(), &stream, &holder);
                app.replica.calls.cancel(sid.as_str(), &key);
                return Err(HttpError::UnknownSession);
            }
            let registered = registration == Some(Registration::Registered);
            let priming =
                (registered && revision.primes_streams()).then(|| format!("{stream}_0-0"));
            let open = OpenStream {
                sid: sid.to_string(),
                stream,
                holder,
                conn,
                replay: Vec::new(),
                after: "0-0".into(),
                watch: None,
                close_after_replay: false,
                resumed_at: None,
            };
            Ok(pump::open(&app, open, Framing::EventIds { priming }))
        }
        None => Err(HttpError::Store(
            "the request ended without an answer".into(),
        )),
    }
}

/// How the request is answered: SSE-only always as a stream (switched before it ran); else JSON
/// when its answer is ready within `sse_after`, else SSE; a JSON-only request past `sse_after` is
/// registered in flight (so it can be cancelled from any node and counts against the session's
/// cap) and its JSON awaited.
async fn decide(
    app: &App,
    response: &ResponseStream,
    first: &mut tokio::sync::oneshot::Receiver<First>,
    answers: Answers,
) -> Option<First> {
    match answers.first_within(app.cfg.sse_after, first).await {
        Waited::Stream => {
            response.register().await;
            Some(First::Stream)
        }
        Waited::Came(f) => f.ok(),
        Waited::Late if answers == Answers::JsonOnly => {
            response.register().await;
            first.await.ok()
        }
        Waited::Late if response.switch_to_stream() => {
            response.register().await;
            Some(First::Stream)
        }
        Waited::Late => first.await.ok(),
    }
}

/// Notifications and responses only: 202 with no body (MCP 2025-11-25, Sending Messages item 4).
async fn accept_only(
    app: App,
    sid: SessionId,
    msgs: Vec<Message>,
    is_batch: bool,
    headers: &HeaderMap,
) -> Result<Response, HttpError> {
    if let [m @ Message::Notification { method, .. }] = msgs.as_slice() {
        if method == "notifications/initialized" && !is_batch {
            // The second half of the handshake: the load and the update in one round trip (in
            // the message's span, its revision recorded once the record is loaded).
            let span = message_span(Some(headers), m.raw(), method, Some(sid.as_str()), None);
            let update = SessionUpdate::Initialized;
            let loaded = session::load_updating(&app, &sid, update);
            let record = loaded.instrument(span.clone()).await?;
            span.record("mcp.protocol.version", record.revision.as_str());
            return Ok(StatusCode::ACCEPTED.into_response());
        }
    }
    let record = session::load(&app, &sid, None)
        .await?
        .unwrap_or_else(|(r, _)| r);
    check_batch(&record, is_batch)?;
    for m in msgs {
        let span = response_span(Some(headers), &m, sid.as_str(), &record.revision);
        deliver(&app, &record, m).instrument(span).await?;
    }
    Ok(StatusCode::ACCEPTED.into_response())
}

/// A 2025-03-26 batch holding requests: answered with a JSON array of the responses (as one SSE
/// event when the client accepts only SSE).
async fn batch(
    app: App,
    sid: SessionId,
    msgs: Vec<Message>,
    form: Answers,
    headers: &HeaderMap,
) -> Result<Response, HttpError> {
    let record = session::load(&app, &sid, None)
        .await?
        .unwrap_or_else(|(r, _)| r);
    check_batch(&record, true)?;
    let mut answers = Vec::new();
    for m in msgs {
        match m {
            Message::Request { id, method, raw } => {
                let (sid, revision) = (Some(sid.as_str()), Some(record.revision.as_str()));
                let span = message_span(Some(headers), &raw, &method, sid, revision);
                let request = Request::new(id, method, raw);
                answers.push(start_call(&app, &record, request, AnswerTo::Batch, span).await?)
            }
            other => {
                let span = response_span(Some(headers), &other, sid.as_str(), &record.revision);
                deliver(&app, &record, other).instrument(span).await?
            }
        }
    }
    let mut out = Vec::with_capacity(answers.len());
    for answer in answers {
        match answer {
            Started::Refused(v) => out.push(v),
            Started::Running(running) => {
                let Answer::Batch(rx) = running.answer else {
                    unreachable!("a request started for a batch answers through Answer::Batch")
                };
                if let Ok(First::Json(v)) = rx.await {
                    out.push(v);
                }
            }
        }
    }
    Ok(form.ready(StatusCode::OK, Value::Array(out)))
}

fn check_batch(record: &SessionRecord, is_batch: bool) -> Result<(), HttpError> {
    if is_batch && !session::revision(record).accepts_batches() {
        return Err(HttpError::InvalidRequest(format!(
            "JSON-RPC batches are not accepted under revision {}",
            record.revision
        )));
    }
    Ok(())
}

/// One notification or response from the client (also the WebSocket transport's path).
pub(crate) async fn deliver(
    app: &App,
    record: &SessionRecord,
    m: Message,
) -> Result<(), HttpError> {
    let sid = record.id.as_str();
    match m {
        Message::Notification { method, raw } => {
            let params = raw.get("params").cloned().unwrap_or(Value::Null);
            match method.as_str() {
                "notifications/initialized" => {
                    app.store.update(sid, SessionUpdate::Initialized).await?;
                }
                "notifications/cancelled" => cancel(app, sid, &params).await?,
                _ => {
                    app.upstream
                        .notify(&method, params, NodeSession::new(record, app))
                        .await
                }
            }
        }
        Message::Response { id: Some(id), raw } => {
            let key = id.key();
            if app.waiters.answer(sid, &key, raw.clone()) {
                let _ = app.store.forget_pending(sid, &key).await;
            } else {
                match app.store.route_reply(sid, &key, &raw).await? {
                    Routed::Delivered => {}
                    Routed::NobodyWaits => telemetry::reply_unmatched(sid, &key),
                    Routed::WaiterStopped { node } => {
                        telemetry::reply_lost(sid, &key, &node);
                        return Err(HttpError::AnswerLost(node));
                    }
                }
            }
        }
        Message::Response { id: None, raw } => {
            tracing::info!(session = %logged_session(sid), response = %raw, "client sent an error response without an id");
        }
        Message::Request { .. } => {}
    }
    Ok(())
}

/// `notifications/cancelled`: cancels the request where it runs, here or on another node.
/// Unknown or finished requests are ignored (MCP 2025-11-25, basic/utilities/cancellation).
async fn cancel(app: &App, sid: &str, params: &Value) -> Result<(), HttpError> {
    let Some(rid) = params
        .get("requestId")
        .filter(|v| v.is_string() || v.is_number())
    else {
        return Ok(());
    };
    let key = RequestId(rid.clone()).key();
    if !app.replica.calls.cancel(sid, &key) {
        let reason = params.get("reason").and_then(Value::as_str);
        app.store.route_cancel(sid, &key, reason).await?;
    }
    Ok(())
}

/// The span of a client notification or response (`method` is `response` for a response).
fn response_span(headers: Option<&HeaderMap>, m: &Message, sid: &str, revision: &str) -> Span {
    let method = m.method().unwrap_or("response");
    message_span(headers, m.raw(), method, Some(sid), Some(revision))
}

fn json_ok(v: Value) -> Response {
    crate::edge::json_body::json_response(StatusCode::OK, v)
}
