//! Tests of the Streamable HTTP upstream against real servers on 127.0.0.1:0: an `rmcp` server
//! (`rmcp_server`), a hand-written axum server for edge cases (`edge`) and one with a standalone
//! GET stream (`get_server`).

mod edge;
mod edge_tests;
mod get_server;
mod get_tests;
mod rmcp_server;
mod rmcp_tests;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::response::IntoResponse;
use serde_json::{json, Value};
use switchboard_protocol::Revision;
use tokio_util::sync::CancellationToken;

use crate::upstream::{ClientPeer, PeerError, RequestContext, RpcError, Upstream};
use crate::LocalSession;

/// What the fake client does with a server-to-client request.
pub(crate) type Responder = Box<dyn Fn(&str, &Value) -> Result<Value, PeerError> + Send + Sync>;

/// A fake client: records notifications (request stream and standalone) and requests, and
/// answers requests with a closure.
pub(crate) struct FakePeer {
    pub notes: Mutex<Vec<Value>>,
    pub standalone: Mutex<Vec<Value>>,
    pub requests: Mutex<Vec<(String, Value)>>,
    responder: Responder,
}

impl FakePeer {
    /// A client that answers with `responder` (its `Ok` is the whole JSON-RPC response).
    pub fn answering(
        responder: impl Fn(&str, &Value) -> Result<Value, PeerError> + Send + Sync + 'static,
    ) -> Arc<FakePeer> {
        Arc::new(FakePeer {
            notes: Mutex::default(),
            standalone: Mutex::default(),
            requests: Mutex::default(),
            responder: Box::new(responder),
        })
    }

    /// A client that expects no requests.
    pub fn quiet() -> Arc<FakePeer> {
        FakePeer::answering(|m, _| Err(PeerError::Delivery(format!("unexpected {m}"))))
    }

    /// The notifications sent on the request's stream so far.
    pub fn notes(&self) -> Vec<Value> {
        self.notes.lock().unwrap().clone()
    }
}

#[async_trait]
impl ClientPeer for FakePeer {
    async fn notify(&self, message: Value) -> Result<(), PeerError> {
        self.notes.lock().unwrap().push(message);
        Ok(())
    }

    async fn notify_standalone(&self, message: Value) -> Result<(), PeerError> {
        self.standalone.lock().unwrap().push(message);
        Ok(())
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, PeerError> {
        self.requests
            .lock()
            .unwrap()
            .push((method.to_owned(), params.clone()));
        (self.responder)(method, &params)
    }
}

/// The `initialize` params a test client sent: revision 2025-11-25, sampling and roots.
pub(crate) fn client_params() -> Value {
    json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"sampling": {}, "roots": {"listChanged": true}},
        "clientInfo": {"name": "test-client", "version": "7.1"}
    })
}

/// A client session with [`client_params`].
pub(crate) fn session(id: &str) -> Arc<LocalSession> {
    Arc::new(LocalSession::new(id, client_params()))
}

/// A request context in `session` with `peer`, no progress token, a fresh cancel token.
pub(crate) fn ctx(session: &Arc<LocalSession>, peer: &Arc<FakePeer>) -> RequestContext {
    RequestContext {
        session_id: crate::SessionHandle::session_id(&**session).to_owned(),
        revision: Revision::V2025_11_25,
        client_capabilities: std::sync::Arc::new(client_params()["capabilities"].clone()),
        progress_token: None,
        cancel: CancellationToken::new(),
        peer: peer.clone(),
        session: session.clone(),
        principal: crate::Principal::anonymous(),
    }
}

/// `{"name": name, "arguments": args}`.
pub(crate) fn call(name: &str, args: Value) -> Value {
    json!({"name": name, "arguments": args})
}

/// `tools/call` of the servers' `echo` tool with `text`, in `session` with `peer`.
pub(crate) async fn echo(
    up: &dyn Upstream,
    session: &Arc<LocalSession>,
    peer: &Arc<FakePeer>,
    text: &str,
) -> Result<Value, RpcError> {
    let params = call("echo", json!({ "text": text }));
    up.request("tools/call", params, ctx(session, peer)).await
}

/// The text of the first content block of a tool result.
pub(crate) fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A URL on 127.0.0.1 where nothing listens (a port bound and released).
pub(crate) async fn refused_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}/mcp")
}

/// Serves `router` on 127.0.0.1:0 until `stop` fires; returns the base URL.
pub(crate) async fn serve(router: axum::Router, stop: CancellationToken) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
            .unwrap();
    });
    url
}

/// 404 with a JSON-RPC error body, as MCP SDK servers answer an unknown session id (a 404
/// without one is confirmed before the session counts as lost: see `http::loss`).
pub(crate) fn session_not_found() -> axum::response::Response {
    let body = json!({"jsonrpc": "2.0", "id": null,
        "error": {"code": -32001, "message": "Session not found"}});
    (axum::http::StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

/// Waits until `check` holds, for at most 5 s.
pub(crate) async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..250 {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
