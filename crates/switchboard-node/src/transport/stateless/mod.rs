//! The stateless era: MCP 2026-07-28 on the same endpoint as the session era.
//!
//! Era choice per request (MCP 2026-07-28, basic/versioning, Backward Compatibility: a request
//! with modern `_meta` is handled statelessly, `initialize` chooses the session era): a POST
//! without `Mcp-Session-Id` whose single message is not `initialize` and either carries
//! `params._meta["io.modelcontextprotocol/protocolVersion"]` or comes with an
//! `MCP-Protocol-Version` of a stateless revision. Everything else stays on the session path. A
//! GET or DELETE without a session id but with a stateless `MCP-Protocol-Version` is 405 (1.8.1);
//! without that header it keeps the session era's 400.
//!
//! Path of a modern POST: message kind (a notification → 202, a response → 400) → [`checks`] →
//! rate limits ([`crate::limits`]: 429 past one; one store round trip, only when a limit applies)
//! → `server/discover` answered here, `subscriptions/listen` opened here ([`listen`]: a long-lived
//! SSE stream fed through the bus), anything else run at the upstream ([`call`]) → JSON, or SSE
//! whose body cancels the request when dropped.
//!
//! Requests whose upstream asks the client something answer `InputRequiredResult` and are
//! retried on any node ([`mrtr`], [`park`]). A `tools/call` from a client declaring the tasks
//! extension (and not an MRTR retry) goes to [`tasks`] instead, and so do `tasks/get`,
//! `tasks/cancel` and `tasks/update`.
//!
//! `tools/call` headers `Mcp-Param-*` are checked against the arguments ([`params`]).
//!
//! Not served yet: `input_required` tasks.

pub mod call;
pub mod checks;
pub mod client_peer;
pub mod listen;

pub mod params;
pub mod park;
pub mod refusal;
pub mod tasks;

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde_json::{json, Value};
use switchboard_protocol::{codes, jsonrpc, meta, Message, RequestId, Revision};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

use crate::edge::error::HttpError;
use crate::edge::header_checks::Answers;
use crate::exec::answer_form::Waited;
use crate::exec::call::{check_progress_token, step_up};
use crate::mrtr;
use crate::state::App;
use crate::{streams::sse, telemetry};
use park::Item;
use refusal::Refusal;

/// The 406 of `subscriptions/listen` from a client that accepts only JSON.
const LISTEN_NEEDS_SSE: &str =
    "subscriptions/listen is answered with a stream: Accept must allow text/event-stream";

