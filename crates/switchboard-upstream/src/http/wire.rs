//! The HTTP exchanges with one Streamable HTTP upstream: POST a message, GET to resume a
//! response stream, DELETE a session (MCP 2025-11-25, basic/transports: Sending Messages to the
//! Server, Resumability and Redelivery, Session Management).
//!
//! Every request carries the configured static headers. A request in an upstream session also
//! carries `Mcp-Session-Id` (when the upstream minted one) and `MCP-Protocol-Version` with the
//! revision the UPSTREAM negotiated (not the client's: case C20 step 4). No header of the
//! client's request gets here, its `Authorization` and `Cookie` included (no token passthrough:
//! MCP 2025-06-18, basic/security_best_practices, Token Passthrough); an upstream that needs
//! credentials gets the static ones configured for it.
//!
//! A 401 or 403 from the upstream, to any exchange, is [`WireError::Refused`]: its credentials
//! were refused, with the status, every `WWW-Authenticate` value and the JSON-RPC error of the
//! body kept for the client (case C33).
//!
//! Nothing the upstream sends is held whole beyond `max_message_bytes`
//! ([`crate::config::DEFAULT_MAX_MESSAGE_BYTES`] unless configured): a JSON body (refused from its
//! `Content-Length` when that is larger, else cut off as it arrives), one SSE event, an error body.
//! Over it, the exchange fails with [`WireError::TooLarge`] (case C32).

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE, WWW_AUTHENTICATE};
use reqwest::{Method, RequestBuilder, Response, StatusCode, Url};
use serde_json::Value;
use switchboard_protocol::headers;

use super::common::{http_client, rpc_error};
use super::events::EventReader;
use super::session::UpstreamSession;
use crate::upstream::RpcError;

/// The `Accept` of every POST (MCP 2025-11-25, basic/transports, Sending Messages to the
/// Server item 2: both JSON and an event stream).
const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// Headers we set ourselves; static headers from the configuration may not override them.
const RESERVED: [&str; 7] = [
    "accept",
    "content-type",
    "content-length",
    "host",
    headers::MCP_SESSION_ID,
    headers::MCP_PROTOCOL_VERSION,
    headers::LAST_EVENT_ID,
];

/// How much of an unexpected error body is quoted in an error message.
const QUOTED_BODY: usize = 200;

/// What the upstream answered to a POST.
pub(crate) enum Reply {
    /// One JSON value (`application/json`): a response, or (MCP 2025-03-26) a batch array.
    Json(Value),
    /// A `text/event-stream` body.
    Stream(EventReader),
    /// 202 Accepted (or another 2xx without a body): the usual answer to a notification or
    /// response.
    Accepted,
}

/// What the upstream answered to a GET for its standalone stream.
pub(crate) enum Opened {
    /// The stream.
    Stream(EventReader),
    /// 405 Method Not Allowed: the upstream offers no GET stream (MCP 2025-11-25,
    /// basic/transports, Listening for Messages from the Server item 2).
    NotAllowed,
}

/// An answer to a POST, with the `Mcp-Session-Id` response header if there was one.
pub(crate) struct Posted {
    /// The body.
    pub reply: Reply,
    /// The session id the upstream assigned (only meaningful on `initialize`).
    pub session_id: Option<String>,
}

/// Why an exchange failed.
#[derive(Debug)]
pub(crate) enum WireError {
    /// 404 to a request that carried our `Mcp-Session-Id`: the upstream ended or forgot the
    /// session (MCP 2025-11-25, basic/transports, Session Management items 3–4).
    Gone,
    /// An HTTP error status whose body was a JSON-RPC error: passed on as is.
    Rpc(RpcError),
    /// 401 or 403: the upstream refused the credentials it was sent.
    Refused(Refusal),
    /// A JSON body or an SSE event larger than the limit (`max_message_bytes`, in bytes).
    TooLarge(usize),
    /// Anything else: unreachable, unexpected status or body. The text says what.
    Failed(String),
}

