//! The built-in demo server: a small, stateless MCP server that exercises every path of the
//! cluster (plain results, progress, server-to-client requests, standalone notifications,
//! resources, prompts and completions). User documentation: `docs/demo-upstream.md`.
//!
//! Submodules:
//! - `tools`: the tool catalogue, `tools/call` dispatch and the local tools (echo, add,
//!   countdown, notify).
//! - `client`: the tools that talk back to the client (sample, elicit, list_roots).
//! - `catalog`: the `demo://greeting` resource, the `greet` prompt and completions.
//! - `results`: the shapes of a tool result (text, `structuredContent`, `isError`), shared by
//!   `tools` and `client`.
//! - `schema`: the small JSON Schema subset that tool arguments are checked against.
//!
//! Error convention for `tools/call`: a malformed call (no `name`, `arguments` not an object) or
//! an unknown tool is a JSON-RPC error -32602; arguments that do not fit the tool's `inputSchema`,
//! and failures of the client's side of a server-to-client request, are tool results with
//! `isError: true` so that the model can read and correct them (MCP 2025-11-25, server/tools,
//! Error Handling). A cancelled request ends with JSON-RPC error -32004.

mod catalog;
mod client;
mod results;
mod schema;
mod tools;

#[cfg(test)]
mod tests;

use std::future::Future;

use async_trait::async_trait;
use serde_json::{json, Value};
use switchboard_protocol::codes;
use tokio_util::sync::CancellationToken;

use crate::upstream::{PeerError, RequestContext, RpcError, Upstream};

/// The name the demo upstream is configured under.
pub const NAME: &str = "demo";

/// The `instructions` the demo server sends in `initialize`.
const INSTRUCTIONS: &str = "Switchboard demo server. Tools: echo and add (plain results), \
regional_echo (its region mirrored into the Mcp-Param-Region header), countdown (progress \
notifications), notify (log messages on the standalone stream), sample (sampling), elicit \
(elicitation) and list_roots (roots). Resource: demo://greeting. Prompt: greet.";

/// The built-in demo MCP server.
///
/// Stateless: every session sees the same tools, resource and prompt, so any node of the cluster
/// can serve any request of any session.
#[derive(Debug)]
pub struct DemoUpstream {
    /// The `tools/list` entries, built once.
    tools: Vec<Value>,
}

impl DemoUpstream {
    /// A demo server.
    pub fn new() -> DemoUpstream {
        DemoUpstream {
            tools: tools::definitions(),
        }
    }
}

impl Default for DemoUpstream {
    fn default() -> DemoUpstream {
        DemoUpstream::new()
    }
}

#[async_trait]
impl Upstream for DemoUpstream {
    fn name(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> Value {
        json!({
            "tools": {"listChanged": false},
            "resources": {"subscribe": true, "listChanged": false},
            "prompts": {"listChanged": false},
            "logging": {},
            "completions": {}
        })
    }

    fn server_info(&self) -> Value {
        json!({"name": "switchboard-demo", "version": env!("CARGO_PKG_VERSION")})
    }

    /// The demo keeps nothing per session.
    fn serves_stateless(&self) -> bool {
        true
    }

    fn instructions(&self) -> Option<String> {
        Some(INSTRUCTIONS.to_owned())
    }

    async fn request(
        &self,
        method: &str,
        params: Value,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        if ctx.cancel.is_cancelled() {
            return Err(cancelled());
        }
        match method {
            "tools/list" => Ok(json!({"tools": self.tools})),
            "tools/call" => tools::call(&self.tools, &params, &ctx).await,
            "resources/list" => Ok(catalog::list_resources()),
            "resources/templates/list" => Ok(json!({"resourceTemplates": []})),
            "resources/read" => catalog::read_resource(&params),
            "resources/subscribe" => catalog::subscribe(&params),
            "resources/unsubscribe" => catalog::unsubscribe(&params),
            "prompts/list" => Ok(catalog::list_prompts()),
            "prompts/get" => catalog::get_prompt(&params),
            "completion/complete" => catalog::complete(&params),
            other => Err(RpcError::method_not_found(other)),
        }
    }
}

/// How a tool call can fail.
#[derive(Debug)]
enum Failure {
    /// A tool execution error, answered as a result with `isError: true`.
    Tool(String),
    /// A protocol error, answered as a JSON-RPC error.
    Rpc(RpcError),
}

/// The error a cancelled request ends with (-32004).
fn cancelled() -> RpcError {
    RpcError::new(codes::REQUEST_ABORTED, "request cancelled")
}

/// Runs `fut` unless `cancel` fires first, in which case the request ends with [`cancelled`].
async fn or_cancel<F: Future>(cancel: &CancellationToken, fut: F) -> Result<F::Output, Failure> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(Failure::Rpc(cancelled())),
        out = fut => Ok(out),
    }
}

/// Where a notification goes.
#[derive(Clone, Copy, Debug)]
enum Route {
    /// The current request's response stream ([`crate::ClientPeer::notify`]).
    Request,
    /// The session's standalone stream ([`crate::ClientPeer::notify_standalone`]).
    Standalone,
}

/// Sends one notification, giving up when the request is cancelled. A delivery failure ends the
/// request with -32603: it is the cluster's fault, not something the model could correct.
async fn send(ctx: &RequestContext, route: Route, message: Value) -> Result<(), Failure> {
    let delivery = async {
        match route {
            Route::Request => ctx.peer.notify(message).await,
            Route::Standalone => ctx.peer.notify_standalone(message).await,
        }
    };
    match or_cancel(&ctx.cancel, delivery).await? {
        Ok(()) => Ok(()),
        Err(PeerError::Cancelled) => Err(Failure::Rpc(cancelled())),
        Err(e) => Err(Failure::Rpc(RpcError::new(
            codes::INTERNAL_ERROR,
            format!("could not deliver a notification: {e}"),
        ))),
    }
}

/// A required string member of `params`, or -32602 naming it.
fn str_param<'a>(params: &'a Value, key: &str) -> Result<&'a str, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(format!("missing or non-string parameter `{key}`")))
}
