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
        /// Whether the body was a JSON-RPC error, as MCP servers (every SDK) send: the server
        /// itself answered. Without one, something in front of it may have (an ingress with no
        /// route for a moment), so the loss is confirmed first (see the `loss` module).
        json_rpc: bool,
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
    Refused {
        /// The exchange.
        at: At,
        /// What the refusal said (boxed: the largest variant otherwise).
        refusal: Box<Refusal>,
    },
    /// A JSON body or an SSE event larger than the limit (`max_message_bytes`; case C32).
    TooLarge {
        /// The exchange whose answer it was; `None` for an event of a legacy SSE stream, which
        /// answers no one exchange.
        at: Option<At>,
        /// The limit, in bytes.
        limit: usize,
    },
    /// No connection could be made to the endpoint (refused, unreachable, connect timeout).
    Unreachable {
        /// The exchange.
        at: At,
        /// The pinned endpoint, when the session has one.
        pinned: Option<SocketAddr>,
        /// What the connection attempt said.
        why: String,
    },
    /// Anything else: unexpected status or body, a broken stream.
    Failed {
        /// The exchange, when the failure comes from one.
        at: Option<At>,
        /// What happened, naming the exchange when there is one ([`WireError::failed`]).
        why: String,
    },
}

impl WireError {
    /// A failure of the exchange `at`: "`<message>` at <endpoint> <what>", e.g. what
    /// "answered HTTP 500 Internal Server Error".
    pub fn failed(at: &At, what: impl std::fmt::Display) -> WireError {
        WireError::Failed {
            why: format!("{at} {what}"),
            at: Some(at.clone()),
        }
    }

    /// A failure outside any one exchange (the host does not resolve, a message that does not
    /// serialize, a legacy SSE stream that ends).
    pub fn other(why: impl Into<String>) -> WireError {
        WireError::Failed {
            at: None,
            why: why.into(),
        }
    }

    /// The exchange the error comes from, if one.
    pub fn at(&self) -> Option<&At> {
        match self {
            WireError::Gone { at, .. }
            | WireError::Rpc { at, .. }
            | WireError::Refused { at, .. }
            | WireError::Unreachable { at, .. } => Some(at),
            WireError::TooLarge { at, .. } | WireError::Failed { at, .. } => at.as_ref(),
        }
    }

    /// Whether the error's text is about a session (see the 400 rule in `Wire::post`).
    pub(crate) fn mentions_session(&self) -> bool {
        let text = match self {
            WireError::Gone { .. } => return true,
            WireError::Rpc { error, .. } => error.message.to_ascii_lowercase(),
            WireError::Failed { why, .. } => why.to_ascii_lowercase(),
            WireError::Unreachable { .. }
            | WireError::Refused { .. }
            | WireError::TooLarge { .. } => return false,
        };
        text.contains("session")
    }

