//! The MCP server of one session, written with rmcp's `ServerHandler`: it answers every request
//! the conformance suite's server scenarios send, from the definitions in `catalog`.
//!
//! Messages are built as MCP JSON and converted to rmcp's types (the scenarios fix the exact
//! JSON). The handler keeps no state: on any replica, a session's handler is rebuilt from its
//! `initialize` params alone, so nothing it would remember could be trusted anyway.

#![allow(deprecated)] // rmcp marks sampling and resources/subscribe as legacy; 2025-11-25 has them.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, CustomRequest,
    GetPromptRequestParams, GetPromptResponse, Implementation, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    ServerNotification, ServerRequest, SetLevelRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use switchboard_rmcp::ResponseStream;

use crate::catalog::{self, text, SCHEMA_2020_12_TOOL};

/// The conformance server.
#[derive(Clone, Debug, Default)]
pub struct Conformance;

/// rmcp's type `T` from its MCP JSON.
fn typed<T: DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// A `tools/call` result with `content` only.
fn content(blocks: Value) -> Value {
    json!({ "content": blocks })
}

impl ServerHandler for Conformance {
    fn get_info(&self) -> ServerConfig {
        let capabilities: ServerCapabilities = serde_json::from_value(json!({
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {"listChanged": true},
            "logging": {},
            "completions": {},
        }))
        .expect("capabilities are valid MCP JSON");
        let mut info = InitializeResult::new(capabilities);
        info.server_info =
            Implementation::new("switchboard-rmcp-replicated", env!("CARGO_PKG_VERSION"));
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        typed(json!({ "tools": catalog::tools() }))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let result = call(&request.name, &args, &context).await?;
        Ok(CallToolResponse::Complete(typed(result)?))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        typed(json!({ "resources": catalog::resources() }))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        typed(json!({ "resourceTemplates": catalog::resource_templates() }))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let contents = catalog::read(&request.uri).ok_or_else(|| {
            ErrorData::resource_not_found(format!("no resource {}", request.uri), None)
        })?;
        Ok(ReadResourceResponse::Complete(typed(
            json!({ "contents": contents }),
        )?))
    }

    async fn subscribe(
        &self,
        _request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        typed(json!({ "prompts": catalog::prompts() }))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let messages = catalog::prompt_messages(&request.name, &args).ok_or_else(|| {
            ErrorData::invalid_params(format!("no prompt {}", request.name), None)
        })?;
        Ok(GetPromptResponse::Complete(typed(
            json!({ "messages": messages }),
        )?))
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let request = serde_json::to_value(&request).unwrap_or_default();
        let values = catalog::completions(&request["ref"], &request["argument"]);
        let total = values.len();
        typed(json!({"completion": {"values": values, "total": total, "hasMore": false}}))
    }

    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }
}

/// Runs tool `name`; its `tools/call` result as MCP JSON.
async fn call(
    name: &str,
    args: &Value,
    context: &RequestContext<RoleServer>,
) -> Result<Value, ErrorData> {
    if let Some(blocks) = catalog::fixed_content(name) {
        return Ok(content(blocks));
    }
    let arg = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match name {
        "test_error_handling" => Ok(json!({
            "content": [text("This tool intentionally returns an error for testing")],
            "isError": true,
        })),
        SCHEMA_2020_12_TOOL => Ok(content(json!([text(&format!("Received: {args}"))]))),
        "test_tool_with_logging" => logging(context).await,
        "test_tool_with_progress" => progress(context).await,
        "test_reconnection" => reconnection(context).await,
        "test_sampling" => sampling(&arg("prompt"), context).await,
        "test_elicitation" => {
            let properties = json!({
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            });
            elicit(
                context,
                &arg("message"),
                properties,
                json!(["username", "email"]),
            )
            .await
        }
        "test_elicitation_sep1034_defaults" => {
            let properties = catalog::sep1034_properties();
            elicit(context, "Please review the defaults", properties, json!([])).await
        }
        "test_elicitation_sep1330_enums" => {
            elicit(
                context,
                "Pick options",
                catalog::sep1330_properties(),
                json!([]),
            )
            .await
        }
        _ => Err(ErrorData::invalid_params(format!("no tool {name}"), None)),
    }
}

