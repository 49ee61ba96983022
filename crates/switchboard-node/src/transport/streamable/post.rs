//! POST on the MCP endpoint: one JSON-RPC message (or, under 2025-03-26, a batch).
//!
//! Order of checks: Content-Type (415) → Accept (406; which answer forms it allows, see
//! [`crate::edge::accept`]) → body size (413) → JSON-RPC parse (400) →
//! era: no `Mcp-Session-Id` and modern `_meta` → the stateless path ([`crate::transport::stateless`]) →
//! `initialize` (no session needed) → session id (400/404) → `MCP-Protocol-Version` (400) →
//! session load and admission, one store round trip → duplicate id running here (C22) → run. A
//! request whose answer streams registers in flight before its first event (one more round trip,
//! paid only by requests that do not answer at once).
//! Source: MCP 2025-11-25, basic/transports, Sending Messages to the Server.

use std::sync::Arc;

use axum::body::Body as HttpBody;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde_json::Value;
use switchboard_protocol::{codes, jsonrpc, Body, Message, RequestId, SessionId, StreamId};
use switchboard_store::{InflightRequest, SessionRecord, SessionUpdate};

use crate::edge::accept::Answers;
use crate::edge::error::HttpError;
use crate::exec::call::{self, Job};
use crate::exec::response::{First, ResponseStream};
use crate::session;
use crate::session::node_session::NodeSession;
use crate::state::App;
use crate::streams::pump::{self, OpenStream};
use crate::{edge::guard, telemetry};

