//! Executing one client request: the session-level methods here, everything else at the
//! upstream. The request runs in its own task, so a dropped connection does not stop it (MCP
//! 2025-11-25, basic/transports: a disconnect SHOULD NOT be read as cancellation); only
//! `notifications/cancelled` (routed to this node from wherever it arrives) or the end of the
//! session does.

use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};
use switchboard_protocol::{codes, jsonrpc, RequestId, Revision};
use switchboard_store::{SessionRecord, SessionUpdate};
use switchboard_upstream::{RequestContext, RpcError};
use tokio_util::sync::CancellationToken;

use crate::exec::client_peer::{NodePeer, Route};
use crate::exec::response::ResponseStream;
use crate::session::node_session::NodeSession;
use crate::state::App;
use switchboard_protocol::logging::is_log_level;

/// One request to execute.
pub struct Job {
    /// Node state.
    pub app: App,
    /// The session as loaded by `begin`.
    pub session: SessionRecord,
    /// The client's request id.
    pub id: RequestId,
    /// The method.
    pub method: String,
    /// The whole request (its `params` are moved out when the request starts).
    pub raw: Value,
    /// Where the answer goes.
    pub response: Arc<ResponseStream>,
    /// Fires when the request is cancelled (from [`crate::exec::running::Calls::try_start`]).
    pub cancel: CancellationToken,
}

/// Starts the request in its own task.
pub fn spawn(mut job: Job) {
    let key = job.id.key();
    let cancel = job.cancel.clone();
    tokio::spawn(async move {
        // The params move out of the request (it is not read again) instead of being copied.
        let params = match job.raw.get_mut("params") {
            Some(p) => p.take(),
            None => json!({}),
        };
        let ending = Arc::new(OnceLock::new());
        let work = execute(&job, params, cancel.clone(), &ending);
        let outcome = crate::exec::cancel::until_cancelled(work, &cancel).await;
        let response = match outcome {
            Ok(result) => jsonrpc::result_response(&job.id, result),
            Err(e) => jsonrpc::error_response(Some(&job.id), e.code, e.message, e.data),
        };
        match ending.get() {
            None => job.response.finish(response).await,
            // An upstream asked to end the session (it lost the session's state): ended before
            // the client can read the answer saying so, which still reaches it.
            Some(reason) => {
                let (app, sid) = (&job.app, &job.session.id);
                let end = async move {
                    if let Err(e) = crate::session::node_session::end_now(app, sid, reason).await {
                        tracing::warn!(session = %sid, error = %e, "could not end the session an upstream asked to end");
                    }
                };
                job.response.finish_ending(response, end).await;
            }
        }
        job.app.calls.end(&job.session.id, &key);
    });
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
                tracing::debug!(session = %sid, error = %e, "upstream did not take logging/setLevel");
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
/// there), and only what it accepted is recorded in the session. A session records at most
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
    let ctx = context(job, &params, cancel, ending);
    let result = job.app.upstream.request(&job.method, params, ctx).await?;
    let update = SessionUpdate::Subscription {
        uri,
        subscribed: subscribe,
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
    let capabilities = job.session.client_capabilities().clone();
    let peer = NodePeer {
        app: job.app.clone(),
        sid: job.session.id.clone(),
        capabilities: capabilities.clone(),
        log_level: job.session.log_level.clone(),
        route: Route::Local(job.response.clone()),
        cancel: cancel.clone(),
        no_requests: job.response.refuses_requests().map(str::to_owned),
    };
    RequestContext {
        session_id: job.session.id.clone(),
        revision: Revision::parse(&job.session.revision).unwrap_or(Revision::LATEST),
        client_capabilities: capabilities,
        progress_token: params.pointer("/_meta/progressToken").cloned(),
        cancel,
        peer: Arc::new(peer),
        session: NodeSession::for_request(&job.session, &job.app, ending.clone()),
    }
}

fn internal(e: switchboard_store::StoreError) -> RpcError {
    RpcError::new(codes::INTERNAL_ERROR, format!("session store error: {e}"))
}
