//! SSE framing and response headers.
//!
//! Every stream answer carries `Content-Type: text/event-stream`, `Cache-Control: no-store,
//! no-cache, no-transform`, `X-Accel-Buffering: no` (MCP 2026-07-28, streamable-http, Receiving
//! Messages; proxies such as nginx otherwise buffer frames) and no `Content-Length` or
//! `Content-Encoding`. `no-store` keeps a browser from writing a GET stream into its HTTP cache
//! under the endpoint's URL: Chromium did, and then restarted a `DELETE` of the same URL that
//! invalidated that entry, so the page saw the second attempt's 404 (issue 35, break-it pass).

use std::convert::Infallible;

use axum::body::Body;
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use http::{header, HeaderValue, StatusCode};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

/// Appends `id: <id_prefix><position>\ndata: <data>\n\n` to `buf`: an event whose id is its
/// stream's prefix (`<stream>_`) and its log position, so that a replayed page is framed into one
/// buffer without a string per event. `data` is one line of compact JSON.
pub fn push_event(buf: &mut BytesMut, id_prefix: &str, position: &str, data: &str) {
    buf.reserve(EVENT_OVERHEAD + id_prefix.len() + position.len() + data.len());
    buf.put_slice(b"id: ");
    buf.put_slice(id_prefix.as_bytes());
    buf.put_slice(position.as_bytes());
    buf.put_slice(b"\ndata: ");
    buf.put_slice(data.as_bytes());
    buf.put_slice(b"\n\n");
}

/// Appends [`named`]'s frame to `buf`.
pub fn push_named(buf: &mut BytesMut, name: &str, data: &str) {
    buf.reserve(EVENT_OVERHEAD + name.len() + data.len());
    buf.put_slice(b"event: ");
    buf.put_slice(name.as_bytes());
    buf.put_slice(b"\ndata: ");
    buf.put_slice(data.as_bytes());
    buf.put_slice(b"\n\n");
}

/// The bytes [`push_event`] and [`push_named`] add besides their fields.
pub const EVENT_OVERHEAD: usize = 17;

/// `data: <data>\n\n`: an event without an id (MCP 2026-07-28 streams are not resumable, so
/// their events carry no ids). `data` is one line of compact JSON.
pub fn data(data: &str) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// [`data`]'s frame of one JSON-RPC message, in pieces: the message is serialized once into an
/// exactly sized buffer (`jsonrpc::to_text`), and one over 64 KiB is handed on as it is between
/// the frame's head and tail instead of being copied into one buffer with them (a 2026-07-28
/// answer of N bytes then raises a node's memory by about 2 × N, not 4–5 × N).
pub fn data_pieces(message: &serde_json::Value) -> Vec<Bytes> {
    let text = switchboard_protocol::jsonrpc::to_text(message);
    if text.len() <= 64 * 1024 {
        return vec![data(&text)];
    }
    vec![
        Bytes::from_static(b"data: "),
        Bytes::from(text),
        Bytes::from_static(b"\n\n"),
    ]
}

/// A stream body of messages, each framed by [`data_pieces`] as it comes.
pub fn data_stream<S>(messages: S) -> axum::body::Body
where
    S: futures::Stream<Item = serde_json::Value> + Send + 'static,
{
    let frames = futures::StreamExt::flat_map(messages, |v| {
        futures::stream::iter(
            data_pieces(&v)
                .into_iter()
                .map(Ok::<_, std::convert::Infallible>),
        )
    });
    axum::body::Body::from_stream(frames)
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
        HeaderValue::from_static("no-store, no-cache, no-transform"),
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
            priming("abc_0-0", 3000),
            Bytes::from_static(b"id: abc_0-0\nretry: 3000\ndata: \n\n")
        );
        assert!(keepalive().starts_with(b":"));
        let mut buf = BytesMut::new();
        push_event(&mut buf, "abc_", "1-0", "{}");
        push_named(&mut buf, "message", "{}");
        push_event(&mut buf, "abc_", "2-0", "[]");
        assert_eq!(
            buf.freeze(),
            Bytes::from_static(
                b"id: abc_1-0\ndata: {}\n\nevent: message\ndata: {}\n\nid: abc_2-0\ndata: []\n\n"
            )
        );
        assert_eq!(
            named("endpoint", "/messages?sessionId=ab"),
            Bytes::from_static(b"event: endpoint\ndata: /messages?sessionId=ab\n\n")
        );
    }
}
