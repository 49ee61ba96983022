//! What the server offers, as MCP JSON: the tools, resources, resource templates and prompts
//! that the server scenarios of `@modelcontextprotocol/conformance` 0.1.16 (`--suite all`) call,
//! with the names, arguments and answers each scenario's "Server Implementation Requirements"
//! give.

use serde_json::{json, Value};

/// A 1×1 red PNG, base64.
pub const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file, base64.
pub const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// The tool whose input schema keeps JSON Schema 2020-12 keywords (SEP-1613).
pub const SCHEMA_2020_12_TOOL: &str = "json_schema_2020_12_tool";

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

fn string_arg(name: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": [name],
    })
}

fn tool(name: &str, description: &str, input: Value) -> Value {
    json!({"name": name, "description": description, "inputSchema": input})
}

/// `tools/list`'s tools.
pub fn tools() -> Value {
    let schema_2020_12 = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            },
        },
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": false,
    });
    json!([
        tool("test_simple_text", "Returns simple text", no_args()),
        tool("test_image_content", "Returns an image", no_args()),
        tool("test_audio_content", "Returns audio", no_args()),
        tool("test_embedded_resource", "Returns a resource", no_args()),
        tool(
            "test_multiple_content_types",
            "Text, image, resource",
            no_args()
        ),
        tool("test_error_handling", "Always fails", no_args()),
        tool(
            SCHEMA_2020_12_TOOL,
            "Tool with JSON Schema 2020-12 features",
            schema_2020_12
        ),
        tool(
            "test_tool_with_logging",
            "Sends three info log messages",
            no_args()
        ),
        tool(
            "test_tool_with_progress",
            "Reports progress 0, 50, 100 of 100",
            no_args()
        ),
        tool(
            "test_reconnection",
            "Closes its SSE stream mid-call (SEP-1699), then answers",
            no_args()
        ),
        tool(
            "test_sampling",
            "Asks the client to sample",
            string_arg("prompt", "The prompt")
        ),
        tool(
            "test_elicitation",
            "Asks the user for input",
            string_arg("message", "What to ask")
        ),
        tool(
            "test_elicitation_sep1034_defaults",
            "Elicitation with defaults (SEP-1034)",
            no_args()
        ),
        tool(
            "test_elicitation_sep1330_enums",
            "Elicitation with every enum form (SEP-1330)",
            no_args()
        ),
    ])
}

/// A text content block.
pub fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

fn image() -> Value {
    json!({"type": "image", "data": PNG, "mimeType": "image/png"})
}

/// The content of the tools that only return content; `None` for the others.
pub fn fixed_content(name: &str) -> Option<Value> {
    let embedded = json!({
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    });
    let mixed = json!({
        "uri": "test://mixed-content-resource",
        "mimeType": "application/json",
        "text": json!({"test": "data", "value": 123}).to_string(),
    });
    let content = match name {
        "test_simple_text" => json!([text("This is a simple text response for testing.")]),
        "test_image_content" => json!([image()]),
        "test_audio_content" => json!([{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]),
        "test_embedded_resource" => json!([{"type": "resource", "resource": embedded}]),
        "test_multiple_content_types" => json!([
            text("Multiple content types test:"),
            image(),
            {"type": "resource", "resource": mixed},
        ]),
        _ => return None,
    };
    Some(content)
}

/// The schema properties `test_elicitation_sep1034_defaults` asks for, each with a default.
pub fn sep1034_properties() -> Value {
    json!({
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": true},
    })
}

/// The schema properties `test_elicitation_sep1330_enums` asks for: every enum form of SEP-1330.
pub fn sep1330_properties() -> Value {
    let titled = |words: [&str; 3]| -> Value {
        let options: Vec<Value> = words
            .iter()
            .enumerate()
            .map(|(i, w)| json!({"const": format!("value{}", i + 1), "title": w}))
            .collect();
        Value::Array(options)
    };
    json!({
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": titled(["First Option", "Second Option", "Third Option"]),
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {"anyOf": titled(["First Choice", "Second Choice", "Third Choice"])},
        },
    })
}

