//! An rmcp [`StreamableHttpClient`] that spreads ONE rmcp client over several nodes: every HTTP
//! request (POST, GET, DELETE) goes to the node a [`Policy`] picks, through rmcp's own reqwest
//! implementation. It records where each request went ([`Routed`]) and every JSON message each SSE
//! stream carried ([`StreamLog`]), and on demand cuts a tool call's response stream after k
//! messages ([`RoutedHttp::arm_cut`]) so that rmcp resumes it with `Last-Event-ID`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use parking_lot::Mutex;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::Value;
use sse_stream::Sse;

mod tap;

use tap::{tap, TapOptions};
pub use tap::{StreamEnd, StreamLog};

/// The HTTP client rmcp's reqwest transport is implemented for (reqwest 0.13).
type Http = rmcp_reqwest::Client;
/// rmcp's error type for that client.
type HttpError = StreamableHttpError<rmcp_reqwest::Error>;
/// An SSE event stream as rmcp consumes it.
pub(crate) type SseBox = BoxStream<'static, Result<Sse, SseError>>;

/// The HTTP method of a routed request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpKind {
    /// A POST carrying one JSON-RPC message.
    Post,
    /// A GET: the standalone stream, or a resumption when `last_event_id` is set.
    Get,
    /// A DELETE ending the session.
    Delete,
}

/// What the policy knows about a request before it is sent.
#[derive(Clone, Debug)]
pub struct RequestInfo {
    /// 0-based position among all HTTP requests of this router.
    pub seq: usize,
    /// The HTTP method.
    pub kind: HttpKind,
    /// For a POST: the JSON-RPC method, or `"response"` / `"error"` for the client's answer to a
    /// server-to-client request.
    pub rpc: Option<String>,
    /// For a `tools/call` POST: the tool name.
    pub tool: Option<String>,
    /// For a POST carrying a request or an answer: its JSON-RPC id.
    pub id: Option<Value>,
    /// For a GET: the `Last-Event-ID` it carries.
    pub last_event_id: Option<String>,
    /// The `Mcp-Session-Id` it carries.
    pub session_id: Option<String>,
}

impl RequestInfo {
    /// Whether this is a POST of JSON-RPC method `method`.
    pub fn is_rpc(&self, method: &str) -> bool {
        self.kind == HttpKind::Post && self.rpc.as_deref() == Some(method)
    }

    /// Whether this is a `tools/call` POST of tool `tool`.
    pub fn is_call_of(&self, tool: &str) -> bool {
        self.is_rpc("tools/call") && self.tool.as_deref() == Some(tool)
    }

    /// Whether this is a GET resuming a stream (it carries `Last-Event-ID`).
    pub fn is_resume(&self) -> bool {
        self.kind == HttpKind::Get && self.last_event_id.is_some()
    }

    /// Whether this is a GET opening the standalone stream (no `Last-Event-ID`).
    pub fn is_standalone_get(&self) -> bool {
        self.kind == HttpKind::Get && self.last_event_id.is_none()
    }
}

/// A routing function: the node index for a request (taken modulo the node count).
pub type RouteFn = dyn Fn(&RequestInfo) -> usize + Send + Sync;

/// How requests are spread over the nodes.
pub enum Policy {
    /// Request `seq` goes to node `seq % n`.
    RoundRobin,
    /// Request `seq` goes to node `nodes[seq]`; requests past the end go round-robin.
    Scripted(Vec<usize>),
    /// A function of the request.
    Custom(Box<RouteFn>),
}

impl Policy {
    /// A [`Policy::Custom`] from a closure.
    pub fn custom(f: impl Fn(&RequestInfo) -> usize + Send + Sync + 'static) -> Policy {
        Policy::Custom(Box::new(f))
    }

    fn pick(&self, info: &RequestInfo, n: usize) -> usize {
        let node = match self {
            Policy::RoundRobin => info.seq,
            Policy::Scripted(nodes) => nodes.get(info.seq).copied().unwrap_or(info.seq),
            Policy::Custom(f) => f(info),
        };
        node % n
    }
}

