//! Messages that must reach the replica where something waits: a client's answer to a
//! server-to-client request (sampling, elicitation, roots, ping) and a client's
//! `notifications/cancelled`.
//!
//! rmcp numbers a session's server-to-client requests 0, 1, 2, … per handler (one per session
//! per process, and a fresh one each time rmcp restores the session in a process, e.g. after its
//! keep-alive ended the previous one), and the same session may run on several replicas at once,
//! so two replicas, two processes of one replica restarted with the same configured id, or two
//! handler lifetimes in one process could all have an open request 0. Every such request leaves
//! this replica with its id rewritten to the string `<original id as JSON>@<node id>/<handler>`
//! (`"3@rmcp-1a2b3c4d.9f0e/17"`): the node id is unique per process (a random suffix, see
//! [`crate::ReplicatedConfig::for_this_process`]) and `<handler>` names the handler's lifetime in
//! it ([`crate::node::Node::handler_started`]), so the id is unique in the session across
//! replicas, restarts and restores. It is registered as pending in the store
//! ([`switchboard_store::Bus::register_pending`]). An answer whose handler has ended meanwhile
//! is dropped (logged), never handed to its successor.
//! The client's answer may then POST to any replica: that replica routes it over the bus to the
//! one waiting ([`switchboard_store::Bus::route_reply`]), which restores the original id and
//! hands it to its rmcp session. A cancellation goes to the replica running the request
//! ([`switchboard_store::Bus::route_cancel`]). (MCP 2025-11-25, basic/transports, Streamable
//! HTTP: the answer is POSTed like any other message, to a server that may be any replica.)

use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_server::SessionManager;
use serde_json::{json, Value};
use switchboard_protocol::RequestId;
use switchboard_telemetry::trace::logged_session;

use crate::node::Node;

/// The wire id of a server-to-client request whose rmcp id is `original`, sent by handler
/// `handler` of `node`.
pub(crate) fn outbound_id(original: &Value, node: &str, handler: u64) -> Value {
    Value::String(format!(
        "{}@{node}/{handler}",
        RequestId(original.clone()).key()
    ))
}

/// The rmcp id and the handler behind a wire id made by [`outbound_id`] for `node`; `None` for
/// any other id.
pub(crate) fn inbound_id(wire: &Value, node: &str) -> Option<(Value, u64)> {
    let (key, from) = wire.as_str()?.rsplit_once('@')?;
    let (from, handler) = from.split_once('/')?;
    (from == node).then_some(())?;
    let handler = handler.parse().ok()?;
    RequestId::from_key(key).map(|id| (id.0, handler))
}

/// Whether a JSON-RPC message is a request (it has a method and an id).
pub(crate) fn is_request(message: &Value) -> bool {
    message.get("method").is_some() && message.get("id").is_some_and(|id| !id.is_null())
}

/// Whether a JSON-RPC message is a response or an error (it ends its request's stream).
pub(crate) fn is_response(message: &Value) -> bool {
    message.get("method").is_none()
        && (message.get("result").is_some() || message.get("error").is_some())
}

/// A server-to-client request leaving handler `handler` of session `sid` here: registers it as
/// pending here and rewrites its id ([`outbound_id`]). Other messages pass unchanged.
pub(crate) async fn outbound(node: &Node, sid: &str, handler: u64, message: &mut Value) {
    if !is_request(message) {
        return;
    }
    let wire = outbound_id(&message["id"], node.id(), handler);
    let key = RequestId(wire.clone()).key();
    if let Err(e) = node.store.register_pending(sid, &key).await {
        // The answer can still come back to this replica; any other cannot route it.
        tracing::warn!(error = %e, session = %logged_session(sid), "could not register a server request as pending");
    }
    message["id"] = wire;
}

/// The client's answer to a server-to-client request arrived over the bus for this replica:
/// restores the request's rmcp id and hands the answer to the session's rmcp handler here, if
/// that is still the handler that sent the request (one that ended took its requests with it:
/// the answer is dropped).
pub(crate) async fn deliver_reply(node: &Node, sid: &str, mut message: Value) {
    let Some((original, handler)) = message.get("id").and_then(|id| inbound_id(id, node.id()))
    else {
        tracing::debug!(session = %logged_session(sid), "a reply for another replica's request reached this one; dropped");
        return;
    };
    if node.handler_of(sid) != Some(handler) {
        tracing::info!(session = %logged_session(sid), handler, "a reply for a request of a handler that has ended here; dropped");
        return;
    }
    message["id"] = original;
    hand_to_local(node, sid, message).await;
}

/// A client's `notifications/cancelled` for request `request_key` running here.
pub(crate) async fn deliver_cancel(
    node: &Node,
    sid: &str,
    request_key: &str,
    reason: Option<String>,
) {
    let Some(id) = RequestId::from_key(request_key) else {
        return;
    };
    node.mark_cancelled(sid, request_key);
    let mut params = json!({ "requestId": id.0 });
    if let Some(reason) = reason {
        params["reason"] = Value::String(reason);
    }
    let message = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params});
    hand_to_local(node, sid, message).await;
}

async fn hand_to_local(node: &Node, sid: &str, message: Value) {
    let message: ClientJsonRpcMessage = match serde_json::from_value(message) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(error = %e, session = %logged_session(sid), "a routed client message does not parse");
            return;
        }
    };
    if let Err(e) = node.local.accept_message(&sid.into(), message).await {
        // The session's handler here has ended meanwhile: nobody waits any more.
        tracing::debug!(error = %e, session = %logged_session(sid), "a routed client message found no session here");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_ids_are_unique_per_replica_and_handler_and_come_back() {
        let a = outbound_id(&json!(3), "rmcp-a", 1);
        let b = outbound_id(&json!(3), "rmcp-b", 1);
        let a2 = outbound_id(&json!(3), "rmcp-a", 2);
        assert!(a != b && a != a2);
        assert_eq!(a, json!("3@rmcp-a/1"));
        assert_eq!(inbound_id(&a, "rmcp-a"), Some((json!(3), 1)));
        assert_eq!(inbound_id(&a2, "rmcp-a"), Some((json!(3), 2)));
        assert_eq!(inbound_id(&a, "rmcp-b"), None, "another replica's id");
        let s = outbound_id(&json!("x@y/z"), "n.1f", 7);
        assert_eq!(
            inbound_id(&s, "n.1f"),
            Some((json!("x@y/z"), 7)),
            "ids with @ and / survive"
        );
        assert_eq!(inbound_id(&json!(3), "n"), None);
        assert_eq!(inbound_id(&json!("3@n"), "n"), None, "no handler part");
    }

    #[test]
    fn requests_and_responses_are_told_apart() {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        let note = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {}});
        let response = json!({"jsonrpc": "2.0", "id": 1, "result": {}});
        let error = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "x"}});
        assert!(is_request(&request) && !is_response(&request));
        assert!(!is_request(&note) && !is_response(&note));
        assert!(is_response(&response) && is_response(&error) && !is_request(&error));
    }
}
