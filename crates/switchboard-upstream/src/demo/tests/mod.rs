//! Unit tests of the demo server, driven through [`Upstream::request`] with a fake client peer.

mod catalog;
mod client;
mod tools;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{json, Value};
use switchboard_protocol::{codes, Revision};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::DemoUpstream;
use crate::upstream::{ClientPeer, PeerError, RequestContext, RpcError, Upstream};

/// What the fake client does with a server-to-client request.
pub(super) enum Reply {
    /// Answers with this whole JSON-RPC response.
    Answer(Value),
    /// The peer fails with this error.
    Fail(PeerError),
    /// Never answers.
    Hang,
}

/// A notification the fake peer received.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Sent {
    /// `"request"` or `"standalone"`.
    pub route: &'static str,
    /// Milliseconds since the peer was made (tokio time, so exact under paused time).
    pub at_ms: u128,
    /// The JSON-RPC notification.
    pub message: Value,
}

/// How the fake client answers a request: (method, params) to a [`Reply`].
type Responder = Box<dyn Fn(&str, &Value) -> Reply + Send + Sync>;

/// The responder of peers that expect no requests.
fn unexpected_request(method: &str, _params: &Value) -> Reply {
    Reply::Fail(PeerError::Delivery(format!("unexpected request {method}")))
}

/// A fake [`ClientPeer`] that records what it is sent and answers requests with a closure.
pub(super) struct FakePeer {
    start: Instant,
    sent: Mutex<Vec<Sent>>,
    requests: Mutex<Vec<(String, Value)>>,
    responder: Responder,
    notify_error: Option<PeerError>,
}

impl FakePeer {
    /// A peer that answers every request with `responder`.
    pub fn answering(
        responder: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static,
    ) -> Arc<FakePeer> {
        FakePeer::build(Box::new(responder), None)
    }

    /// A peer for tools that send no requests (any request fails with a delivery error).
    pub fn quiet() -> Arc<FakePeer> {
        FakePeer::answering(unexpected_request)
    }

    /// A peer whose notifications all fail with `error`.
    pub fn failing_notifications(error: PeerError) -> Arc<FakePeer> {
        FakePeer::build(Box::new(unexpected_request), Some(error))
    }

    fn build(responder: Responder, notify_error: Option<PeerError>) -> Arc<FakePeer> {
        Arc::new(FakePeer {
            start: Instant::now(),
            sent: Mutex::default(),
            requests: Mutex::default(),
            responder,
            notify_error,
        })
    }

    /// The notifications received so far.
    pub fn sent(&self) -> Vec<Sent> {
        self.sent.lock().unwrap().clone()
    }

    /// The requests received so far, as (method, params).
    pub fn requests(&self) -> Vec<(String, Value)> {
        self.requests.lock().unwrap().clone()
    }

    fn record(&self, route: &'static str, message: Value) -> Result<(), PeerError> {
        if let Some(e) = &self.notify_error {
            return Err(e.clone());
        }
        let at_ms = self.start.elapsed().as_millis();
        self.sent.lock().unwrap().push(Sent {
            route,
            at_ms,
            message,
        });
        Ok(())
    }
}

#[async_trait]
impl ClientPeer for FakePeer {
    async fn notify(&self, message: Value) -> Result<(), PeerError> {
        self.record("request", message)
    }

    async fn notify_standalone(&self, message: Value) -> Result<(), PeerError> {
        self.record("standalone", message)
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, PeerError> {
        let reply = (self.responder)(method, &params);
        self.requests
            .lock()
            .unwrap()
            .push((method.to_owned(), params));
        match reply {
            Reply::Answer(answer) => Ok(answer),
            Reply::Fail(e) => Err(e),
            Reply::Hang => std::future::pending().await,
        }
    }
}

/// A request context on `peer`, with `token` as the progress token.
pub(super) fn ctx(peer: &Arc<FakePeer>, token: Option<Value>) -> RequestContext {
    RequestContext {
        session_id: "test-session".into(),
        revision: Revision::LATEST,
        client_capabilities: std::sync::Arc::new(
            json!({"sampling": {}, "elicitation": {}, "roots": {}}),
        ),
        progress_token: token,
        cancel: CancellationToken::new(),
        peer: peer.clone(),
        session: Arc::new(crate::LocalSession::new("test-session", json!({}))),
        principal: crate::Principal::anonymous(),
    }
}

/// Sends one request to a fresh demo server.
pub(super) async fn send(
    method: &str,
    params: Value,
    ctx: RequestContext,
) -> Result<Value, RpcError> {
    DemoUpstream::new().request(method, params, ctx).await
}

/// Calls one tool on a fresh demo server.
pub(super) async fn call(tool: &str, args: Value, ctx: RequestContext) -> Result<Value, RpcError> {
    send("tools/call", json!({"name": tool, "arguments": args}), ctx).await
}

/// The text of a tool result's first content block.
pub(super) fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().expect("a text block")
}

/// Asserts that `result` is a tool execution error whose text contains `needle`.
pub(super) fn assert_tool_error(result: &Value, needle: &str) {
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        text(result).contains(needle),
        "{:?} should contain {needle:?}",
        text(result)
    );
}

#[test]
fn initialize_pieces() {
    let demo = DemoUpstream::default();
    assert_eq!(demo.name(), "demo");
    assert_eq!(
        demo.capabilities(),
        json!({"tools":{"listChanged":false},"resources":{"subscribe":true,"listChanged":false},
               "prompts":{"listChanged":false},"logging":{},"completions":{}})
    );
    assert_eq!(
        demo.server_info(),
        json!({"name": "switchboard-demo", "version": env!("CARGO_PKG_VERSION")})
    );
    assert!(demo.instructions().is_some_and(|i| i.contains("countdown")));
    // The instructions name every tool `tools/list` offers.
    let instructions = demo.instructions().unwrap_or_default();
    for tool in &demo.tools {
        let name = tool["name"].as_str().unwrap_or_default();
        assert!(
            instructions.contains(name),
            "{name} missing from {instructions}"
        );
    }
}

#[tokio::test]
async fn unknown_method_is_method_not_found() {
    let err = send("tools/frobnicate", json!({}), ctx(&FakePeer::quiet(), None))
        .await
        .unwrap_err();
    assert_eq!(err, RpcError::method_not_found("tools/frobnicate"));
    // Session-level methods are the node's business, not the upstream's.
    let err = send("ping", json!({}), ctx(&FakePeer::quiet(), None))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::METHOD_NOT_FOUND);
}

#[tokio::test]
async fn an_already_cancelled_request_is_aborted() {
    let c = ctx(&FakePeer::quiet(), None);
    c.cancel.cancel();
    let err = call("echo", json!({"text": "hi"}), c).await.unwrap_err();
    assert_eq!(err.code, codes::REQUEST_ABORTED);
}
