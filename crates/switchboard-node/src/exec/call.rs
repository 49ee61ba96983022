//! One client request of a session, from its start to its answer.
//!
//! Starting it is the one path every session-era transport takes (a Streamable HTTP POST, each
//! request of a 2025-03-26 batch, a legacy HTTP+SSE message, a WebSocket frame):
//! [`start_call`] checks the request, registers it, and spawns it ([`spawn`]); the transport then
//! carries the answer in its own form.
//!
//! Running it: the session-level methods here, everything else at the upstream. The request
//! runs in its own task, so a dropped connection does not stop it (MCP 2025-11-25,
//! basic/transports: a disconnect SHOULD NOT be read as cancellation); only
//! `notifications/cancelled` (routed to this node from wherever it arrives) or the end of the
//! session does.
//!
//! In order: initialized session (only `ping` before `initialize`, MCP 2024-11-05,
//! basic/lifecycle) → `_meta.progressToken` shape and size (`session.max_progress_token`) → the id
//! not running here already (C22) → registration in flight → spawn. A POST registers in flight
//! only once its answer streams (the admission it passed already checked the id, the cap and
//! the rate limits, see [`crate::session::admit`]); the other forms register with their
//! admission (the same function, one store round trip), so a duplicate id, a full session or a
//! request past a rate limit is refused before the request runs. Each member of a batch is
//! admitted on its own: a refused member gets its own error in the batch's answer.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use serde_json::{json, Value};
use switchboard_protocol::logging::is_log_level;
use switchboard_protocol::{codes, jsonrpc, shaping, RequestId, SessionId, StreamId};
use switchboard_store::{InflightRequest, SessionRecord, SessionUpdate};
use switchboard_telemetry::metrics::labels;
use switchboard_upstream::{RequestContext, RpcError};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::edge::error::HttpError;
use crate::edge::header_checks::Answers;
use crate::exec::client_peer::{NodePeer, Route};
use crate::exec::response::{First, ResponseStream};
use crate::exec::session_handle::NodeSession;
use crate::exec::traced::Finished;
use crate::session::{self, NotAdmitted};
use crate::state::App;
use switchboard_runtime::ConnHandle;
use switchboard_telemetry::trace::logged_session;

/// One request to execute.
pub struct Job {
    /// Node state.
    pub app: App,
    /// The session as loaded by `begin`.
    pub session: Arc<SessionRecord>,
    /// The client's request id.
    pub id: RequestId,
    /// The method.
    pub method: String,
    /// The whole request (its `params` are moved out when the request starts).
    pub raw: Value,
    /// Where the answer goes.
    pub response: Arc<ResponseStream>,
    /// Fires when the request is cancelled (from [`switchboard_runtime::Calls::try_start`]).
    pub cancel: CancellationToken,
    /// The message's span ([`crate::exec::traced::message_span`]): the request's task runs in
    /// it.
    pub span: Span,
    /// When the message was parsed.
    pub started: Instant,
    /// Who sent it (the request's credential, read while the request's task-local is set).
    pub principal: Arc<switchboard_upstream::Principal>,
}

/// Starts the request in its own task.
pub fn spawn(mut job: Job) {
    let key = job.id.key();
    let cancel = job.cancel.clone();
    let span = job.span.clone();
    let task = async move {
        // The params move out of the request (it is not read again) instead of being copied.
        let params = match job.raw.get_mut("params") {
            Some(p) => p.take(),
            None => json!({}),
        };
        let ending = Arc::new(OnceLock::new());
        let work = execute(&job, params, cancel.clone(), &ending);
        let (outcome, upstream) =
            labels::reaching_upstream(crate::exec::cancel::until_cancelled(work, &cancel)).await;
        let response = match outcome {
            Ok(mut result) => {
                // Shaped for the client's revision before it is logged, so a replay sends the
                // same (docs/revisions.md).
                shaping::result(session::revision(&job.session), &job.method, &mut result);
                jsonrpc::result_response(&job.id, result)
            }
            Err(e) => jsonrpc::error_response(Some(&job.id), e.code, e.message, e.data),
        };
        let finished = Finished {
            method: &job.method,
            started: job.started,
            upstream,
        };
        finished.record(&job.span, &response);
        match ending.get() {
            None => job.response.finish(response).await,
            // An upstream asked to end the session (it lost the session's state): ended before
            // the client can read the answer saying so, which still reaches it.
            Some(reason) => {
                let (app, sid) = (&job.app, &job.session.id);
                let end = async move {
                    if let Err(e) = crate::exec::session_handle::end_now(app, sid, reason).await {
                        tracing::warn!(session = %logged_session(sid), error = %e, "could not end the session an upstream asked to end");
                    }
                };
                job.response.finish_ending(response, end).await;
            }
        }
        job.app.replica.calls.end(&job.session.id, &key);
    };
    tokio::spawn(task.instrument(span));
}