/// Answers one modern POST message in a form `answers` allows ([`crate::edge::header_checks`]).
pub async fn serve_request(
    app: &App,
    h: &HeaderMap,
    message: Message,
    answers: Answers,
) -> Response {
    let (id, method, raw) = match message {
        // No client notifications are defined over 2026-07-28 Streamable HTTP; accepted.
        Message::Notification { .. } => return StatusCode::ACCEPTED.into_response(),
        Message::Response { .. } => return Refusal::ResponseNotAllowed.respond(None),
        Message::Request { id, method, raw } => (id, method, raw),
    };
    let params = raw.get("params").unwrap_or(&Value::Null);
    let checked = match checks::check(h, &method, params) {
        Ok(c) => c,
        Err(r) => return r.respond(Some(&id)),
    };
    if let Some(refused) = refused_by_params(app, &id, &method, &raw) {
        return refused;
    }
    if method == "tools/call" {
        if let Err(r) = params::check(app, h, params).await {
            return r.respond(Some(&id));
        }
    }
    let principal = crate::session::current_principal();
    if let Some(refused) = rate_limited(app, &id, &principal, &method, &raw).await {
        return refused;
    }
    if method == "server/discover" {
        let result = call::complete("server/discover", discover(app));
        return answer(answers, jsonrpc::result_response(&id, result));
    }
    if method == "subscriptions/listen" {
        return match answers {
            Answers::JsonOnly => HttpError::NotAcceptable(LISTEN_NEEDS_SSE).into_response(),
            _ => listen::open(app, id, params),
        };
    }
    if tasks::METHODS.contains(&method.as_str()) {
        return answer(
            answers,
            tasks::methods::answer(app, &id, &method, params).await,
        );
    }
    if tasks::wanted(&method, &checked) && params.get("requestState").is_none() {
        return tasks::create::call(app, id, method, raw, checked, answers).await;
    }
    // Upstreams with per-session state park a request that asks the client something; the
    // others are re-run on the retry (see `mrtr` and `park`).
    let parking = !app.upstream.serves_stateless();
    let retry = if mrtr::SUPPORTED.contains(&method.as_str()) {
        match mrtr::Inputs::from_request(&app.mrtr, &method, params, &principal, parking) {
            Ok(retry) => Some(retry),
            Err(e) => {
                let response =
                    jsonrpc::error_response(Some(&id), codes::INVALID_PARAMS, e.to_string(), None);
                return answer(answers, response);
            }
        }
    } else {
        None
    };
    // Dropping the guard (the client went away before the answer) cancels the request.
    let rid = id.clone();
    let (rx, guard): (_, Box<dyn Send>) = match retry {
        Some(mrtr::Retry::Resume(r)) if r.node == app.node_id() => {
            let (rx, guard) = park::resume_here(app, id, &r.park, &principal, r.answers);
            (rx, Box::new(guard))
        }
        Some(mrtr::Retry::Resume(r)) => {
            let (rx, cancel) = park::resume_from(app, &r.node, id, r.park, r.answers);
            (rx, Box::new(cancel.drop_guard()))
        }
        retry => {
            let inputs = match retry {
                Some(mrtr::Retry::Run(inputs)) => Some(Arc::new(inputs)),
                _ => None,
            };
            match call::spawn(app, id, method, raw, checked, inputs, principal) {
                Ok((rx, guard)) => (rx, Box::new(guard)),
                Err(refusal) => return refusal.respond(Some(&rid)),
            }
        }
    };
    answer_run(app, answers, (rx, guard), &rid).await
}

/// The request's rate limits ([`crate::limits`]), the same limits a session's request of
/// `method` takes: one store round trip (`take_rates`) when a limit applies to it, none
/// otherwise (no `[rate_limits]`: the stateless path is as it was). The refusal past a limit:
/// [`Refusal::RateLimited`] (429); a store failure with `on_store_error = "closed"`: 503.
async fn rate_limited(
    app: &App,
    id: &RequestId,
    principal: &str,
    method: &str,
    raw: &Value,
) -> Option<Response> {
    let taken = crate::limits::admission::without_session(app, principal, method, raw).await;
    match taken {
        Ok(()) => None,
        Err(HttpError::RateLimited {
            limit,
            retry_after_ms,
            policy,
        }) => {
            let refusal = Refusal::RateLimited {
                limit,
                retry_after_ms,
                policy,
            };
            Some(refusal.respond(Some(id)))
        }
        Err(e) => Some(e.into_response()),
    }
}

/// The answer of running request `id`, in a form `answers` allows: SSE-only always a stream,
/// JSON-only always one body, else JSON when the response comes first within `sse_after`.
async fn answer_run(
    app: &App,
    answers: Answers,
    (mut rx, guard): (tokio::sync::mpsc::Receiver<Item>, Box<dyn Send>),
    id: &RequestId,
) -> Response {
    let waited = {
        // Pinned on the stack: no allocation per request (`recv` is cancel-safe).
        let mut recv = std::pin::pin!(rx.recv());
        answers.first_within(app.cfg.sse_after, &mut recv).await
    };
    let first = match waited {
        Waited::Stream => None,
        Waited::Came(Some(Item::Final(v))) => return answer(answers, v),
        Waited::Came(first) => first,
        Waited::Late => None,
    };
    match answers {
        Answers::JsonOnly => json_only_answer(first, rx, guard, id).await,
        _ => stream_answer(first, rx, guard),
    }
}

