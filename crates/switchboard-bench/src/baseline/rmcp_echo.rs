//! `serve-rmcp`: the baseline a user would run without Switchboard, an `rmcp` stateful
//! Streamable HTTP server (sessions in memory, [`LocalSessionManager`]) with one tool, `echo`,
//! of the same shape as Switchboard's demo `echo`: `{"text": string}` in, that text as one text
//! block out.

use std::sync::Arc;

use rmcp::handler::server::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

/// The arguments of `echo`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct EchoArgs {
    /// The text to return.
    pub text: String,
}

/// The MCP server of one session: its tool router is built once per session, as in rmcp's
/// own examples.
#[derive(Clone)]
pub struct EchoServer {
    tool_router: ToolRouter<EchoServer>,
}

impl Default for EchoServer {
    fn default() -> EchoServer {
        EchoServer {
            tool_router: EchoServer::tool_router(),
        }
    }
}

#[tool_router]
impl EchoServer {
    /// Returns the given text unchanged.
    #[tool(description = "Returns the given text unchanged.")]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text(text)])
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for EchoServer {}

/// The router: the Streamable HTTP service on `/mcp`, stateful, sessions in memory. The
/// server stops its sessions when `cancel` is cancelled.
pub fn router(cancel: CancellationToken) -> axum::Router {
    let config = StreamableHttpServerConfig::default().with_cancellation_token(cancel);
    let service = StreamableHttpService::new(
        || Ok(EchoServer::default()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    axum::Router::new().nest_service("/mcp", service)
}
