//! `subscriptions/listen` (MCP 2026-07-28, basic/patterns/subscriptions): a POST answered by a
//! long-lived SSE stream of server notifications, fed cluster-wide through the bus.
//!
//! Path of a notification: an upstream raises it outside a request's own traffic
//! ([`switchboard_upstream::ClientPeer::notify_standalone`] of a 2026-07-28 request's
//! `StatelessPeer`, the stateless `peer` module) → [`Raiser::raise`] broadcasts it on the bus
//! ([`switchboard_store::Bus::broadcast`]; Redis: one `PUBLISH` on the cluster channel every
//! node subscribes to) → every node's inbox (`replica::inbox`) → [`deliver`] → the
//! [`crate::state::listeners::Listeners`] of that node whose filter matches → each stream. So a notification raised on
//! any node reaches every listening client on every node, once.
//!
//! Only the four listenable types travel ([`filter::LISTENABLE`]); other unsolicited
//! notifications (the demo's log messages) have nowhere to go in 2026-07-28 and are dropped.
//! Upstream-wide notifications outside any request do not reach listeners: the upstreams that
//! serve 2026-07-28 (the demo) raise none, and the session-era upstreams deliver theirs per
//! session (the standalone GET stream), which is not bridged here.
//!
//! A stream: first `notifications/subscriptions/acknowledged` with the agreed filter (before any
//! notification: the listener is registered before the acknowledgement is queued), then the
//! matching notifications, each with `_meta["io.modelcontextprotocol/subscriptionId"]` = the
//! listen request's id, and SSE comment keep-alives every `keepalive_interval` (revisions.md
//! 1.3.16; `X-Accel-Buffering: no` comes with every SSE answer, [`crate::streams::sse`]). The client ends
//! it by closing the stream (1.3.17); the registration goes with it. The server ends it — node
//! drain, or the listener lagged ([`registry`]) — with the result the schema defines for that
//! (`SubscriptionsListenResult`: `resultType: "complete"` and the subscription id in `_meta`),
//! then closes the stream. It does not send `notifications/cancelled` (revisions.md 3.4.7: the
//! cancellation page's rule conflicts with the subscriptions page's graceful closure and the
//! schema; we follow the schema).
//!
//! A request whose agreed filter is empty (nothing it asked for can be raised here, case C42)
//! gets the acknowledgement, the closing result and the end of the stream at once: it takes no
//! place in the registry and no `stateless.max_listeners` slot.
//!
//! A subscribed URI the listener's principal may not see (`[policy]`) is acknowledged as asked
//! and never delivered ([`Filter::hidden`]).
//!
//! Delivery to every node is the bus's broadcast: each node subscribed, or subscribing again
//! after a gap, takes each notification once within `bus.message_ttl` (docs/redis.md, "What the
//! bus guarantees"). A listen stream that drops loses what came meanwhile: 2026-07-28 listen
//! streams are not resumable.

use std::sync::{Arc, Weak};

use axum::response::Response;
use bytes::Bytes;
use serde_json::{json, Value};
use switchboard_protocol::{jsonrpc, meta, RequestId};
use switchboard_store::BusMessage;
use tokio::sync::mpsc;
use tokio::time::{interval, MissedTickBehavior};

use super::refusal::Refusal;
use crate::state::listeners::filter::{self, Bounds, Filter};
use crate::state::listeners::Listening;
use crate::state::{App, AppState};
use crate::streams::sse;
use crate::telemetry;
use switchboard_upstream::item::Kind;

/// Frames buffered between a listener's task and its HTTP body.
const FRAMES: usize = 8;

/// Answers `subscriptions/listen` request `id` with `params` (already through the checks).
pub fn open(app: &App, id: RequestId, params: &Value) -> Response {
    let bounds = Bounds {
        max_uris: app.cfg.max_subscriptions,
        max_uri_bytes: app.cfg.max_uri_bytes,
    };
    let asked = match Filter::parse(params, bounds) {
        Ok(f) => f,
        Err(why) => return Refusal::InvalidParams(why).respond(Some(&id)),
    };
    if asked.task_ids.is_some() && !declares_tasks(params) {
        // ext-tasks, Task Status Notifications: taskIds need the extension declared.
        let missing = vec![format!("extensions.{}", super::tasks::EXTENSION)];
        return Refusal::MissingCapability(missing).respond(Some(&id));
    }
    let mut agreed = asked.agree(&app.upstream.capabilities());
    let principal = crate::session::current();
    agreed.hidden = (agreed.uris.iter().flatten())
        .filter(|uri| !app.upstream.visible(&principal, Kind::Resource, uri))
        .cloned()
        .collect();
    if !agreed.can_deliver() {
        // Nothing agreed: the stream could never carry a notification (case C42). It ends
        // after the acknowledgement, holding no slot and no registration.
        telemetry::listen_empty();
        return ended_at_once(&id, &agreed);
    }
    let registered = (app.listeners).register(id.clone(), agreed.clone(), principal.id.clone());
    let Some((reg, notes)) = registered else {
        telemetry::listen_refused(app.cfg.max_listeners);
        return Refusal::Overloaded(format!(
            "this node already serves {} subscriptions/listen streams",
            app.cfg.max_listeners
        ))
        .respond(Some(&id));
    };
    let (out, body) = mpsc::channel(FRAMES);
    tokio::spawn(stream(app.clone(), id, agreed, reg, notes, out));
    sse::response(body, &[])
}

