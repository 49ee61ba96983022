//! The node's [`ClientPeer`]: how an upstream talks back to the client during a request.
//!
//! Server-to-client requests (MCP 2025-11-25, basic/transports, Sending Messages item 6) go out on
//! the request's own response stream with an id unique in the session across nodes (`s-` and 16
//! random base-32 characters). The client may POST the answer to any node: the store records which
//! node waits (`register_pending`), and the bus carries the answer here.
//!
//! Every notification and request an upstream sends is shaped first for the revision the client
//! negotiated ([`switchboard_protocol::shaping::server_message`], docs/revisions.md): one that
//! revision does not define is not sent (a notification is dropped, a request refused to the
//! upstream with -32601, as for an undeclared capability).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use switchboard_protocol::logging::{required_capability, severity};
use switchboard_protocol::shaping::{self, Outgoing};
use switchboard_protocol::{jsonrpc, RequestId, Revision, StreamId};
use switchboard_upstream::{ClientPeer, PeerError};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::exec::outage::Sequence;
use crate::exec::response::ResponseStream;
use crate::state::App;
use switchboard_store::BusMessage;
use switchboard_telemetry::trace::logged_session;

/// Where messages that belong on the request's stream go.
pub enum Route {
    /// The client's POST is on this node: its answer channel.
    Local(Arc<ResponseStream>),
    /// The request was forwarded here from `origin`: messages travel back to it over the bus as
    /// [`BusMessage::ForwardMessage`] for call `call`, and the origin puts them on the stream.
    Remote {
        /// The node holding the client's POST.
        origin: String,
        /// The call id on the origin.
        call: String,
    },
    /// Not tied to any request: the session's standalone GET stream (an upstream's unsolicited
    /// notifications and requests).
    Standalone,
}

impl Route {
    /// Sends `message` of `peer` this way.
    async fn send(&self, peer: &NodePeer, message: &Value) -> Result<(), PeerError> {
        match self {
            Route::Standalone => peer.log_standalone(message).await,
            Route::Local(response) => response.send(message).await,
            // Not tried again: the origin appends what arrives, and a message sent twice would
            // be logged twice.
            Route::Remote { origin, call } => {
                let msg = BusMessage::ForwardMessage {
                    call: call.clone(),
                    message: message.clone(),
                };
                peer.app
                    .store
                    .send_to(origin, &msg)
                    .await
                    .map_err(|e| PeerError::Delivery(e.to_string()))
            }
        }
    }
}

/// The way back to the client for one request.
pub struct NodePeer {
    pub(crate) app: App,
    pub(crate) sid: String,
    pub(crate) capabilities: Arc<Value>,
    pub(crate) log_level: Option<String>,
    /// The revision the client negotiated: what its messages are shaped for.
    pub(crate) revision: Revision,
    pub(crate) route: Route,
    pub(crate) cancel: CancellationToken,
    /// Why server-to-client requests cannot reach the client during this call (it accepts only
    /// JSON, or the call is part of a batch); `None` when they can.
    pub(crate) no_requests: Option<String>,
    /// The messages this peer sends on the session's standalone stream, logged in order until
    /// the deadline ([`crate::exec::outage`]); a call's own ([`ResponseStream::sequence`]) when
    /// the client's POST is here.
    pub(crate) sequence: Arc<Sequence>,
}

impl NodePeer {
    /// `notifications/message` below the session's level is not sent (MCP 2025-11-25,
    /// server/utilities/logging), nor a notification the client's revision does not define;
    /// the others are shaped for that revision in place.
    fn filtered(&self, message: &mut Value) -> bool {
        if let Outgoing::Undefined(since) = shaping::server_message(self.revision, message) {
            let method = message.get("method").and_then(Value::as_str).unwrap_or("?");
            tracing::debug!(session = %logged_session(&self.sid), method, client_revision = %self.revision, since = %since,
                "not sent: the client's revision has no such notification");
            return true;
        }
        if message.get("method").and_then(Value::as_str) != Some("notifications/message") {
            return false;
        }
        let (Some(min), Some(level)) = (
            &self.log_level,
            message.pointer("/params/level").and_then(Value::as_str),
        ) else {
            return false;
        };
        severity(level) < severity(min)
    }
}

impl NodePeer {
    /// Appends `message` to the session's standalone stream, after this peer's earlier ones,
    /// tried again through a store outage until the deadline. The store delivers
    /// standalone-stream events to the holder through the bus (one ordered path for all
    /// writers), so nothing is handed to the local hub here.
    async fn log_standalone(&self, message: &Value) -> Result<(), PeerError> {
        let (data, once) = (
            message.to_string(),
            switchboard_store::rules::new_append_id(),
        );
        let (sid, store) = (self.sid.as_str(), &self.app.store);
        let append = || store.append_once(sid, StreamId::STANDALONE, &data, false, &once);
        self.sequence.log(false, append).await.map(|_| ()).map_err(|why| {
            tracing::warn!(session = %logged_session(sid), error = %why, "a message for the standalone stream could not be logged before its deadline");
            PeerError::Delivery(why)
        })
    }
}