    /// What the error says, naming the exchange.
    pub fn describe(&self) -> String {
        match self {
            WireError::Gone {
                at,
                status,
                json_rpc,
            } => format!(
                "{} answered HTTP {}{} to the upstream session id",
                at,
                status.as_u16(),
                if *json_rpc {
                    ""
                } else {
                    " (with no JSON-RPC error in the body)"
                }
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
            WireError::Refused { at, refusal } => format!("{at} answered HTTP {}", refusal.status),
            WireError::TooLarge { at, limit } => {
                let answering = at
                    .as_ref()
                    .map(|at| format!(" answering {at}"))
                    .unwrap_or_default();
                format!("a message larger than max_message_bytes ({limit} bytes){answering}")
            }
            WireError::Failed { why, .. } => why.clone(),
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
/// SSE), the one place it is built: -32006 naming the upstream and what failed; when it comes
/// from an exchange, the message names the message that was sent and the endpoint that
/// answered, which is also `data.endpoint`. An HTTP-level refusal keeps the upstream's own error
/// as `data.error`; a refusal of the credentials is [`credentials_refused`], a message over the
/// size limit [`too_large`].
pub(crate) fn exchange_error(name: &str, e: WireError) -> RpcError {
    let text = e.describe();
    let endpoint = e.at().map(|at| at.endpoint.clone());
    let error = match e {
        WireError::Refused { at, refusal } => credentials_refused(name, *refusal, Some(&at)),
        WireError::TooLarge { at, limit } => too_large(
            name,
            "max_message_bytes",
            limit,
            at.as_ref().map(|at| at as &dyn std::fmt::Display),
            "the request failed",
        ),
        WireError::Rpc { error, .. } => RpcError {
            code: codes::UPSTREAM_UNAVAILABLE,
            message: format!("upstream `{name}` refused the request: {text}"),
            data: Some(json!({"upstream": name,
                "error": {"code": error.code, "message": error.message, "data": error.data}})),
        },
        WireError::Gone { .. } | WireError::Unreachable { .. } | WireError::Failed { .. } => {
            unavailable(name, text)
        }
    };
    match endpoint {
        Some(endpoint) => with_endpoint(error, &endpoint),
        None => error,
    }
}

/// -32006 for a 401 or 403 of upstream `name` (case C33), the one place this error is built:
/// ``upstream `NAME` refused the credentials switchboard sent it (HTTP 401 Unauthorized to
/// `initialize` at 10.0.0.5:8080): …`` (the exchange `at`, when known) with `data.upstream`,
/// `data.status`, `data.www_authenticate` (every value as sent, or null) and, when the body was
/// a JSON-RPC error, `data.error` ([`exchange_error`] adds `data.endpoint`). The client's own
/// credentials are never sent upstream, so the fix is the upstream's configured `headers`, which
/// the message says.
pub(crate) fn credentials_refused(name: &str, refusal: Refusal, at: Option<&At>) -> RpcError {
    let status = refusal.status;
    let to = at.map(|at| format!(" to {at}")).unwrap_or_default();
    let mut message = format!(
        "upstream `{name}` refused the credentials switchboard sent it (HTTP {status}{to})"
    );
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
///
/// A body in one piece is that piece. A longer one is copied into one buffer as it arrives, sized
/// from `Content-Length` when there is one, so that each piece is freed at once: pieces kept until
/// the end stayed resident beside the joined copy (case C48).
pub(crate) async fn read_body(
    mut response: Response,
    max: usize,
    at: &At,
) -> Result<bytes::Bytes, WireError> {
    let too_large = |len: u64| usize::try_from(len).map_or(true, |len| len > max);
    let over = || WireError::TooLarge {
        at: Some(at.clone()),
        limit: max,
    };
    if response.content_length().is_some_and(too_large) {
        return Err(over());
    }
    let declared = response
        .content_length()
        .and_then(|l| usize::try_from(l).ok());
    let mut first: Option<bytes::Bytes> = None;
    let mut body: Vec<u8> = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| WireError::failed(at, format!("broke off its answer: {}", describe(&e))))?
    {
        let length = first.as_ref().map_or(0, bytes::Bytes::len) + body.len() + chunk.len();
        if length > max {
            return Err(over());
        }
        match first.take() {
            None if body.is_empty() => first = Some(chunk),
            None => body.extend_from_slice(&chunk),
            Some(one) => {
                body.reserve_exact(declared.unwrap_or(0).max(length));
                body.extend_from_slice(&one);
                body.extend_from_slice(&chunk);
            }
        }
    }
    Ok(first.unwrap_or_else(|| bytes::Bytes::from(body)))
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
        let refusal = Box::new(Refusal {
            status,
            www_authenticate,
            error,
        });
        return WireError::Refused {
            at: at.clone(),
            refusal,
        };
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
        WireError::failed(at, format!("answered HTTP {status}"))
    } else {
        let quoted: String = text.chars().take(QUOTED_BODY).collect();
        WireError::failed(at, format!("answered HTTP {status}: {quoted}"))
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

/// A reqwest error with its causes ("error sending request … : connection refused"). An answer
/// whose header section the HTTP client refused (hyper's "message head is too large") says so
/// plainly first: [`HEAD_TOO_LARGE`].
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        "cannot connect".to_owned()
    } else if head_too_large(e) {
        format!("{HEAD_TOO_LARGE}: {e}")
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

/// What an answer whose header section the HTTP client refused is called in errors. The limits
/// are hyper's HTTP/1 client defaults, which reqwest does not let us change: 100 header fields,
/// and a header section of about 400 KiB.
pub(crate) const HEAD_TOO_LARGE: &str = "its answer has more headers than the HTTP client \
    accepts (at most 100 header fields, about 400 KiB of headers)";

/// Whether a cause of `e` is hyper refusing the answer's header section as too large.
fn head_too_large(e: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_parse_too_large)
        {
            return true;
        }
        source = s.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Finding 7: an answer with 150 header fields fails with an error that says the upstream
    /// sent more headers than the HTTP client accepts, not only hyper's "message head is too
    /// large".
    #[tokio::test]
    async fn an_answer_with_too_many_headers_says_so() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let mut head = String::from("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n");
            for i in 0..150 {
                head.push_str(&format!("x-h{i}: v\r\n"));
            }
            head.push_str("\r\n");
            let _ = socket.write_all(head.as_bytes()).await;
        });
        let e = reqwest::get(format!("http://{addr}/"))
            .await
            .expect_err("hyper refuses 150 headers");
        let text = super::describe(&e);
        assert!(text.starts_with(super::HEAD_TOO_LARGE), "{text}");
        server.abort();
    }
}
