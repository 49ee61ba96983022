//! A real MCP server for the tests, built with `rmcp` and served over Streamable HTTP.
//! Tools: `echo`, `slow_echo`, `whoami` (the client as the server saw it in `initialize`),
//! `progress` (progress notifications with the request's token) and `sample` (asks the client
//! for sampling).

#![allow(deprecated)] // rmcp marks sampling deprecated (SEP-2577); the revisions we test have it.

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{
    CreateMessageRequestParams, Implementation, ProgressNotificationParam, RequestMetaObject,
    SamplingMessage, ServerCapabilities, ServerConfig,
};
use rmcp::service::Peer;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

/// The fixture server.
#[derive(Clone)]
pub(crate) struct Fixture {
    #[allow(dead_code)] // read by the code `tool_handler` generates
    tool_router: ToolRouter<Self>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct Text {
    text: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct Slow {
    text: String,
    ms: u64,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct Steps {
    steps: u32,
}

#[tool_router]
impl Fixture {
    fn new() -> Fixture {
        Fixture {
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Returns its text")]
    fn echo(&self, Parameters(Text { text }): Parameters<Text>) -> String {
        text
    }

    #[tool(description = "Returns its text after ms milliseconds")]
    async fn slow_echo(&self, Parameters(Slow { text, ms }): Parameters<Slow>) -> String {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        text
    }

    #[tool(description = "The client's initialize params as this server received them")]
    fn whoami(&self, client: Peer<RoleServer>) -> String {
        let info = client.peer_info();
        serde_json::to_string(&info.as_deref()).unwrap()
    }

    #[tool(description = "Sends progress notifications with the request's token")]
    async fn progress(
        &self,
        Parameters(Steps { steps }): Parameters<Steps>,
        meta: RequestMetaObject,
        client: Peer<RoleServer>,
    ) -> Result<String, ErrorData> {
        let token = meta
            .get_progress_token()
            .ok_or_else(|| ErrorData::invalid_params("a progress token is required", None))?;
        for step in 1..=steps {
            let note = ProgressNotificationParam::new(token.clone(), f64::from(step))
                .with_total(f64::from(steps));
            client
                .notify_progress(note)
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        }
        Ok("progress done".into())
    }

    #[tool(description = "Asks the client for a completion and returns its answer")]
    async fn sample(
        &self,
        Parameters(Text { text }): Parameters<Text>,
        client: Peer<RoleServer>,
    ) -> Result<String, ErrorData> {
        let params = CreateMessageRequestParams::new(vec![SamplingMessage::user_text(text)], 50);
        let answer = client
            .create_message(params)
            .await
            .map_err(|e| ErrorData::internal_error(format!("sampling failed: {e}"), None))?;
        Ok(serde_json::to_string(&answer).unwrap())
    }
}

#[tool_handler]
impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("rmcp-fixture", "1.2.3"))
            .with_instructions("the rmcp fixture")
    }
}

/// Serves the fixture at `<base>/mcp` until `stop` fires; returns the endpoint URL. With
/// `stateful` false the server mints no session id (rmcp's stateless mode).
pub(crate) async fn start(stop: &CancellationToken, stateful: bool) -> String {
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop.child_token())
        .with_legacy_session_mode(stateful)
        .with_sse_keep_alive(None);
    let service = StreamableHttpService::new(
        || Ok(Fixture::new()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    format!("{}/mcp", super::serve(router, stop.clone()).await)
}