fn new_server_request_id() -> RequestId {
    const A: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let bytes: [u8; 16] = rand::random();
    let tail: String = bytes.iter().map(|b| A[(b & 31) as usize] as char).collect();
    RequestId(Value::String(format!("s-{tail}")))
}

#[async_trait]
impl ClientPeer for NodePeer {
    async fn notify(&self, mut message: Value) -> Result<(), PeerError> {
        if self.filtered(&mut message) {
            return Ok(());
        }
        self.route.send(self, &message).await
    }

    async fn send_raw(&self, message: Value) -> Result<(), PeerError> {
        self.route.send(self, &message).await
    }

    async fn notify_standalone(&self, mut message: Value) -> Result<(), PeerError> {
        if self.filtered(&mut message) {
            return Ok(());
        }
        self.log_standalone(&message).await
    }

    fn refuses_requests(&self) -> Option<String> {
        self.no_requests.clone()
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, PeerError> {
        let params = self.shaped_request(method, params)?;
        if let Some(cap) = required_capability(method) {
            if self.capabilities.get(cap).is_none() {
                return Err(PeerError::MissingCapability(cap));
            }
        }
        // Refused before anything is registered or sent: nobody could answer (case C18).
        if let Some(why) = &self.no_requests {
            return Err(PeerError::Unreachable(why.clone()));
        }
        // The wait for the client's answer, a client span of this node (MCP conventions: a
        // request the server sends), child of the upstream call that asked.
        let span = tracing::info_span!(
            target: switchboard_telemetry::trace::TARGET,
            "client request",
            otel.name = method,
            otel.kind = "client",
            mcp.method.name = method,
            error.type = tracing::field::Empty,
        );
        let asked = self.ask(method, params).instrument(span.clone()).await;
        if let Err(e) = &asked {
            span.record("error.type", e.to_string());
        }
        asked
    }
}

impl NodePeer {
    /// The params of the server request `method` shaped for the client's revision, or the
    /// refusal when that revision has no such request (`elicitation/create` before 2025-06-18).
    fn shaped_request(&self, method: &str, params: Value) -> Result<Value, PeerError> {
        if !shaping::needed(self.revision) {
            return Ok(params);
        }
        let mut request = serde_json::json!({"method": method, "params": params});
        if let Outgoing::Undefined(since) = shaping::server_message(self.revision, &mut request) {
            return Err(PeerError::Unreachable(format!(
                "the client negotiated MCP {}, which has no `{method}` of this form (it came \
                 in {since}; docs/revisions.md)",
                self.revision
            )));
        }
        Ok(request["params"].take())
    }

    /// Sends the server request `method` to the client and waits for its answer (at most
    /// `session.client_request_timeout`).
    async fn ask(&self, method: &str, mut params: Value) -> Result<Value, PeerError> {
        // The context of this wait goes to the client in `params._meta` (OpenTelemetry's MCP
        // conventions), for a client that traces its answer.
        if let (Some(tp), Some(obj)) = (
            switchboard_telemetry::trace::current(),
            params.as_object_mut(),
        ) {
            let meta = obj
                .entry("_meta")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(meta) = meta.as_object_mut() {
                meta.entry("traceparent").or_insert(Value::String(tp));
            }
        }
        let id = new_server_request_id();
        let key = id.key();
        let waiter = self.app.waiters.wait(&self.sid, &key);
        let store = &self.app.store;
        let sent = async {
            store
                .register_pending(&self.sid, &key)
                .await
                .map_err(|e| PeerError::Delivery(e.to_string()))?;
            self.route
                .send(self, &jsonrpc::request(&id, method, params))
                .await
        };
        if let Err(e) = sent.await {
            self.app.waiters.stop(&self.sid, &key);
            return Err(e);
        }
        let timeout = self.app.cfg.client_request_timeout;
        let outcome = tokio::select! {
            answer = waiter => answer.map_err(|_| PeerError::Cancelled),
            _ = tokio::time::sleep(timeout) => Err(PeerError::Timeout(timeout.as_millis() as u64)),
            _ = self.cancel.cancelled() => Err(PeerError::Cancelled),
        };
        if outcome.is_err() {
            self.app.waiters.stop(&self.sid, &key);
            if let Err(e) = store.forget_pending(&self.sid, &key).await {
                tracing::warn!(error = %e, "could not forget a pending server request");
            }
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_request_ids_are_unique_and_prefixed() {
        let a = new_server_request_id();
        assert!(a.0.as_str().unwrap().starts_with("s-"));
        assert_ne!(a, new_server_request_id());
    }
}
