//! How a refusal by a rate limit is answered: the JSON-RPC error's `data` (every answer), and
//! the HTTP fields of a 429 (only without a session: `initialize` on the endpoint, 2026-07-28
//! requests). A request refused
//! inside a session gets the JSON-RPC error -32029 in an ordinary 200 answer, like the session's
//! other refusals (a busy session's -32003).

use http::{header, HeaderMap, HeaderValue};
use serde_json::{json, Value};
use switchboard_protocol::{codes, jsonrpc, RequestId};

/// `data` of the JSON-RPC error: `{"retryAfterMs": <integer ms>, "limit": <name>}`.
pub(crate) fn data(limit: &str, retry_after_ms: u64) -> Value {
    json!({"retryAfterMs": retry_after_ms, "limit": limit})
}

/// The JSON-RPC error response to request `id` refused by `limit`.
pub(crate) fn refusal(id: &RequestId, limit: &str, retry_after_ms: u64) -> Value {
    let message = format!("rate limit {limit} reached; retry after {retry_after_ms} ms");
    let data = data(limit, retry_after_ms);
    jsonrpc::error_response(Some(id), codes::RATE_LIMITED, message, Some(data))
}

/// Seconds for `Retry-After` and the `t` parameter: `retry_after_ms` rounded up.
pub(crate) fn retry_after_secs(retry_after_ms: u64) -> u64 {
    retry_after_ms.div_ceil(1000).max(1)
}

/// Sets `Retry-After`, `RateLimit-Policy` (when `policy` is known: `(q, w)`) and `RateLimit`
/// of a 429 (draft-ietf-httpapi-ratelimit-headers-10: `"<name>";q=<quota>;w=<seconds>` and
/// `"<name>";r=0;t=<seconds>`; nothing remains when the limit refused).
pub(crate) fn headers(
    headers: &mut HeaderMap,
    limit: &str,
    retry_after_ms: u64,
    policy: Option<(u64, u64)>,
) {
    let secs = retry_after_secs(retry_after_ms);
    headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    let name = sf_string(limit);
    if let Some((quota, window)) = policy {
        if let Ok(v) = HeaderValue::from_str(&format!("{name};q={quota};w={window}")) {
            headers.insert("ratelimit-policy", v);
        }
    }
    if let Ok(v) = HeaderValue::from_str(&format!("{name};r=0;t={secs}")) {
        headers.insert("ratelimit", v);
    }
}

/// `text` as a Structured Fields String (RFC 9651 §3.3.3): quoted, `"` and `\` escaped, any
/// character outside printable ASCII replaced by `?` (limit names are config keys).
fn sf_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_429_carries_the_draft_fields() {
        let mut h = HeaderMap::new();
        headers(&mut h, "tool:a\"b", 1001, Some((20, 1)));
        assert_eq!(h[header::RETRY_AFTER], "2");
        assert_eq!(h["ratelimit-policy"], r#""tool:a\"b";q=20;w=1"#);
        assert_eq!(h["ratelimit"], r#""tool:a\"b";r=0;t=2"#);
        let mut h = HeaderMap::new();
        headers(&mut h, "principal", 1, None);
        assert_eq!(h[header::RETRY_AFTER], "1");
        assert!(h.get("ratelimit-policy").is_none());
        assert_eq!(h["ratelimit"], r#""principal";r=0;t=1"#);
    }

    #[test]
    fn the_jsonrpc_refusal_says_when_to_retry() {
        let v = refusal(&RequestId(json!(7)), "principal", 49);
        assert_eq!(v["id"], 7);
        assert_eq!(v["error"]["code"], codes::RATE_LIMITED);
        assert_eq!(
            v["error"]["data"],
            json!({"retryAfterMs": 49, "limit": "principal"})
        );
    }
}
