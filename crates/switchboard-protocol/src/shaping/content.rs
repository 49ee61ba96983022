//! Content blocks for an older client: in tool results (`CallToolResult.content`), prompt
//! messages (`PromptMessage.content`), sampling messages (`SamplingMessage.content`) and the
//! resources a result embeds.
//!
//! Sources: `schema/<revision>/schema.ts` of the MCP specification. 2024-11-05 has `text`,
//! `image` and `resource` blocks with `annotations` {`audience`, `priority`}; 2025-03-26 adds
//! `audio`; 2025-06-18 adds `resource_link`, `_meta` on every block and on resource contents,
//! and `annotations.lastModified`.

use serde_json::{json, Map, Value};

use super::rows::{AUDIO, CONTENT_META, LAST_MODIFIED, RESOURCE_LINK};
use crate::revision::Revision;

/// Shapes every block of `blocks` for `client` in place.
pub(super) fn blocks(client: Revision, blocks: &mut [Value]) {
    for b in blocks {
        block(client, b);
    }
}

/// Shapes one content block for `client` in place: a block type the revision lacks becomes a
/// text block that says what it was (`resource_link`, `audio`); members it lacks are removed.
pub(super) fn block(client: Revision, block: &mut Value) {
    let Some(obj) = block.as_object_mut() else {
        return;
    };
    match obj.get("type").and_then(Value::as_str) {
        Some("resource_link") if RESOURCE_LINK.lacks(client) => {
            *obj = resource_link_as_text(obj);
        }
        Some("audio") if AUDIO.lacks(client) => *obj = audio_as_text(obj, client),
        Some("resource") => {
            if let Some(contents) = obj.get_mut("resource").and_then(Value::as_object_mut) {
                resource_contents(client, contents);
            }
        }
        _ => {}
    }
    members(client, obj);
}

/// The members of a block (or a list entry) that `client` lacks: `_meta`, and
/// `annotations.lastModified`.
pub(super) fn members(client: Revision, obj: &mut Map<String, Value>) {
    if CONTENT_META.lacks(client) {
        obj.remove("_meta");
    }
    annotations(client, obj);
}

/// `annotations.lastModified` removed for a client that lacks it (an emptied `annotations`
/// goes too).
pub(super) fn annotations(client: Revision, obj: &mut Map<String, Value>) {
    if !LAST_MODIFIED.lacks(client) {
        return;
    }
    let Some(ann) = obj.get_mut("annotations").and_then(Value::as_object_mut) else {
        return;
    };
    ann.remove("lastModified");
    if ann.is_empty() {
        obj.remove("annotations");
    }
}

/// One `TextResourceContents` or `BlobResourceContents` (`resources/read`, embedded resources):
/// `_meta` removed for a client that lacks it.
pub(super) fn resource_contents(client: Revision, contents: &mut Map<String, Value>) {
    if CONTENT_META.lacks(client) {
        contents.remove("_meta");
    }
}

/// A `resource_link` as the text block an older client can show: its name (or title), URI,
/// MIME type and description, with its annotations.
fn resource_link_as_text(link: &Map<String, Value>) -> Map<String, Value> {
    let field = |k: &str| link.get(k).and_then(Value::as_str);
    let name = field("title").or(field("name")).unwrap_or("resource");
    let mut text = format!("Resource link: {name} <{}>", field("uri").unwrap_or(""));
    if let Some(mime) = field("mimeType") {
        text.push_str(&format!(" ({mime})"));
    }
    if let Some(description) = field("description") {
        text.push_str(&format!(": {description}"));
    }
    with_annotations(text, link)
}

/// An `audio` block as a text block saying what was left out.
fn audio_as_text(audio: &Map<String, Value>, client: Revision) -> Map<String, Value> {
    let mime = audio
        .get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or("audio");
    let text = format!("[audio content ({mime}) left out: MCP {client} has no audio content]");
    with_annotations(text, audio)
}

fn with_annotations(text: String, from: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("type".into(), json!("text"));
    out.insert("text".into(), Value::String(text));
    if let Some(ann) = from.get("annotations") {
        out.insert("annotations".into(), ann.clone());
    }
    out
}
