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
//! ([`DEFAULT_MAX_MESSAGE_BYTES`] unless configured): a JSON body (refused from its
//! `Content-Length` when that is larger, else cut off as it arrives), one SSE event, an error body.
//! Over it, the exchange fails with [`WireError::TooLarge`] (case C32).

use std::net::SocketAddr;
use std::sync::Arc;

use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE, COOKIE, SET_COOKIE};
use reqwest::{Method, RequestBuilder, Response, StatusCode, Url};
use serde_json::Value;
use switchboard_protocol::headers;

use super::common::http_client;
use super::endpoints::{Endpoints, Resolution};
use super::events::EventReader;
pub(crate) use super::exchange::{describe, exchange_error, At, WireError};
use super::exchange::{failure, read_body};
use super::session::UpstreamSession;
use crate::config::DEFAULT_MAX_MESSAGE_BYTES;

/// The `Accept` of every POST (MCP 2025-11-25, basic/transports, Sending Messages to the
/// Server item 2: both JSON and an event stream).
const ACCEPT_BOTH: &str = "application/json, text/event-stream";

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
    /// Where the answer came from.
    pub at: At,
    /// The endpoint it connected to, when the URL names a host (where a new session is pinned).
    pub endpoint: Option<SocketAddr>,
    /// The `Set-Cookie` values of the answer.
    pub set_cookies: Vec<String>,
}

/// An answer to one request, and where it came from.
struct Sent {
    response: Response,
    at: At,
    endpoint: Option<SocketAddr>,
}

/// The HTTP side of one upstream.
pub(crate) struct Wire {
    url: Url,
    headers: HeaderMap,
    client: reqwest::Client,
    /// The endpoints of a URL that names a host (see [`Endpoints`]); `None`: the URL as it is.
    endpoints: Option<Arc<Endpoints>>,
    /// The largest JSON body or SSE event read, in bytes.
    max_message: usize,
}

