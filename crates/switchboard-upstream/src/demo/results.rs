//! The shapes of a `tools/call` result (MCP 2025-11-25, server/tools, Tool Result): one text
//! block, optionally `structuredContent`, and `isError`. Shared by the local tools (`tools`) and
//! the tools that talk back to the client (`client`).

use serde_json::{json, Value};

/// A successful tool result with one text block.
pub(super) fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

/// A successful tool result with one text block and `structuredContent`.
pub(super) fn structured_result(text: &str, structured: Value) -> Value {
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": false
    })
}

/// A tool execution error: one text block and `isError: true`.
pub(super) fn error_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}
