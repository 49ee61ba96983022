//! Running one 2026-07-28 request: no session and no store round trip. Its context comes from
//! `_meta`: an ephemeral [`LocalSession`] (never stored) whose initialize params hold the
//! request's capabilities and client info, and a [`StatelessPeer`] on the response stream.
//!
//! The request runs in its own task under a cancellation token; the HTTP side holds a drop guard
//! of that token in the response body, so closing the response stream cancels the request (MCP
//! 2026-07-28, basic/transports, Cancellation: closing the stream MUST be treated as cancelling).

use std::sync::Arc;

use parking_lot::Mutex;

use serde_json::{json, Value};
use switchboard_protocol::{codes, jsonrpc, meta, RequestId, Revision, StreamId};
use switchboard_upstream::{LocalSession, RequestContext, RpcError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::checks::Checked;
use super::client_peer::StatelessPeer;
use super::park::{Item, ItemSink, RoundGuard, Rounds};
use super::refusal::Refusal;
use crate::mrtr::{self, Inputs};
use crate::state::names::EPHEMERAL_PREFIX;
use crate::state::App;
use crate::telemetry;

/// Starts the request; its notifications and then its response arrive on the receiver.
/// Dropping the guard (the response stream closed) cancels it, unless it parked. `inputs`: its
/// MRTR answers (`None` for methods that may not ask); `principal` the one its `requestState`
/// is issued to. The upstream sees an ephemeral session of its own, ended with the request
/// (for upstreams with per-session state: a stdio child, an upstream session).
pub fn spawn(
    app: &App,
    id: RequestId,
    method: String,
    raw: Value,
    checked: Checked,
    inputs: Option<Arc<Inputs>>,
    principal: String,
) -> Result<(mpsc::Receiver<Item>, RoundGuard), Refusal> {
    // An upstream with per-session state starts an upstream session (a stdio child, an
    // `initialize`) for this request alone: at most `stateless.max_ephemeral_sessions` at once here.
    let seat = if app.upstream.serves_stateless() {
        None
    } else {
        Some(app.ephemeral_sessions.take().ok_or_else(|| {
            Refusal::Overloaded(format!(
                "{} requests already run in upstream sessions of their own on this node \
                 (stateless.max_ephemeral_sessions); try again later",
                app.cfg.max_ephemeral_sessions
            ))
        })?)
    };
    let (tx, rx) = mpsc::channel(app.cfg.connection_queue.max(1));
    let sink = Arc::new(ItemSink::new(tx));
    // A name for logs and upstream bookkeeping only; it is never stored or sent to the client.
    let sid = format!("{EPHEMERAL_PREFIX}{}", StreamId::generate());
    let key = id.key();
    let cancel = app.replica.calls.start(&sid, &key);
    let rounds = Arc::new(Rounds::default());
    let guard = RoundGuard::new(cancel.clone(), rounds.clone(), 0);
    let peer = Arc::new(StatelessPeer {
        tx: sink.clone(),
        capabilities: checked.capabilities.clone(),
        log_level: checked.log_level.clone(),
        missing: Mutex::new(None),
        inputs: inputs.clone(),
        cancel: cancel.clone(),
        listen: super::listen::Raiser::new(app),
    });
    // The upstreams speak the session era: they see the newest session revision (2026-07-28
    // upstreams add the stateless `_meta` themselves).
    let init = json!({
        "protocolVersion": Revision::LATEST.as_str(),
        "capabilities": checked.capabilities,
        "clientInfo": checked.client_info,
    });
    let ctx = RequestContext {
        session_id: sid.clone(),
        revision: Revision::LATEST,
        client_capabilities: Arc::new(checked.capabilities),
        progress_token: raw.pointer("/params/_meta/progressToken").cloned(),
        cancel: cancel.clone(),
        peer: peer.clone(),
        session: Arc::new(LocalSession::new(sid.clone(), init)),
        principal: crate::session::current(),
    };
    let run = Run {
        app: app.clone(),
        id,
        method,
        inputs,
        principal,
        token: cancel,
        rounds,
        sink,
        peer,
    };
    tokio::spawn(async move {
        let params = raw.get("params").cloned().unwrap_or(Value::Null);
        let (upstream, method, token) = (
            run.app.upstream.clone(),
            run.method.clone(),
            run.token.clone(),
        );
        let work = upstream.request(&method, mrtr::upstream_params(params), ctx);
        let work = crate::exec::cancel::until_cancelled(work, &token);
        let mut run = run;
        if let Some(response) = run.drive(work).await {
            run.sink.send(Item::Final(response)).await;
        }
        run.app.replica.calls.end(&sid, &key);
        run.app.upstream.session_ended(&sid).await;
        drop(seat);
    });
    Ok((rx, guard))
}

/// One request's run, across its MRTR rounds.
struct Run {
    app: App,
    id: RequestId,
    method: String,
    inputs: Option<Arc<Inputs>>,
    principal: String,
    token: CancellationToken,
    rounds: Arc<Rounds>,
    sink: Arc<ItemSink>,
    peer: Arc<StatelessPeer>,
}

impl Run {
    /// Drives `work` to its final response (`None`: nothing is left to answer: the request
    /// parked and no retry came, or its state could not be issued and was answered already).
    /// Re-run mode: the first question stops the run with an `InputRequiredResult`. Park mode:
    /// each batch of questions answers the current round with one and waits for a retry,
    /// which delivers the answers and takes the rest of the request's messages.
    async fn drive(
        &mut self,
        work: impl std::future::Future<Output = Result<Value, RpcError>>,
    ) -> Option<Value> {
        tokio::pin!(work);
        let parking = self.inputs.as_ref().is_some_and(|i| i.parking());
        loop {
            let inputs = self.inputs.clone();
            let asked = async {
                match &inputs {
                    // A task's questions wait for `tasks/update`; the task watches them.
                    Some(i) if i.mode() != mrtr::InputMode::Task => i.asked().await,
                    _ => std::future::pending().await,
                }
            };
            let finished = tokio::select! {
                outcome = &mut work => Some(outcome),
                () = asked => None,
            };
            if let Some(outcome) = finished {
                return Some(self.respond(outcome));
            }
            // Give questions asked in parallel a moment.
            let gathered = tokio::time::timeout(mrtr::GATHER, &mut work).await;
            if !parking {
                self.token.cancel();
                let stopped = RpcError::new(codes::REQUEST_ABORTED, "input required");
                return Some(self.respond(Err(stopped)));
            }
            if let Ok(outcome) = gathered {
                return Some(self.respond(outcome));
            }
            let inputs = inputs?;
            if let Err(answer) = self.park_round(&inputs, &mut work).await {
                return answer;
            }
        }
    }

    /// One park round: the questions asked so far answer the current round with an
    /// `InputRequiredResult` naming this node's parked request, then the request waits for the
    /// retry (at most `mrtr.state_ttl`), still driving `work`. `Ok` when the retry came (its
    /// answers are delivered and it takes the rest of the request's messages); `Err` when the run
    /// ends here, with the answer left to send (`None`: nothing is).
    async fn park_round<F>(
        &mut self,
        inputs: &Inputs,
        work: &mut std::pin::Pin<&mut F>,
    ) -> Result<(), Option<Value>>
    where
        F: std::future::Future<Output = Result<Value, RpcError>>,
    {
        let questions = inputs.take_asked();
        let max = self.app.cfg.mrtr.max_parked;
        if self.app.parking.len() >= max {
            self.token.cancel();
            let message = format!(
                "{max} requests already wait for input on this node (stateless.mrtr.max_parked); \
                 try again later"
            );
            let e = jsonrpc::error_response(Some(&self.id), codes::INTERNAL_ERROR, message, None);
            return Err(Some(e));
        }
        let park = self
            .app
            .parking
            .park(&self.principal, &self.token, &self.rounds);
        let node = self.app.node_id().to_owned();
        let issued = inputs.result(
            &self.app.mrtr,
            &self.app.cfg.mrtr,
            &self.principal,
            &questions,
            Some((&node, &park.id)),
        );
        let result = match issued {
            Ok(result) => result,
            Err(message) => {
                self.app.parking.forget(&park.id);
                self.token.cancel();
                let e =
                    jsonrpc::error_response(Some(&self.id), codes::INTERNAL_ERROR, message, None);
                return Err(Some(e));
            }
        };
        self.rounds.park();
        self.sink
            .send(Item::Final(jsonrpc::result_response(&self.id, result)))
            .await;
        // The round is answered: drop its stream's sender so that the stream ends now, not
        // when a retry or the state's expiry replaces it.
        self.sink.redirect(mpsc::channel(1).0);
        // Wait for the retry (at most the state's TTL), still driving the call so that its
        // own timers and transport keep running.
        let resumed = tokio::select! {
            resumed = park.resumed => resumed.ok(),
            () = tokio::time::sleep(self.app.cfg.mrtr.state_ttl) => {
                tracing::info!(method = %self.method,
                    "a parked request got no retry within stateless.mrtr.state_ttl; cancelled");
                None
            }
            outcome = work.as_mut() => {
                // E.g. the upstream's `timeout_ms`, which bounds the whole call, questions
                // included.
                tracing::info!(method = %self.method, error = ?outcome.err().map(|e| e.message),
                    "a parked request ended before its retry");
                None
            }
        };
        let Some(resumed) = resumed else {
            self.app.parking.forget(&park.id);
            self.token.cancel();
            return Err(None);
        };
        self.sink.redirect(resumed.tx);
        self.id = resumed.id;
        inputs.deliver(&resumed.answers);
        Ok(())
    }

    /// The final JSON-RPC response of `outcome`: -32021 when a question needed a capability
    /// the request lacked, the re-run mode's `InputRequiredResult` when it asked, else the
    /// outcome with `resultType`.
    fn respond(&self, outcome: Result<Value, RpcError>) -> Value {
        let inputs = self
            .inputs
            .as_deref()
            .filter(|i| i.mode() == mrtr::InputMode::Rerun);
        let needs_input = inputs
            .and_then(|i| i.input_required(&self.app.mrtr, &self.app.cfg.mrtr, &self.principal));
        if self.token.is_cancelled() && needs_input.is_none() {
            telemetry::stateless_cancelled(&self.method);
        }
        let missing = self.peer.missing_capability();
        match needs_input {
            _ if missing.is_some() => answer(&self.id, &self.method, outcome, missing),
            Some(Ok(result)) => jsonrpc::result_response(&self.id, result),
            Some(Err(message)) => {
                jsonrpc::error_response(Some(&self.id), codes::INTERNAL_ERROR, message, None)
            }
            None => answer(&self.id, &self.method, outcome, None),
        }
    }
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
        return Refusal::MissingCapability(vec![cap.to_owned()]).body(Some(id));
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