/// Where one request goes.
struct Route {
    client: reqwest::Client,
    endpoint: String,
    pinned: Option<SocketAddr>,
    /// The endpoint it connects to and the endpoints to record the outcome in, when the URL
    /// names a host.
    tracked: Option<(SocketAddr, Arc<Endpoints>)>,
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
            headers: super::static_headers::parse(static_headers)?,
            client: http_client()?,
            endpoints: None,
            max_message: usize::try_from(DEFAULT_MAX_MESSAGE_BYTES).unwrap_or(usize::MAX),
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
            endpoints: self.endpoints.clone(),
            max_message: self.max_message,
        }
    }

    /// The same wire reaching the endpoints of the URL's host one by one (see [`Endpoints`]);
    /// unchanged when the host is an IP address.
    pub fn with_endpoints(mut self, resolution: Resolution) -> Result<Wire, String> {
        self.endpoints = Endpoints::for_url(&self.url, resolution)?.map(Arc::new);
        Ok(self)
    }

    /// The upstream's URL.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The endpoints, when the URL names a host.
    pub fn endpoints(&self) -> Option<&Arc<Endpoints>> {
        self.endpoints.as_ref()
    }

    /// Whether the pinned endpoint `addr` is gone: after resolving again now, the name no longer
    /// includes it. Always `false` without endpoints (an IP address).
    pub async fn endpoint_gone(&self, addr: SocketAddr) -> bool {
        match &self.endpoints {
            Some(endpoints) => !endpoints.still_resolves(addr).await,
            None => false,
        }
    }

    /// Where a request in `session` may go, in the order to try them: its pinned endpoint only;
    /// else every current endpoint, starting with the next in turn (a stateless upstream's
    /// requests, and `initialize`, spread freely); `[None]` (the URL as it is) without endpoints.
    async fn targets(
        &self,
        session: Option<&UpstreamSession>,
    ) -> Result<Vec<Option<SocketAddr>>, WireError> {
        let Some(endpoints) = &self.endpoints else {
            return Ok(vec![None]);
        };
        if let Some(addr) = session.and_then(|s| s.endpoint) {
            return Ok(vec![Some(addr)]);
        }
        let addrs = endpoints.candidates().await.map_err(WireError::other)?;
        Ok(addrs.into_iter().map(Some).collect())
    }

    /// The client and endpoint for a request to `target` (`None`: the URL as it is) in
    /// `session`. Errors when the endpoint's client cannot be built.
    fn route(
        &self,
        session: Option<&UpstreamSession>,
        target: Option<SocketAddr>,
    ) -> Result<Route, String> {
        let (Some(endpoints), Some(addr)) = (&self.endpoints, target) else {
            return Ok(Route {
                client: self.client.clone(),
                endpoint: self.authority(),
                pinned: None,
                tracked: None,
            });
        };
        let client = endpoints.client(addr)?;
        Ok(Route {
            client,
            endpoint: addr.to_string(),
            pinned: session.and_then(|s| s.endpoint),
            tracked: Some((addr, endpoints.clone())),
        })
    }

    /// Sends one request (`method`, the message `what`) in `session`, finished by `build`. A
    /// request that is not pinned and cannot connect to its endpoint (so it certainly did not
    /// run) is sent to the next endpoint, until one connects or every current endpoint was
    /// tried; a pinned one goes to its endpoint only.
    async fn send(
        &self,
        method: Method,
        what: &str,
        session: Option<&UpstreamSession>,
        build: impl Fn(RequestBuilder) -> RequestBuilder,
    ) -> Result<Sent, WireError> {
        let targets = self.targets(session).await?;
        let tried = targets.len();
        let mut refused = None;
        for target in targets {
            let route = self.route(session, target).map_err(WireError::other)?;
            let request = build(self.request(&route, method.clone(), session));
            match send(request, what, &route).await {
                Err(e @ WireError::Unreachable { pinned: None, .. }) if tried > 1 => {
                    tracing::info!(host = self.url.host_str().unwrap_or(""), error = %e.describe(),
                        "trying the next endpoint");
                    refused = Some(e);
                }
                sent => {
                    return sent.map(|(response, at)| Sent {
                        response,
                        at,
                        endpoint: target,
                    })
                }
            }
        }
        Err(match refused {
            Some(WireError::Unreachable { at, pinned, why }) => WireError::Unreachable {
                why: format!("{why} (and no other of its {tried} endpoints could be reached)"),
                at,
                pinned,
            },
            _ => WireError::other(format!("no endpoint to send `{what}` to")),
        })
    }

    /// The URL's `host:port`.
    fn authority(&self) -> String {
        let host = self.url.host_str().unwrap_or("");
        match self.url.port_or_known_default() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        }
    }

    /// POSTs one JSON-RPC message (`what`: its method, or `response`) with `Accept:
    /// application/json, text/event-stream`. An error status is [`WireError::Gone`] when it
    /// says the session is gone (the 404 and 400 rule of `Wire::refusal`).
    pub async fn post<M: serde::Serialize + ?Sized>(
        &self,
        what: &str,
        message: &M,
        session: Option<&UpstreamSession>,
    ) -> Result<Posted, WireError> {
        let body = serde_json::to_vec(message)
            .map_err(|e| WireError::other(format!("cannot serialize `{what}`: {e}")))?;
        let body = bytes::Bytes::from(body);
        let Sent {
            response,
            at,
            endpoint,
        } = self
            .send(Method::POST, what, session, |request| {
                request
                    .header(ACCEPT, HeaderValue::from_static(ACCEPT_BOTH))
                    .header(CONTENT_TYPE, headers::APPLICATION_JSON)
                    .body(body.clone())
            })
            .await?;
        let status = response.status();
        let session_id = response
            .headers()
            .get(headers::MCP_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let set_cookies = response
            .headers()
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect();
        if !status.is_success() {
            let had_session = session.is_some_and(|s| s.id.is_some());
            return Err(self.refusal(response, at, had_session).await);
        }
        let reply = if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            // Legacy servers write a word ("Accepted") into their 202s; no message is in it.
            Reply::Accepted
        } else if is_event_stream(&response) {
            Reply::Stream(EventReader::new(response, self.max_message))
        } else {
            let body = read_body(response, self.max_message, &at).await?;
            if body.iter().all(u8::is_ascii_whitespace) {
                Reply::Accepted
            } else {
                let value = serde_json::from_slice(&body).map_err(|e| {
                    let what = format!("answered HTTP {status} with a body that is not JSON: {e}");
                    WireError::failed(&at, what)
                })?;
                Reply::Json(value)
            }
        };
        Ok(Posted {
            reply,
            session_id,
            at,
            endpoint,
            set_cookies,
        })
    }

    /// The same headers and client towards another URL (the POST endpoint a legacy SSE server
    /// announces).
    pub fn with_url(&self, url: Url) -> Wire {
        Wire {
            url,
            endpoints: None,
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
        let Sent { response, at, .. } = self
            .send(Method::GET, "GET", None, |r| {
                r.header(ACCEPT, headers::TEXT_EVENT_STREAM)
            })
            .await?;
        if !response.status().is_success() {
            return Err(failure(response, &at, self.max_message).await);
        }
        if !is_event_stream(&response) {
            return Err(WireError::failed(&at, "answered with no event stream"));
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
        let Sent { response, at, .. } = self
            .send(Method::GET, "GET", Some(session), |r| {
                r.header(ACCEPT, headers::TEXT_EVENT_STREAM)
                    .header(headers::LAST_EVENT_ID, last_event_id)
            })
            .await?;
        let status = response.status();
        if !status.is_success() {
            return Err(match failure(response, &at, self.max_message).await {
                WireError::Failed { at, why } => WireError::Failed {
                    why: format!("resuming failed: {why}"),
                    at,
                },
                other => other,
            });
        }
        if !is_event_stream(&response) {
            return Err(WireError::failed(
                &at,
                "answered with no event stream (resuming failed)",
            ));
        }
        Ok(EventReader::new(response, self.max_message))
    }

    /// GETs the upstream's standalone stream in `session` (MCP 2025-11-25, basic/transports,
    /// Listening for Messages from the Server), resuming after `last_event_id` when given
    /// (Resumability and Redelivery). 404, and the 400 rule of [`Wire::post`], are
    /// [`WireError::Gone`] when the session has an id.
    pub async fn open_stream(
        &self,
        session: &UpstreamSession,
        last_event_id: Option<&str>,
    ) -> Result<Opened, WireError> {
        let Sent { response, at, .. } = self
            .send(Method::GET, "GET", Some(session), |r| {
                let r = r.header(ACCEPT, headers::TEXT_EVENT_STREAM);
                match last_event_id {
                    Some(id) => r.header(headers::LAST_EVENT_ID, id),
                    None => r,
                }
            })
            .await?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(Opened::NotAllowed);
        }
        if !status.is_success() {
            return Err(self.refusal(response, at, session.id.is_some()).await);
        }
        if !is_event_stream(&response) {
            return Err(WireError::failed(&at, "answered with no event stream"));
        }
        Ok(Opened::Stream(EventReader::new(response, self.max_message)))
    }

    /// The error for an answer with an error status to a POST or GET (`had_session`: it carried
    /// our `Mcp-Session-Id`). 404 to a request that carried the session id is
    /// [`WireError::Gone`] (MCP 2025-11-25, basic/transports, Session Management item 3). Not
    /// spec, but common: the TypeScript SDK's server answers an unknown session id with 400
    /// "Bad Request: No valid session ID provided", so a 400 that talks about the session, to a
    /// request that carried one, is [`WireError::Gone`] too.
    async fn refusal(&self, response: Response, at: At, had_session: bool) -> WireError {
        let status = response.status();
        let failed = failure(response, &at, self.max_message).await;
        let gone = status == StatusCode::NOT_FOUND
            || (status == StatusCode::BAD_REQUEST && failed.mentions_session());
        if !(had_session && gone) {
            return failed;
        }
        WireError::Gone {
            at,
            status,
            json_rpc: matches!(failed, WireError::Rpc { .. }),
        }
    }

    /// DELETEs an upstream session (MCP 2025-11-25, basic/transports, Session Management
    /// item 5). A 405 (the server does not let clients end sessions) and a 404 (already gone)
    /// count as done.
    pub async fn delete(&self, session: &UpstreamSession) -> Result<(), String> {
        let Sent { response, at, .. } = self
            .send(Method::DELETE, "DELETE", Some(session), |r| r)
            .await
            .map_err(|e| e.describe())?;
        let status = response.status();
        // 405: the server does not let clients end sessions; 404: the session is gone already
        // (every node that served the client session sends its own DELETE when it ends).
        if status.is_success()
            || status == StatusCode::METHOD_NOT_ALLOWED
            || status == StatusCode::NOT_FOUND
        {
            Ok(())
        } else {
            Err(format!("{at} answered HTTP {status}"))
        }
    }

    fn request(
        &self,
        route: &Route,
        method: Method,
        session: Option<&UpstreamSession>,
    ) -> RequestBuilder {
        let mut headers = self.headers.clone();
        if let Some(cookies) = session.and_then(|s| s.cookies.as_deref()) {
            // One `Cookie` header (RFC 6265 §5.4): the configured one first, then the session's.
            let value = match headers.get(COOKIE).and_then(|v| v.to_str().ok()) {
                Some(configured) => format!("{configured}; {cookies}"),
                None => cookies.to_owned(),
            };
            if let Ok(mut value) = HeaderValue::from_str(&value) {
                value.set_sensitive(true);
                headers.insert(COOKIE, value);
            }
        }
        // W3C trace context of the current span (the upstream call's), when tracing is on.
        switchboard_telemetry::trace::inject(&mut headers);
        let mut builder = route
            .client
            .request(method, self.url.clone())
            .headers(headers);
        if let Some(s) = session {
            if let Some(id) = &s.id {
                builder = builder.header(headers::MCP_SESSION_ID, id);
            }
            // Empty before `initialize` negotiated one (see `UpstreamSession::before_initialize`).
            if !s.revision.is_empty() {
                builder = builder.header(headers::MCP_PROTOCOL_VERSION, &s.revision);
            }
        }
        builder
    }
}

/// Sends `request` (the message `what`) along `route`; the answer and where it came from.
async fn send(
    request: RequestBuilder,
    what: &str,
    route: &Route,
) -> Result<(Response, At), WireError> {
    let mut at = At {
        what: what.to_owned(),
        endpoint: route.endpoint.clone(),
    };
    let sent = request.send().await;
    if let Some((addr, endpoints)) = &route.tracked {
        endpoints.reached(*addr, !matches!(&sent, Err(e) if e.is_connect()));
    }
    match sent {
        Ok(response) => {
            if let Some(addr) = response.remote_addr() {
                at.endpoint = addr.to_string();
            }
            Ok((response, at))
        }
        Err(e) if e.is_connect() => Err(WireError::Unreachable {
            why: describe(&e),
            pinned: route.pinned,
            at,
        }),
        Err(e) => Err(WireError::failed(&at, format!("failed: {}", describe(&e)))),
    }
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with(headers::TEXT_EVENT_STREAM))
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