/// Three `info` log messages on the call's own stream (through [`ResponseStream`]: rmcp would
/// put them on the standalone stream), 50 ms apart.
async fn logging(context: &RequestContext<RoleServer>) -> Result<Value, ErrorData> {
    let steps = [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ];
    for (i, data) in steps.into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let params = json!({"level": "info", "logger": "conformance", "data": data});
        let note: ServerNotification =
            typed(json!({"method": "notifications/message", "params": params}))?;
        match context.extensions.get::<ResponseStream>() {
            Some(stream) => stream.notify(note).await.map_err(internal)?,
            None => context
                .peer
                .send_notification(note)
                .await
                .map_err(internal)?,
        }
    }
    Ok(content(json!([text(
        "Tool with logging executed successfully"
    )])))
}

/// Progress 0, 50 and 100 of 100, 50 ms apart, when the request has a progress token.
async fn progress(context: &RequestContext<RoleServer>) -> Result<Value, ErrorData> {
    let token = context.meta.get_progress_token();
    for step in [0, 50, 100] {
        if step > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if let Some(token) = &token {
            let params = json!({
                "progressToken": token,
                "progress": step,
                "total": 100,
                "message": format!("{step} of 100"),
            });
            let note: ServerNotification =
                typed(json!({"method": "notifications/progress", "params": params}))?;
            context
                .peer
                .send_notification(note)
                .await
                .map_err(internal)?;
        }
    }
    let token = serde_json::to_string(&token).unwrap_or_default();
    Ok(content(json!([text(&format!(
        "Progress done (token {token})"
    ))])))
}

/// Closes the call's SSE stream before answering (SEP-1699): the client resumes it with
/// `Last-Event-ID`, on any replica, and gets the answer from the log.
async fn reconnection(context: &RequestContext<RoleServer>) -> Result<Value, ErrorData> {
    if let Some(stream) = context.extensions.get::<ResponseStream>() {
        stream.close();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(content(json!([text(
        "Reconnection test completed successfully"
    )])))
}

async fn sampling(prompt: &str, context: &RequestContext<RoleServer>) -> Result<Value, ErrorData> {
    let params = json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": 100,
    });
    let result = ask(context, "sampling/createMessage", params).await?;
    let reply = match result["content"]["text"].as_str() {
        Some(t) => t.to_owned(),
        None => result["content"].to_string(),
    };
    Ok(content(json!([text(&format!("LLM response: {reply}"))])))
}

async fn elicit(
    context: &RequestContext<RoleServer>,
    message: &str,
    properties: Value,
    required: Value,
) -> Result<Value, ErrorData> {
    let schema = json!({"type": "object", "properties": properties, "required": required});
    let params = json!({"mode": "form", "message": message, "requestedSchema": schema});
    let result = ask(context, "elicitation/create", params).await?;
    let answered = result.get("content").cloned().unwrap_or_else(|| json!({}));
    let action = result["action"].as_str().unwrap_or_default();
    let summary = format!("Elicitation completed: action={action}, content={answered}");
    Ok(content(json!([text(&summary)])))
}

/// Sends a server-to-client request as raw MCP JSON (the scenarios fix its exact shape) on the
/// call's stream, and answers the client's result as JSON.
async fn ask(
    context: &RequestContext<RoleServer>,
    method: &str,
    params: Value,
) -> Result<Value, ErrorData> {
    let request = ServerRequest::CustomRequest(CustomRequest::new(method, Some(params)));
    let result = context.peer.send_request(request).await.map_err(internal)?;
    serde_json::to_value(result).map_err(internal)
}

fn internal(e: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(e.to_string(), None)
}