impl WireError {
    /// Whether the error's text is about a session (see the 400 rule in [`Wire::post`]).
    fn mentions_session(&self) -> bool {
        let text = match self {
            WireError::Gone => return true,
            WireError::Refused(_) | WireError::TooLarge(_) => return false,
            WireError::Rpc(e) => e.message.to_ascii_lowercase(),
            WireError::Failed(why) => why.to_ascii_lowercase(),
        };
        text.contains("session")
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

/// The HTTP side of one upstream.
pub(crate) struct Wire {
    url: Url,
    headers: HeaderMap,
    client: reqwest::Client,
    /// The largest JSON body or SSE event read, in bytes.
    max_message: usize,
}

impl Wire {
    /// A wire to `url` that sends `static_headers` on every request. Errors on an invalid URL,
    /// an invalid header, or a header we set ourselves.
    pub fn new<K, V>(
        url: &str,
        static_headers: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Wire, String>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let url = Url::parse(url).map_err(|e| format!("invalid URL {url:?}: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("unsupported URL scheme in {url}"));
        }
        Ok(Wire {
            url,
            headers: header_map(static_headers)?,
            client: http_client()?,
            max_message: usize::try_from(crate::config::DEFAULT_MAX_MESSAGE_BYTES)
                .unwrap_or(usize::MAX),
        })
    }

    /// The same wire reading messages of at most `bytes` (`max_message_bytes`).
    pub fn with_max_message(&self, bytes: usize) -> Wire {
        Wire {
            max_message: bytes,
            ..self.clone_parts()
        }
    }

    fn clone_parts(&self) -> Wire {
        Wire {
            url: self.url.clone(),
            headers: self.headers.clone(),
            client: self.client.clone(),
            max_message: self.max_message,
        }
    }

    /// The upstream's URL.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// POSTs one JSON-RPC message with `Accept: application/json, text/event-stream`.
    pub async fn post<M: serde::Serialize + ?Sized>(
        &self,
        message: &M,
        session: Option<&UpstreamSession>,
    ) -> Result<Posted, WireError> {
        let request =
            self.request(Method::POST, session)
                .header(ACCEPT, HeaderValue::from_static(ACCEPT_BOTH))
                .header(CONTENT_TYPE, headers::APPLICATION_JSON)
                .body(serde_json::to_vec(message).map_err(|e| {
                    WireError::Failed(format!("cannot serialize the message: {e}"))
                })?);
        let response = send(request).await?;
        let status = response.status();
        let session_id = response
            .headers()
            .get(headers::MCP_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let had_session = session.is_some_and(|s| s.id.is_some());
        if status == StatusCode::NOT_FOUND && had_session {
            return Err(WireError::Gone);
        }
        if !status.is_success() {
            let failed = failure(response, self.max_message).await;
            // Not spec (which says 404), but common: the TypeScript SDK's server answers an
            // unknown session id with 400 "Bad Request: No valid session ID provided". Treat a
            // 400 that talks about the session, to a request that carried one, as a lost session
            // (re-initialized and retried once, like 404).
            if status == StatusCode::BAD_REQUEST && had_session && failed.mentions_session() {
                return Err(WireError::Gone);
            }
            return Err(failed);
        }
        let reply = if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            // Legacy servers write a word ("Accepted") into their 202s; no message is in it.
            Reply::Accepted
        } else if is_event_stream(&response) {
            Reply::Stream(EventReader::new(response, self.max_message))
        } else {
            let body = read_body(response, self.max_message).await?;
            if body.iter().all(u8::is_ascii_whitespace) {
                Reply::Accepted
            } else {
                let value = serde_json::from_slice(&body).map_err(|e| {
                    WireError::Failed(format!("HTTP {status} with a body that is not JSON: {e}"))
                })?;
                Reply::Json(value)
            }
        };
        Ok(Posted { reply, session_id })
    }

    /// The same headers and client towards another URL (the POST endpoint a legacy SSE server
    /// announces).
    pub fn with_url(&self, url: Url) -> Wire {
        Wire {
            url,
            ..self.clone_parts()
        }
    }

    /// The same wire with `extra` headers on every request (set or replacing the static ones):
    /// the per-request headers of the stateless revision (`MCP-Protocol-Version`, `Mcp-Method`,
    /// `Mcp-Name`; MCP 2026-07-28, basic/transports/streamable-http, Standard Request Headers).
    pub fn with_headers(&self, extra: HeaderMap) -> Wire {
        let mut headers = self.headers.clone();
        headers.extend(extra);
        Wire {
            headers,
            ..self.clone_parts()
        }
    }

    /// GETs the URL as an event stream (the legacy HTTP+SSE transport's SSE endpoint: MCP
    /// 2024-11-05, basic/transports, HTTP with SSE).
    pub async fn listen(&self) -> Result<EventReader, WireError> {
        let request = self
            .request(Method::GET, None)
            .header(ACCEPT, headers::TEXT_EVENT_STREAM);
        let response = send(request).await?;
        if !response.status().is_success() {
            return Err(failure(response, self.max_message).await);
        }
        if !is_event_stream(&response) {
            return Err(WireError::Failed(
                "the answer is not an event stream".into(),
            ));
        }
        Ok(EventReader::new(response, self.max_message))
    }

    /// GETs the endpoint with `Last-Event-ID` to resume a response stream that broke (MCP
    /// 2025-11-25, basic/transports, Resumability and Redelivery item 2). A 404 here is a
    /// failure, not [`WireError::Gone`]: the request already ran and must not be sent again.
    pub async fn resume(
        &self,
        session: &UpstreamSession,
        last_event_id: &str,
    ) -> Result<EventReader, WireError> {
        let request = self
            .request(Method::GET, Some(session))
            .header(ACCEPT, headers::TEXT_EVENT_STREAM)
            .header(headers::LAST_EVENT_ID, last_event_id);
        let response = send(request).await?;
        let status = response.status();
        if !status.is_success() {
            return Err(match failure(response, self.max_message).await {
                WireError::Failed(why) => WireError::Failed(format!("resuming failed: {why}")),
                other => other,
            });
        }
        if !is_event_stream(&response) {
            return Err(WireError::Failed(
                "resuming failed: the answer is not an event stream".into(),
            ));
        }
        Ok(EventReader::new(response, self.max_message))
    }

    /// GETs the upstream's standalone stream in `session` (MCP 2025-11-25, basic/transports,
    /// Listening for Messages from the Server), resuming after `last_event_id` when given
    /// (Resumability and Redelivery). 404 is [`WireError::Gone`] when the session has an id.
    pub async fn open_stream(
        &self,
        session: &UpstreamSession,
        last_event_id: Option<&str>,
    ) -> Result<Opened, WireError> {
        let mut request = self
            .request(Method::GET, Some(session))
            .header(ACCEPT, headers::TEXT_EVENT_STREAM);
        if let Some(id) = last_event_id {
            request = request.header(headers::LAST_EVENT_ID, id);
        }
        let response = send(request).await?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(Opened::NotAllowed);
        }
        if status == StatusCode::NOT_FOUND && session.id.is_some() {
            return Err(WireError::Gone);
        }
        if !status.is_success() {
            return Err(failure(response, self.max_message).await);
        }
        if !is_event_stream(&response) {
            return Err(WireError::Failed(
                "its GET answer is not an event stream".into(),
            ));
        }
        Ok(Opened::Stream(EventReader::new(response, self.max_message)))
    }

    /// DELETEs an upstream session (MCP 2025-11-25, basic/transports, Session Management
    /// item 5). A 405 (the server does not let clients end sessions) counts as done.
    pub async fn delete(&self, session: &UpstreamSession) -> Result<(), String> {
        let response = self
            .request(Method::DELETE, Some(session))
            .send()
            .await
            .map_err(|e| describe(&e))?;
        let status = response.status();
        if status.is_success() || status == StatusCode::METHOD_NOT_ALLOWED {
            Ok(())
        } else {
            Err(format!("HTTP {status}"))
        }
    }

    fn request(&self, method: Method, session: Option<&UpstreamSession>) -> RequestBuilder {
        let mut builder = self
            .client
            .request(method, self.url.clone())
            .headers(self.headers.clone());
        if let Some(s) = session {
            if let Some(id) = &s.id {
                builder = builder.header(headers::MCP_SESSION_ID, id);
            }
            builder = builder.header(headers::MCP_PROTOCOL_VERSION, &s.revision);
        }
        builder
    }
}

/// The static headers as a header map (values marked sensitive: they are credentials).
fn header_map<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Result<HeaderMap, String>
where
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        let (k, v) = (k.as_ref(), v.as_ref());
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("invalid header name {k:?}"))?;
        if RESERVED.contains(&name.as_str()) {
            return Err(format!(
                "header {k:?} is set by switchboard and cannot be configured"
            ));
        }
        let mut value =
            HeaderValue::from_str(v).map_err(|_| format!("invalid value for header {k:?}"))?;
        value.set_sensitive(true);
        map.append(name, value);
    }
    Ok(map)
}

