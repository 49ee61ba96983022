//! JSON-RPC 2.0 envelopes.
//!
//! A POST body is one message or (MCP 2025-03-26 only) a batch array. Messages are kept as
//! `serde_json::Value` so that every field we do not interpret passes through unchanged; this module
//! only classifies them. Source: JSON-RPC 2.0 §4–§6; MCP 2025-11-25, basic (Messages).

use serde_json::{Map, Value};

use crate::codes;

/// A JSON-RPC request id: a string or a number. String `"1"` and number `1` are different ids.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestId(pub Value);

impl RequestId {
    /// A canonical text form that keeps `"1"` and `1` apart (`"\"1\""` vs `"1"`); used as a map key
    /// in the store.
    pub fn key(&self) -> String {
        // `to_string` on a string or number cannot fail; `Display` would go through `fmt`.
        serde_json::to_string(&self.0).unwrap_or_default()
    }

    /// Rebuilds an id from [`RequestId::key`]; `None` when the key is not a string or number.
    pub fn from_key(key: &str) -> Option<RequestId> {
        match serde_json::from_str::<Value>(key).ok()? {
            v @ (Value::String(_) | Value::Number(_)) => Some(RequestId(v)),
            _ => None,
        }
    }
}

/// One classified JSON-RPC message, holding the original JSON object.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// Has `method` and a non-null `id`.
    Request {
        /// The request id.
        id: RequestId,
        /// The method name.
        method: String,
        /// The whole message.
        raw: Value,
    },
    /// Has `method` and no `id`.
    Notification {
        /// The method name.
        method: String,
        /// The whole message.
        raw: Value,
    },
    /// Has `result` or `error` and no `method`. The id is `None` when it was null or absent.
    Response {
        /// The id of the request this answers.
        id: Option<RequestId>,
        /// The whole message.
        raw: Value,
    },
}

/// Why a numeric id whose value JSON parsing could not keep is refused.
const INEXACT_ID: &str =
    "a numeric \"id\" must be an integer within 64 bits written without a fraction or exponent \
     (1, not 1.0 or 1e0), or a number with a fractional part; send a string id instead";

/// Whether `n` is kept exactly: an integer within 64 bits, or a number with a fractional part.
/// An integer beyond 64 bits is parsed as the nearest `f64`, so two different ids (e.g.
/// `18446744073709551616` and `18446744073709551617`) became one, and a request was refused as a
/// duplicate, or cancelled by the other's `notifications/cancelled` (a tester's report, issue 14).
fn exact(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() != 0.0)
}

impl Message {
    /// Classifies a JSON value; `Err` with a reason when it is not a valid JSON-RPC 2.0 message.
    pub fn classify(raw: Value) -> Result<Message, &'static str> {
        let obj = raw
            .as_object()
            .ok_or("a JSON-RPC message must be an object")?;
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err("\"jsonrpc\" must be \"2.0\"");
        }
        let id = match obj.get("id") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if !exact(n) => return Err(INEXACT_ID),
            Some(v @ (Value::String(_) | Value::Number(_))) => Some(RequestId(v.clone())),
            Some(_) => return Err("\"id\" must be a string or a number"),
        };
        let answers = obj.contains_key("result") || obj.contains_key("error");
        if obj.contains_key("result") && obj.contains_key("error") {
            return Err("a response has either \"result\" or \"error\", not both");
        }
        if let Some(method) = obj.get("method") {
            if answers {
                return Err("a message with \"method\" must not carry \"result\" or \"error\"");
            }
            let method = method
                .as_str()
                .ok_or("\"method\" must be a string")?
                .to_owned();
            if let Some(p) = obj.get("params") {
                if !p.is_object() && !p.is_array() {
                    return Err("\"params\" must be an object or an array");
                }
            }
            return Ok(match id {
                Some(id) => Message::Request { id, method, raw },
                None if obj.contains_key("id") => return Err("a request id must not be null"),
                None => Message::Notification { method, raw },
            });
        }
        if answers {
            return Ok(Message::Response { id, raw });
        }
        Err("a message needs \"method\", \"result\" or \"error\"")
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request { method, .. } | Message::Notification { method, .. } => Some(method),
            Message::Response { .. } => None,
        }
    }

    /// The original JSON.
    pub fn raw(&self) -> &Value {
        match self {
            Message::Request { raw, .. }
            | Message::Notification { raw, .. }
            | Message::Response { raw, .. } => raw,
        }
    }

    /// Whether this is a request (expects an answer).
    pub fn is_request(&self) -> bool {
        matches!(self, Message::Request { .. })
    }
}

/// Why a POST body could not be read as JSON-RPC.
#[derive(Clone, Debug, PartialEq)]
pub enum BodyError {
    /// Not JSON at all (-32700).
    Parse(String),
    /// JSON, but not a JSON-RPC message or batch (-32600).
    Invalid(String),
    /// One JSON object that is not a valid JSON-RPC message but has a valid `id` (a string or
    /// an exact number): -32600, answered with that id.
    InvalidWithId(String, RequestId),
}

