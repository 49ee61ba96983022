//! This node's inbox: messages other nodes (and the store) send here over the bus.

use switchboard_store::BusMessage;
use tokio::sync::mpsc;

use crate::cluster::forward::owner;
use crate::state::App;
use crate::streams::hub::StreamEvent;
use crate::transport::stateless::park::resume_remote;
use switchboard_telemetry::trace::logged_session;

/// Handles inbox messages until the inbox closes (it stays open while the node drains: answers
/// to server requests of still-running calls arrive here).
pub async fn listen(app: App, mut inbox: mpsc::Receiver<BusMessage>) {
    while let Some(msg) = inbox.recv().await {
        deliver(&app, msg).await;
    }
}

async fn deliver(app: &App, msg: BusMessage) {
    match msg {
        BusMessage::Event(e) => {
            let event = StreamEvent {
                position: e.position,
                data: e.data,
                end: e.end,
            };
            if e.verify {
                app.hub
                    .deliver_verified(&e.sid, &e.stream, &e.holder, event);
            } else {
                app.hub.deliver(&e.sid, &e.stream, &e.holder, event);
            }
        }
        BusMessage::Takeover {
            sid,
            stream,
            holder,
        } => app.hub.close(&sid, &stream, &holder),
        BusMessage::Reply {
            sid,
            request_key,
            message,
            trace,
        } => reply_span(trace.as_deref()).in_scope(|| {
            if !app.calls.answer(&sid, &request_key, message) {
                tracing::debug!(session = %logged_session(&sid), id = %request_key, "reply arrived after its waiter gave up");
            }
        }),
        BusMessage::Cancel {
            sid,
            request_key,
            reason,
        } => {
            if app.calls.cancel(&sid, &request_key) {
                tracing::info!(session = %logged_session(&sid), id = %request_key, reason = reason.as_deref().unwrap_or(""), "request cancelled by the client");
            }
        }
        BusMessage::Forward(request) => {
            tokio::spawn(owner::execute(app.clone(), *request));
        }
        BusMessage::ForwardNotify(notification) => {
            tokio::spawn(owner::notify(app.clone(), notification));
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
        BusMessage::Resubscribed {} => {
            switchboard_telemetry::metrics::get()
                .counters
                .inbox_resubscribed
                .inc();
            tracing::warn!("bus inbox subscribed again: open streams re-read their event logs for live events missed meanwhile (messages to this node were kept in its mailboxes and arrive in order)");
            app.hub.catch_up_all();
        }
        BusMessage::Notify { origin, message } => {
            crate::transport::stateless::listen::deliver(app, &origin, &message)
        }
        BusMessage::Terminated { sid } => {
            app.hub.close_session(&sid);
            app.calls.end_session(&sid);
            app.upstream.session_ended(&sid).await;
        }
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
