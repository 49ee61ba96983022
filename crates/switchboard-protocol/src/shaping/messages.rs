//! What the server sends the client unasked, for an older client: notifications and
//! server-to-client requests.
//!
//! Sources: `schema/<revision>/schema.ts` of the MCP specification. `elicitation/create` is in
//! 2025-06-18 and later (`ElicitRequest`); `notifications/elicitation/complete` and
//! `notifications/tasks/status` and the `tasks/*` requests in 2025-11-25 only; `message` of
//! `notifications/progress` in 2025-03-26 and later; `audio` in a `SamplingMessage` in
//! 2025-03-26 and later.

use serde_json::Value;

use super::content;
use super::rows::{ELICITATION, NEW_NOTIFICATIONS, PROGRESS_MESSAGE};
use crate::revision::Revision;

/// The first session-era revision that defines the server-to-client `method` (a request or a
/// notification); `None` for the methods every session-era revision has, and for methods no
/// revision defines (an upstream's own are passed on).
pub(super) fn since(method: &str) -> Option<Revision> {
    match method {
        "elicitation/create" => Some(ELICITATION.since),
        "notifications/elicitation/complete"
        | "notifications/tasks/status"
        | "tasks/get"
        | "tasks/result"
        | "tasks/list"
        | "tasks/cancel" => Some(NEW_NOTIFICATIONS.since),
        _ => None,
    }
}

/// Shapes a message the server sends (a notification or a request, `method` in it) for
/// `client` in place.
pub(super) fn shape(client: Revision, message: &mut Value) {
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    match method {
        "notifications/progress" if PROGRESS_MESSAGE.lacks(client) => {
            if let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) {
                params.remove("message");
            }
        }
        "sampling/createMessage" => {
            let messages = message
                .pointer_mut("/params/messages")
                .and_then(Value::as_array_mut);
            for m in messages.into_iter().flatten() {
                match m.get_mut("content") {
                    Some(Value::Array(blocks)) => content::blocks(client, blocks),
                    Some(block) => content::block(client, block),
                    None => {}
                }
            }
        }
        _ => {}
    }
}
