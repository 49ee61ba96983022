//! Starting a client request of a session: the one path every session-era transport takes
//! (a Streamable HTTP POST, each request of a 2025-03-26 batch, a legacy HTTP+SSE message, a
//! WebSocket frame). [`start_call`] checks the request, registers it, and spawns it
//! ([`crate::exec::call::spawn`]); the transport then carries the answer in its own form.
//!
//! In order: initialized session (only `ping` before `initialize`, MCP 2024-11-05,
//! basic/lifecycle) → `_meta.progressToken` shape and size (`session.max_progress_token`) → the id
//! not running here already (C22) → registration in flight → spawn. A POST registers in flight
//! only once its answer streams (the admission it passed already checked the id and the cap,
//! see [`crate::session::admit`]); the other forms register with the session load, so a
//! duplicate id or a full session is refused before the request runs.

use std::sync::Arc;

use serde_json::Value;
use switchboard_protocol::{codes, jsonrpc, RequestId, SessionId, StreamId};
use switchboard_store::{InflightRequest, SessionRecord};
use tokio::sync::oneshot;

use crate::edge::accept::Answers;
use crate::edge::error::HttpError;
use crate::exec::call::{self, Job};
use crate::exec::response::{First, ResponseStream};
use crate::session::{self, NotAdmitted};
use crate::state::App;
use crate::streams::hub::ConnHandle;

/// One client request as parsed: its id, method and the whole message.
pub(crate) struct Request {
    /// The JSON-RPC id.
    pub id: RequestId,
    /// The method.
    pub method: String,
    /// The whole request (its `params` move into the running call).
    pub raw: Value,
}

/// Where a started request's answer goes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum AnswerTo {
    /// The POST's own response, JSON or SSE as the client's `Accept` allows.
    Post(Answers),
    /// One answer in a batch's JSON array.
    Batch,
    /// The session's standalone stream (legacy HTTP+SSE, WebSocket).
    Standalone,
}

/// What [`start_call`] did.
pub(crate) enum Started {
    /// Refused before it ran, nothing registered: the JSON-RPC error response to send in the
    /// transport's form.
    Refused(Value),
    /// Running in its own task.
    Running(Box<Running>),
}

/// A request running in its own task, and how its answer comes back.
pub(crate) struct Running {
    /// The session as loaded when the request was registered.
    pub record: SessionRecord,
    /// The request's answer channel (the POST side registers it once the answer streams).
    pub response: Arc<ResponseStream>,
    /// The transport's end of the answer.
    pub answer: Answer,
}

/// The transport's end of a running request's answer.
pub(crate) enum Answer {
    /// A POST: the first answer (JSON, or "it streams"), and the SSE connection registered for
    /// its stream `stream` under `holder`.
    Post {
        /// The first answer.
        first: oneshot::Receiver<First>,
        /// The request's stream id.
        stream: String,
        /// This connection's holder token.
        holder: String,
        /// The connection registered in the hub (the session's end closes it).
        conn: ConnHandle,
    },
    /// One request of a batch: its JSON answer.
    Batch(oneshot::Receiver<First>),
    /// The standalone stream carries everything; nothing comes back here.
    Standalone,
}

/// Starts `request` of the session `record` (already loaded and checked against the client's
/// principal: [`session::admit`] or [`session::load`]), answered as `to` says. Errors are store
/// failures and a session that ended meanwhile ([`HttpError::UnknownSession`]).
pub(crate) async fn start_call(
    app: &App,
    record: &SessionRecord,
    request: Request,
    to: AnswerTo,
) -> Result<Started, HttpError> {
    let Request { id, method, raw } = request;
    if let Some(refused) = precheck(app, record, &id, &method, &raw) {
        return Ok(Started::Refused(refused));
    }
    let sid = record.id.as_str();
    let key = id.key();
    let Some(cancel) = app.calls.try_start(sid, &key) else {
        return Ok(Started::Refused(refusal(&id, NotAdmitted::DuplicateId)));
    };
    let (record, response, answer) = match to {
        AnswerTo::Post(answers) => post_channel(app, record, &id, key, answers),
        AnswerTo::Batch | AnswerTo::Standalone => {
            match register(app, record, &id, key.clone(), to).await {
                Ok(Ok(registered)) => registered,
                Ok(Err(refused)) => {
                    app.calls.end(sid, &key);
                    return Ok(Started::Refused(refused));
                }
                Err(e) => {
                    app.calls.end(sid, &key);
                    return Err(e);
                }
            }
        }
    };
    call::spawn(Job {
        app: app.clone(),
        session: record.clone(),
        id,
        method,
        raw,
        response: response.clone(),
        cancel,
    });
    Ok(Started::Running(Box::new(Running {
        record,
        response,
        answer,
    })))
}

/// A started request: the session as loaded, its answer channel, the transport's end.
type Channel = (SessionRecord, Arc<ResponseStream>, Answer);

