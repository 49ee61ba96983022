//! How the stateless path refuses a request: each refusal has exactly one HTTP status and one
//! JSON-RPC code, declared here (MCP 2026-07-28, basic/transports, Server Validation and the
//! status matrix; basic, `_meta`; basic/versioning). The body is a JSON-RPC error carrying the
//! request's id when it is known, so a client can tell a modern server from a legacy one by it.

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::{json, Value};
use switchboard_protocol::{codes, jsonrpc, RequestId, Revision};

/// A refused 2026-07-28 request.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// A required header is missing, unreadable or differs from the body (400, -32020).
    HeaderMismatch(String),
    /// The version in `_meta` is not one we serve statelessly (400, -32022).
    UnsupportedVersion(String),
    /// A required `_meta` field is missing or malformed, or the params are not an object
    /// (400, -32602).
    InvalidParams(String),
    /// The request needs client capabilities its `_meta` did not declare (400, -32021).
    MissingCapability(Vec<String>),
    /// A method this server does not implement in this era (404, -32601).
    UnknownMethod(String),
    /// A JSON-RPC response POSTed by the client, which 2026-07-28 forbids (400, -32600).
    ResponseNotAllowed,
    /// A per-node cap is reached (`stateless.max_listeners`): 503, -32003; retry later or elsewhere.
    Overloaded(String),
    /// A rate limit (`rate_limits`, [`crate::limits`]) refused the request: 429 with
    /// `Retry-After`, `RateLimit-Policy` and `RateLimit` (as `initialize`'s), -31029
    /// ([`codes::STATELESS_RATE_LIMITED`]: 2026-07-28 reserves -32029's range) with
    /// `data.retryAfterMs` and `data.limit`.
    RateLimited {
        /// The refusing limit's name.
        limit: String,
        /// Milliseconds until the request would pass.
        retry_after_ms: u64,
        /// The limit as a quota policy (`q`, `w`) for `RateLimit-Policy`.
        policy: Option<(u64, u64)>,
    },
}

