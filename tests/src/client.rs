//! A raw MCP-over-HTTP client for tests: exact control of headers and bodies, and answers read
//! either as one JSON body or as an SSE stream, incrementally.

use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::msg;
use crate::sse::{is_response, SseEvent, SseStream};

/// How long any request may take to get its response headers.
const HEADERS_LIMIT: Duration = Duration::from_secs(15);

/// Request headers in order; names compare case-insensitively.
#[derive(Clone, Debug, Default)]
pub struct Headers(Vec<(String, String)>);

impl Headers {
    /// Sets `name` to `value`, replacing any earlier value.
    pub fn set(mut self, name: &str, value: &str) -> Headers {
        self = self.remove(name);
        self.0.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Adds another value of `name`, keeping the earlier ones (a header sent twice).
    pub fn add(mut self, name: &str, value: &str) -> Headers {
        self.0.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Removes `name`.
    pub fn remove(mut self, name: &str) -> Headers {
        self.0.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self
    }

    fn to_map(&self) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (n, v) in &self.0 {
            let name = HeaderName::from_bytes(n.as_bytes()).expect("header name");
            map.append(name, HeaderValue::from_str(v).expect("header value"));
        }
        map
    }
}

/// A test client, optionally bound to one session. Cloning shares the connection pool.
#[derive(Clone)]
pub struct McpClient {
    http: reqwest::Client,
    /// The session id sent as `Mcp-Session-Id`, if any.
    pub session_id: Option<String>,
    /// The revision sent as `MCP-Protocol-Version`, if any.
    pub revision: Option<String>,
}

impl Default for McpClient {
    fn default() -> Self {
        McpClient::new()
    }
}

impl McpClient {
    /// A client that reuses keep-alive connections.
    pub fn new() -> McpClient {
        McpClient::build(reqwest::Client::builder())
    }

    /// A client that opens a new TCP connection for every request (`Connection: close` behaviour).
    pub fn new_connections() -> McpClient {
        McpClient::build(reqwest::Client::builder().pool_max_idle_per_host(0))
    }

    fn build(builder: reqwest::ClientBuilder) -> McpClient {
        let http = builder
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("reqwest client");
        McpClient {
            http,
            session_id: None,
            revision: None,
        }
    }

    /// The same connection pool, bound to another session (or none).
    pub fn with_session(&self, session_id: Option<&str>, revision: Option<&str>) -> McpClient {
        McpClient {
            http: self.http.clone(),
            session_id: session_id.map(str::to_owned),
            revision: revision.map(str::to_owned),
        }
    }

    /// `HS`: `initialize` (no session header) offering `revision` with no client capabilities,
    /// then `notifications/initialized` (asserted 202). Binds this client to the new session and
    /// returns its id and the negotiated revision.
    pub async fn initialize(&mut self, url: &str, revision: &str) -> (String, String) {
        self.initialize_with(url, revision, json!({})).await
    }

    /// [`McpClient::initialize`] declaring `capabilities`.
    pub async fn initialize_with(
        &mut self,
        url: &str,
        revision: &str,
        capabilities: Value,
    ) -> (String, String) {
        let (sid, negotiated) = self.initialize_only(url, revision, capabilities).await;
        let reply = self.post(url, &msg::inited()).await;
        assert_eq!(
            reply.status,
            StatusCode::ACCEPTED,
            "notifications/initialized on {url}"
        );
        (sid, negotiated)
    }

    /// `initialize` alone (no `notifications/initialized`); binds this client to the session.
    pub async fn initialize_only(
        &mut self,
        url: &str,
        revision: &str,
        capabilities: Value,
    ) -> (String, String) {
        self.session_id = None;
        self.revision = None;
        let reply = self.post(url, &msg::init(revision, capabilities)).await;
        assert_eq!(reply.status, StatusCode::OK, "initialize on {url}");
        let sid = reply
            .session_id()
            .unwrap_or_else(|| panic!("initialize on {url}: no Mcp-Session-Id"));
        let answer = reply.answer(json!(1), Duration::from_secs(10)).await;
        let negotiated = answer.response["result"]["protocolVersion"]
            .as_str()
            .unwrap_or_else(|| {
                panic!(
                    "initialize result without protocolVersion: {}",
                    answer.response
                )
            })
            .to_owned();
        self.session_id = Some(sid.clone());
        self.revision = Some(negotiated.clone());
        (sid, negotiated)
    }

