//! `serve-forward`: the smallest Rust proxy hop. Every request on `/mcp` is sent on to one
//! upstream URL with the same method, body and MCP headers through a pooled `reqwest` client
//! (the HTTP client a Switchboard node uses for its HTTP upstreams), and the upstream's status,
//! content type, session id and whole body go back. No session, no store, no parsing: what a
//! hop costs in this HTTP stack before any of Switchboard's own work, to read the proxy row of
//! `compare` against.
//!
//! The answer is read to its end before it is sent on (as a node reads an upstream's answer),
//! so the client's connection is reused; passing an SSE answer through chunk by chunk made the
//! load generator drop the response before its last chunk and open a new connection per call.
//! A GET stream never ends, so this hop is for request/response exchanges only.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;

/// The request headers passed on (MCP 2025-11-25, basic/transports), and the answer headers
/// passed back.
const REQUEST_HEADERS: [&str; 5] = [
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];
const ANSWER_HEADERS: [&str; 2] = ["content-type", "mcp-session-id"];

/// The upstream and the pooled client that reaches it.
#[derive(Clone)]
struct Hop {
    client: reqwest::Client,
    upstream: reqwest::Url,
}

/// The router: any method on `/mcp` → [`forward`] to `upstream` (an absolute URL); an error
/// when `upstream` is not one or the HTTP client cannot be built.
pub fn router(upstream: String) -> Result<Router, String> {
    let upstream = reqwest::Url::parse(&upstream)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| format!("--upstream {upstream:?}: not an http:// or https:// URL"))?;
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .no_proxy()
        .build()
        .map_err(|e| format!("http client: {e}"))?;
    Ok(Router::new()
        .route("/mcp", any(forward))
        .with_state(Hop { client, upstream }))
}

/// Sends the request on and the whole answer back; 502 when the upstream cannot be reached or
/// its answer breaks off.
async fn forward(
    State(hop): State<Hop>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut out = hop.client.request(method, hop.upstream.clone()).body(body);
    for name in REQUEST_HEADERS {
        if let Some(v) = headers.get(name) {
            out = out.header(name, v);
        }
    }
    let answer = match out.send().await {
        Ok(a) => a,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let mut response = Response::builder().status(answer.status());
    for name in ANSWER_HEADERS {
        if let Some(v) = answer.headers().get(name) {
            response = response.header(HeaderName::from_static(name), v);
        }
    }
    let body = match answer.bytes().await {
        Ok(b) => b,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    response
        .body(Body::from(body))
        .unwrap_or_else(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response())
}
