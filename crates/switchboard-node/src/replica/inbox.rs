//! This node's share of its bus inbox: the messages other nodes (and the store) send here that
//! are not about held streams.

use switchboard_store::BusMessage;

use crate::state::App;
use crate::transport::forwarded;
use crate::transport::stateless::park::resume_remote;
use switchboard_telemetry::trace::logged_session;

/// Handles a bus message the runtime passes on ([`switchboard_runtime::inbox`] handles live
/// events, takeovers and a resubscribed inbox itself).
pub async fn deliver(app: &App, msg: BusMessage) {
    match msg {
        BusMessage::Reply {
            sid,
            request_key,
            message,
            trace,
        } => reply_span(trace.as_deref()).in_scope(|| {
            if !app.waiters.answer(&sid, &request_key, message) {
                tracing::debug!(session = %logged_session(&sid), id = %request_key, "reply arrived after its waiter gave up");
            }
        }),
        BusMessage::Cancel {
            sid,
            request_key,
            reason,
        } => {
            if app.replica.calls.cancel(&sid, &request_key) {
                tracing::info!(session = %logged_session(&sid), id = %request_key, reason = reason.as_deref().unwrap_or(""), "request cancelled by the client");
            }
        }
        BusMessage::Forward(request) => {
            tokio::spawn(forwarded::execute(app.clone(), *request));
        }
        BusMessage::ForwardNotify(notification) => {
            tokio::spawn(forwarded::notify(app.clone(), notification));
        }
        BusMessage::ForwardMessage { call, message } => app.forwards.relay(&call, message).await,
        BusMessage::ForwardDone { call, outcome } => app.forwards.done(&call, outcome),
        BusMessage::ForwardCancel { call, origin } => app.forwards.cancel(&origin, &call),
        BusMessage::Resume {
            call,
            origin,
            park,
            answers,
        } => {
            tokio::spawn(resume_remote(app.clone(), call, origin, park, answers));
        }
        BusMessage::TaskInput { task, answers } => {
            let app = app.clone();
            tokio::spawn(async move {
                crate::transport::stateless::tasks::deliver(&app, &task, &answers).await;
            });
        }
        BusMessage::Notify {
            origin,
            message,
            principal,
        } => crate::transport::stateless::listen::deliver(app, &origin, &message, principal.as_deref()),
        BusMessage::Terminated { sid } => {
            app.end_session_here(&sid);
            app.upstream.session_ended(&sid).await;
        }
        // The runtime's own (events, takeovers, a resubscribed inbox).
        BusMessage::Event(_) | BusMessage::Takeover { .. } | BusMessage::Resubscribed {} => {}
    }
}

/// A span for a client's answer that reached this node over the bus, child of the span that
/// routed it here (the other node's `route_reply`): it ends the hop of the trace.
fn reply_span(traceparent: Option<&str>) -> tracing::Span {
    let span = tracing::info_span!(
        target: switchboard_telemetry::trace::TARGET,
        "bus",
        otel.name = "deliver reply",
        otel.kind = "consumer",
        messaging.system = "redis",
        messaging.operation.type = "receive",
    );
    switchboard_telemetry::trace::set_parent(
        &span,
        switchboard_telemetry::trace::parent_from(traceparent),
    );
    span
}