/// One routed request and how it ended.
#[derive(Clone, Debug)]
pub struct Routed {
    /// The request.
    pub request: RequestInfo,
    /// The node it went to.
    pub node: usize,
    /// `Ok("json" | "sse" | "accepted" | "stream" | "deleted")` or the error text; `None` while
    /// in flight.
    pub outcome: Option<Result<String, String>>,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) log: Vec<Routed>,
    pub(crate) streams: Vec<StreamLog>,
    cut: Option<(String, usize)>,
    hold_get_streams: bool,
    session_id: Option<String>,
}

struct Inner {
    http: Http,
    urls: Vec<Arc<str>>,
    policy: Policy,
    state: Arc<Mutex<State>>,
}

/// The routing client; clones share the log and the connection pool.
#[derive(Clone)]
pub struct RoutedHttp(Arc<Inner>);

impl RoutedHttp {
    /// A router over the MCP endpoints `urls` (node 0 = `urls[0]`).
    pub fn new(urls: &[String], policy: Policy) -> RoutedHttp {
        assert!(!urls.is_empty(), "RoutedHttp needs at least one node");
        let http = Http::builder()
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(5))
            .build()
            .expect("reqwest 0.13 client");
        let urls = urls.iter().map(|u| Arc::from(u.as_str())).collect();
        RoutedHttp(Arc::new(Inner {
            http,
            urls,
            policy,
            state: Arc::default(),
        }))
    }

    /// An rmcp transport using this router. Session re-initialization on 404 is off, so a gone
    /// session shows as an error instead of being silently replaced.
    pub fn transport(&self) -> StreamableHttpClientTransport<RoutedHttp> {
        let config = StreamableHttpClientTransportConfig::with_uri(self.0.urls[0].clone())
            .reinit_on_expired_session(false);
        StreamableHttpClientTransport::with_client(self.clone(), config)
    }

    /// Cuts the response stream of the next `tools/call` of `tool` after `after` JSON messages:
    /// the connection is closed and rmcp sees a stream error, as on a network failure.
    pub fn arm_cut(&self, tool: &str, after: usize) {
        self.0.state.lock().cut = Some((tool.to_owned(), after));
    }

    /// Keeps reading GET streams after rmcp lets go of them (e.g. when it closes), so that the
    /// test sees when the *server* ends them.
    pub fn hold_get_streams(&self) {
        self.0.state.lock().hold_get_streams = true;
    }

    /// Every request so far, in the order they were sent.
    pub fn log(&self) -> Vec<Routed> {
        self.0.state.lock().log.clone()
    }

    /// Every SSE stream so far, in the order they were opened.
    pub fn streams(&self) -> Vec<StreamLog> {
        self.0.state.lock().streams.clone()
    }

    /// The nodes of the requests matching `pred`, in order.
    pub fn nodes_where(&self, pred: impl Fn(&RequestInfo) -> bool) -> Vec<usize> {
        self.0
            .state
            .lock()
            .log
            .iter()
            .filter(|r| pred(&r.request))
            .map(|r| r.node)
            .collect()
    }

    /// The session id the server assigned (from the `initialize` response), if any yet.
    pub fn session_id(&self) -> Option<String> {
        self.0.state.lock().session_id.clone()
    }

    /// Assigns the next sequence number, picks the node and logs the request.
    fn route(&self, mut info: RequestInfo) -> (usize, Arc<str>) {
        let mut state = self.0.state.lock();
        info.seq = state.log.len();
        let node = self.0.policy.pick(&info, self.0.urls.len());
        state.log.push(Routed {
            request: info,
            node,
            outcome: None,
        });
        (state.log.len() - 1, self.0.urls[node].clone())
    }

    fn finish<T>(&self, seq: usize, result: &Result<T, HttpError>, ok: &str) {
        let outcome = match result {
            Ok(_) => Ok(ok.to_owned()),
            Err(e) => Err(e.to_string()),
        };
        self.0.state.lock().log[seq].outcome = Some(outcome);
    }

    /// Wraps an SSE body in a recording tap (see the `tap` submodule).
    fn tapped(&self, seq: usize, stream: SseBox, cut: Option<usize>, hold: bool) -> SseBox {
        let node = self.0.state.lock().log[seq].node;
        tap(
            self.0.state.clone(),
            TapOptions {
                seq,
                node,
                cut,
                hold,
            },
            stream,
        )
    }
}

