//! The tool catalogue, `tools/call` dispatch, and the tools that need nothing from the client:
//! `echo`, `add`, `countdown` and `notify`.

use std::time::Duration;

use serde_json::{json, Map, Number, Value};
use switchboard_protocol::jsonrpc::notification;
use switchboard_protocol::Revision;

use super::results::{error_result, structured_result, text_result};
use super::schema::{self, count_arg, str_arg};
use super::{catalog, client, or_cancel, send, Failure, Route};
use crate::upstream::{RequestContext, RpcError};
use switchboard_telemetry::trace::logged_session;

/// The logger name of the `notifications/message` the `notify` tool sends.
const LOGGER: &str = "demo";

/// Every `tools/list` entry, in a stable order.
pub(super) fn definitions() -> Vec<Value> {
    let mut tools = local_definitions();
    tools.extend(client::definitions());
    tools
}

/// The entries of the tools defined in this module.
fn local_definitions() -> Vec<Value> {
    vec![
        json!({
            "name": "echo",
            "title": "Echo",
            "description": "Returns the given text unchanged.",
            "inputSchema": {
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The text to return."}},
                "required": ["text"],
                "additionalProperties": false
            }
        }),
        json!({
            "name": "regional_echo",
            "title": "Regional echo",
            "description": "Returns `<region>: <text>`. The region is mirrored into the \
                `Mcp-Param-Region` header (x-mcp-header, MCP 2026-07-28) so that gateways can \
                route on it without reading the body.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region",
                               "description": "Where the request should run."},
                    "text": {"type": "string", "description": "The text to return."}
                },
                "required": ["region", "text"],
                "additionalProperties": false
            }
        }),
        json!({
            "name": "add",
            "title": "Add",
            "description": "Adds two numbers and returns the sum.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "a": {"type": "number", "description": "The first addend."},
                    "b": {"type": "number", "description": "The second addend."}
                },
                "required": ["a", "b"],
                "additionalProperties": false
            },
            "outputSchema": {
                "type": "object",
                "properties": {"sum": {"type": "number"}},
                "required": ["sum"]
            }
        }),
        json!({
            "name": "countdown",
            "title": "Countdown",
            "description": "Counts down n steps, one per interval, reporting each step as a \
                progress notification when the request carries a progress token.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "n": {"type": "integer", "minimum": 0, "maximum": 100000, "default": 5,
                          "description": "Number of steps."},
                    "interval_ms": {"type": "integer", "minimum": 0, "maximum": 60000,
                                    "default": 1000,
                                    "description": "Milliseconds between steps."}
                },
                "required": [],
                "additionalProperties": false
            }
        }),
        json!({
            "name": "notify",
            "title": "Notify",
            "description": "Sends count log messages on the session's standalone stream, one per \
                interval, then a resources/updated notification for demo://greeting.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 5,
                              "description": "Number of log messages."},
                    "interval_ms": {"type": "integer", "minimum": 0, "maximum": 60000,
                                    "default": 500,
                                    "description": "Milliseconds between messages."},
                    "level": {"type": "string", "default": "info",
                              "enum": ["debug", "info", "notice", "warning", "error", "critical",
                                       "alert", "emergency"],
                              "description": "Log level of the messages."},
                    "tag": {"type": "string",
                            "description": "Echoed in every notification this call sends (data.tag \
                                of each message, _meta.tag of resources/updated), to tell the \
                                notifications of calls apart."}
                },
                "required": [],
                "additionalProperties": false
            }
        }),
    ]
}

/// `tools/call`: finds the tool, checks the arguments against its `inputSchema` and runs it.
pub(super) async fn call(
    tools: &[Value],
    params: &Value,
    ctx: &RequestContext,
) -> Result<Value, RpcError> {
    let name = super::str_param(params, "name")?;
    let Some(tool) = tools.iter().find(|t| t["name"] == name) else {
        return Err(unknown_tool(name));
    };
    let args = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(args)) => args.clone(),
        Some(_) => return Err(RpcError::invalid_params("`arguments` must be an object")),
    };
    tracing::debug!(tool = name, session = %logged_session(&ctx.session_id), "demo tools/call");
    let outcome = match schema::validate(&tool["inputSchema"], &args) {
        Ok(args) => run(name, &args, ctx).await,
        Err(reason) => Err(Failure::Tool(format!(
            "invalid arguments for `{name}`: {reason}"
        ))),
    };
    match outcome {
        Ok(result) => Ok(result),
        Err(Failure::Tool(text)) => Ok(error_result(&text)),
        Err(Failure::Rpc(e)) => Err(e),
    }
}

