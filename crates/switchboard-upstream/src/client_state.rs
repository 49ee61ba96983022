//! What a client asked an upstream to keep for its session, replayed into every new upstream
//! session of that upstream (issue 34, case C41).
//!
//! Resource subscriptions (`resources/subscribe`, MCP 2025-11-25, server/resources) and the log
//! level (`logging/setLevel`, server/utilities/logging) are state of the upstream session: a
//! server forgets them with the session. Switchboard keeps them in the client's session record
//! (so any node has them) and, whenever it makes a new upstream session (an HTTP or legacy SSE
//! upstream initialized again, a new stdio child, a child started on another node after its
//! owner died), sends them again right after the `initialize` handshake, before the session is
//! recorded or used for any request: first `logging/setLevel` (only to a server that declares
//! `logging`), then one `resources/subscribe` per URI the record says this upstream accepted.
//!
//! What cannot be sent again (the server refuses a subscription, no longer declares `logging`,
//! does not answer) is logged and told to the client: one `notifications/message` at level
//! `error`, logger `switchboard`, on the session's standalone GET stream (logged, so a client
//! resuming it gets it too), naming the upstream and each thing not restored
//! ([`tell_unrestored`]). The new upstream session is used anyway: what was restored works.

use std::future::Future;
use std::sync::Arc;

use serde_json::{json, Value};
use switchboard_protocol::jsonrpc;

use crate::upstream::{ClientPeer, ClientState, RpcError, SessionHandle};
use switchboard_telemetry::trace::logged_session;

/// One thing a new upstream session could not be given again.
#[derive(Clone, Debug, PartialEq)]
pub struct Unrestored {
    /// `logging/setLevel` or `resources/subscribe`.
    pub method: &'static str,
    /// Its params (`{"level": …}` or `{"uri": …}`).
    pub params: Value,
    /// Why.
    pub error: RpcError,
}

