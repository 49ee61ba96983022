//! Why one HTTP exchange with an upstream failed, naming the exchange: the message that was
//! sent (`initialize`, the call's method, `GET`, `DELETE`) and the endpoint that answered
//! (the address connected to), so every error a client reads says who answered what.

use std::net::SocketAddr;

use reqwest::header::{HeaderMap, WWW_AUTHENTICATE};
use reqwest::{Response, StatusCode};
use serde_json::{json, Value};
use switchboard_protocol::codes;

use super::common::{rpc_error, too_large, unavailable, with_endpoint};
use crate::upstream::RpcError;

/// How much of an unexpected error body is quoted in an error message.
const QUOTED_BODY: usize = 200;

/// Which exchange an error comes from: the message (`initialize`, a method, `GET`, `DELETE`)
/// and the endpoint that answered (the address connected to, as `reqwest` reports it, else the
/// pinned address, else the URL's `host:port`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct At {
    /// The message, e.g. `tools/call` or `GET`.
    pub what: String,
    /// The endpoint, e.g. `127.0.0.2:8080`.
    pub endpoint: String,
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` at {}", self.what, self.endpoint)
    }
}

/// Why an exchange failed.
#[derive(Debug)]
pub(crate) enum WireError {
    /// 404 to a request that carried our `Mcp-Session-Id` (or the 400 rule of `Wire::post`):
    /// the upstream ended or forgot the session (MCP 2025-11-25, basic/transports, Session
    /// Management items 3–4). The request was not run.
    Gone {
        /// The exchange.
        at: At,
        /// 404, or 400.
        status: StatusCode,
    },
    /// An HTTP error status whose body was a JSON-RPC error.
    Rpc {
        /// The exchange.
        at: At,
        /// The status.
        status: StatusCode,
        /// The upstream's error.
        error: RpcError,
    },
    /// 401 or 403: the upstream refused the credentials it was sent (case C33).
    Refused(Refusal),
    /// A JSON body or an SSE event larger than the limit (`max_message_bytes`, in bytes; case
    /// C32).
    TooLarge(usize),
    /// No connection could be made to the endpoint (refused, unreachable, connect timeout).
    Unreachable {
        /// The exchange.
        at: At,
        /// The pinned endpoint, when the session has one.
        pinned: Option<SocketAddr>,
        /// What the connection attempt said.
        why: String,
    },
    /// Anything else: unexpected status or body, a broken stream. The text says what and where.
    Failed(String),
}

impl WireError {
    /// Whether the error's text is about a session (see the 400 rule in `Wire::post`).
    pub(crate) fn mentions_session(&self) -> bool {
        let text = match self {
            WireError::Gone { .. } => return true,
            WireError::Rpc { error, .. } => error.message.to_ascii_lowercase(),
            WireError::Failed(why) => why.to_ascii_lowercase(),
            WireError::Unreachable { .. } | WireError::Refused(_) | WireError::TooLarge(_) => {
                return false
            }
        };
        text.contains("session")
    }

    /// What the error says, naming the exchange.
    pub fn describe(&self) -> String {
        match self {
            WireError::Gone { at, status } => format!(
                "{} answered HTTP {} to the upstream session id",
                at,
                status.as_u16()
            ),
            WireError::Rpc { at, status, error } => format!(
                "{} answered HTTP {}: {} ({})",
                at,
                status.as_u16(),
                error.message,
                error.code
            ),
            WireError::Unreachable { at, why, .. } => {
                format!("cannot connect to {} for `{}`: {why}", at.endpoint, at.what)
            }
            WireError::Refused(refusal) => format!("HTTP {}", refusal.status),
            WireError::TooLarge(limit) => {
                format!("a message larger than max_message_bytes ({limit} bytes)")
            }
            WireError::Failed(why) => why.clone(),
        }
    }
}

/// What a 401 or 403 said (RFC 9110 §15.5.2 and §15.5.4; MCP 2025-06-18,
/// basic/authorization, Error Handling).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    /// 401 or 403.
    pub status: StatusCode,
    /// Every `WWW-Authenticate` value as sent, joined with `, ` when there were several (RFC
    /// 9110 §5.3); `None` when there was none.
    pub www_authenticate: Option<String>,
    /// The JSON-RPC error of the body, when it held one.
    pub error: Option<RpcError>,
}

/// The JSON-RPC error a client gets for a failed exchange with upstream `name` (HTTP or legacy
/// SSE): -32006 naming the upstream, the message that failed and the endpoint that answered
/// (also as `data.endpoint`); an HTTP-level refusal keeps the upstream's own error as
/// `data.error`; a refusal of the credentials is [`credentials_refused`], a message over the
/// size limit [`too_large`].
pub(crate) fn exchange_error(name: &str, e: WireError) -> RpcError {
    let text = e.describe();
    match e {
        WireError::Refused(refusal) => credentials_refused(name, refusal),
        WireError::TooLarge(limit) => {
            too_large(name, "max_message_bytes", limit, "the request failed")
        }
        WireError::Rpc { at, error, .. } => RpcError {
            code: codes::UPSTREAM_UNAVAILABLE,
            message: format!("upstream `{name}` refused the request: {text}"),
            data: Some(json!({"upstream": name, "endpoint": at.endpoint,
                "error": {"code": error.code, "message": error.message, "data": error.data}})),
        },
        WireError::Gone { at, .. } | WireError::Unreachable { at, .. } => {
            with_endpoint(unavailable(name, text), &at.endpoint)
        }
        WireError::Failed(why) => unavailable(name, why),
    }
}

/// -32006 for a 401 or 403 of upstream `name` (case C33), the one place this error is built:
/// ``upstream `NAME` refused the credentials switchboard sent it (HTTP 401 Unauthorized): …``
/// with `data.upstream`, `data.status`, `data.www_authenticate` (every value as sent, or null)
/// and, when the body was a JSON-RPC error, `data.error`. The client's own credentials are never
/// sent upstream, so the fix is the upstream's configured `headers`, which the message says.
pub(crate) fn credentials_refused(name: &str, refusal: Refusal) -> RpcError {
    let status = refusal.status;
    let mut message =
        format!("upstream `{name}` refused the credentials switchboard sent it (HTTP {status})");
    if let Some(e) = &refusal.error {
        message.push_str(": ");
        message.push_str(&e.message);
    }
    message.push_str("; check the `headers` configured for it");
    let mut data = json!({
        "upstream": name,
        "status": status.as_u16(),
        "www_authenticate": refusal.www_authenticate,
    });
    if let Some(e) = refusal.error {
        data["error"] = json!({"code": e.code, "message": e.message, "data": e.data});
    }
    RpcError {
        code: codes::UPSTREAM_UNAVAILABLE,
        message,
        data: Some(data),
    }
}

/// A whole body of at most `max` bytes: refused from its `Content-Length` when that is larger,
/// else read until it passes `max` ([`WireError::TooLarge`]).
pub(crate) async fn read_body(
    mut response: Response,
    max: usize,
    at: &At,
) -> Result<bytes::Bytes, WireError> {
    let too_large = |len: u64| usize::try_from(len).map_or(true, |len| len > max);
    if response.content_length().is_some_and(too_large) {
        return Err(WireError::TooLarge(max));
    }
    let mut body = bytes::BytesMut::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| WireError::Failed(format!("{at}: {}", describe(&e))))?
    {
        if body.len() + chunk.len() > max {
            return Err(WireError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// An error status, naming the exchange: [`WireError::Refused`] for 401 and 403; else a
/// JSON-RPC error from its body when there is one, otherwise the status and the start of the
/// body. A body over `max` bytes (or unreadable) counts as empty.
pub(crate) async fn failure(response: Response, at: &At, max: usize) -> WireError {
    let status = response.status();
    let www_authenticate = www_authenticate(response.headers());
    let body = read_body(response, max, at).await.unwrap_or_default();
    let error = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|value| value.get("error").filter(|e| e.is_object()).map(rpc_error));
    if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        return WireError::Refused(Refusal {
            status,
            www_authenticate,
            error,
        });
    }
    if let Some(error) = error {
        return WireError::Rpc {
            at: at.clone(),
            status,
            error,
        };
    }
    let text = String::from_utf8_lossy(&body);
    let text = text.trim();
    if text.is_empty() {
        WireError::Failed(format!("{at} answered HTTP {status}"))
    } else {
        let quoted: String = text.chars().take(QUOTED_BODY).collect();
        WireError::Failed(format!("{at} answered HTTP {status}: {quoted}"))
    }
}

/// Every `WWW-Authenticate` value, joined with `, ` (text that is not visible ASCII kept as
/// UTF-8, lossily).
fn www_authenticate(headers: &HeaderMap) -> Option<String> {
    let values: Vec<String> = headers
        .get_all(WWW_AUTHENTICATE)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}

/// A reqwest error with its causes ("error sending request … : connection refused").
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        "cannot connect".to_owned()
    } else {
        e.to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}
