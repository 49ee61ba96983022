//! Every way the HTTP edge refuses a request, each with exactly one HTTP status and one JSON-RPC
//! error code, declared here beside the type. Error bodies are JSON-RPC error responses (MCP
//! 2025-11-25, basic/transports: the body MAY be a JSON-RPC error without an id) whose `id` is
//! the request's whenever it was read (JSON-RPC 2.0 §5): [`HttpError::InvalidMessage`] carries
//! it, and every other refusal gets it from [`HttpError::answering`] (the edge answers a refusal
//! made after the parse with it, `edge::request_id`); `null` only where it could not be read.
//! They never carry `Mcp-Session-Id`.

use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};
use switchboard_protocol::{codes, jsonrpc};

/// A refused request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HttpError {
    /// A request other than `initialize` without `Mcp-Session-Id` (MCP 2025-03-26+, Session
    /// Management item 2: SHOULD be 400).
    #[error("Bad Request: Mcp-Session-Id header is required")]
    MissingSession,
    /// The session id is unknown, expired or deleted (Session Management item 3: MUST be 404).
    #[error("Session not found")]
    UnknownSession,
    /// `MCP-Protocol-Version` names no revision we speak (MCP 2025-06-18+: MUST be 400).
    #[error("Bad Request: unsupported MCP-Protocol-Version: {0}")]
    BadProtocolVersion(String),
    /// The `Accept` header does not allow what we must send.
    #[error("Not Acceptable: {0}")]
    NotAcceptable(&'static str),
    /// `Content-Type` is not `application/json`.
    #[error("Unsupported Media Type: Content-Type must be application/json")]
    UnsupportedMediaType,
    /// The body is not JSON.
    #[error("Parse error: {0}")]
    Parse(String),
    /// The body is JSON but not a valid JSON-RPC message for this endpoint.
    #[error("Invalid Request: {0}")]
    InvalidRequest(String),
    /// The body is one JSON-RPC message that is invalid but has a readable id (a string or an
    /// exact number), or a valid request refused before it runs: 400, -32600, answered with
    /// that id.
    #[error("Invalid Request: {reason}")]
    InvalidMessage {
        /// Why.
        reason: String,
        /// The request's id.
        id: serde_json::Value,
    },
    /// The body is larger than `http.max_body`.
    #[error("Payload Too Large: the body exceeds {0} bytes")]
    PayloadTooLarge(usize),
    /// The body is not framed as HTTP/1.1 says (a malformed chunk size, a body shorter than its
    /// `Content-Length` when the connection ends): 400 (RFC 9112 §7.1, §8) with
    /// `Connection: close`, as what follows on the connection cannot be read either.
    #[error("Bad Request: the body is not framed as HTTP/1.1 says: {0}")]
    BadFraming(String),
    /// An HTTP/1.1 request without `Host` (RFC 9112 §3.2: a server MUST answer 400).
    #[error("Bad Request: an HTTP/1.1 request must carry a Host header")]
    MissingHost,
    /// The body did not arrive in full within `http.body_read_timeout` of the end of its head
    /// (a client sending it a byte at a time): 408 (RFC 9110 §15.5.9) with `Connection: close`,
    /// as the rest of the body may still be on its way, and -32600 like the other refusals
    /// made before the body is read.
    #[error("Request Timeout: the body did not arrive within {0:?}")]
    BodyTimeout(std::time::Duration),
    /// `Origin` is present and not allowed (MCP 2025-11-25: MUST be 403).
    #[error("Forbidden: Origin {0} is not allowed")]
    ForbiddenOrigin(String),
    /// `Host` is not one this node serves (DNS-rebinding protection).
    #[error("Misdirected Request: Host {0} is not served here")]
    ForbiddenHost(String),
    /// An HTTP method the endpoint does not offer.
    #[error("Method Not Allowed")]
    MethodNotAllowed,
    /// The global session cap is reached.
    #[error("Service Unavailable: the session limit is reached, retry later")]
    AtCapacity {
        /// Seconds for `Retry-After`.
        retry_after_secs: u64,
    },
    /// A rate limit refused the request before a session exists (`initialize`): 429 with
    /// `Retry-After` (whole seconds, rounded up; RFC 9110 §10.2.3) and the IETF `RateLimit-Policy`
    /// and `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers-10, September 2025: each a
    /// Structured Fields List of one Item, the policy's name as an sf-String with parameters
    /// `q` quota and `w` window in seconds, resp. `r` remaining and `t` seconds until reset),
    /// and JSON-RPC -32029 with `data.retryAfterMs` and `data.limit`.
    #[error("Too Many Requests: rate limit {limit} reached; retry after {retry_after_ms} ms")]
    RateLimited {
        /// The refusing limit's name.
        limit: String,
        /// Milliseconds until the request would pass.
        retry_after_ms: u64,
        /// The limit as a quota policy: (`q`, `w`) = (burst, seconds for a burst at the rate);
        /// `None` leaves out `RateLimit-Policy`.
        policy: Option<(u64, u64)>,
    },
    /// The request's principal has `session.max_sessions_per_principal` sessions (429: the
    /// client's own usage, not the cluster's capacity; it may end one with DELETE or wait for
    /// one to idle out).
    #[error("Too Many Requests: this principal has reached session.max_sessions_per_principal ({limit} sessions); end one (DELETE) or retry later")]
    TooManySessions {
        /// The cap.
        limit: u64,
        /// Seconds for `Retry-After`.
        retry_after_secs: u64,
    },
    /// `Last-Event-ID` is not an event id of ours.
    #[error("Bad Request: malformed Last-Event-ID")]
    BadLastEventId,
    /// `Last-Event-ID` names a stream this session does not have (or whose log has expired).
    #[error("Bad Request: Last-Event-ID names no stream of this session")]
    UnknownStream,
    /// `Last-Event-ID` is older than the retained event log.
    #[error("Gone: events after this Last-Event-ID are no longer retained (oldest retained: {0})")]
    EventsTrimmed(String),
    /// The shared store failed.
    #[error("Service Unavailable: session store error")]
    Store(String),
    /// A client's answer (a JSON-RPC response) to a server-to-client request whose node
    /// stopped before it arrived: the request that asked was lost with that node (its call ends
    /// with -32004 where the client resumes it), so nobody can take the answer. 410 Gone with
    /// -32004, at once, instead of a 202 for an answer that goes nowhere (MCP 2025-11-25,
    /// basic/transports: a POSTed response the server cannot accept gets an HTTP error status,
    /// the body a JSON-RPC error without an id).
    #[error("Gone: the request this answer was for was lost: node {0}, which ran it, stopped")]
    AnswerLost(String),
    /// Authorization is on and the request has no bearer token (MCP 2025-11-25,
    /// basic/authorization: 401; RFC 6750 §3.1: no error code). `challenge` is the
    /// `WWW-Authenticate` value, pointing at the metadata (RFC 9728 §5.1).
    #[error("Unauthorized: a bearer token is required")]
    MissingToken {
        /// The `WWW-Authenticate` value.
        challenge: String,
    },
    /// The bearer token is malformed, expired, badly signed or not for this resource
    /// (401, `error="invalid_token"`, RFC 6750 §3.1).
    #[error("Unauthorized: invalid token: {reason}")]
    InvalidToken {
        /// The `WWW-Authenticate` value.
        challenge: String,
        /// Why, also in `error_description`.
        reason: String,
    },
    /// A valid token lacks a required scope (403, `error="insufficient_scope"`: MCP
    /// 2025-11-25, Runtime Insufficient Scope Errors; RFC 6750 §3.1).
    #[error("Forbidden: the token lacks the required scope: {lacking}")]
    InsufficientScope {
        /// The `WWW-Authenticate` value.
        challenge: String,
        /// The required scopes the token lacks, space-separated.
        lacking: String,
    },
}

