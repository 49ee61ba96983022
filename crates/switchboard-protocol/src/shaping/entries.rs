//! List entries for an older client: `tools/list`, `prompts/list`, `resources/list` and
//! `resources/templates/list`.
//!
//! Sources: `schema/<revision>/schema.ts` of the MCP specification, `Tool`, `Prompt`,
//! `PromptArgument`, `Resource`, `ResourceTemplate`. 2025-03-26 adds `Tool.annotations`;
//! 2025-06-18 adds `title` (`BaseMetadata`), `Tool.outputSchema` and `_meta` on each entry;
//! 2025-11-25 adds `icons` and `Tool.execution`.

use serde_json::{Map, Value};

use super::content;
use super::rows::TOOL_TITLE;
use super::rows::{ICONS, ITEM_META, ITEM_TITLE, OUTPUT_SCHEMA, TOOL_ANNOTATIONS, TOOL_EXECUTION};
use crate::revision::Revision;

/// Shapes each entry of the array `key` of a list result (`tools`, `prompts`, …) with `entry`.
pub(super) fn each(
    client: Revision,
    result: &mut Map<String, Value>,
    key: &str,
    entry: fn(Revision, &mut Map<String, Value>),
) {
    let Some(list) = result.get_mut(key).and_then(Value::as_array_mut) else {
        return;
    };
    for item in list.iter_mut().filter_map(Value::as_object_mut) {
        entry(client, item);
    }
}

/// One `Tool`. Its `title` becomes `annotations.title` for a 2025-03-26 client (the place that
/// revision gives a tool's display name), unless that is set.
pub(super) fn tool(client: Revision, tool: &mut Map<String, Value>) {
    if TOOL_TITLE.lacks(client) {
        let title = tool.remove("title");
        if let Some(title) = title.filter(|_| !TOOL_ANNOTATIONS.lacks(client)) {
            let ann = tool
                .entry("annotations")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(ann) = ann.as_object_mut() {
                ann.entry("title").or_insert(title);
            }
        }
    }
    if OUTPUT_SCHEMA.lacks(client) {
        tool.remove("outputSchema");
    }
    if TOOL_ANNOTATIONS.lacks(client) {
        tool.remove("annotations");
    }
    if TOOL_EXECUTION.lacks(client) {
        tool.remove("execution");
    }
    common(client, tool);
}

/// One `Prompt`, with its `arguments`.
pub(super) fn prompt(client: Revision, prompt: &mut Map<String, Value>) {
    if let Some(args) = prompt.get_mut("arguments").and_then(Value::as_array_mut) {
        for arg in args.iter_mut().filter_map(Value::as_object_mut) {
            if ITEM_TITLE.lacks(client) {
                arg.remove("title");
            }
        }
    }
    if ITEM_TITLE.lacks(client) {
        prompt.remove("title");
    }
    common(client, prompt);
}

/// One `Resource` or `ResourceTemplate` (its `annotations` lose `lastModified` too).
pub(super) fn resource(client: Revision, resource: &mut Map<String, Value>) {
    if ITEM_TITLE.lacks(client) {
        resource.remove("title");
    }
    content::annotations(client, resource);
    common(client, resource);
}

/// The members every entry kind gained: `_meta` (2025-06-18) and `icons` (2025-11-25).
fn common(client: Revision, item: &mut Map<String, Value>) {
    if ITEM_META.lacks(client) {
        item.remove("_meta");
    }
    if ICONS.lacks(client) {
        item.remove("icons");
    }
}
