//! Running one 2026-07-28 request: no session and no store round trip. Its context comes from
//! `_meta`: an ephemeral [`LocalSession`] (never stored) whose initialize params hold the
//! request's capabilities and client info, and a [`StatelessPeer`] on the response stream.
//!
//! The request runs in its own task under a cancellation token; the HTTP side holds a drop guard
//! of that token in the response body, so closing the response stream cancels the request (MCP
//! 2026-07-28, basic/transports, Cancellation: closing the stream MUST be treated as cancelling).

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use switchboard_protocol::{codes, jsonrpc, meta, RequestId, Revision, StreamId};
use switchboard_upstream::{LocalSession, RequestContext, RpcError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::checks::Checked;
use super::peer::{Item, StatelessPeer};
use crate::state::App;
use crate::telemetry;

/// Starts the request; its notifications and then its response arrive on the receiver. The
/// token cancels it.
pub fn spawn(
    app: &App,
    id: RequestId,
    method: String,
    raw: Value,
    checked: Checked,
) -> (mpsc::Receiver<Item>, CancellationToken) {
    let (tx, rx) = mpsc::channel(app.cfg.connection_queue.max(1));
    // A name for logs and upstream bookkeeping only; it is never stored or sent to the client.
    let sid = format!("stateless-{}", StreamId::generate());
    let key = id.key();
    let cancel = app.calls.start(&sid, &key);
    let peer = Arc::new(StatelessPeer {
        tx: tx.clone(),
        capabilities: checked.capabilities.clone(),
        log_level: checked.log_level.clone(),
        missing: Mutex::new(None),
        listen: super::listen::Raiser::new(app),
    });
    // The upstreams speak the session era: they see the newest session revision (era bridging
    // towards 2026-07-28 upstreams is not built yet).
    let init = json!({
        "protocolVersion": Revision::LATEST.as_str(),
        "capabilities": checked.capabilities,
        "clientInfo": checked.client_info,
    });
    let ctx = RequestContext {
        session_id: sid.clone(),
        revision: Revision::LATEST,
        client_capabilities: checked.capabilities,
        progress_token: raw.pointer("/params/_meta/progressToken").cloned(),
        cancel: cancel.clone(),
        peer: peer.clone(),
        session: Arc::new(LocalSession::new(sid.clone(), init)),
    };
    let app = app.clone();
    let token = cancel.clone();
    tokio::spawn(async move {
        let params = raw.get("params").cloned().unwrap_or(Value::Null);
        let work = app.upstream.request(&method, params, ctx);
        let outcome = crate::run::until_cancelled(work, &token).await;
        if token.is_cancelled() {
            telemetry::stateless_cancelled(&method);
        }
        let response = answer(&id, &method, outcome, peer.missing_capability());
        let _ = tx.send(Item::Final(response)).await;
        app.calls.end(&sid, &key);
    });
    (rx, cancel)
}

/// The JSON-RPC response: a result with `resultType`, the -32021 of a server-to-client request
/// the request's capabilities did not allow, or the error.
fn answer(
    id: &RequestId,
    method: &str,
    outcome: Result<Value, RpcError>,
    missing: Option<&'static str>,
) -> Value {
    if let Some(cap) = missing {
        let data = json!({"requiredCapabilities": {cap: {}}});
        let msg = format!("Missing required client capability: {cap}");
        return jsonrpc::error_response(
            Some(id),
            codes::MISSING_CLIENT_CAPABILITY,
            msg,
            Some(data),
        );
    }
    match outcome {
        Ok(result) => jsonrpc::result_response(id, complete(method, result)),
        Err(e) => jsonrpc::error_response(Some(id), e.code, e.message, e.data),
    }
}

/// The methods whose results carry caching directives (MCP 2026-07-28: list and read results
/// and `server/discover` carry `ttlMs` and `cacheScope`).
const CACHEABLE: [&str; 6] = [
    "prompts/list",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "server/discover",
    "tools/list",
];

/// Adds `resultType: "complete"` unless the result names one (MCP 2026-07-28, basic,
/// ResultType: every result MUST carry it), and to the results of [`CACHEABLE`] methods the
/// caching directives they must carry, unless the upstream set them: `ttlMs: 0` (immediately
/// stale) and `cacheScope: "private"`. A gateway cannot know how long an upstream's list stays
/// valid, nor whether it is the same for every user, so it promises nothing.
pub fn complete(method: &str, mut result: Value) -> Value {
    if let Some(obj) = result.as_object_mut() {
        obj.entry(meta::RESULT_TYPE)
            .or_insert_with(|| Value::String(meta::RESULT_COMPLETE.into()));
        if CACHEABLE.contains(&method) {
            obj.entry("ttlMs").or_insert_with(|| json!(0));
            obj.entry("cacheScope").or_insert_with(|| json!("private"));
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_carry_result_type_and_missing_capabilities_win() {
        let id = RequestId(json!(1));
        let r = answer(&id, "tools/call", Ok(json!({"content": []})), None);
        assert_eq!(r["result"]["resultType"], "complete");
        assert!(r["result"].get("ttlMs").is_none(), "not a cacheable method");
        let r = answer(&id, "tools/list", Ok(json!({"tools": []})), None);
        assert_eq!(r["result"]["ttlMs"], 0);
        assert_eq!(r["result"]["cacheScope"], "private");
        let kept = json!({"tools": [], "ttlMs": 5000, "cacheScope": "public"});
        let r = answer(&id, "tools/list", Ok(kept), None);
        assert_eq!(
            (&r["result"]["ttlMs"], &r["result"]["cacheScope"]),
            (&json!(5000), &json!("public"))
        );
        let r = answer(
            &id,
            "tools/call",
            Ok(json!({"resultType": "input_required"})),
            None,
        );
        assert_eq!(r["result"]["resultType"], "input_required");
        let r = answer(&id, "tools/call", Ok(json!({})), Some("roots"));
        assert_eq!(r["error"]["code"], -32021);
        assert_eq!(
            r["error"]["data"]["requiredCapabilities"],
            json!({"roots": {}})
        );
    }
}