async fn send(request: RequestBuilder) -> Result<Response, WireError> {
    request
        .send()
        .await
        .map_err(|e| WireError::Failed(describe(&e)))
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with(headers::TEXT_EVENT_STREAM))
}

/// A whole body of at most `max` bytes: refused from its `Content-Length` when that is larger,
/// else read until it passes `max` ([`WireError::TooLarge`]).
async fn read_body(mut response: Response, max: usize) -> Result<bytes::Bytes, WireError> {
    let too_large = |len: u64| usize::try_from(len).map_or(true, |len| len > max);
    if response.content_length().is_some_and(too_large) {
        return Err(WireError::TooLarge(max));
    }
    let mut body = bytes::BytesMut::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| WireError::Failed(describe(&e)))?
    {
        if body.len() + chunk.len() > max {
            return Err(WireError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// An error status: [`WireError::Refused`] for 401 and 403; else a JSON-RPC error from its body
/// when there is one, otherwise the status and the start of the body. A body over `max` bytes
/// (or unreadable) counts as empty.
async fn failure(response: Response, max: usize) -> WireError {
    let status = response.status();
    let www_authenticate = www_authenticate(response.headers());
    let body = read_body(response, max).await.unwrap_or_default();
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
        return WireError::Rpc(error);
    }
    let text = String::from_utf8_lossy(&body);
    let text = text.trim();
    if text.is_empty() {
        WireError::Failed(format!("HTTP {status}"))
    } else {
        let quoted: String = text.chars().take(QUOTED_BODY).collect();
        WireError::Failed(format!("HTTP {status}: {quoted}"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_headers_are_checked() {
        assert!(Wire::new("http://127.0.0.1:1/mcp", [("X-Api-Key", "k")]).is_ok());
        let reserved = Wire::new("http://127.0.0.1:1/mcp", [("Mcp-Session-Id", "x")]);
        assert!(reserved.err().unwrap().contains("cannot be configured"));
        assert!(Wire::new("http://127.0.0.1:1/mcp", [("bad header", "x")]).is_err());
        assert!(Wire::new("ftp://example.com/", Vec::<(String, String)>::new()).is_err());
        assert!(Wire::new("not a url", Vec::<(String, String)>::new()).is_err());
    }
}
