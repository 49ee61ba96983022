//! The rmcp server the replica tests run: tools that show which replica did what.

#![allow(deprecated)] // sampling is legacy in rmcp's eyes; 2025-11-25 has it.

use std::time::Duration;

use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{CustomRequest, ProgressNotificationParam, ServerNotification, ServerRequest};
use rmcp::service::RequestContext;
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use serde_json::json;
use switchboard_rmcp::ResponseStream;

/// The test server of one session.
#[derive(Clone)]
pub struct TestServer {
    tool_router: ToolRouter<TestServer>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Chatter {
    /// Log messages to send on the call's own stream before answering.
    n: u32,
    /// Close the call's stream first (the client resumes it).
    close: bool,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Steps {
    /// Progress notifications to send.
    n: u32,
    /// Milliseconds before each.
    ms: u64,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Wait {
    /// Milliseconds before the answer.
    ms: u64,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Text {
    text: String,
}

fn log_message(data: &str) -> Result<ServerNotification, ErrorData> {
    let note =
        json!({"method": "notifications/message", "params": {"level": "info", "data": data}});
    serde_json::from_value(note).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

fn internal(e: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(e.to_string(), None)
}

#[tool_router]
impl TestServer {
    pub fn new() -> TestServer {
        TestServer {
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "The client's name, as its initialize said")]
    fn whoami(&self, context: RequestContext<RoleServer>) -> String {
        let info = context.peer.peer_info();
        info.map(|i| i.client_info.name.clone()).unwrap_or_default()
    }

    #[tool(
        description = "n log messages on the call's stream (optionally closed first), then done"
    )]
    async fn chatter(
        &self,
        Parameters(Chatter { n, close }): Parameters<Chatter>,
        context: RequestContext<RoleServer>,
    ) -> Result<String, ErrorData> {
        let stream = context
            .extensions
            .get::<ResponseStream>()
            .cloned()
            .ok_or_else(|| internal("no ResponseStream"))?;
        if close {
            stream.close();
        }
        for i in 1..=n {
            stream
                .notify(log_message(&format!("line {i}"))?)
                .await
                .map_err(internal)?;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok("done".into())
    }

    #[tool(description = "n progress notifications `ms` apart, with the call's progress token")]
    async fn progress(
        &self,
        Parameters(Steps { n, ms }): Parameters<Steps>,
        context: RequestContext<RoleServer>,
    ) -> Result<String, ErrorData> {
        let token = context
            .meta
            .get_progress_token()
            .ok_or_else(|| internal("no progress token"))?;
        for i in 1..=n {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let step = ProgressNotificationParam::new(token.clone(), f64::from(i));
            context.peer.notify_progress(step).await.map_err(internal)?;
        }
        Ok("counted".into())
    }

    #[tool(description = "A log message on the session's standalone stream")]
    async fn announce(
        &self,
        Parameters(Text { text }): Parameters<Text>,
        context: RequestContext<RoleServer>,
    ) -> Result<String, ErrorData> {
        context
            .peer
            .send_notification(log_message(&text)?)
            .await
            .map_err(internal)?;
        Ok("announced".into())
    }

    #[tool(description = "Asks the client to sample `text`; answers what it said")]
    async fn ask(
        &self,
        Parameters(Text { text }): Parameters<Text>,
        context: RequestContext<RoleServer>,
    ) -> Result<String, ErrorData> {
        let params = json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": 10,
        });
        let request = CustomRequest::new("sampling/createMessage", Some(params));
        let result = context
            .peer
            .send_request(ServerRequest::CustomRequest(request))
            .await
            .map_err(internal)?;
        let result = serde_json::to_value(result).map_err(internal)?;
        Ok(result["content"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }

    #[tool(description = "Answers `waited` after `ms` milliseconds")]
    async fn wait(&self, Parameters(Wait { ms }): Parameters<Wait>) -> String {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        "waited".into()
    }

    #[tool(description = "Answers after 10 s unless cancelled")]
    async fn slow(&self) -> String {
        tokio::time::sleep(Duration::from_secs(10)).await;
        "finished".into()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for TestServer {}
