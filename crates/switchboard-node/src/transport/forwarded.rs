//! The owner side of a forwarded call: the node that owns the session's node-bound upstream and
//! runs the request another node forwarded. [`execute`] runs it on the local member upstream with
//! a peer that routes back to the origin, or, while this node is stopping, answers "moved"
//! without running it ([`encode_moved`]); [`notify`] delivers a forwarded client notification.

use std::sync::Arc;

use serde_json::Value;
use switchboard_protocol::{codes, Revision};
use switchboard_store::{BeginOutcome, BusMessage, ForwardNotification, ForwardRequest};
use switchboard_upstream::{RequestContext, RpcError};
use tokio_util::sync::CancellationToken;

use crate::cluster::forward::wire::{encode_moved, encode_outcome, find_member};
use crate::exec::client_peer::{NodePeer, Route};
use crate::exec::outage::{Deadline, Sequence};
use crate::exec::session_handle::NodeSession;
use crate::state::App;
use switchboard_telemetry::trace::logged_session;
use tracing::Instrument;

/// Owner: delivers a client notification forwarded from another node to the local member.
pub async fn notify(app: App, notification: ForwardNotification) {
    let ForwardNotification {
        sid,
        upstream,
        method,
        params,
    } = notification;
    let Some(member) = find_member(&app.upstream, &upstream) else {
        return;
    };
    let record = match app.store.begin(&sid, None).await {
        Ok(BeginOutcome::Ready(r))
        | Ok(BeginOutcome::DuplicateId { record: r, .. })
        | Ok(BeginOutcome::Busy(r)) => r,
        _ => return,
    };
    member
        .notify(&method, params, NodeSession::new(&record, &app))
        .await;
}

/// Owner: runs a forwarded request here and sends its outcome to the origin. While this node is
/// stopping (draining, or retired) it runs none: the origin is answered "moved" at once
/// ([`encode_moved`]) and runs the request on a live node, so no request waits for this node's
/// heartbeat to lapse (case C08). The call is registered before that check, so a drain that
/// began after it waits for it. Nor does it run one when the session record names another
/// owner now (this node stalled past `cluster.node_ttl` and was taken over while the request waited
/// in its inbox): "moved" too, so it never starts a second child or connection for the session.
pub async fn execute(app: App, inc: ForwardRequest) {
    // The owner's run of the call, a server span continuing the origin's trace.
    let span = tracing::info_span!(
        target: switchboard_telemetry::trace::TARGET,
        "forwarded",
        otel.name = format!("{} forwarded", inc.method),
        otel.kind = "server",
        mcp.method.name = inc.method.as_str(),
        switchboard.upstream = inc.upstream.as_str(),
        switchboard.origin = inc.origin.as_str(),
    );
    let parent = switchboard_telemetry::trace::parent_from(inc.trace.as_deref());
    switchboard_telemetry::trace::set_parent(&span, parent);
    run_here(app, inc).instrument(span).await;
}

/// [`execute`] inside its span.
async fn run_here(app: App, inc: ForwardRequest) {
    let key = format!("fwd:{}:{}", inc.origin, inc.call);
    let cancel = app.replica.calls.start(&inc.sid, &key);
    let outcome = if app.shutdown.is_cancelled() {
        tracing::debug!(session = %logged_session(&inc.sid), upstream = %inc.upstream, origin = %inc.origin, "stopping: a forwarded request moves to its origin");
        encode_moved(app.node_id())
    } else {
        app.forwards.track(&inc.origin, &inc.call, cancel.clone());
        let outcome = run_forwarded(&app, &inc, cancel).await;
        app.forwards.untrack(&inc.origin, &inc.call);
        match outcome {
            Some(outcome) => encode_outcome(&outcome),
            None => {
                tracing::info!(session = %logged_session(&inc.sid), upstream = %inc.upstream, origin = %inc.origin, "another node owns this session's node-bound upstream now: a forwarded request moves to its origin");
                encode_moved(app.node_id())
            }
        }
    };
    app.replica.calls.end(&inc.sid, &key);
    let msg = BusMessage::ForwardDone {
        call: inc.call.clone(),
        outcome,
    };
    if let Err(e) = app.store.send_to(&inc.origin, &msg).await {
        tracing::warn!(error = %e, origin = %inc.origin, "could not return a forwarded call's outcome");
    }
}

/// Runs a forwarded request on the local member; `None` (not run) when the session record names
/// another owner of its upstream.
async fn run_forwarded(
    app: &App,
    inc: &ForwardRequest,
    cancel: CancellationToken,
) -> Option<Result<Value, RpcError>> {
    let record = match app.store.begin(&inc.sid, None).await {
        Ok(BeginOutcome::Ready(r))
        | Ok(BeginOutcome::DuplicateId { record: r, .. })
        | Ok(BeginOutcome::Busy(r))
        | Ok(BeginOutcome::Limited { record: r, .. }) => r,
        Ok(BeginOutcome::Missing) => {
            let ended = RpcError::new(codes::INVALID_REQUEST, "the session has ended");
            return Some(Err(ended));
        }
        Err(e) => {
            let message = format!("session store error: {e}");
            return Some(Err(RpcError::new(codes::INTERNAL_ERROR, message)));
        }
    };
    let owner = record.owners.get(&inc.upstream);
    if owner.is_some_and(|o| o != app.node_id()) {
        return None;
    }
    Some(run_member(app, inc, &record, cancel).await)
}

async fn run_member(
    app: &App,
    inc: &ForwardRequest,
    record: &switchboard_store::SessionRecord,
    cancel: CancellationToken,
) -> Result<Value, RpcError> {
    let context = &inc.context;
    let member = find_member(&app.upstream, &inc.upstream).ok_or_else(|| {
        RpcError::new(
            codes::UPSTREAM_UNAVAILABLE,
            format!(
                "upstream `{}` is not configured on node {}",
                inc.upstream,
                app.node_id()
            ),
        )
    })?;
    let capabilities = context.capabilities.clone();
    let revision = Revision::parse(&context.revision).unwrap_or(Revision::LATEST);
    let peer = NodePeer {
        app: app.clone(),
        sid: inc.sid.clone(),
        capabilities: Arc::new(capabilities.clone()),
        log_level: record.log_level.clone(),
        revision,
        route: Route::Remote {
            origin: inc.origin.clone(),
            call: inc.call.clone(),
        },
        cancel: cancel.clone(),
        no_requests: context.no_requests.clone(),
        sequence: std::sync::Arc::new(Sequence::new(Deadline::of_call(app))),
    };
    let ctx = RequestContext {
        session_id: inc.sid.clone(),
        revision,
        client_capabilities: Arc::new(capabilities),
        progress_token: context.progress_token.clone().filter(|t| !t.is_null()),
        cancel: cancel.clone(),
        peer: Arc::new(peer),
        session: NodeSession::new(record, app),
        // The origin's aggregate applied the caller's policy before forwarding to this member.
        principal: switchboard_upstream::Principal::internal(),
    };
    let work = member.request(&inc.method, inc.params.clone(), ctx);
    crate::exec::cancel::until_cancelled(work, &cancel).await
}
