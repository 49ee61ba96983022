//! `text/event-stream` answers read through the `sse-stream` parser (WHATWG HTML, "Interpreting
//! an event stream"), with a tap on the body bytes for the first byte's arrival and the byte
//! count (what the parser does not report).

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use futures::{Stream, StreamExt};
use sse_stream::{Sse, SseStream};

use crate::error::CallError;

/// One complete SSE event: its `id` field (when the event had one) and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The event's own `id:` field, if it carried one.
    pub id: Option<String>,
    /// The data lines joined with `\n` (empty for a priming event).
    pub data: String,
}

/// What the tap saw of the body: when its first byte arrived and how many bytes there were.
#[derive(Debug, Default)]
struct Tap {
    first_byte: OnceLock<Instant>,
    bytes: AtomicU64,
}

/// The events of one SSE answer body, in order. Only events with a `data` or an `id` field are
/// yielded (an `event`- or `retry`-only block and comments are skipped).
pub struct SseEvents {
    events: Pin<Box<dyn Stream<Item = Result<Sse, sse_stream::Error>> + Send>>,
    tap: Arc<Tap>,
}

impl std::fmt::Debug for SseEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseEvents")
            .field("tap", &self.tap)
            .finish_non_exhaustive()
    }
}

impl SseEvents {
    /// Reads the body of `resp` (whose status and content type the caller checked).
    pub fn new(resp: reqwest::Response) -> SseEvents {
        SseEvents::from_bytes(resp.bytes_stream())
    }

    fn from_bytes<S, E>(body: S) -> SseEvents
    where
        S: Stream<Item = Result<bytes::Bytes, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        let tap = Arc::new(Tap::default());
        let seen = Arc::clone(&tap);
        let body = body.inspect(move |chunk| {
            if let Ok(chunk) = chunk {
                if !chunk.is_empty() {
                    seen.first_byte.get_or_init(Instant::now);
                }
                seen.bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
        });
        SseEvents {
            events: Box::pin(SseStream::from_bytes_stream(body)),
            tap,
        }
    }

    /// The next event, or `None` when the body has ended.
    ///
    /// # Errors
    /// [`CallError::Transport`] when the body failed or is not a valid event stream.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, CallError> {
        while let Some(sse) = self.events.next().await {
            let sse = sse.map_err(|e| CallError::Transport(format!("SSE: {e}")))?;
            if sse.data.is_some() || sse.id.is_some() {
                return Ok(Some(SseEvent {
                    id: sse.id,
                    data: sse.data.unwrap_or_default(),
                }));
            }
        }
        Ok(None)
    }

    /// When the first body byte arrived, once one has.
    pub fn first_byte(&self) -> Option<Instant> {
        self.tap.first_byte.get().copied()
    }

    /// Body bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.tap.bytes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events_of(chunks: &[&'static [u8]]) -> SseEvents {
        let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = chunks
            .iter()
            .map(|c| Ok(bytes::Bytes::from_static(c)))
            .collect();
        SseEvents::from_bytes(futures::stream::iter(chunks))
    }

    async fn all(mut events: SseEvents) -> Vec<SseEvent> {
        let mut out = Vec::new();
        while let Some(e) = events.next().await.unwrap() {
            out.push(e);
        }
        out
    }

    fn ev(id: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            id: id.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    #[tokio::test]
    async fn events_across_chunks_and_crlf() {
        let events = events_of(&[
            b"id: 1\nretry: 1000\ndata:\n\n",
            b"event: message\r\ndata: {\"a\":",
            b"1}\r\n\r\n: comment\n",
            b"data: x\ndata: y\n\ndata:z\n\nretry: 5\n\n",
        ]);
        let got = all(events).await;
        assert_eq!(
            got,
            vec![
                ev(Some("1"), ""),
                ev(None, "{\"a\":1}"),
                ev(None, "x\ny"),
                ev(None, "z")
            ]
        );
    }

    #[tokio::test]
    async fn events_keep_their_ids_and_the_tap_counts_bytes() {
        let body: &'static [u8] =
            b"id: s_0-0\nretry: 3000\ndata:\n\nid: s_1-0\ndata: {}\n\n: ka\n\n";
        let mut events = events_of(&[body]);
        assert_eq!(events.next().await.unwrap(), Some(ev(Some("s_0-0"), "")));
        assert_eq!(events.next().await.unwrap(), Some(ev(Some("s_1-0"), "{}")));
        assert_eq!(events.next().await.unwrap(), None);
        assert_eq!(events.bytes(), body.len() as u64);
        assert!(events.first_byte().is_some());
    }
}