/// Runs `job`, whose `params` (taken out of `job.raw`) are `params`; an upstream's request to
/// end the session lands in `ending`.
async fn execute(
    job: &Job,
    params: Value,
    cancel: CancellationToken,
    ending: &Arc<OnceLock<String>>,
) -> Result<Value, RpcError> {
    let store = &job.app.store;
    let sid = &job.session.id;
    match job.method.as_str() {
        "ping" => Ok(json!({})),
        "initialize" => Err(RpcError::new(
            codes::INVALID_REQUEST,
            "this session is already initialized",
        )),
        "logging/setLevel" => {
            let level = params
                .get("level")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !is_log_level(level) {
                return Err(RpcError::invalid_params(format!(
                    "invalid log level: {level:?}"
                )));
            }
            store
                .update(sid, SessionUpdate::LogLevel(level.to_owned()))
                .await
                .map_err(internal)?;
            // The level is the session's (filtered here for every upstream); upstreams that log
            // are told too, so they can skip producing what would be dropped.
            let ctx = context(job, &params, cancel, ending);
            if let Err(e) = job.app.upstream.request(&job.method, params, ctx).await {
                tracing::debug!(session = %logged_session(sid), error = %e, "upstream did not take logging/setLevel");
            }
            Ok(json!({}))
        }
        "resources/subscribe" | "resources/unsubscribe" => {
            subscription(job, params, cancel, ending).await
        }
        _ => {
            let ctx = context(job, &params, cancel, ending);
            job.app.upstream.request(&job.method, params, ctx).await
        }
    }
}

/// `resources/subscribe` / `unsubscribe`: the upstream decides (an unknown resource is refused
/// there), and only what it accepted is recorded in the session, with the upstream that accepted
/// it (an aggregate's member), whose new upstream sessions are subscribed again. A session records at most
/// `session.max_subscriptions` URIs of at most `session.max_uri` each, so no client can bloat the record
/// every request loads.
async fn subscription(
    job: &Job,
    params: Value,
    cancel: CancellationToken,
    ending: &Arc<OnceLock<String>>,
) -> Result<Value, RpcError> {
    let cfg = &job.app.cfg;
    let uri = params
        .get("uri")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("uri is required"))?
        .to_owned();
    let subscribe = job.method == "resources/subscribe";
    if subscribe {
        if uri.len() > cfg.max_uri_bytes {
            return Err(RpcError::invalid_params(format!(
                "uri is longer than {} bytes",
                cfg.max_uri_bytes
            )));
        }
        let subs = &job.session.subscriptions;
        if subs.len() >= cfg.max_subscriptions && !subs.contains(&uri) {
            return Err(RpcError::invalid_params(format!(
                "this session already has {} resource subscriptions, the limit",
                cfg.max_subscriptions
            )));
        }
    }
    let session = NodeSession::for_request(&job.session, &job.app, ending.clone());
    let ctx = context_with(job, &params, cancel, session.clone());
    let result = job.app.upstream.request(&job.method, params, ctx).await?;
    // Recorded with the upstream that accepted it: only that upstream's new sessions are
    // subscribed again (`switchboard_upstream::client_state`).
    let update = SessionUpdate::Subscription {
        uri,
        subscribed: subscribe,
        upstream: session.served(),
    };
    job.app
        .store
        .update(&job.session.id, update)
        .await
        .map_err(internal)?;
    Ok(result)
}