/// The checks both eras make of a request's params before it runs: its `_meta.progressToken`
/// (400, -32602) and, with authorization on, the scopes the `[policy]` needs (403, step-up).
fn refused_by_params(app: &App, id: &RequestId, method: &str, raw: &Value) -> Option<Response> {
    let params = raw.get("params").unwrap_or(&Value::Null);
    if let Err(why) = check_progress_token(params, app.cfg.max_progress_token_bytes) {
        return Some(Refusal::InvalidParams(why).respond(Some(id)));
    }
    step_up(app, method, raw)
        .err()
        .map(|e| e.answering(Some(id)))
}

/// The one JSON answer of a client that accepts only JSON: the notifications before it have no
/// stream to ride (2026-07-28 has no standalone stream), so they are dropped and counted. The
/// guard is held until then: a client that hangs up still cancels the request. A request that
/// ends without one is answered -32603 with its `id` (JSON-RPC 2.0 §5).
async fn json_only_answer(
    first: Option<Item>,
    mut rx: tokio::sync::mpsc::Receiver<Item>,
    guard: Box<dyn Send>,
    id: &RequestId,
) -> Response {
    let _held = guard;
    let mut next = match first {
        Some(item) => Some(item),
        None => rx.recv().await,
    };
    while let Some(item) = next {
        match item {
            Item::Note(v) => {
                telemetry::notification_dropped(v["method"].as_str().unwrap_or("?"), JSON_ONLY);
            }
            Item::Final(v) => return answer(Answers::JsonOnly, v),
        }
        next = rx.recv().await;
    }
    let message = "the request ended without an answer";
    answer(
        Answers::JsonOnly,
        jsonrpc::error_response(Some(id), codes::INTERNAL_ERROR, message, None),
    )
}

/// Why [`telemetry::notification_dropped`]: the request is answered as one JSON body.
pub(crate) const JSON_ONLY: &str = "the request is answered as one JSON body";

/// `server/discover` (MCP 2026-07-28, server/discover): the versions served, the upstream's
/// capabilities and instructions, and server info in `_meta`.
pub fn discover(app: &App) -> Value {
    let offer = crate::session::initialize::offer(app);
    // The upstream's capabilities as they are: in 2026-07-28 `resources.subscribe` and the
    // `listChanged` flags say what `subscriptions/listen` can deliver (schema ServerCapabilities),
    // and [`listen`] agrees to exactly those. The tasks extension is the node's own.
    let mut capabilities = offer.capabilities;
    tasks::advertise(&mut capabilities);
    let mut result = json!({
        "supportedVersions": Revision::STATELESS.map(Revision::as_str),
        "capabilities": capabilities,
        "_meta": {meta::SERVER_INFO: offer.server_info},
    });
    if let Some(text) = offer.instructions {
        result["instructions"] = Value::String(text);
    }
    result
}

/// An answer ready now, in a form `answers` allows; an error the spec ties to a status gets it
/// (404 for -32601, 400 for -32021) and stays JSON.
pub(crate) fn answer(answers: Answers, v: Value) -> Response {
    crate::exec::traced::record_code(&tracing::Span::current(), &v);
    let status = match v.pointer("/error/code").and_then(Value::as_i64) {
        Some(codes::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(codes::MISSING_CLIENT_CAPABILITY) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    };
    answers.ready(status, v)
}

/// An SSE answer: `first` (if any), then the rest, ending after the response. The body holds
/// the drop guard: a closed stream cancels the request.
fn stream_answer(
    first: Option<Item>,
    rx: tokio::sync::mpsc::Receiver<Item>,
    guard: Box<dyn Send>,
) -> Response {
    let head = tokio_stream::iter(first);
    let items = head.chain(ReceiverStream::new(rx));
    let mut done = false;
    let frames = items
        .take_while(move |item| {
            let go = !done;
            done |= matches!(item, Item::Final(_));
            go
        })
        .map(move |item| {
            let _held = &guard;
            let (Item::Note(v) | Item::Final(v)) = item;
            v
        });
    sse::body_response(sse::data_stream(frames), &[])
}