    /// The standard POST headers: JSON content type, both media types accepted, and the session
    /// and version headers when bound.
    pub fn post_headers(&self) -> Headers {
        self.session_headers()
            .set("Content-Type", "application/json")
            .set("Accept", "application/json, text/event-stream")
    }

    /// Just the session and version headers (when bound).
    pub fn session_headers(&self) -> Headers {
        let mut h = Headers::default();
        if let Some(sid) = &self.session_id {
            h = h.set("Mcp-Session-Id", sid);
        }
        if let Some(rev) = &self.revision {
            h = h.set("MCP-Protocol-Version", rev);
        }
        h
    }

    /// POSTs one JSON message (or batch) with the standard headers.
    pub async fn post(&self, url: &str, body: &Value) -> Reply {
        self.send(
            Method::POST,
            url,
            &self.post_headers(),
            Some(body.to_string()),
        )
        .await
    }

    /// POSTs a raw body with the standard headers.
    pub async fn post_raw(&self, url: &str, body: &str) -> Reply {
        self.send(
            Method::POST,
            url,
            &self.post_headers(),
            Some(body.to_owned()),
        )
        .await
    }

    /// `tools/call` of `name` with `args`.
    pub async fn call_tool(
        &self,
        url: &str,
        id: impl Into<Value>,
        name: &str,
        args: Value,
    ) -> Reply {
        self.post(url, &msg::call(id, name, args)).await
    }

    /// `GET` the standalone stream (or resume one with `Last-Event-ID`).
    pub async fn get_stream(&self, url: &str, last_event_id: Option<&str>) -> Reply {
        let mut h = self.session_headers().set("Accept", "text/event-stream");
        if let Some(id) = last_event_id {
            h = h.set("Last-Event-ID", id);
        }
        self.send(Method::GET, url, &h, None).await
    }

    /// `DELETE` the bound session.
    pub async fn delete(&self, url: &str) -> Reply {
        self.send(Method::DELETE, url, &self.session_headers(), None)
            .await
    }

    /// Sends exactly these headers and body; panics when no response headers arrive in 15 s.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &Headers,
        body: Option<String>,
    ) -> Reply {
        self.try_send(method.clone(), url, headers, body)
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"))
    }

    /// [`McpClient::send`] that returns the failure instead of panicking, for clients that must
    /// live through faults (the chaos suite).
    ///
    /// # Errors
    /// [`SendError::Timeout`] when no response headers arrive in 15 s, [`SendError::Connect`] when
    /// no connection could be made, [`SendError::Transport`] for any other transport failure.
    pub async fn try_send(
        &self,
        method: Method,
        url: &str,
        headers: &Headers,
        body: Option<String>,
    ) -> Result<Reply, SendError> {
        let mut req = self.http.request(method, url).headers(headers.to_map());
        let sent_id = body.as_deref().map_or(Value::Null, request_id);
        if let Some(b) = body {
            req = req.body(b);
        }
        let sent_at = Instant::now();
        let response = match tokio::time::timeout(HEADERS_LIMIT, req.send()).await {
            Err(_) => return Err(SendError::Timeout),
            Ok(Err(e)) if e.is_connect() => return Err(SendError::Connect(e.to_string())),
            Ok(Err(e)) => return Err(SendError::Transport(e.to_string())),
            Ok(Ok(response)) => response,
        };
        Ok(Reply {
            status: response.status(),
            headers: response.headers().clone(),
            response,
            sent_at,
            sent_id,
        })
    }
}

/// Why [`McpClient::try_send`] got no response headers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendError {
    /// No response headers within 15 s.
    Timeout,
    /// The TCP connection could not be made (the message).
    Connect(String),
    /// The request failed otherwise, e.g. the connection closed before the headers (the message).
    Transport(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Timeout => write!(f, "no response headers within {HEADERS_LIMIT:?}"),
            SendError::Connect(e) => write!(f, "cannot connect: {e}"),
            SendError::Transport(e) => write!(f, "transport error: {e}"),
        }
    }
}

/// One HTTP response whose body has not been read yet.
pub struct Reply {
    /// The status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: HeaderMap,
    response: reqwest::Response,
    sent_at: Instant,
    sent_id: Value,
}