impl Refusal {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::UnknownMethod(_) => StatusCode::NOT_FOUND,
            Refusal::Overloaded(_) => StatusCode::SERVICE_UNAVAILABLE,
            Refusal::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match self {
            Refusal::HeaderMismatch(_) => codes::HEADER_MISMATCH,
            Refusal::UnsupportedVersion(_) => codes::UNSUPPORTED_PROTOCOL_VERSION,
            Refusal::InvalidParams(_) => codes::INVALID_PARAMS,
            Refusal::MissingCapability(_) => codes::MISSING_CLIENT_CAPABILITY,
            Refusal::UnknownMethod(_) => codes::METHOD_NOT_FOUND,
            Refusal::ResponseNotAllowed => codes::INVALID_REQUEST,
            Refusal::Overloaded(_) => codes::OVERLOADED,
            Refusal::RateLimited { .. } => codes::STATELESS_RATE_LIMITED,
        }
    }

    fn message(&self) -> String {
        match self {
            Refusal::HeaderMismatch(why) => format!("Header mismatch: {why}"),
            Refusal::UnsupportedVersion(v) => format!("Unsupported protocol version: {v}"),
            Refusal::InvalidParams(why) => format!("Invalid params: {why}"),
            Refusal::MissingCapability(caps) => {
                format!("Missing required client capability: {}", caps.join(", "))
            }
            Refusal::UnknownMethod(m) => format!("Method not found: {m}"),
            Refusal::ResponseNotAllowed => {
                "Invalid Request: clients must not send JSON-RPC responses under 2026-07-28".into()
            }
            Refusal::Overloaded(why) => format!("Overloaded: {why}"),
            Refusal::RateLimited {
                limit,
                retry_after_ms,
                ..
            } => format!(
                "Too Many Requests: rate limit {limit} reached; retry after {retry_after_ms} ms"
            ),
        }
    }

    fn data(&self) -> Option<Value> {
        match self {
            Refusal::UnsupportedVersion(requested) => Some(json!({
                "supported": Revision::STATELESS.map(Revision::as_str),
                "requested": requested,
            })),
            Refusal::MissingCapability(caps) => {
                // Shaped as a client declares capabilities: an extension (`extensions.<id>`)
                // nested under `extensions`, as in `clientCapabilities`.
                let mut required = json!({});
                for cap in caps {
                    match cap.strip_prefix("extensions.") {
                        Some(ext) => required["extensions"][ext] = json!({}),
                        None => required[cap.as_str()] = json!({}),
                    }
                }
                Some(json!({ "requiredCapabilities": required }))
            }
            Refusal::RateLimited {
                limit,
                retry_after_ms,
                ..
            } => Some(crate::edge::rate_limited::data(limit, *retry_after_ms)),
            _ => None,
        }
    }

    /// The JSON-RPC error response for request `id` (null when unknown), also the answer inside
    /// a stream that is already open (a server-to-client request the client's capabilities did
    /// not allow ends its request with [`Refusal::MissingCapability`]).
    pub fn body(&self, id: Option<&RequestId>) -> Value {
        jsonrpc::error_response(id, self.code(), self.message(), self.data())
    }

    /// The HTTP answer, its body [`Refusal::body`].
    pub fn respond(&self, id: Option<&RequestId>) -> Response {
        let body = self.body(id);
        let mut response = (self.status(), axum::Json(body)).into_response();
        let headers = response.headers_mut();
        match self {
            // A full node frees up as requests end: a short wait, then any node.
            Refusal::Overloaded(_) => {
                let one = http::HeaderValue::from_static("1");
                headers.insert(http::header::RETRY_AFTER, one);
            }
            Refusal::RateLimited {
                limit,
                retry_after_ms,
                policy,
            } => crate::edge::rate_limited::headers(headers, limit, *retry_after_ms, *policy),
            _ => {}
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_has_its_status_and_code() {
        let all = [
            (Refusal::HeaderMismatch("x".into()), 400, -32020),
            (Refusal::UnsupportedVersion("x".into()), 400, -32022),
            (Refusal::InvalidParams("x".into()), 400, -32602),
            (
                Refusal::MissingCapability(vec!["sampling".into()]),
                400,
                -32021,
            ),
            (Refusal::UnknownMethod("ping".into()), 404, -32601),
            (Refusal::ResponseNotAllowed, 400, -32600),
            (Refusal::Overloaded("x".into()), 503, -32003),
            (
                Refusal::RateLimited {
                    limit: "principal".into(),
                    retry_after_ms: 1500,
                    policy: Some((2, 20)),
                },
                429,
                -31029,
            ),
        ];
        for (r, status, code) in all {
            assert_eq!((r.status().as_u16(), r.code()), (status, code), "{r:?}");
        }
        let data = Refusal::UnsupportedVersion("2099-01-01".into())
            .data()
            .unwrap();
        assert_eq!(data["supported"], json!(["2026-07-28"]));
        assert_eq!(data["requested"], "2099-01-01");
        let data = Refusal::MissingCapability(vec!["sampling".into()])
            .data()
            .unwrap();
        assert_eq!(data["requiredCapabilities"], json!({"sampling": {}}));
        let ext =
            Refusal::MissingCapability(vec!["extensions.io.modelcontextprotocol/tasks".into()]);
        let data = ext.data().expect("data");
        assert_eq!(
            data["requiredCapabilities"],
            json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
        );
    }

    #[test]
    fn a_rate_refusal_carries_the_id_the_wait_and_the_429_fields() {
        let refusal = Refusal::RateLimited {
            limit: "tool:echo".into(),
            retry_after_ms: 1500,
            policy: Some((2, 20)),
        };
        let body = refusal.body(Some(&RequestId(json!(9))));
        assert_eq!(body["id"], 9);
        assert_eq!(
            body["error"]["data"],
            json!({"retryAfterMs": 1500, "limit": "tool:echo"})
        );
        let response = refusal.respond(Some(&RequestId(json!(9))));
        let h = response.headers();
        assert_eq!(h[http::header::RETRY_AFTER], "2");
        assert_eq!(h["ratelimit-policy"], r#""tool:echo";q=2;w=20"#);
        assert_eq!(h["ratelimit"], r#""tool:echo";r=0;t=2"#);
    }
}
