//! SSE framing and response headers.
//!
//! Every stream answer carries `Content-Type: text/event-stream`, `Cache-Control: no-cache,
//! no-transform`, `X-Accel-Buffering: no` (MCP 2026-07-28, streamable-http, Receiving Messages;
//! proxies such as nginx otherwise buffer frames) and no `Content-Length` or `Content-Encoding`.

use std::convert::Infallible;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

/// `id: <id>\ndata: <data>\n\n`. `data` is one line of compact JSON.
pub fn event(id: &str, data: &str) -> Bytes {
    Bytes::from(format!("id: {id}\ndata: {data}\n\n"))
}

/// `data: <data>\n\n`: an event without an id (MCP 2026-07-28 streams are not resumable, so
/// their events carry no ids). `data` is one line of compact JSON.
pub fn data(data: &str) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// `event: <name>\ndata: <data>\n\n`: the frames of the legacy HTTP+SSE transport (MCP 2024-11-05,
/// basic/transports, HTTP with SSE): one `endpoint` event, then a `message` event per JSON-RPC
/// message. No ids: that revision has no resumability. `data` is one line.
pub fn named(name: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// The priming event (MCP 2025-11-25, basic/transports, Sending Messages item 6): an event id and
/// empty data, plus `retry` in milliseconds (Resumability, polling).
pub fn priming(id: &str, retry_ms: u64) -> Bytes {
    Bytes::from(format!("id: {id}\nretry: {retry_ms}\ndata: \n\n"))
}

/// An SSE comment, ignored by clients; keeps proxies from timing the stream out.
pub fn keepalive() -> Bytes {
    Bytes::from_static(b": keep-alive\n\n")
}

/// A `200 text/event-stream` response whose body is whatever arrives on `rx`. When the client goes
/// away the body is dropped, which closes `rx` and tells the writer.
pub fn response(rx: mpsc::Receiver<Bytes>, extra: &[(&'static str, HeaderValue)]) -> Response {
    let body = Body::from_stream(ReceiverStream::new(rx).map(Ok::<_, Infallible>));
    body_response(body, extra)
}

/// A `200 text/event-stream` response with the headers above around `body`.
pub fn body_response(body: Body, extra: &[(&'static str, HeaderValue)]) -> Response {
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    for (k, v) in extra {
        h.insert(*k, v.clone());
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames() {
        assert_eq!(
            event("abc_1-0", "{}"),
            Bytes::from_static(b"id: abc_1-0\ndata: {}\n\n")
        );
        assert_eq!(
            priming("abc_0-0", 3000),
            Bytes::from_static(b"id: abc_0-0\nretry: 3000\ndata: \n\n")
        );
        assert!(keepalive().starts_with(b":"));
        assert_eq!(
            named("endpoint", "/messages?sessionId=ab"),
            Bytes::from_static(b"event: endpoint\ndata: /messages?sessionId=ab\n\n")
        );
    }
}
