//! The demo's one resource (`demo://greeting`), one prompt (`greet`) and the completions for the
//! prompt's argument.

use serde_json::{json, Value};
use switchboard_protocol::codes;

use super::str_param;
use crate::upstream::RpcError;

/// The URI of the demo's only resource.
pub(super) const GREETING_URI: &str = "demo://greeting";

/// The text of `demo://greeting`.
const GREETING_TEXT: &str = "Hello from the Switchboard demo server!";

/// The name of the demo's only prompt.
const PROMPT: &str = "greet";

/// The values `completion/complete` offers for the `name` argument of `greet`.
const NAMES: [&str; 10] = [
    "Ada", "Alan", "Alice", "Barbara", "Bob", "Dennis", "Grace", "Ken", "Linus", "Margaret",
];

/// `resources/list`.
pub(super) fn list_resources() -> Value {
    json!({"resources": [{
        "uri": GREETING_URI,
        "name": "greeting",
        "title": "Greeting",
        "description": "A short plain-text greeting.",
        "mimeType": "text/plain"
    }]})
}

/// `resources/read`: the greeting, or -32002 for any other URI.
pub(super) fn read_resource(params: &Value) -> Result<Value, RpcError> {
    let uri = known_uri(params)?;
    Ok(json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": GREETING_TEXT}]}))
}

/// `resources/subscribe`: accepted for the greeting (the demo keeps no subscription state; the
/// `notify` tool announces an update to every session that calls it).
pub(super) fn subscribe(params: &Value) -> Result<Value, RpcError> {
    known_uri(params)?;
    Ok(json!({}))
}

/// `resources/unsubscribe`: always succeeds for a string `uri`.
pub(super) fn unsubscribe(params: &Value) -> Result<Value, RpcError> {
    str_param(params, "uri")?;
    Ok(json!({}))
}

/// `params.uri` when it names the greeting; -32602 when absent, -32002 when unknown.
fn known_uri(params: &Value) -> Result<&str, RpcError> {
    let uri = str_param(params, "uri")?;
    if uri != GREETING_URI {
        return Err(RpcError {
            data: Some(json!({"uri": uri})),
            ..RpcError::new(codes::RESOURCE_NOT_FOUND, "Resource not found")
        });
    }
    Ok(uri)
}

/// `prompts/list`.
pub(super) fn list_prompts() -> Value {
    json!({"prompts": [{
        "name": PROMPT,
        "title": "Greet someone",
        "description": "Asks the model to greet a person by name.",
        "arguments": [{"name": "name", "description": "Who to greet.", "required": true}]
    }]})
}

/// `prompts/get`: one user message; -32602 for an unknown prompt or a missing `name` argument.
pub(super) fn get_prompt(params: &Value) -> Result<Value, RpcError> {
    let prompt = str_param(params, "name")?;
    if prompt != PROMPT {
        return Err(RpcError::invalid_params(format!(
            "unknown prompt: {prompt}"
        )));
    }
    let name = params
        .pointer("/arguments/name")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            RpcError::invalid_params("prompt `greet` needs the string argument `name`")
        })?;
    Ok(json!({
        "description": format!("A greeting for {name}"),
        "messages": [{
            "role": "user",
            "content": {
                "type": "text",
                "text": format!("Please greet {name} warmly, in one sentence.")
            }
        }]
    }))
}

/// `completion/complete`: names starting with the typed value (case-insensitive) for argument
/// `name` of prompt `greet`; no values for any other reference. -32602 when `ref` or
/// `argument` is malformed.
pub(super) fn complete(params: &Value) -> Result<Value, RpcError> {
    let reference = params
        .get("ref")
        .filter(|r| r.is_object())
        .ok_or_else(|| RpcError::invalid_params("missing or non-object parameter `ref`"))?;
    let argument = params
        .get("argument")
        .filter(|a| a.is_object())
        .ok_or_else(|| RpcError::invalid_params("missing or non-object parameter `argument`"))?;
    let arg_name = str_param(argument, "name")?;
    let typed = str_param(argument, "value")?.to_lowercase();
    let ours =
        reference["type"] == "ref/prompt" && reference["name"] == PROMPT && arg_name == "name";
    let values: Vec<&str> = if ours {
        NAMES
            .into_iter()
            .filter(|n| n.to_lowercase().starts_with(&typed))
            .collect()
    } else {
        Vec::new()
    };
    Ok(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}
