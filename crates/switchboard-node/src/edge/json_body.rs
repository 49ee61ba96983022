//! A JSON response body that a large answer does not have to fit whole ([`json_response`]): an
//! answer up to 64 KiB is one buffer; a larger one is measured first, then written into one
//! buffer of its exact size up to 4 MiB, and past that serialized on a blocking thread into
//! 64 KiB pieces that go out as the client takes them, at most a few held at once.
//! axum's `Json` serialized into one buffer grown by doubling, which for an answer of N bytes
//! held up to 2 × N beside the answer's value (case C48: a 6 MiB answer raised the node's memory
//! by 61–64 MiB).

use std::io::Write;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use serde_json::Value;
use switchboard_protocol::jsonrpc;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// The size of one piece of a large body, and the largest body written in one buffer.
const CHUNK: usize = 64 * 1024;

/// The largest body written into one buffer of its exact size (measured first) where it is
/// made; a larger one is written on a blocking thread, in pieces ([`streamed`]). Below it the
/// thread costs more than the pieces save: a 1 MiB answer raised the node's memory by 3.0 ×
/// its size through a thread, about 2 × without (case C48).
const ONE_BUFFER: usize = 4 << 20;

/// Pieces of a large body written but not yet taken by the connection, at most.
const QUEUED: usize = 2;

/// A `status` response with `body` as `application/json`, with its `Content-Length`.
pub fn json_response(status: StatusCode, body: Value) -> Response {
    let (length, body) = match jsonrpc::to_bytes_within(&body, CHUNK) {
        Some(small) => (small.len(), Body::from(small)),
        None => match jsonrpc::text_len(&body) {
            length if length <= ONE_BUFFER => {
                let mut exact = Vec::with_capacity(length);
                // A `Value` always serializes into a `Vec`.
                let _ = serde_json::to_writer(&mut exact, &body);
                (length, Body::from(exact))
            }
            length => (length, streamed(body)),
        },
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    response
}

/// `value` serialized on a blocking thread into [`CHUNK`]-byte pieces, each sent when the
/// connection has taken all but [`QUEUED`] of the earlier ones. A client that goes away ends it.
fn streamed(value: Value) -> Body {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(QUEUED);
    tokio::task::spawn_blocking(move || {
        let mut pieces = Pieces {
            current: Vec::with_capacity(CHUNK),
            tx,
        };
        if serde_json::to_writer(&mut pieces, &value).is_ok() {
            let last = std::mem::take(&mut pieces.current);
            let _ = pieces.tx.blocking_send(Ok(Bytes::from(last)));
        }
    });
    Body::from_stream(ReceiverStream::new(rx))
}

/// A writer that sends each full [`CHUNK`] down a channel, waiting for room.
struct Pieces {
    current: Vec<u8>,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
}

impl Write for Pieces {
    fn write(&mut self, mut buf: &[u8]) -> std::io::Result<usize> {
        let written = buf.len();
        while !buf.is_empty() {
            if self.current.len() == CHUNK {
                let full = std::mem::replace(&mut self.current, Vec::with_capacity(CHUNK));
                if self.tx.blocking_send(Ok(Bytes::from(full))).is_err() {
                    return Err(std::io::ErrorKind::BrokenPipe.into());
                }
            }
            let take = (CHUNK - self.current.len()).min(buf.len());
            self.current.extend_from_slice(&buf[..take]);
            buf = &buf[take..];
        }
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn small_and_large_bodies_are_the_json_with_their_length() {
        for size in [0, 10, CHUNK - 40, CHUNK, 3 * CHUNK + 7, ONE_BUFFER + 3] {
            let value = serde_json::json!({"text": "x".repeat(size), "n": 1});
            let expected = serde_json::to_vec(&value).unwrap();
            let response = json_response(StatusCode::OK, value);
            let length = response.headers()[header::CONTENT_LENGTH]
                .to_str()
                .unwrap()
                .to_owned();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap();
            assert_eq!(bytes.as_ref(), expected.as_slice(), "{size}");
            assert_eq!(length, expected.len().to_string(), "{size}");
        }
    }
}
