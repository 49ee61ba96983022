//! The results of client requests for an older client, by method: lists (through
//! [`super::entries`]), `tools/call`, `prompts/get` and `resources/read`.
//!
//! Sources: `schema/<revision>/schema.ts` of the MCP specification, `CallToolResult`,
//! `GetPromptResult`, `ReadResourceResult`. 2025-06-18 adds `structuredContent`; the
//! server/tools page of 2025-06-18 (Structured Content) says a tool returning structured
//! content SHOULD also return it serialized in a text block, for backwards compatibility,
//! which is what an older client is left with.

use serde_json::{Map, Value};

use super::rows::STRUCTURED_CONTENT;
use super::{content, entries};
use crate::revision::Revision;

/// Shapes the result of `method` for `client` in place; methods with nothing to shape are left
/// alone.
pub(super) fn of(client: Revision, method: &str, result: &mut Value) {
    let Some(obj) = result.as_object_mut() else {
        return;
    };
    match method {
        "tools/call" => call_tool(client, obj),
        "tools/list" => entries::each(client, obj, "tools", entries::tool),
        "prompts/list" => entries::each(client, obj, "prompts", entries::prompt),
        "resources/list" => entries::each(client, obj, "resources", entries::resource),
        "resources/templates/list" => {
            entries::each(client, obj, "resourceTemplates", entries::resource);
        }
        "prompts/get" => get_prompt(client, obj),
        "resources/read" => read_resource(client, obj),
        _ => {}
    }
}

/// A `CallToolResult`: each content block, then `structuredContent`, which a client that lacks
/// it loses; when `content` has nothing to carry it, a text block with its JSON takes its place.
fn call_tool(client: Revision, result: &mut Map<String, Value>) {
    if let Some(blocks) = result.get_mut("content").and_then(Value::as_array_mut) {
        content::blocks(client, blocks);
    }
    if !STRUCTURED_CONTENT.lacks(client) {
        return;
    }
    let Some(structured) = result.remove("structuredContent") else {
        return;
    };
    let empty = result
        .get("content")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if empty {
        let text = serde_json::json!({"type": "text", "text": structured.to_string()});
        result.insert("content".into(), Value::Array(vec![text]));
    }
}

/// A `GetPromptResult`: each message's content block.
fn get_prompt(client: Revision, result: &mut Map<String, Value>) {
    let Some(messages) = result.get_mut("messages").and_then(Value::as_array_mut) else {
        return;
    };
    for message in messages {
        if let Some(block) = message.get_mut("content") {
            content::block(client, block);
        }
    }
}

/// A `ReadResourceResult`: each of its contents.
fn read_resource(client: Revision, result: &mut Map<String, Value>) {
    let Some(contents) = result.get_mut("contents").and_then(Value::as_array_mut) else {
        return;
    };
    for c in contents.iter_mut().filter_map(Value::as_object_mut) {
        content::resource_contents(client, c);
    }
}