/// The routing facts of a POSTed message.
fn post_info(message: &ClientJsonRpcMessage, session_id: &Option<Arc<str>>) -> RequestInfo {
    let value = serde_json::to_value(message).unwrap_or(Value::Null);
    let rpc = match (value.get("method"), value.get("result"), value.get("error")) {
        (Some(m), _, _) => m.as_str().map(str::to_owned),
        (None, Some(_), _) => Some("response".to_owned()),
        (None, None, Some(_)) => Some("error".to_owned()),
        _ => None,
    };
    let tool = value["params"]["name"]
        .as_str()
        .filter(|_| rpc.as_deref() == Some("tools/call"));
    let id = value.get("id").cloned();
    RequestInfo {
        seq: 0,
        kind: HttpKind::Post,
        rpc,
        tool: tool.map(str::to_owned),
        id,
        last_event_id: None,
        session_id: session_id.as_deref().map(str::to_owned),
    }
}

impl StreamableHttpClient for RoutedHttp {
    type Error = rmcp_reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        _uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let info = post_info(&message, &session_id);
        let cut = {
            let mut state = self.0.state.lock();
            match &state.cut {
                Some((tool, after)) if info.tool.as_deref() == Some(tool.as_str()) => {
                    let after = *after;
                    state.cut = None;
                    Some(after)
                }
                _ => None,
            }
        };
        let (seq, url) = self.route(info);
        let result = self
            .0
            .http
            .post_message_with_response_limits(
                url,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        let kind = match &result {
            Ok(StreamableHttpPostResponse::Sse(..)) => "sse",
            Ok(StreamableHttpPostResponse::Json(..)) => "json",
            _ => "accepted",
        };
        self.finish(seq, &result, kind);
        match result {
            Ok(StreamableHttpPostResponse::Sse(stream, sid)) => {
                self.remember_session(sid.as_deref());
                Ok(StreamableHttpPostResponse::Sse(
                    self.tapped(seq, stream, cut, false),
                    sid,
                ))
            }
            Ok(StreamableHttpPostResponse::Json(msg, sid)) => {
                self.remember_session(sid.as_deref());
                Ok(StreamableHttpPostResponse::Json(msg, sid))
            }
            other => other,
        }
    }

    async fn delete_session(
        &self,
        _uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        let info = RequestInfo {
            seq: 0,
            kind: HttpKind::Delete,
            rpc: None,
            tool: None,
            id: None,
            last_event_id: None,
            session_id: Some(session_id.to_string()),
        };
        let (seq, url) = self.route(info);
        let result = self
            .0
            .http
            .delete_session(url, session_id, auth_header, custom_headers)
            .await;
        self.finish(seq, &result, "deleted");
        result
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<SseBox, HttpError> {
        let max = StreamableHttpResponseLimits::default().max_sse_event_size;
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        _uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<SseBox, HttpError> {
        let info = RequestInfo {
            seq: 0,
            kind: HttpKind::Get,
            rpc: None,
            tool: None,
            id: None,
            last_event_id: last_event_id.clone(),
            session_id: session_id.as_deref().map(str::to_owned),
        };
        let hold = info.is_standalone_get() && self.0.state.lock().hold_get_streams;
        let (seq, url) = self.route(info);
        let result = self
            .0
            .http
            .get_stream_with_max_sse_event_size(
                url,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.finish(seq, &result, "stream");
        result.map(|stream| self.tapped(seq, stream, None, hold))
    }
}

impl RoutedHttp {
    fn remember_session(&self, sid: Option<&str>) {
        if let Some(sid) = sid {
            self.0
                .state
                .lock()
                .session_id
                .get_or_insert_with(|| sid.to_owned());
        }
    }
}