impl BodyError {
    /// The JSON-RPC error code of this failure.
    pub fn code(&self) -> i64 {
        match self {
            BodyError::Parse(_) => codes::PARSE_ERROR,
            BodyError::Invalid(_) | BodyError::InvalidWithId(..) => codes::INVALID_REQUEST,
        }
    }

    /// A human-readable reason.
    pub fn message(&self) -> &str {
        match self {
            BodyError::Parse(m) | BodyError::Invalid(m) | BodyError::InvalidWithId(m, _) => m,
        }
    }

    /// The id of the invalid message, when it could be read (its error carries it).
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            BodyError::InvalidWithId(_, id) => Some(id),
            _ => None,
        }
    }
}

/// The `id` of a JSON object when it is a valid request id (a string, or a number kept
/// exactly), whatever else the object holds.
fn readable_id(v: &Value) -> Option<RequestId> {
    match v.get("id")? {
        Value::Number(n) if !exact(n) => None,
        id @ (Value::String(_) | Value::Number(_)) => Some(RequestId(id.clone())),
        _ => None,
    }
}

/// A parsed POST body.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// One message.
    Single(Message),
    /// A non-empty batch (only legal under MCP 2025-03-26).
    Batch(Vec<Message>),
}

impl Body {
    /// Parses a POST body. An empty array or an invalid element is [`BodyError::Invalid`].
    pub fn parse(bytes: &[u8]) -> Result<Body, BodyError> {
        let value: Value = serde_json::from_slice(bytes)
            .map_err(|e| BodyError::Parse(format!("parse error: {e}")))?;
        match value {
            Value::Array(items) => {
                if items.is_empty() {
                    return Err(BodyError::Invalid(
                        "an empty batch is not a valid request".into(),
                    ));
                }
                let msgs = items
                    .into_iter()
                    .map(Message::classify)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| BodyError::Invalid(format!("invalid batch element: {e}")))?;
                Ok(Body::Batch(msgs))
            }
            other => {
                // The id of an invalid message, when it can still be read, goes in the error
                // (JSON-RPC 2.0 §5: null only "if there was an error in detecting the id").
                let id = readable_id(&other);
                Message::classify(other)
                    .map(Body::Single)
                    .map_err(|e| match id {
                        Some(id) => BodyError::InvalidWithId(e.into(), id),
                        None => BodyError::Invalid(e.into()),
                    })
            }
        }
    }

    /// The messages in order.
    pub fn messages(&self) -> &[Message] {
        match self {
            Body::Single(m) => std::slice::from_ref(m),
            Body::Batch(v) => v,
        }
    }
}

/// A JSON-RPC 2.0 message of `members` after `"jsonrpc": "2.0"`, each moved in as it is: the
/// `json!` macro would copy every value (it serializes them), and a result may be megabytes
/// (case C48).
fn envelope<const N: usize>(members: [(&str, Value); N]) -> Value {
    let mut map = Map::new();
    map.insert("jsonrpc".into(), Value::String("2.0".into()));
    for (key, value) in members {
        map.insert(key.into(), value);
    }
    Value::Object(map)
}