/// Sends `state` into a new upstream session of `upstream` through `send` (one request in that
/// session, its answer awaited), in order: the log level when `capabilities` declares `logging`,
/// then each subscription. Returns what failed; a log level the server cannot take (it does not
/// declare `logging`) counts as failed.
pub async fn replay<S, F>(capabilities: &Value, state: &ClientState, mut send: S) -> Vec<Unrestored>
where
    S: FnMut(&'static str, Value) -> F,
    F: Future<Output = Result<Value, RpcError>>,
{
    let mut failed = Vec::new();
    if let Some(level) = &state.log_level {
        let params = json!({"level": level});
        if capabilities.get("logging").is_some() {
            if let Err(error) = send("logging/setLevel", params.clone()).await {
                failed.push(Unrestored {
                    method: "logging/setLevel",
                    params,
                    error,
                });
            }
        } else if capabilities.is_object() && !is_empty_object(capabilities) {
            failed.push(Unrestored {
                method: "logging/setLevel",
                params,
                error: RpcError::method_not_found(
                    "logging/setLevel (it no longer declares `logging`)",
                ),
            });
        }
    }
    for uri in &state.subscriptions {
        let params = json!({"uri": uri});
        if let Err(error) = send("resources/subscribe", params.clone()).await {
            failed.push(Unrestored {
                method: "resources/subscribe",
                params,
                error,
            });
        }
    }
    failed
}

fn is_empty_object(value: &Value) -> bool {
    value.as_object().is_some_and(|o| o.is_empty())
}

/// Replays the client state of `session` for `upstream` into a new upstream session (see
/// [`replay`]) and tells the client what could not be restored ([`tell_unrestored`]); `peer` is
/// the request's, used when the session has no standalone stream (outside a node).
pub async fn restore<S, F>(
    upstream: &str,
    capabilities: &Value,
    session: &dyn SessionHandle,
    peer: &Arc<dyn ClientPeer>,
    send: S,
) where
    S: FnMut(&'static str, Value) -> F,
    F: Future<Output = Result<Value, RpcError>>,
{
    let state = session.client_state(upstream);
    if state.is_empty() {
        return;
    }
    let failed = replay(capabilities, &state, send).await;
    let restored = state.subscriptions.len() + usize::from(state.log_level.is_some());
    tracing::info!(upstream, session = %logged_session(session.session_id()), restored = restored - failed.len().min(restored),
        failed = failed.len(), "replayed the client's log level and resource subscriptions into the new upstream session");
    if !failed.is_empty() {
        tell_unrestored(upstream, session, peer, &failed).await;
    }
}

/// The `notifications/message` (level `error`, logger `switchboard`) that tells the client what
/// a new upstream session of `upstream` could not be given again: `data` has `upstream`,
/// `message` and `unrestored` (each `method`, `params`, `error` `{code, message}`).
pub fn unrestored_message(upstream: &str, failed: &[Unrestored]) -> Value {
    let items: Vec<Value> = failed
        .iter()
        .map(|f| {
            json!({"method": f.method, "params": f.params,
                "error": {"code": f.error.code, "message": f.error.message}})
        })
        .collect();
    let text = format!(
        "upstream `{upstream}` started a new session and did not take back {} of what this \
         session had asked it for (resource subscriptions, log level); send those requests again",
        failed.len()
    );
    jsonrpc::notification(
        "notifications/message",
        json!({"level": "error", "logger": "switchboard",
            "data": {"upstream": upstream, "message": text, "unrestored": items}}),
    )
}

/// Tells the client (and the log) what could not be restored, on the session's standalone stream
/// (else on `peer`'s request stream).
pub async fn tell_unrestored(
    upstream: &str,
    session: &dyn SessionHandle,
    peer: &Arc<dyn ClientPeer>,
    failed: &[Unrestored],
) {
    for f in failed {
        tracing::warn!(upstream, session = %logged_session(session.session_id()), method = f.method, params = %f.params,
            error = %f.error, "could not restore the client's state in the new upstream session; telling the client");
    }
    let message = unrestored_message(upstream, failed);
    let sent = match session.standalone_peer() {
        Some(standalone) => standalone.notify_standalone(message).await,
        None => peer.notify(message).await,
    };
    if let Err(e) = sent {
        tracing::warn!(upstream, session = %logged_session(session.session_id()), error = %e,
            "could not tell the client that its state was not restored");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    #[tokio::test]
    async fn replays_the_level_then_each_subscription_and_reports_refusals() {
        let sent = Mutex::new(Vec::new());
        let state = ClientState {
            log_level: Some("debug".into()),
            subscriptions: vec!["fx://a".into(), "fx://gone".into()],
        };
        let caps = json!({"logging": {}, "resources": {"subscribe": true}});
        let failed = replay(&caps, &state, |method, params| {
            sent.lock().push((method, params.clone()));
            async move {
                if params["uri"] == "fx://gone" {
                    Err(RpcError::new(-32002, "Resource not found"))
                } else {
                    Ok(json!({}))
                }
            }
        })
        .await;
        assert_eq!(
            *sent.lock(),
            vec![
                ("logging/setLevel", json!({"level": "debug"})),
                ("resources/subscribe", json!({"uri": "fx://a"})),
                ("resources/subscribe", json!({"uri": "fx://gone"})),
            ]
        );
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].params, json!({"uri": "fx://gone"}));
        let note = unrestored_message("h", &failed);
        assert_eq!(note["params"]["level"], "error");
        assert_eq!(
            note["params"]["data"]["unrestored"][0]["error"]["code"],
            -32002
        );
    }

    fn never(method: &'static str, _: Value) -> std::future::Ready<Result<Value, RpcError>> {
        panic!("nothing is sent, yet {method} was")
    }

    #[tokio::test]
    async fn a_level_is_not_sent_to_a_server_without_logging() {
        let state = ClientState {
            log_level: Some("debug".into()),
            subscriptions: vec![],
        };
        let failed = replay(&json!({"tools": {}}), &state, never).await;
        assert_eq!(failed[0].method, "logging/setLevel");
        // Capabilities not known yet: nothing sent, nothing reported.
        let failed = replay(&json!({}), &state, never).await;
        assert!(failed.is_empty());
    }
}
