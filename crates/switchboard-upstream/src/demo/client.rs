//! The tools that send a request to the client and report its answer: `sample`
//! (`sampling/createMessage`), `elicit` (`elicitation/create`) and `list_roots` (`roots/list`).
//!
//! Whatever keeps the client from answering (missing capability, timeout, delivery failure) and
//! any JSON-RPC error the client answers with become a tool result with `isError: true`; only a
//! cancelled request ends with a JSON-RPC error (-32004).

use serde_json::{json, Map, Value};

use super::results::structured_result;
use super::schema::{count_arg, str_arg};
use super::{cancelled, or_cancel, Failure};
use crate::upstream::{PeerError, RequestContext};

/// The `tools/list` entries of this module's tools.
pub(super) fn definitions() -> Vec<Value> {
    vec![
        json!({
            "name": "sample",
            "title": "Sample",
            "description": "Asks the client's LLM to answer a prompt (sampling/createMessage) and \
                returns the answer. Needs the client's `sampling` capability.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "prompt": {"type": "string", "description": "The user message to send."},
                    "max_tokens": {"type": "integer", "minimum": 1, "maximum": 100000,
                                   "default": 256,
                                   "description": "maxTokens of the sampling request."}
                },
                "required": ["prompt"],
                "additionalProperties": false
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "model": {"type": "string"},
                    "stopReason": {"type": "string"}
                },
                "required": ["text"]
            }
        }),
        json!({
            "name": "elicit",
            "title": "Elicit",
            "description": "Asks the user a question through the client (elicitation/create, one \
                string field `answer`) and returns the action and content. Needs the client's \
                `elicitation` capability.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "The question to show the user."}
                },
                "required": ["message"],
                "additionalProperties": false
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["accept", "decline", "cancel"]},
                    "content": {"type": "object"}
                },
                "required": ["action"]
            }
        }),
        json!({
            "name": "list_roots",
            "title": "List roots",
            "description": "Asks the client for its roots (roots/list) and returns them as JSON. \
                Needs the client's `roots` capability.",
            "inputSchema": {
                "type": "object",
                "properties": {},
                "required": [],
                "additionalProperties": false
            },
            "outputSchema": {
                "type": "object",
                "properties": {"roots": {"type": "array", "items": {"type": "object"}}},
                "required": ["roots"]
            }
        }),
    ]
}

/// `sample`: one user message, returns the text of the client's answer.
pub(super) async fn sample(
    args: &Map<String, Value>,
    ctx: &RequestContext,
) -> Result<Value, Failure> {
    let params = json!({
        "messages": [{
            "role": "user",
            "content": {"type": "text", "text": str_arg(args, "prompt")}
        }],
        "maxTokens": count_arg(args, "max_tokens")
    });
    let method = "sampling/createMessage";
    let result = ask(ctx, method, params).await?;
    let text = answer_text(result.get("content").unwrap_or(&Value::Null)).ok_or_else(|| {
        Failure::Tool(format!("the client's {method} answer has no text content"))
    })?;
    let mut structured = json!({"text": text});
    for key in ["model", "stopReason"] {
        if let Some(value) = result.get(key).filter(|v| v.is_string()) {
            structured[key] = value.clone();
        }
    }
    Ok(structured_result(&text, structured))
}

/// The text of a sampling answer: one content block, or (MCP 2025-11-25) an array of them whose
/// text blocks are joined. `None` when there is no text block.
fn answer_text(content: &Value) -> Option<String> {
    let blocks = match content {
        Value::Array(blocks) => blocks.as_slice(),
        block => std::slice::from_ref(block),
    };
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// `elicit`: a form with one required string `answer`; returns `{action, content?}` as JSON text.
pub(super) async fn elicit(
    args: &Map<String, Value>,
    ctx: &RequestContext,
) -> Result<Value, Failure> {
    let params = json!({
        "message": str_arg(args, "message"),
        "requestedSchema": {
            "type": "object",
            "properties": {
                "answer": {"type": "string", "title": "Answer", "description": "Your answer."}
            },
            "required": ["answer"]
        }
    });
    let method = "elicitation/create";
    let result = ask(ctx, method, params).await?;
    let action = result
        .get("action")
        .and_then(Value::as_str)
        .filter(|a| ["accept", "decline", "cancel"].contains(a))
        .ok_or_else(|| {
            Failure::Tool(format!(
                "the client's {method} answer has no valid `action`"
            ))
        })?;
    let mut structured = json!({"action": action});
    if let Some(content) = result.get("content").filter(|c| c.is_object()) {
        structured["content"] = content.clone();
    }
    Ok(structured_result(&structured.to_string(), structured))
}

/// `list_roots`: returns the client's roots as a JSON array in text.
pub(super) async fn list_roots(ctx: &RequestContext) -> Result<Value, Failure> {
    let method = "roots/list";
    let result = ask(ctx, method, json!({})).await?;
    let roots = result
        .get("roots")
        .filter(|r| r.is_array())
        .ok_or_else(|| {
            Failure::Tool(format!("the client's {method} answer has no `roots` array"))
        })?;
    Ok(structured_result(
        &roots.to_string(),
        json!({"roots": roots}),
    ))
}

/// Sends `method` to the client and returns the `result` of its answer.
async fn ask(ctx: &RequestContext, method: &str, params: Value) -> Result<Value, Failure> {
    let answer = match or_cancel(&ctx.cancel, ctx.peer.request(method, params)).await? {
        Ok(answer) => answer,
        Err(PeerError::Cancelled) => return Err(Failure::Rpc(cancelled())),
        Err(e) => return Err(Failure::Tool(format!("{method} failed: {e}"))),
    };
    if let Some(result) = answer.get("result") {
        return Ok(result.clone());
    }
    if let Some(error) = answer.get("error") {
        let code = error
            .get("code")
            .map_or_else(|| "?".to_owned(), Value::to_string);
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("(no message)");
        return Err(Failure::Tool(format!(
            "the client answered {method} with error {code}: {message}"
        )));
    }
    Err(Failure::Tool(format!(
        "the client's {method} answer has neither `result` nor `error`"
    )))
}
