//! `Mcp-Param-*` checks of 2026-07-28 `tools/call` requests (MCP 2026-07-28,
//! basic/transports/streamable-http, Server Behavior for Custom Headers: a server that processes
//! the body MUST reject a missing or mismatching mirrored header with 400 and -32020).
//!
//! Which arguments a tool mirrors comes from the upstream's `tools/list` (the `x-mcp-header`
//! annotations of each `inputSchema`, [`switchboard_protocol::param_headers`]). Each node keeps
//! the last list it fetched: fetched before the call that first needs it, and before a call
//! naming a tool not in it once the list is older than [`MIN_AGE`]; a list older than
//! [`MAX_AGE`] is still used while one fetch refreshes it in the background. One fetch at a
//! time; a failed fetch leaves the last list (calls of tools it does not know are not checked,
//! and the upstream decides). The fetch runs in an ephemeral upstream session like any
//! stateless request.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http::HeaderMap;
use serde_json::{json, Map, Value};
use switchboard_protocol::param_headers;
use switchboard_protocol::{Revision, StreamId};
use switchboard_upstream::{ClientPeer, LocalSession, PeerError, RequestContext};
use tokio_util::sync::CancellationToken;

use super::refusal::Refusal;
use crate::state::names::EPHEMERAL_PREFIX;
use crate::state::App;

/// A list younger than this is not fetched again for an unknown tool name.
pub const MIN_AGE: Duration = Duration::from_secs(5);
/// A list older than this is fetched again before the next call.
pub const MAX_AGE: Duration = Duration::from_secs(60);
/// How long one page of the list may take.
const PAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most pages one fetch reads.
const MAX_PAGES: usize = 100;

/// Checks the `Mcp-Param-*` headers of a `tools/call` with `params` against its arguments.
pub async fn check(app: &App, h: &HeaderMap, params: &Value) -> Result<(), Refusal> {
    let Some(tool) = params.get("name").and_then(Value::as_str) else {
        return Ok(());
    };
    let headers = &app.param_headers;
    if headers.known.needed(tool, MIN_AGE) {
        let _one = headers.fetching.lock().await;
        if headers.known.needed(tool, MIN_AGE) {
            fetch(app).await;
        }
    } else if headers.known.stale(tool, MIN_AGE, MAX_AGE) {
        // Old but usable: this call goes on with it, one fetch refreshes it in the background.
        let app = app.clone();
        tokio::spawn(async move {
            if let Ok(_one) = app.param_headers.fetching.try_lock() {
                fetch(&app).await;
            }
        });
    }
    let decls = headers.known.get(tool).unwrap_or_default();
    if decls.is_empty() {
        return Ok(());
    }
    let mut sent = Map::new();
    for (name, value) in h {
        if name.as_str().starts_with(param_headers::PREFIX) {
            let value = value
                .to_str()
                .map_err(|_| Refusal::HeaderMismatch(format!("{name} is not visible ASCII")))?;
            let earlier = sent.insert(name.as_str().to_owned(), Value::String(value.to_owned()));
            if earlier.is_some() {
                return Err(Refusal::HeaderMismatch(format!(
                    "{name} is sent more than once"
                )));
            }
        }
    }
    let arguments = params.get("arguments").unwrap_or(&Value::Null);
    param_headers::check(&decls, arguments, &sent).map_err(Refusal::HeaderMismatch)
}

/// Reads every page of the upstream's `tools/list` into the node's knowledge.
async fn fetch(app: &App) {
    let sid = format!("{EPHEMERAL_PREFIX}{}", StreamId::generate());
    let init = json!({
        "protocolVersion": Revision::LATEST.as_str(),
        "capabilities": {},
        "clientInfo": {"name": "switchboard", "version": env!("CARGO_PKG_VERSION")},
    });
    let session = Arc::new(LocalSession::new(sid.clone(), init));
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut complete = false;
    for _ in 0..MAX_PAGES {
        let ctx = RequestContext {
            session_id: sid.clone(),
            revision: Revision::LATEST,
            client_capabilities: std::sync::Arc::new(json!({})),
            progress_token: None,
            cancel: CancellationToken::new(),
            peer: Arc::new(Silent),
            session: session.clone(),
            // The node's own list: never filtered by a client's policy, never shown to one
            // (each call is still checked against its caller's policy by the aggregate).
            principal: switchboard_upstream::Principal::internal(),
        };
        let params = cursor
            .take()
            .map_or_else(|| json!({}), |c| json!({"cursor": c}));
        let page = tokio::time::timeout(
            PAGE_TIMEOUT,
            app.upstream.request("tools/list", params, ctx),
        );
        match page.await {
            Ok(Ok(page)) => {
                tools.extend(page["tools"].as_array().cloned().unwrap_or_default());
                cursor = page["nextCursor"].as_str().map(str::to_owned);
                if cursor.is_none() {
                    complete = true;
                    break;
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e.message, "tools/list for Mcp-Param-* checks failed; keeping the last list");
                break;
            }
            Err(_) => {
                tracing::warn!(
                    "tools/list for Mcp-Param-* checks timed out; keeping the last list"
                );
                break;
            }
        }
    }
    app.upstream.session_ended(&sid).await;
    if complete {
        app.param_headers.known.replace(tools.iter());
    }
}

/// The peer of the node's own `tools/list`: nobody listens.
struct Silent;

#[async_trait]
impl ClientPeer for Silent {
    async fn notify(&self, _message: Value) -> Result<(), PeerError> {
        Ok(())
    }

    async fn notify_standalone(&self, _message: Value) -> Result<(), PeerError> {
        Ok(())
    }

    async fn request(&self, method: &str, _params: Value) -> Result<Value, PeerError> {
        Err(PeerError::Delivery(format!(
            "{method} during the node's own tools/list"
        )))
    }
}