/// `message` serialized compactly, in a buffer of its exact size when it is large: a message up
/// to 16 KiB is written once; a larger one is measured first, then written into a buffer of that
/// size, instead of one grown by doubling (up to twice the message, and the smaller buffers it
/// outgrew left to the allocator: case C48).
pub fn to_text(message: &Value) -> String {
    const SMALL: usize = 16 * 1024;
    let buf = to_bytes_within(message, SMALL).unwrap_or_else(|| {
        let mut exact = Vec::with_capacity(text_len(message));
        let _ = serde_json::to_writer(&mut exact, message);
        exact
    });
    // serde_json writes UTF-8 only.
    String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `message` serialized compactly when that takes at most `max` bytes; `None` (having written
/// at most `max`) when it would take more.
pub fn to_bytes_within(message: &Value, max: usize) -> Option<Vec<u8>> {
    let mut capped = Capped(Vec::with_capacity(max.min(512)), max);
    serde_json::to_writer(&mut capped, message).ok()?;
    Some(capped.0)
}

/// How many bytes `message` takes serialized compactly (serialized into nothing to count them).
pub fn text_len(message: &Value) -> usize {
    let mut counted = Counted(0);
    // A `Value` always serializes; the counter never fails.
    let _ = serde_json::to_writer(&mut counted, message);
    counted.0
}

/// A writer into a buffer that refuses to grow past a cap.
struct Capped(Vec<u8>, usize);

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + buf.len() > self.1 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A writer that only counts.
struct Counted(usize);

impl std::io::Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `{"jsonrpc":"2.0","id":id,"result":result}`.
pub fn result_response(id: &RequestId, result: Value) -> Value {
    envelope([("id", id.0.clone()), ("result", result)])
}

/// `{"jsonrpc":"2.0","id":id|null,"error":{"code","message","data"?}}`.
pub fn error_response(
    id: Option<&RequestId>,
    code: i64,
    message: impl Into<String>,
    data: Option<Value>,
) -> Value {
    let mut err = Map::new();
    err.insert("code".into(), code.into());
    err.insert("message".into(), Value::String(message.into()));
    if let Some(d) = data {
        err.insert("data".into(), d);
    }
    let id = id.map(|i| i.0.clone()).unwrap_or(Value::Null);
    envelope([("id", id), ("error", Value::Object(err))])
}

/// `{"jsonrpc":"2.0","method":method,"params":params}`.
pub fn notification(method: &str, params: Value) -> Value {
    envelope([("method", Value::String(method.into())), ("params", params)])
}

/// `{"jsonrpc":"2.0","id":id,"method":method,"params":params}`.
pub fn request(id: &RequestId, method: &str, params: Value) -> Value {
    let method = Value::String(method.into());
    envelope([("id", id.0.clone()), ("method", method), ("params", params)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn to_text_is_the_compact_json_at_every_size() {
        for size in [0, 100, 16 * 1024 - 40, 16 * 1024, 200_000] {
            let m = result_response(&RequestId(json!(7)), json!({"text": "é".repeat(size)}));
            let text = to_text(&m);
            assert_eq!(text, m.to_string(), "{size}");
            if size > 16 * 1024 {
                assert_eq!(text.capacity(), text.len(), "exact");
            }
        }
    }

    #[test]
    fn classifies_the_three_kinds() {
        let r = Message::classify(json!({"jsonrpc":"2.0","id":1,"method":"ping"})).unwrap();
        assert!(r.is_request());
        let n = Message::classify(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .unwrap();
        assert_eq!(n.method(), Some("notifications/initialized"));
        let s = Message::classify(json!({"jsonrpc":"2.0","id":"srv-1","result":{}})).unwrap();
        assert!(matches!(s, Message::Response { id: Some(_), .. }));
        assert!(Message::classify(json!({"jsonrpc":"1.0","id":1,"method":"x"})).is_err());
        assert!(Message::classify(json!({"jsonrpc":"2.0","id":null,"method":"x"})).is_err());
        assert!(Message::classify(json!({"jsonrpc":"2.0","id":{},"method":"x"})).is_err());
        // Integers beyond 64 bits cannot be told apart once parsed; the largest ones within
        // 64 bits, and fractions, are kept.
        let with_id = |id: &str| {
            let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"x"}}"#);
            Message::classify(serde_json::from_str(&text).unwrap())
        };
        for inexact in [
            "18446744073709551616",
            "18446744073709551617",
            "-9223372036854775809",
            "123456789012345678901234567890",
            "1e19",
        ] {
            assert_eq!(with_id(inexact), Err(INEXACT_ID), "{inexact}");
        }
        for exact_id in [
            "18446744073709551615",
            "-9223372036854775808",
            "9007199254740993",
            "1.5",
        ] {
            let Ok(Message::Request { id, .. }) = with_id(exact_id) else {
                panic!("{exact_id} is refused");
            };
            assert_eq!(id.key(), exact_id);
        }
        assert!(
            Message::classify(json!({"jsonrpc":"2.0","id":9,"method":"ping","result":{}})).is_err()
        );
        assert!(Message::classify(json!({"jsonrpc":"2.0","id":9,"result":{},"error":{}})).is_err());
    }

    #[test]
    fn string_and_number_ids_stay_apart() {
        assert_ne!(RequestId(json!("1")).key(), RequestId(json!(1)).key());
        assert_eq!(RequestId::from_key("\"1\""), Some(RequestId(json!("1"))));
    }

    #[test]
    fn bodies() {
        assert_eq!(Body::parse(b"{").unwrap_err().code(), codes::PARSE_ERROR);
        assert_eq!(
            Body::parse(b"[]").unwrap_err().code(),
            codes::INVALID_REQUEST
        );
        let b = Body::parse(
            br#"[{"jsonrpc":"2.0","id":10,"method":"tools/list"},{"jsonrpc":"2.0","method":"n"}]"#,
        )
        .unwrap();
        assert_eq!(b.messages().len(), 2);
    }

    #[test]
    fn an_invalid_message_keeps_its_readable_id() {
        let e = Body::parse(br#"{"id":8,"method":"tools/list"}"#).unwrap_err();
        assert_eq!(e.code(), codes::INVALID_REQUEST);
        assert_eq!(e.id(), Some(&RequestId(json!(8))));
        let e = Body::parse(br#"{"jsonrpc":"2.0","id":"a","method":42}"#).unwrap_err();
        assert_eq!(e.id(), Some(&RequestId(json!("a"))));
        for unreadable in [
            &br#"{"jsonrpc":"1.0","id":{"a":1},"method":"x"}"#[..],
            br#"{"id":1e400}"#,
            b"[1]",
        ] {
            if let Err(e) = Body::parse(unreadable) {
                assert_eq!(e.id(), None, "{}", String::from_utf8_lossy(unreadable));
            }
        }
    }
}
