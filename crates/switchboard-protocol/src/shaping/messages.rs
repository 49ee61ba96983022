//! What the server sends the client unasked, for an older client: notifications and
//! server-to-client requests.
//!
//! Sources: `schema/<revision>/schema.ts` of the MCP specification. `elicitation/create` is in
//! 2025-06-18 and later (`ElicitRequest`); `notifications/elicitation/complete` and
//! `notifications/tasks/status` and the `tasks/*` requests in 2025-11-25 only, as are URL-mode
//! elicitation (`mode`) and sampling with tools or a content array; `message` of
//! `notifications/progress` in 2025-03-26 and later; `audio` in a `SamplingMessage` in
//! 2025-03-26 and later.

use serde_json::Value;

use super::content;
use super::rows::{
    ELICITATION, ELICITATION_URL, NEW_NOTIFICATIONS, PROGRESS_MESSAGE, SAMPLING_2025_11_25,
};
use crate::revision::Revision;

/// The first session-era revision that defines the server-to-client `message` as it is (its
/// method, and for `elicitation/create` and `sampling/createMessage` the form of its params);
/// `None` for what every session-era revision has, and for methods no revision defines (an
/// upstream's own are passed on).
pub(super) fn since(message: &Value) -> Option<Revision> {
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    let params = message.get("params");
    match method {
        "elicitation/create" if params.and_then(|p| p.get("mode")) == Some(&"url".into()) => {
            Some(ELICITATION_URL.since)
        }
        "elicitation/create" => Some(ELICITATION.since),
        "sampling/createMessage" if params.is_some_and(needs_2025_11_25_sampling) => {
            Some(SAMPLING_2025_11_25.since)
        }
        "notifications/elicitation/complete"
        | "notifications/tasks/status"
        | "tasks/get"
        | "tasks/result"
        | "tasks/list"
        | "tasks/cancel" => Some(NEW_NOTIFICATIONS.since),
        _ => None,
    }
}

/// Whether sampling `params` use what only 2025-11-25 has: `tools`, `toolChoice`, or a
/// message whose `content` is an array of other than one block.
fn needs_2025_11_25_sampling(params: &Value) -> bool {
    let several = |m: &Value| {
        m.get("content")
            .and_then(Value::as_array)
            .is_some_and(|b| b.len() != 1)
    };
    params.get("tools").is_some()
        || params.get("toolChoice").is_some()
        || params
            .get("messages")
            .and_then(Value::as_array)
            .is_some_and(|ms| ms.iter().any(several))
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
        "elicitation/create" if ELICITATION_URL.lacks(client) => {
            if let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) {
                params.remove("mode");
            }
        }
        "sampling/createMessage" => {
            let messages = message
                .pointer_mut("/params/messages")
                .and_then(Value::as_array_mut);
            for m in messages.into_iter().flatten() {
                let Some(content) = m.get_mut("content") else {
                    continue;
                };
                // One block in an array: that block, as older revisions have it.
                if SAMPLING_2025_11_25.lacks(client) {
                    if let Some(only) = content.as_array_mut().and_then(|b| b.pop()) {
                        *content = only;
                    }
                }
                match content {
                    Value::Array(blocks) => content::blocks(client, blocks),
                    block => content::block(client, block),
                }
            }
        }
        _ => {}
    }
}