/// The context of `job`'s upstream request, whose params are `params`.
fn context(
    job: &Job,
    params: &Value,
    cancel: CancellationToken,
    ending: &Arc<OnceLock<String>>,
) -> RequestContext {
    let session = NodeSession::for_request(&job.session, &job.app, ending.clone());
    context_with(job, params, cancel, session)
}

/// [`context`] with the session handle given.
fn context_with(
    job: &Job,
    params: &Value,
    cancel: CancellationToken,
    session: Arc<NodeSession>,
) -> RequestContext {
    let capabilities = Arc::new(job.session.client_capabilities().clone());
    let revision = session::revision(&job.session);
    let peer = NodePeer {
        app: job.app.clone(),
        sid: job.session.id.clone(),
        capabilities: capabilities.clone(),
        log_level: job.session.log_level.clone(),
        revision,
        route: Route::Local(job.response.clone()),
        cancel: cancel.clone(),
        no_requests: job.response.refuses_requests().map(str::to_owned),
        sequence: job.response.sequence(),
    };
    RequestContext {
        session_id: job.session.id.clone(),
        revision,
        client_capabilities: capabilities,
        progress_token: params.pointer("/_meta/progressToken").cloned(),
        cancel,
        peer: Arc::new(peer),
        session,
        principal: job.principal.clone(),
    }
}

fn internal(e: switchboard_store::StoreError) -> RpcError {
    RpcError::new(codes::INTERNAL_ERROR, format!("session store error: {e}"))
}

/// One client request as parsed: its id, method and the whole message.
pub(crate) struct Request {
    /// The JSON-RPC id.
    pub id: RequestId,
    /// The method.
    pub method: String,
    /// The whole request (its `params` move into the running call).
    pub raw: Value,
    /// When it was parsed (its duration counts from here).
    pub started: Instant,
}

impl Request {
    /// A request parsed now.
    pub(crate) fn new(id: RequestId, method: String, raw: Value) -> Request {
        Request {
            id,
            method,
            raw,
            started: Instant::now(),
        }
    }
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
    pub record: Arc<SessionRecord>,
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
    span: Span,
) -> Result<Started, HttpError> {
    let Request {
        id,
        method,
        raw,
        started: request_started,
    } = request;
    if let Some(refused) = precheck(app, record, &id, &method, &raw) {
        return Ok(Started::Refused(refused));
    }
    step_up(app, &method, &raw)?;
    let sid = record.id.as_str();
    let key = id.key();
    // A request answered on the standalone stream is marked so: if this node dies while it
    // runs, ending it there also tells the client (`switchboard_runtime::lost`).
    let stream = match to {
        AnswerTo::Standalone => StreamId::generate_standalone_answered(),
        AnswerTo::Post(_) | AnswerTo::Batch => StreamId::generate(),
    };
    let Some(cancel) = app.replica.calls.try_start(sid, &key, stream.as_str()) else {
        return Ok(Started::Refused(refusal(&id, NotAdmitted::DuplicateId)));
    };
    let (record, response, answer) = match to {
        AnswerTo::Post(answers) => post_channel(app, record, (&id, key, stream), answers),
        AnswerTo::Batch | AnswerTo::Standalone => {
            let request = (&id, method.as_str(), &raw);
            match register(app, record, request, (key.clone(), stream), to).await {
                Ok(Ok(registered)) => registered,
                Ok(Err(refused)) => {
                    app.replica.calls.end(sid, &key);
                    return Ok(Started::Refused(refused));
                }
                Err(e) => {
                    app.replica.calls.end(sid, &key);
                    return Err(e);
                }
            }
        }
    };
    spawn(Job {
        app: app.clone(),
        session: record.clone(),
        id,
        method,
        raw,
        response: response.clone(),
        cancel,
        span,
        started: request_started,
        principal: session::current(),
    });
    Ok(Started::Running(Box::new(Running {
        record,
        response,
        answer,
    })))
}

