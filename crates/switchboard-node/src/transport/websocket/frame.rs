//! What goes into the socket's frames beyond the JSON-RPC message itself: the event id of each
//! delivered message (under `_meta`), the session id on the `initialize` answer, and the close
//! codes this transport uses.

use serde_json::{Map, Value};

/// `_meta` key holding a delivered message's event id (`get_<ms>-<seq>`): what a client sends as
/// `Last-Event-ID` to resume. A reverse-DNS prefixed key, as MCP 2025-11-25 (basic, `_meta`)
/// reserves unprefixed names for the protocol.
pub const EVENT_ID_META: &str = "io.switchboard/eventId";

/// `_meta` key of the `initialize` result holding the new session's id (what a client sends as
/// `Mcp-Session-Id` to resume on a new socket).
pub const SESSION_ID_META: &str = "io.switchboard/sessionId";

/// Close codes (RFC 6455 §7.4.1; 4000–4999 are the application's own).
pub mod close {
    /// The node is draining: resume the session on another node.
    pub const GOING_AWAY: u16 = 1001;
    /// A binary frame: this transport carries JSON text only.
    pub const UNSUPPORTED_DATA: u16 = 1003;
    /// A message larger than `http.max_body`.
    pub const TOO_BIG: u16 = 1009;
    /// The session cap is reached: try again later.
    pub const TRY_AGAIN_LATER: u16 = 1013;
    /// Two keep-alive pings went unanswered.
    pub const KEEPALIVE_TIMEOUT: u16 = 4408;
    /// The session ended (DELETE, expiry) or is unknown: do not resume it.
    pub const SESSION_ENDED: u16 = 4404;
    /// A newer connection took over this session's stream (on this or another node).
    pub const REPLACED: u16 = 4409;
}

/// `data` (one logged JSON-RPC message) with `event_id` added under `_meta` where MCP allows
/// `_meta`: `params._meta` of a request or notification (`params` is added when absent),
/// `result._meta` of a result, `error.data._meta` of an error (`data` added when absent). A
/// message with no object there (never the case for MCP messages) goes out unchanged, without
/// an id.
pub fn tag(data: &str, event_id: &str) -> String {
    let Ok(Value::Object(mut msg)) = serde_json::from_str::<Value>(data) else {
        return data.to_owned();
    };
    let slot = if msg.contains_key("method") {
        Some(msg.entry("params").or_insert_with(empty))
    } else if let Some(result) = msg.get_mut("result") {
        Some(result)
    } else if let Some(Value::Object(error)) = msg.get_mut("error") {
        Some(error.entry("data").or_insert_with(empty))
    } else {
        None
    };
    if let Some(Value::Object(slot)) = slot {
        if let Value::Object(meta) = slot.entry("_meta").or_insert_with(empty) {
            meta.insert(EVENT_ID_META.to_owned(), Value::String(event_id.to_owned()));
        }
    }
    serde_json::to_string(&msg).unwrap_or_else(|_| data.to_owned())
}

/// Adds the session id to an `initialize` response's `result._meta`.
pub fn with_session_id(mut response: Value, sid: &str) -> Value {
    if let Some(Value::Object(result)) = response.get_mut("result") {
        if let Value::Object(meta) = result.entry("_meta").or_insert_with(empty) {
            meta.insert(SESSION_ID_META.to_owned(), Value::String(sid.to_owned()));
        }
    }
    response
}

fn empty() -> Value {
    Value::Object(Map::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tagged(v: Value) -> Value {
        serde_json::from_str(&tag(&v.to_string(), "get_1-2")).unwrap()
    }

    #[test]
    fn event_ids_go_under_meta_wherever_mcp_allows_it() {
        let n = tagged(
            json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1,"_meta":{"x":1}}}),
        );
        assert_eq!(n["params"]["_meta"][EVENT_ID_META], "get_1-2");
        assert_eq!(n["params"]["_meta"]["x"], 1);
        assert_eq!(n["params"]["progress"], 1);
        let bare = tagged(json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}));
        assert_eq!(bare["params"]["_meta"][EVENT_ID_META], "get_1-2");
        let r = tagged(json!({"jsonrpc":"2.0","id":3,"result":{"content":[]}}));
        assert_eq!(r["result"]["_meta"][EVENT_ID_META], "get_1-2");
        assert_eq!(r["id"], 3);
        let e = tagged(json!({"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}));
        assert_eq!(e["error"]["data"]["_meta"][EVENT_ID_META], "get_1-2");
        assert_eq!(e["error"]["code"], -32601);
        let odd = json!({"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m","data":"text"}});
        assert_eq!(
            tagged(odd.clone()),
            odd,
            "no object to hold _meta: unchanged"
        );
        assert_eq!(tag("not json", "get_1-2"), "not json");
    }

    #[test]
    fn session_id_on_initialize() {
        let r = with_session_id(
            json!({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}),
            "abc",
        );
        assert_eq!(r["result"]["_meta"][SESSION_ID_META], "abc");
    }
}