/// The whole answer of a listen request whose agreed filter is empty: the acknowledgement,
/// then the closing result, then the end of the stream.
fn ended_at_once(id: &RequestId, agreed: &Filter) -> Response {
    let frames = [acknowledged(id, agreed), closing(id)]
        .map(|v| Ok::<_, std::convert::Infallible>(sse::data(&v.to_string())));
    sse::body_response(
        axum::body::Body::from_stream(tokio_stream::iter(frames)),
        &[],
    )
}

/// Why a listen stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The client closed it.
    ClientClosed,
    /// The node is draining.
    Draining,
    /// Its queue was full ([`registry`]).
    Lagged,
}

/// Writes one listen stream until it ends; the registration drops with it.
async fn stream(
    app: App,
    id: RequestId,
    agreed: Filter,
    reg: Listening,
    mut notes: mpsc::Receiver<Value>,
    out: mpsc::Sender<Bytes>,
) {
    let _reg = reg;
    let ack = acknowledged(&id, &agreed);
    if out.send(sse::data(&ack.to_string())).await.is_err() {
        return;
    }
    let mut keepalive = interval(app.cfg.keepalive_interval);
    keepalive.set_missed_tick_behavior(MissedTickBehavior::Delay);
    keepalive.tick().await;
    let end = loop {
        let frame = tokio::select! {
            biased;
            _ = out.closed() => break End::ClientClosed,
            _ = app.shutdown.cancelled() => break End::Draining,
            note = notes.recv() => match note {
                Some(v) => sse::data(&v.to_string()),
                None => break End::Lagged,
            },
            _ = keepalive.tick() => sse::keepalive(),
        };
        if out.send(frame).await.is_err() {
            break End::ClientClosed;
        }
    };
    if end != End::ClientClosed {
        let _ = out.send(sse::data(&closing(&id).to_string())).await;
    }
    tracing::debug!(subscription = %id.key(), ?end, "listen stream ended");
}

/// `notifications/subscriptions/acknowledged` for subscription `id` with the agreed filter.
fn acknowledged(id: &RequestId, agreed: &Filter) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "_meta": {meta::SUBSCRIPTION_ID: id.0},
            "notifications": agreed.to_json(),
        },
    })
}

/// The response that ends subscription `id` gracefully (schema `SubscriptionsListenResult`).
fn closing(id: &RequestId) -> Value {
    let result = json!({
        meta::RESULT_TYPE: meta::RESULT_COMPLETE,
        "_meta": {meta::SUBSCRIPTION_ID: id.0},
    });
    jsonrpc::result_response(id, result)
}

/// Whether the listen request's `_meta` client capabilities declare the tasks extension.
fn declares_tasks(params: &Value) -> bool {
    params
        .pointer("/_meta")
        .and_then(|m| m.get(meta::CLIENT_CAPABILITIES))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(super::tasks::EXTENSION))
        .is_some_and(Value::is_object)
}

/// A notification from the bus ([`BusMessage::Notify`]): to this node's listeners (only
/// `principal`'s when set).
pub fn deliver(app: &App, origin: &str, message: &Value, principal: Option<&str>) {
    let n = app.listeners.publish(message, principal);
    tracing::debug!(origin, delivered = n, method = ?message.get("method"), "notification fanned out to listen streams");
}

/// Raises unsolicited upstream notifications to every listen stream of the cluster. The
/// default raises nothing (a peer outside a node, in unit tests). It holds the node weakly: an
/// upstream may keep a request's peer (its latest) as long as it lives, and the node owns the
/// upstream.
#[derive(Clone, Default)]
pub struct Raiser {
    app: Option<Weak<AppState>>,
}

impl Raiser {
    /// Raises through `app`'s bus.
    pub fn new(app: &App) -> Raiser {
        Raiser {
            app: Some(Arc::downgrade(app)),
        }
    }

    /// Broadcasts `message` when a listen stream may carry it; `false` when it may not (the
    /// caller drops it). When the bus refuses, this node's listeners still get it.
    pub async fn raise(&self, message: &Value) -> bool {
        if !filter::is_listenable(message) {
            return false;
        }
        let Some(app) = self.app.as_ref().and_then(Weak::upgrade) else {
            return false;
        };
        let msg = BusMessage::Notify {
            origin: app.node_id().to_owned(),
            message: message.clone(),
            principal: None,
        };
        if let Err(e) = app.store.broadcast(&msg).await {
            tracing::warn!(error = %e, "could not broadcast a notification to the cluster; only this node's listen streams get it");
            app.listeners.publish(message, None);
        }
        true
    }
}

impl std::fmt::Debug for Raiser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Raiser")
            .field("wired", &self.app.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgement_and_closing_result_carry_the_subscription_id() {
        let id = RequestId(json!("L1"));
        let agreed = Filter {
            tools: true,
            ..Filter::default()
        };
        let ack = acknowledged(&id, &agreed);
        assert_eq!(ack["params"]["_meta"][meta::SUBSCRIPTION_ID], "L1");
        assert_eq!(
            ack["params"]["notifications"],
            json!({"toolsListChanged": true})
        );
        let end = closing(&id);
        assert_eq!(end["id"], "L1");
        assert_eq!(end["result"]["resultType"], "complete");
        assert_eq!(end["result"]["_meta"][meta::SUBSCRIPTION_ID], "L1");
    }
}