/// The POST handler.
pub async fn on_post(State(app): State<App>, headers: HeaderMap, body: HttpBody) -> Response {
    match post(app, headers, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// Reads a POSTed body of at most `max_body_bytes` (else 413) and parses its JSON-RPC (400 with
/// -32700 or -32600). Shared by this endpoint and the legacy transport's message endpoint.
pub(crate) async fn read_body(app: &App, body: HttpBody) -> Result<Body, HttpError> {
    let max = app.cfg.max_body_bytes;
    let bytes = axum::body::to_bytes(body, max)
        .await
        .map_err(|_| HttpError::PayloadTooLarge(max))?;
    Body::parse(&bytes).map_err(|e| match e.code() {
        codes::PARSE_ERROR => HttpError::Parse(e.message().to_owned()),
        _ => HttpError::InvalidRequest(e.message().to_owned()),
    })
}

async fn post(app: App, headers: HeaderMap, body: HttpBody) -> Result<Response, HttpError> {
    guard::check_content_type(&headers)?;
    let answers = Answers::of_post(&headers)?;
    let parsed = read_body(&app, body).await?;
    if crate::transport::stateless::is_modern(&headers, &parsed) {
        if let Body::Single(message) = parsed {
            return Ok(crate::transport::stateless::serve_request(
                &app, &headers, message, answers,
            )
            .await);
        }
    }
    let sessionless = !headers.contains_key(switchboard_protocol::headers::MCP_SESSION_ID);
    if matches!(parsed, Body::Batch(_))
        && sessionless
        && crate::transport::stateless::stateless_header(&headers)
    {
        return Err(HttpError::InvalidRequest(
            "JSON-RPC batches are not allowed under protocol version 2026-07-28: one message per POST".into(),
        ));
    }
    if let Body::Single(Message::Request { id, method, raw }) = &parsed {
        if method == "initialize" {
            return crate::session::initialize::start_session(&app, id, raw, answers).await;
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
    let sid = session::session_id(&headers)?;
    guard::protocol_version(&headers)?;
    match parsed {
        Body::Single(Message::Request { id, method, raw }) => {
            request(app, sid, Call { id, method, raw }, answers).await
        }
        Body::Single(m) => accept_only(app, sid, vec![m], false).await,
        Body::Batch(msgs) if !msgs.iter().any(Message::is_request) => {
            accept_only(app, sid, msgs, true).await
        }
        Body::Batch(msgs) => batch(app, sid, msgs, answers).await,
    }
}

/// One client request as parsed.
struct Call {
    id: RequestId,
    method: String,
    raw: Value,
}

/// A single request: admitted (one store round trip), run in its own task, answered as JSON or
/// SSE as `answers` allows. It is registered in flight only when its answer streams or takes
/// longer than `sse_after` (see [`ResponseStream`]).
async fn request(
    app: App,
    sid: SessionId,
    call: Call,
    answers: Answers,
) -> Result<Response, HttpError> {
    let Call { id, method, raw } = call;
    let key = id.key();
    let record = match session::admit(&app, &sid, &key).await? {
        Ok(r) => r,
        Err((_, why)) => return Ok(answers.ready(StatusCode::OK, refusal(&id, why))),
    };
    // A session opened by the legacy SSE GET has no `initialize` yet: only `ping` may come
    // first (MCP 2024-11-05, basic/lifecycle), on this endpoint as on its own.
    if record.initialize_params.is_null() && method != "ping" {
        let message = "send initialize first (on the legacy messages endpoint)";
        let answer = jsonrpc::error_response(Some(&id), codes::INVALID_REQUEST, message, None);
        return Ok(answers.ready(StatusCode::OK, answer));
    }
    // Only after the session (and its principal, C34) checked out, so a stranger learns nothing.
    let Some(cancel) = app.calls.try_start(sid.as_str(), &key) else {
        let answer = refusal(&id, session::NotAdmitted::DuplicateId);
        return Ok(answers.ready(StatusCode::OK, answer));
    };
    let stream = StreamId::generate().to_string();
    let holder = app.new_holder();
    // Should the session end while the request runs, the hub ends this stream with its -32004.
    let conn = app
        .hub
        .register_request(sid.as_str(), &stream, &holder, &id);
    let revision = session::revision(&record);
    let inflight = InflightRequest {
        request_key: key,
        stream: stream.clone(),
        node: app.node_id().to_owned(),
        holder: holder.clone(),
    };
    let (response, mut first) = if answers == Answers::JsonOnly {
        ResponseStream::new_json_only(app.clone(), sid.as_str(), inflight)
    } else {
        ResponseStream::new(app.clone(), sid.as_str(), inflight)
    };
    let response = Arc::new(response);
    // A client that takes only SSE gets a stream even for an answer ready at once: decided
    // before the request runs, so its answer cannot come out as JSON first.
    if answers == Answers::SseOnly {
        response.switch_to_stream();
    }
    call::spawn(Job {
        app: app.clone(),
        session: record,
        id,
        method,
        raw,
        response: response.clone(),
        cancel,
    });
    match decide(&app, &response, &mut first, answers).await {
        Some(First::Json(v)) => {
            app.hub.unregister(sid.as_str(), &stream, &holder);
            Ok(json_ok(v))
        }
        Some(First::Stream) => {
            let priming = revision.primes_streams().then(|| format!("{stream}_0-0"));
            let open = OpenStream {
                sid: sid.to_string(),
                stream,
                holder,
                conn,
                priming,
                replay: Vec::new(),
                after: "0-0".into(),
                watch: None,
                close_after_replay: false,
            };
            Ok(pump::open(&app, open, &[]))
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
    if answers == Answers::SseOnly {
        response.register().await;
        return Some(First::Stream);
    }
    tokio::select! {
        f = &mut *first => f.ok(),
        _ = tokio::time::sleep(app.cfg.sse_after) => {
            if answers == Answers::JsonOnly {
                response.register().await;
                (&mut *first).await.ok()
            } else if response.switch_to_stream() {
                response.register().await;
                Some(First::Stream)
            } else {
                (&mut *first).await.ok()
            }
        }
    }
}

/// Notifications and responses only: 202 with no body (MCP 2025-11-25, Sending Messages item 4).
async fn accept_only(
    app: App,
    sid: SessionId,
    msgs: Vec<Message>,
    is_batch: bool,
) -> Result<Response, HttpError> {
    let record = session::load(&app, &sid, None)
        .await?
        .unwrap_or_else(|(r, _)| r);
    check_batch(&record, is_batch)?;
    for m in msgs {
        deliver(&app, &record, m).await?;
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
) -> Result<Response, HttpError> {
    let record = session::load(&app, &sid, None)
        .await?
        .unwrap_or_else(|(r, _)| r);
    check_batch(&record, true)?;
    let mut answers = Vec::new();
    for m in msgs {
        match m {
            Message::Request { id, method, raw } => {
                answers.push(batch_request(&app, &sid, &record, id, method, raw).await?)
            }
            other => deliver(&app, &record, other).await?,
        }
    }
    let mut out = Vec::with_capacity(answers.len());
    for answer in answers {
        match answer {
            BatchAnswer::Now(v) => out.push(v),
            BatchAnswer::Later(rx) => {
                if let Ok(First::Json(v)) = rx.await {
                    out.push(v);
                }
            }
        }
    }
    Ok(form.ready(StatusCode::OK, Value::Array(out)))
}

enum BatchAnswer {
    Now(Value),
    Later(tokio::sync::oneshot::Receiver<First>),
}

/// One request of a batch: registered in flight like a single request (so a duplicate id is
/// refused and `notifications/cancelled` reaches it from any node), then run; its answer joins the
/// batch's JSON array.
async fn batch_request(
    app: &App,
    sid: &SessionId,
    record: &SessionRecord,
    id: RequestId,
    method: String,
    raw: Value,
) -> Result<BatchAnswer, HttpError> {
    let stream = StreamId::generate().to_string();
    let key = id.key();
    let Some(cancel) = app.calls.try_start(sid.as_str(), &key) else {
        return Ok(BatchAnswer::Now(refusal(
            &id,
            session::NotAdmitted::DuplicateId,
        )));
    };
    let inflight = InflightRequest {
        request_key: key.clone(),
        stream,
        node: app.node_id().to_owned(),
        holder: String::new(),
    };
    match session::load(app, sid, Some(&inflight)).await {
        Ok(Ok(_)) => {}
        Ok(Err((_, why))) => {
            app.calls.end(sid.as_str(), &key);
            return Ok(BatchAnswer::Now(refusal(&id, why)));
        }
        Err(e) => {
            app.calls.end(sid.as_str(), &key);
            return Err(e);
        }
    }
    let (rs, rx) = ResponseStream::for_batch(app.clone(), sid.as_str(), inflight);
    call::spawn(Job {
        app: app.clone(),
        session: record.clone(),
        id,
        method,
        raw,
        response: Arc::new(rs),
        cancel,
    });
    Ok(BatchAnswer::Later(rx))
}

/// The JSON-RPC error for a request the store would not register.
pub(crate) fn refusal(id: &RequestId, why: session::NotAdmitted) -> Value {
    let (code, msg) = match why {
        session::NotAdmitted::DuplicateId => (
            codes::INVALID_REQUEST,
            format!("request id {} is already in flight in this session", id.0),
        ),
        session::NotAdmitted::Busy => (
            codes::OVERLOADED,
            "too many requests in flight in this session; retry when one has finished".to_owned(),
        ),
    };
    jsonrpc::error_response(Some(id), code, msg, None)
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
            if app.calls.answer(sid, &key, raw.clone()) {
                let _ = app.store.forget_pending(sid, &key).await;
            } else if !app.store.route_reply(sid, &key, &raw.to_string()).await? {
                telemetry::reply_unmatched(sid, &key);
            }
        }
        Message::Response { id: None, raw } => {
            tracing::info!(session = sid, response = %raw, "client sent an error response without an id");
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
    if !app.calls.cancel(sid, &key) {
        let reason = params.get("reason").and_then(Value::as_str);
        app.store.route_cancel(sid, &key, reason).await?;
    }
    Ok(())
}

fn json_ok(v: Value) -> Response {
    (StatusCode::OK, axum::Json(v)).into_response()
}