impl HttpError {
    /// The JSON-RPC refusal to request `id` when this is a rate limit's ([`HttpError::RateLimited`]):
    /// for an `initialize` answered inside a stream or a socket (legacy HTTP+SSE, WebSocket), where
    /// no HTTP status carries it: -32029 with `data.retryAfterMs`, as in a session.
    pub(crate) fn rate_refusal(&self, id: &jsonrpc::RequestId) -> Option<serde_json::Value> {
        match self {
            HttpError::RateLimited {
                limit,
                retry_after_ms,
                ..
            } => Some(crate::edge::rate_limited::refusal(
                id,
                limit,
                *retry_after_ms,
            )),
            _ => None,
        }
    }

    /// The HTTP status of this refusal.
    pub fn status(&self) -> StatusCode {
        use HttpError::*;
        match self {
            MissingSession
            | BadProtocolVersion(_)
            | Parse(_)
            | InvalidRequest(_)
            | InvalidMessage { .. }
            | BadLastEventId
            | BadFraming(_)
            | MissingHost
            | UnknownStream => StatusCode::BAD_REQUEST,
            MissingToken { .. } | InvalidToken { .. } => StatusCode::UNAUTHORIZED,
            InsufficientScope { .. } => StatusCode::FORBIDDEN,
            UnknownSession => StatusCode::NOT_FOUND,
            NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ForbiddenOrigin(_) => StatusCode::FORBIDDEN,
            ForbiddenHost(_) => StatusCode::MISDIRECTED_REQUEST,
            MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            AtCapacity { .. } | Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            TooManySessions { .. } => StatusCode::TOO_MANY_REQUESTS,
            EventsTrimmed(_) | AnswerLost(_) => StatusCode::GONE,
            RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// The JSON-RPC error code in the body.
    pub fn code(&self) -> i64 {
        use HttpError::*;
        match self {
            Parse(_) => codes::PARSE_ERROR,
            UnknownSession => codes::SESSION_NOT_FOUND,
            AtCapacity { .. } | TooManySessions { .. } => codes::OVERLOADED,
            RateLimited { .. } => codes::RATE_LIMITED,
            Store(_) => codes::INTERNAL_ERROR,
            AnswerLost(_) => codes::REQUEST_ABORTED,
            _ => codes::INVALID_REQUEST,
        }
    }
}

impl From<switchboard_store::StoreError> for HttpError {
    fn from(e: switchboard_store::StoreError) -> Self {
        tracing::error!(error = %e, "store error");
        HttpError::Store(e.to_string())
    }
}

/// The value of `Allow` on the MCP endpoint.
pub const ALLOW: &str = "GET, POST, DELETE";

/// Marks a refusal's response built without the request's id ([`HttpError::into_response`]),
/// with the refusal, so that the edge can answer it with the id once the handler read it
/// (`edge::request_id`).
#[derive(Clone, Debug)]
pub struct WithoutId(pub HttpError);

impl HttpError {
    /// The refusal as the answer to request `id` (JSON-RPC 2.0 §5: its id when it was read);
    /// `None`: `id: null`. [`HttpError::InvalidMessage`] answers with the id it holds.
    pub fn answering(self, id: Option<&jsonrpc::RequestId>) -> Response {
        let own = match &self {
            HttpError::InvalidMessage { id, .. } => Some(jsonrpc::RequestId(id.clone())),
            _ => None,
        };
        let id = own.as_ref().or(id);
        let data = match &self {
            HttpError::RateLimited {
                limit,
                retry_after_ms,
                ..
            } => Some(crate::edge::rate_limited::data(limit, *retry_after_ms)),
            _ => None,
        };
        let body = jsonrpc::error_response(id, self.code(), self.to_string(), data);
        let mut resp = (self.status(), axum::Json(body)).into_response();
        if id.is_none() {
            resp.extensions_mut().insert(WithoutId(self.clone()));
        }
        self.headers(resp.headers_mut());
        resp
    }

    /// The headers a refusal sets besides `Content-Type`.
    fn headers(self, headers: &mut http::HeaderMap) {
        match self {
            HttpError::MissingToken { challenge }
            | HttpError::InvalidToken { challenge, .. }
            | HttpError::InsufficientScope { challenge, .. } => {
                // Built from config and RFC 6750-safe characters only; never fails in practice.
                if let Ok(v) = HeaderValue::from_str(&challenge) {
                    headers.insert(header::WWW_AUTHENTICATE, v);
                }
            }
            HttpError::MethodNotAllowed => {
                headers.insert(header::ALLOW, HeaderValue::from_static(ALLOW));
            }
            HttpError::BodyTimeout(_) | HttpError::BadFraming(_) => {
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            HttpError::AtCapacity { retry_after_secs }
            | HttpError::TooManySessions {
                retry_after_secs, ..
            } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
            }
            HttpError::RateLimited {
                limit,
                retry_after_ms,
                policy,
            } => crate::edge::rate_limited::headers(headers, &limit, retry_after_ms, policy),
            _ => {}
        }
    }
}

impl IntoResponse for HttpError {
    /// The refusal with `id: null` (unless it holds its id), marked [`WithoutId`]: the edge
    /// answers it with the request's id when the handler read one.
    fn into_response(self) -> Response {
        self.answering(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_variant() -> Vec<HttpError> {
        use HttpError::*;
        vec![
            MissingSession,
            UnknownSession,
            BadProtocolVersion("x".into()),
            NotAcceptable("x"),
            UnsupportedMediaType,
            Parse("x".into()),
            InvalidRequest("x".into()),
            InvalidMessage {
                reason: "x".into(),
                id: serde_json::json!(7),
            },
            PayloadTooLarge(1),
            BadFraming("x".into()),
            MissingHost,
            BodyTimeout(std::time::Duration::from_secs(2)),
            ForbiddenOrigin("x".into()),
            ForbiddenHost("x".into()),
            MethodNotAllowed,
            AtCapacity {
                retry_after_secs: 5,
            },
            TooManySessions {
                limit: 2,
                retry_after_secs: 5,
            },
            BadLastEventId,
            UnknownStream,
            EventsTrimmed("1-0".into()),
            AnswerLost("b".into()),
            RateLimited {
                limit: "principal".into(),
                retry_after_ms: 1200,
                policy: Some((20, 1)),
            },
            Store("x".into()),
            MissingToken {
                challenge: "Bearer resource_metadata=\"x\"".into(),
            },
            InvalidToken {
                challenge: "Bearer error=\"invalid_token\"".into(),
                reason: "x".into(),
            },
            InsufficientScope {
                challenge: "Bearer error=\"insufficient_scope\"".into(),
                lacking: "x".into(),
            },
        ]
    }

    #[test]
    fn every_variant_maps_to_a_client_or_server_error_with_a_jsonrpc_body() {
        for e in every_variant() {
            let status = e.status();
            let code = e.code();
            assert!(
                status.is_client_error() || status.is_server_error(),
                "{e:?}"
            );
            assert!(
                (-32800..=-32000).contains(&code) || code == codes::PARSE_ERROR,
                "{e:?}"
            );
            let resp = e.clone().into_response();
            assert_eq!(resp.status(), status);
            assert!(resp.headers().get("mcp-session-id").is_none());
        }
    }

    /// JSON-RPC 2.0 §5: every refusal answers with the request's id once it was read, and with
    /// `null` (marked for the edge to fill in) before; the status, code and headers stay the same.
    #[tokio::test]
    async fn every_variant_answers_with_the_request_id_when_known() {
        let id = jsonrpc::RequestId(serde_json::json!("req-9"));
        for e in every_variant() {
            let own = match &e {
                HttpError::InvalidMessage { id, .. } => id.clone(),
                _ => serde_json::Value::Null,
            };
            let bare = e.clone().into_response();
            assert_eq!(
                bare.extensions().get::<WithoutId>().is_some(),
                own.is_null()
            );
            let known = e.clone().answering(Some(&id));
            assert_eq!(known.status(), e.status(), "{e:?}");
            assert!(known.extensions().get::<WithoutId>().is_none());
            let names = |r: &Response| r.headers().keys().cloned().collect::<Vec<_>>();
            assert_eq!(names(&known), names(&bare), "{e:?}");
            let answered = if own.is_null() {
                id.0.clone()
            } else {
                own.clone()
            };
            for (resp, want) in [(bare, own), (known, answered)] {
                let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16)
                    .await
                    .unwrap();
                let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                assert_eq!(body["id"], want, "{e:?}");
                assert_eq!(body["error"]["code"], e.code(), "{e:?}");
            }
        }
    }

    #[test]
    fn special_headers() {
        let r = HttpError::MethodNotAllowed.into_response();
        assert_eq!(r.headers()[header::ALLOW], ALLOW);
        let r = HttpError::AtCapacity {
            retry_after_secs: 7,
        }
        .into_response();
        assert_eq!(r.headers()[header::RETRY_AFTER], "7");
        let r = HttpError::BodyTimeout(std::time::Duration::from_secs(2)).into_response();
        assert_eq!(r.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(r.headers()[header::CONNECTION], "close");
        assert_eq!(
            HttpError::BodyTimeout(std::time::Duration::ZERO).code(),
            codes::INVALID_REQUEST
        );
        assert_eq!(HttpError::UnknownSession.status(), StatusCode::NOT_FOUND);
        assert_eq!(HttpError::Parse("x".into()).code(), codes::PARSE_ERROR);
        for e in every_variant() {
            let challenged = e.clone().into_response();
            let has = challenged.headers().get(header::WWW_AUTHENTICATE).is_some();
            let auth = matches!(
                e,
                HttpError::MissingToken { .. }
                    | HttpError::InvalidToken { .. }
                    | HttpError::InsufficientScope { .. }
            );
            assert_eq!(has, auth, "WWW-Authenticate on {e:?}");
        }
        let r = HttpError::InsufficientScope {
            challenge: "Bearer error=\"insufficient_scope\"".into(),
            lacking: "a".into(),
        };
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
    }
}
