//! The `initialize` result for an older client: its server capabilities and `serverInfo`.
//!
//! Sources: `schema/<revision>/schema.ts` of the MCP specification, `InitializeResult`,
//! `ServerCapabilities`, `Implementation`. 2025-03-26 adds the `completions` capability;
//! 2025-06-18 adds `serverInfo.title`; 2025-11-25 adds the `tasks` capability and
//! `serverInfo.icons`, `description` and `websiteUrl`. `instructions` is in every revision.

use serde_json::{Map, Value};

use super::rows::{CAP_COMPLETIONS, CAP_TASKS, ICONS, SERVER_DETAILS, SERVER_TITLE};
use crate::revision::Revision;

/// Shapes an `InitializeResult` for `client` in place.
pub(super) fn initialize_result(client: Revision, result: &mut Value) {
    if let Some(caps) = result
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    {
        capabilities(client, caps);
    }
    if let Some(info) = result.get_mut("serverInfo").and_then(Value::as_object_mut) {
        server_info(client, info);
    }
}

fn capabilities(client: Revision, caps: &mut Map<String, Value>) {
    if CAP_COMPLETIONS.lacks(client) {
        caps.remove("completions");
    }
    if CAP_TASKS.lacks(client) {
        caps.remove("tasks");
    }
}

fn server_info(client: Revision, info: &mut Map<String, Value>) {
    if SERVER_TITLE.lacks(client) {
        info.remove("title");
    }
    if SERVER_DETAILS.lacks(client) {
        info.remove("description");
        info.remove("websiteUrl");
    }
    if ICONS.lacks(client) {
        info.remove("icons");
    }
}
