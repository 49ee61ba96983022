//! The byte caps on what the event log keeps, shared by both backends: the largest event stored
//! ([`StoreConfig::max_event_bytes`]) and what is stored instead of a larger one.
//!
//! Policy for an event over the cap (issue 16, "large answers"): it is **delivered live only**.
//! The log keeps a small stand-in in its place, so a resume that needs it gets a clear answer
//! instead of a silent gap: for a response (a message with an `id` and no `method`) a JSON-RPC
//! error with the same `id` and code [`OVERSIZED_EVENT_CODE`]; for anything else (a notification
//! or a server request) a `notifications/message` at level `warning` saying what was left out.
//! The byte caps per stream and per session are enforced where the event is appended (the Lua
//! append script, the memory store's lock), trimming the oldest events as the count cap does.

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::model::StoreConfig;

/// The JSON-RPC code of the stand-in for a response over `session.max_event_bytes` (in the
/// implementation-defined server error range, -32000 to -32099; -32006 is an upstream's message
/// over its relay limit, this one is the node's own storage limit).
pub const OVERSIZED_EVENT_CODE: i64 = -32012;

/// The parts of a JSON-RPC message the stand-in needs; everything else is skipped unread
/// ([`IgnoredAny`] allocates nothing for it).
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<IgnoredAny>,
}

/// What the log stores for `data`: `None` when it fits `config.max_event_bytes` (it is stored
/// as it is), else the stand-in described in the module doc.
pub fn stored_form(data: &str, config: &StoreConfig) -> Option<String> {
    let limit = config.max_event_bytes;
    let bytes = data.len() as u64;
    if bytes <= limit {
        return None;
    }
    let head: Option<Head> = serde_json::from_str(data).ok();
    let detail = json!({"bytes": bytes, "max_event_bytes": limit});
    let stand_in = match head {
        Some(Head {
            id: Some(id),
            method: None,
        }) => json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": OVERSIZED_EVENT_CODE,
                "message": format!(
                    "the answer ({bytes} bytes) was larger than session.max_event_bytes \
                     ({limit} bytes): it was delivered live only and is not kept for a resume"
                ),
                "data": detail,
            },
        }),
        _ => json!({
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {
                "level": "warning",
                "logger": "switchboard",
                "data": {
                    "message": format!(
                        "a message of {bytes} bytes was larger than session.max_event_bytes \
                         ({limit} bytes): it was delivered live only and is not kept for a \
                         resume"
                    ),
                    "bytes": bytes,
                    "max_event_bytes": limit,
                },
            },
        }),
    };
    Some(stand_in.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(max: u64) -> StoreConfig {
        StoreConfig {
            max_event_bytes: max,
            ..StoreConfig::default_for("n")
        }
    }

    #[test]
    fn events_within_the_cap_are_stored_as_they_are() {
        let data = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        assert_eq!(stored_form(data, &config(data.len() as u64)), None);
    }

    #[test]
    fn a_response_over_the_cap_is_kept_as_an_error_with_its_id() {
        let data = json!({"jsonrpc": "2.0", "id": "a", "result": {"x": "y".repeat(100)}});
        let stored: Value =
            serde_json::from_str(&stored_form(&data.to_string(), &config(50)).unwrap()).unwrap();
        assert_eq!(stored["id"], "a");
        assert_eq!(stored["error"]["code"], OVERSIZED_EVENT_CODE);
        assert_eq!(stored["error"]["data"]["max_event_bytes"], 50);
        assert_eq!(
            stored["error"]["data"]["bytes"],
            data.to_string().len() as u64
        );
    }

    #[test]
    fn a_notification_over_the_cap_is_kept_as_a_warning() {
        let data = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                          "params": {"message": "z".repeat(100)}});
        let stored: Value =
            serde_json::from_str(&stored_form(&data.to_string(), &config(50)).unwrap()).unwrap();
        assert_eq!(stored["method"], "notifications/message");
        assert_eq!(stored["params"]["level"], "warning");
        assert_eq!(stored["params"]["data"]["max_event_bytes"], 50);
    }
}