/// The id of `body` when it is one JSON-RPC request (a method and an id), else `null`.
fn request_id(body: &str) -> Value {
    match serde_json::from_str::<Value>(body) {
        Ok(m) if m.get("method").is_some() => m.get("id").cloned().unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

impl Reply {
    /// A response header as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    }

    /// The id of the JSON-RPC request this answers, when the body sent was one request (not a
    /// notification, a response or a batch); `null` otherwise. A refusal the node makes after it
    /// read the body answers with it (JSON-RPC 2.0 §5).
    pub fn sent_id(&self) -> &Value {
        &self.sent_id
    }

    /// `Mcp-Session-Id`, if present.
    pub fn session_id(&self) -> Option<String> {
        self.header("mcp-session-id")
    }

    /// Whether the body is an SSE stream.
    pub fn is_sse(&self) -> bool {
        self.header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
    }

    /// Whether the body is JSON.
    pub fn is_json(&self) -> bool {
        self.header("content-type")
            .is_some_and(|c| c.starts_with("application/json"))
    }

    /// The whole body as text (at most 15 s).
    pub async fn text(self) -> String {
        let status = self.status;
        tokio::time::timeout(HEADERS_LIMIT, self.response.text())
            .await
            .unwrap_or_else(|_| panic!("{status} body not complete within {HEADERS_LIMIT:?}"))
            .unwrap_or_else(|e| panic!("{status} body: {e}"))
    }

    /// The whole body as text (at most 15 s), or why it could not be read.
    ///
    /// # Errors
    /// The body did not complete within 15 s, or the transport failed while reading it.
    pub async fn try_text(self) -> Result<String, SendError> {
        match tokio::time::timeout(HEADERS_LIMIT, self.response.text()).await {
            Err(_) => Err(SendError::Timeout),
            Ok(Err(e)) => Err(SendError::Transport(e.to_string())),
            Ok(Ok(text)) => Ok(text),
        }
    }

    /// The whole body as JSON; panics (showing the body) when it is not.
    pub async fn json(self) -> Value {
        let status = self.status;
        let text = self.text().await;
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{status} body is not JSON ({e}): {text:?}"))
    }

    /// The body as an SSE stream (whatever the content type says).
    pub fn sse(self) -> SseStream {
        SseStream::new(self.response, self.sent_at)
    }

    /// The JSON-RPC response to request `id`, from a JSON body or from the SSE stream (reading at
    /// most `timeout`). Panics when the status is not 200 or no response arrives.
    pub async fn answer(self, id: Value, timeout: Duration) -> Answer {
        assert_eq!(self.status, StatusCode::OK, "answer to request {id}");
        if self.is_json() {
            let response = self.json().await;
            return Answer {
                response,
                messages: Vec::new(),
                events: Vec::new(),
                sse: false,
            };
        }
        assert!(
            self.is_sse(),
            "answer to {id}: content type {:?}",
            self.header("content-type")
        );
        let mut stream = self.sse();
        let got = stream.until_response(&id, timeout).await;
        let response = got.matched.unwrap_or_else(|| {
            panic!(
                "no response to {id} within {timeout:?} (ended: {}); read: {:?}",
                stream.is_ended(),
                got.events
            )
        });
        let messages = got.messages.into_iter().map(|(_, m)| m).collect();
        Answer {
            response,
            messages,
            events: got.events,
            sse: true,
        }
    }
}

/// A JSON-RPC response and whatever came before it on its stream.
#[derive(Debug)]
pub struct Answer {
    /// The response object.
    pub response: Value,
    /// The messages before it (requests and notifications); empty for a JSON body.
    pub messages: Vec<Value>,
    /// Every SSE event read (empty for a JSON body).
    pub events: Vec<SseEvent>,
    /// Whether it came as SSE.
    pub sse: bool,
}

impl Answer {
    /// The messages with `method`.
    pub fn with_method(&self, method: &str) -> Vec<&Value> {
        self.messages
            .iter()
            .filter(|m| m["method"] == method)
            .collect()
    }

    /// Whether this is the response to `id`.
    pub fn answers(&self, id: &Value) -> bool {
        is_response(&self.response, id)
    }
}