/// A POST's answer channel, not registered in flight yet (the POST side registers it once its
/// answer streams), and its SSE connection in the hub.
fn post_channel(
    app: &App,
    record: &SessionRecord,
    id: &RequestId,
    key: String,
    answers: Answers,
) -> Channel {
    let sid = record.id.as_str();
    let stream = StreamId::generate().to_string();
    let holder = app.new_holder();
    // Should the session end while the request runs, the hub ends this stream with its -32004.
    let conn = app.hub.register_request(sid, &stream, &holder, id);
    let inflight = InflightRequest {
        request_key: key,
        stream: stream.clone(),
        node: app.node_id().to_owned(),
        holder: holder.clone(),
    };
    let (response, first) = if answers == Answers::JsonOnly {
        ResponseStream::new_json_only(app.clone(), sid, inflight)
    } else {
        ResponseStream::new(app.clone(), sid, inflight)
    };
    // A client that takes only SSE gets a stream even for an answer ready at once: decided
    // before the request runs, so its answer cannot come out as JSON first.
    if answers == Answers::SseOnly {
        response.switch_to_stream();
    }
    let answer = Answer::Post {
        first,
        stream,
        holder,
        conn,
    };
    (record.clone(), Arc::new(response), answer)
}

/// A batch's or the standalone stream's answer channel, registered in flight with the session
/// load (one store round trip). `Ok(Err(error))`: the store would not register it (duplicate
/// id, full session), answered with `error`.
async fn register(
    app: &App,
    record: &SessionRecord,
    id: &RequestId,
    key: String,
    to: AnswerTo,
) -> Result<Result<Channel, Value>, HttpError> {
    let sid = record.id.as_str();
    // A request answered on the standalone stream is marked so: if this node dies while it
    // runs, ending it there also tells the client (`session::end_lost_requests`).
    let stream = match to {
        AnswerTo::Batch => StreamId::generate(),
        _ => StreamId::generate_standalone_answered(),
    };
    let inflight = InflightRequest {
        request_key: key,
        stream: stream.to_string(),
        node: app.node_id().to_owned(),
        holder: String::new(),
    };
    let parsed = SessionId::parse(sid).ok_or(HttpError::UnknownSession)?;
    let record = match session::load(app, &parsed, Some(&inflight)).await? {
        Ok(record) => record,
        Err((_, why)) => return Ok(Err(refusal(id, why))),
    };
    Ok(Ok(if to == AnswerTo::Batch {
        let (rs, first) = ResponseStream::for_batch(app.clone(), sid, inflight);
        (record, Arc::new(rs), Answer::Batch(first))
    } else {
        let rs = ResponseStream::for_standalone(app.clone(), sid, inflight);
        (record, Arc::new(rs), Answer::Standalone)
    }))
}

/// The checks that need only the request and the session as loaded: the JSON-RPC error of the
/// first that fails.
fn precheck(
    app: &App,
    record: &SessionRecord,
    id: &RequestId,
    method: &str,
    raw: &Value,
) -> Option<Value> {
    // A session opened by the legacy SSE GET has no `initialize` yet: only `ping` may come first
    // (MCP 2024-11-05, basic/lifecycle); upstreams would otherwise start without the client's
    // params.
    if record.initialize_params.is_null() && method != "ping" {
        let message = "send initialize first";
        return Some(jsonrpc::error_response(
            Some(id),
            codes::INVALID_REQUEST,
            message,
            None,
        ));
    }
    let params = raw.get("params").unwrap_or(&Value::Null);
    check_progress_token(params, app.cfg.max_progress_token_bytes)
        .err()
        .map(|why| jsonrpc::error_response(Some(id), codes::INVALID_PARAMS, why, None))
}

/// `params._meta.progressToken`, when present, is a string or a number of at most `max` bytes
/// as JSON (MCP 2025-11-25, basic/utilities/progress: a string or integer, unique per request);
/// the error names the limit. Both eras check it before a request runs.
pub(crate) fn check_progress_token(params: &Value, max: usize) -> Result<(), String> {
    match params.pointer("/_meta/progressToken") {
        Some(token)
            if !(token.is_string() || token.is_number()) || token.to_string().len() > max =>
        {
            Err(format!(
                "_meta.progressToken must be a string or number of at most {max} bytes \
                 (session.max_progress_token)"
            ))
        }
        _ => Ok(()),
    }
}

/// The JSON-RPC error for a request that was not admitted (duplicate id -32600, a full session
/// -32003).
pub(crate) fn refusal(id: &RequestId, why: NotAdmitted) -> Value {
    let (code, msg) = match why {
        NotAdmitted::DuplicateId => (
            codes::INVALID_REQUEST,
            format!("request id {} is already in flight in this session", id.0),
        ),
        NotAdmitted::Busy => (
            codes::OVERLOADED,
            "too many requests in flight in this session; retry when one has finished".to_owned(),
        ),
    };
    jsonrpc::error_response(Some(id), code, msg, None)
}