/// The fixed resources: (name, URI, MIME type, content fields).
fn fixed_resources() -> [(&'static str, &'static str, &'static str, Value); 3] {
    [
        (
            "static-text",
            "test://static-text",
            "text/plain",
            json!({"text": "This is the content of the static text resource."}),
        ),
        (
            "static-binary",
            "test://static-binary",
            "image/png",
            json!({"blob": PNG}),
        ),
        (
            "watched-resource",
            "test://watched-resource",
            "text/plain",
            json!({"text": "Watched resource content"}),
        ),
    ]
}

/// `resources/list`'s resources.
pub fn resources() -> Value {
    let list: Vec<Value> = fixed_resources()
        .into_iter()
        .map(|(name, uri, mime, _)| {
            json!({"name": name, "uri": uri, "mimeType": mime, "description": format!("{name} resource")})
        })
        .collect();
    Value::Array(list)
}

/// `resources/templates/list`'s templates.
pub fn resource_templates() -> Value {
    json!([{
        "name": "template",
        "uriTemplate": "test://template/{id}/data",
        "description": "Data for an id",
        "mimeType": "application/json",
    }])
}

/// `resources/read`'s contents for `uri`; `None` for an unknown URI.
pub fn read(uri: &str) -> Option<Value> {
    if let Some((_, _, mime, body)) = fixed_resources().into_iter().find(|r| r.1 == uri) {
        let mut content = json!({"uri": uri, "mimeType": mime});
        content.as_object_mut()?.extend(body.as_object()?.clone());
        return Some(json!([content]));
    }
    let id = uri
        .strip_prefix("test://template/")?
        .strip_suffix("/data")?;
    let body = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
    Some(json!([{"uri": uri, "mimeType": "application/json", "text": body.to_string()}]))
}

fn argument(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description, "required": true})
}

/// `prompts/list`'s prompts.
pub fn prompts() -> Value {
    json!([
        {"name": "test_simple_prompt", "description": "A simple prompt"},
        {
            "name": "test_prompt_with_arguments",
            "description": "A prompt with two arguments",
            "arguments": [argument("arg1", "First test argument"), argument("arg2", "Second test argument")],
        },
        {
            "name": "test_prompt_with_embedded_resource",
            "description": "A prompt embedding a resource",
            "arguments": [argument("resourceUri", "URI of the resource to embed")],
        },
        {"name": "test_prompt_with_image", "description": "A prompt with an image"},
    ])
}

fn user(content: Value) -> Value {
    json!({"role": "user", "content": content})
}

/// `prompts/get`'s messages for prompt `name` with `args`; `None` for an unknown prompt.
pub fn prompt_messages(name: &str, args: &Value) -> Option<Value> {
    let arg = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let messages = match name {
        "test_simple_prompt" => json!([user(text("This is a simple prompt for testing."))]),
        "test_prompt_with_arguments" => {
            let t = format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1"),
                arg("arg2")
            );
            json!([user(text(&t))])
        }
        "test_prompt_with_embedded_resource" => {
            let resource = json!({
                "uri": arg("resourceUri"),
                "mimeType": "text/plain",
                "text": "Embedded resource content for testing.",
            });
            json!([
                user(json!({"type": "resource", "resource": resource})),
                user(text("Please process the embedded resource above.")),
            ])
        }
        "test_prompt_with_image" => {
            json!([user(image()), user(text("Please analyze the image above.")),])
        }
        _ => return None,
    };
    Some(messages)
}

/// `completion/complete`'s values: `arg1` of `test_prompt_with_arguments` completes from three
/// words; anything else completes to nothing.
pub fn completions(reference: &Value, argument: &Value) -> Vec<&'static str> {
    let is_arg1 = reference["type"] == "ref/prompt"
        && reference["name"] == "test_prompt_with_arguments"
        && argument["name"] == "arg1";
    if !is_arg1 {
        return Vec::new();
    }
    let prefix = argument["value"].as_str().unwrap_or_default();
    ["paris", "park", "party"]
        .into_iter()
        .filter(|w| w.starts_with(prefix))
        .collect()
}