/// Runs a listed tool with validated arguments.
async fn run(
    name: &str,
    args: &Map<String, Value>,
    ctx: &RequestContext,
) -> Result<Value, Failure> {
    match name {
        "echo" => Ok(text_result(str_arg(args, "text"))),
        "regional_echo" => Ok(text_result(&format!(
            "{}: {}",
            str_arg(args, "region"),
            str_arg(args, "text")
        ))),
        "add" => add(args),
        "countdown" => countdown(args, ctx).await,
        "notify" => notify(args, ctx).await,
        "sample" => client::sample(args, ctx).await,
        "elicit" => client::elicit(args, ctx).await,
        "list_roots" => client::list_roots(ctx).await,
        other => Err(Failure::Rpc(unknown_tool(other))),
    }
}

/// -32602 naming the tool.
fn unknown_tool(name: &str) -> RpcError {
    RpcError {
        data: Some(json!({"name": name})),
        ..RpcError::invalid_params(format!("unknown tool: {name}"))
    }
}

/// `add`: integer arithmetic when both addends are integers and the sum fits in an i64,
/// floating point otherwise.
fn add(args: &Map<String, Value>) -> Result<Value, Failure> {
    let (a, b) = (&args["a"], &args["b"]);
    let sum = match (a.as_i64(), b.as_i64()) {
        (Some(x), Some(y)) if x.checked_add(y).is_some() => Number::from(x + y),
        _ => {
            let total = a.as_f64().unwrap_or(f64::NAN) + b.as_f64().unwrap_or(f64::NAN);
            Number::from_f64(total)
                .ok_or_else(|| Failure::Tool(format!("{a} + {b} is not a finite number")))?
        }
    };
    Ok(structured_result(&sum.to_string(), json!({"sum": sum})))
}

/// `countdown`: waits `n` intervals; after each, reports progress when the request carries a
/// progress token (MCP 2025-11-25, basic/utilities/progress).
async fn countdown(args: &Map<String, Value>, ctx: &RequestContext) -> Result<Value, Failure> {
    let n = count_arg(args, "n");
    let interval = Duration::from_millis(count_arg(args, "interval_ms"));
    for i in 1..=n {
        // A zero interval does not sleep: a timer of 0 still waits for the next 1 ms tick, which
        // made a 10,000-step countdown take 12 s (benchmarks fill event logs with it).
        let pause = async {
            if !interval.is_zero() {
                tokio::time::sleep(interval).await;
            }
        };
        or_cancel(&ctx.cancel, pause).await?;
        if let Some(token) = &ctx.progress_token {
            let mut params = json!({"progressToken": token, "progress": i, "total": n});
            // `message` arrived in 2025-03-26.
            if ctx.revision >= Revision::V2025_03_26 {
                params["message"] = json!(format!("{} of {n} done, {} to go", i, n - i));
            }
            send(
                ctx,
                Route::Request,
                notification("notifications/progress", params),
            )
            .await?;
        }
    }
    Ok(text_result("countdown finished"))
}

/// `notify`: `count` log messages on the standalone stream, one per interval, then
/// `notifications/resources/updated` for the greeting.
async fn notify(args: &Map<String, Value>, ctx: &RequestContext) -> Result<Value, Failure> {
    let count = count_arg(args, "count");
    let interval = Duration::from_millis(count_arg(args, "interval_ms"));
    let level = str_arg(args, "level");
    let tag = args.get("tag").and_then(Value::as_str);
    for seq in 1..=count {
        or_cancel(&ctx.cancel, tokio::time::sleep(interval)).await?;
        let mut data = json!({"seq": seq, "of": count});
        if let Some(tag) = tag {
            data["tag"] = json!(tag);
        }
        let params = json!({"level": level, "logger": LOGGER, "data": data});
        send(
            ctx,
            Route::Standalone,
            notification("notifications/message", params),
        )
        .await?;
    }
    let mut params = json!({"uri": catalog::GREETING_URI});
    if let Some(tag) = tag {
        params["_meta"] = json!({"tag": tag});
    }
    let updated = notification("notifications/resources/updated", params);
    send(ctx, Route::Standalone, updated).await?;
    let plural = if count == 1 { "" } else { "s" };
    Ok(text_result(&format!("sent {count} message{plural}")))
}