/// A started request: the session as loaded, its answer channel, the transport's end.
type Channel = (Arc<SessionRecord>, Arc<ResponseStream>, Answer);

/// A POST's answer channel on `stream`, not registered in flight yet (the POST side registers
/// it once its answer streams), and its SSE connection in the hub.
fn post_channel(
    app: &App,
    record: &SessionRecord,
    (id, key, stream): (&RequestId, String, StreamId),
    answers: Answers,
) -> Channel {
    let sid = record.id.as_str();
    let stream = stream.to_string();
    let holder = app.new_holder();
    // Should the session end while the request runs, the hub ends this stream with its -32004.
    let conn = app.replica.hub.register_request(sid, &stream, &holder, id);
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
    (Arc::new(record.clone()), Arc::new(response), answer)
}

/// A batch's or the standalone stream's answer channel, registered in flight (request id key,
/// stream) with the request's admission ([`session::admit`], one store round trip, its rate
/// limits included) of `request` (id, method, the whole message). `Ok(Err(error))`: the store would not register it
/// (duplicate id, full session, a rate limit), answered with `error`.
async fn register(
    app: &App,
    record: &SessionRecord,
    (id, method, raw): (&RequestId, &str, &Value),
    (key, stream): (String, StreamId),
    to: AnswerTo,
) -> Result<Result<Channel, Value>, HttpError> {
    let sid = record.id.as_str();
    let inflight = InflightRequest {
        request_key: key,
        stream: stream.to_string(),
        node: app.node_id().to_owned(),
        holder: String::new(),
    };
    let parsed = SessionId::parse(sid).ok_or(HttpError::UnknownSession)?;
    let admit = session::Admit::Register(&inflight);
    let record = match session::admit(app, &parsed, admit, method, raw).await? {
        Ok(record) => record,
        Err((_, why)) => return Ok(Err(refusal(id, why))),
    };
    Ok(Ok(if to == AnswerTo::Batch {
        let (rs, first) = ResponseStream::for_batch(app.clone(), sid, inflight);
        (Arc::new(record), Arc::new(rs), Answer::Batch(first))
    } else {
        let rs = ResponseStream::for_standalone(app.clone(), sid, inflight);
        (Arc::new(record), Arc::new(rs), Answer::Standalone)
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

/// With authorization on, a request the `[policy]` lets through only with scopes the token
/// lacks is refused before it runs: 403 with an `insufficient_scope` challenge naming them
/// (step-up, MCP 2025-11-25, basic/authorization, Scope Challenge Handling), answered with the
/// request's id. Both eras check it.
pub(crate) fn step_up(app: &App, method: &str, raw: &Value) -> Result<(), HttpError> {
    let Some(auth) = &app.auth else {
        return Ok(());
    };
    let params = raw.get("params").unwrap_or(&Value::Null);
    let principal = session::current();
    match app.upstream.lacking_scopes(&principal, method, params) {
        Some(needed) => Err(auth.step_up(&needed)),
        None => Ok(()),
    }
}

/// `params._meta`, when present, is an object (MCP 2025-11-25, basic, `_meta`), and its
/// `progressToken`, when present, is a string or a number of at most `max` bytes as JSON (MCP
/// 2025-11-25, basic/utilities/progress: a string or integer, unique per request); the error
/// names the limit. Both eras check it before a request runs.
pub(crate) fn check_progress_token(params: &Value, max: usize) -> Result<(), String> {
    if params.get("_meta").is_some_and(|m| !m.is_object()) {
        return Err("params._meta must be an object".into());
    }
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
        NotAdmitted::Limited {
            limit,
            retry_after_ms,
        } => return crate::edge::rate_limited::refusal(id, &limit, retry_after_ms),
    };
    jsonrpc::error_response(Some(id), code, msg, None)
}
