//! Server-sent events: a stream reader over the `sse-stream` parser (WHATWG HTML, "Interpreting
//! an event stream"), with per-event arrival times, for tests that care about what arrives when.
//!
//! `sse-stream` drops comment lines, but the keep-alive cases count them and time them, so a
//! minimal raw tap on the body bytes (before the parser) notes each line that starts with `:`.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::Value;
use sse_stream::{Sse, SseStream as SseParse};

/// One dispatched SSE event.
#[derive(Clone, Debug)]
pub struct SseEvent {
    /// The `id` field, if the event had one.
    pub id: Option<String>,
    /// The `event` field, if any.
    pub event: Option<String>,
    /// The joined `data` lines; `None` when the event had no `data` field at all.
    pub data: Option<String>,
    /// The `retry` field in milliseconds, if any.
    pub retry: Option<u64>,
    /// When the event's last line arrived.
    pub at: Instant,
}

impl SseEvent {
    /// Whether this is a priming event: an id and a present but empty `data` field.
    pub fn is_priming(&self) -> bool {
        self.id.is_some() && self.data.as_deref() == Some("")
    }

    /// The data parsed as JSON; `None` when there is no data, it is empty, or it is not JSON.
    pub fn json(&self) -> Option<Value> {
        let data = self.data.as_deref().filter(|d| !d.trim().is_empty())?;
        serde_json::from_str(data).ok()
    }
}

/// What the raw tap saw of the body bytes: arrival times, and the comment lines the parser
/// drops. A line starts at the beginning of the body and after each `\r` or `\n`.
#[derive(Debug)]
struct Tap {
    at_line_start: bool,
    first_byte_at: Option<Instant>,
    last_chunk_at: Option<Instant>,
    comment_times: Vec<Instant>,
}

impl Tap {
    fn observe(&mut self, chunk: &[u8]) {
        let now = Instant::now();
        if !chunk.is_empty() {
            self.first_byte_at.get_or_insert(now);
        }
        self.last_chunk_at = Some(now);
        for &b in chunk {
            if self.at_line_start && b == b':' {
                self.comment_times.push(now);
            }
            self.at_line_start = b == b'\n' || b == b'\r';
        }
    }
}

type Events = Pin<Box<dyn Stream<Item = Result<Sse, sse_stream::Error>> + Send>>;

/// An open SSE response body, read incrementally. Dropping it closes the connection.
pub struct SseStream {
    events: Events,
    tap: Arc<Mutex<Tap>>,
    comment_times: Vec<Instant>,
    ended: bool,
    /// When the request was sent.
    pub sent_at: Instant,
    /// When the first body byte arrived.
    pub first_byte_at: Option<Instant>,
    /// The transport or parse error that ended the stream, if it did not end cleanly.
    pub error: Option<String>,
}

impl SseStream {
    /// Wraps a response body; `sent_at` is when its request went out.
    pub fn new(response: reqwest::Response, sent_at: Instant) -> SseStream {
        SseStream::from_bytes(response.bytes_stream(), sent_at)
    }

    /// Wraps any stream of body chunks.
    fn from_bytes<S, E>(body: S, sent_at: Instant) -> SseStream
    where
        S: Stream<Item = Result<Bytes, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        let tap = Arc::new(Mutex::new(Tap {
            at_line_start: true,
            first_byte_at: None,
            last_chunk_at: None,
            comment_times: Vec::new(),
        }));
        let seen = Arc::clone(&tap);
        let body = body.inspect(move |chunk| {
            if let Ok(chunk) = chunk {
                seen.lock().expect("tap lock").observe(chunk);
            }
        });
        SseStream {
            events: Box::pin(SseParse::from_bytes_stream(body)),
            tap,
            comment_times: Vec::new(),
            ended: false,
            sent_at,
            first_byte_at: None,
            error: None,
        }
    }

    /// The next event (priming events included) within `timeout`; `None` on timeout or when the
    /// stream has ended (see [`SseStream::is_ended`]).
    pub async fn next_event(&mut self, timeout: Duration) -> Option<SseEvent> {
        if self.ended {
            return None;
        }
        let next = tokio::time::timeout(timeout, self.events.next()).await;
        // The event was completed by the last chunk the parser pulled (it hands out events
        // parsed from one chunk before it pulls the next).
        let at = {
            let mut tap = self.tap.lock().expect("tap lock");
            self.first_byte_at = tap.first_byte_at;
            self.comment_times.append(&mut tap.comment_times);
            tap.last_chunk_at.unwrap_or_else(Instant::now)
        };
        match next {
            Err(_) => None,
            Ok(None) => {
                self.ended = true;
                None
            }
            Ok(Some(Err(e))) => {
                self.ended = true;
                self.error = Some(e.to_string());
                None
            }
            Ok(Some(Ok(sse))) => Some(SseEvent {
                id: sse.id,
                event: sse.event,
                data: sse.data,
                retry: sse.retry,
                at,
            }),
        }
    }

    /// The next event carrying a JSON message (skips priming events), with the message.
    pub async fn next_message(&mut self, timeout: Duration) -> Option<(SseEvent, Value)> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ev = self.next_event(left).await?;
            if let Some(v) = ev.json() {
                return Some((ev, v));
            }
        }
    }

    /// Reads messages until the JSON-RPC response with `id` (a `result` or `error` member, no
    /// `method`), or until `timeout` or the end of the stream.
    pub async fn until_response(&mut self, id: &Value, timeout: Duration) -> Collected {
        self.until(timeout, |m| is_response(m, id)).await
    }

    /// Reads messages until one with `method`, or until `timeout` or the end of the stream.
    pub async fn until_method(&mut self, method: &str, timeout: Duration) -> Collected {
        self.until(timeout, |m| m["method"] == method).await
    }

    /// Reads until a JSON message satisfies `stop` (kept in [`Collected::matched`]), or until
    /// `timeout` or the end of the stream.
    pub async fn until(
        &mut self,
        timeout: Duration,
        mut stop: impl FnMut(&Value) -> bool,
    ) -> Collected {
        let deadline = Instant::now() + timeout;
        let mut collected = Collected::default();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(ev) = self.next_event(left).await else {
                return collected;
            };
            let Some(msg) = ev.json() else {
                collected.events.push(ev);
                continue;
            };
            collected.events.push(ev.clone());
            if stop(&msg) {
                collected.matched = Some(msg);
                return collected;
            }
            collected.messages.push((ev, msg));
        }
    }

    /// Reads until the stream ends; `Err` with what was read when it is still open after `timeout`.
    pub async fn until_end(&mut self, timeout: Duration) -> Result<Vec<SseEvent>, Vec<SseEvent>> {
        let deadline = Instant::now() + timeout;
        let mut events = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event(left).await {
                Some(ev) => events.push(ev),
                None if self.ended => return Ok(events),
                None => return Err(events),
            }
        }
    }

    /// Whether the body has ended (cleanly or not) and every event in it was read.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Comment lines (keep-alives) seen so far.
    pub fn comments(&self) -> usize {
        self.comment_times.len()
    }

    /// Arrival times of the comment lines seen so far.
    pub fn comment_times(&self) -> &[Instant] {
        &self.comment_times
    }
}

/// What [`SseStream::until_response`] read.
#[derive(Debug, Default)]
pub struct Collected {
    /// Every event read, priming events and the matching one included, in order.
    pub events: Vec<SseEvent>,
    /// The JSON messages before the matching one, with their events.
    pub messages: Vec<(SseEvent, Value)>,
    /// The message that stopped the read, if it arrived.
    pub matched: Option<Value>,
}

impl Collected {
    /// The messages with the given `method`.
    pub fn with_method(&self, method: &str) -> Vec<&Value> {
        self.messages
            .iter()
            .map(|(_, m)| m)
            .filter(|m| m["method"] == method)
            .collect()
    }
}

/// Whether `msg` is the JSON-RPC response to request `id`.
pub fn is_response(msg: &Value, id: &Value) -> bool {
    msg.get("method").is_none()
        && (msg.get("result").is_some() || msg.get("error").is_some())
        && &msg["id"] == id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_of(chunks: &[&'static [u8]]) -> SseStream {
        let chunks: Vec<Result<Bytes, std::io::Error>> =
            chunks.iter().map(|c| Ok(Bytes::from_static(c))).collect();
        SseStream::from_bytes(futures::stream::iter(chunks), Instant::now())
    }

    #[tokio::test]
    async fn reads_priming_comments_and_split_chunks() {
        let mut s = stream_of(&[
            b"id: s_0-0\r\nretry: 3000\r\ndata:\r\n\r\n: keep\n\nda",
            b"ta: {\"a\":1}\ndata: 2\nid: s_1-0\r",
            b"\n\r\n",
        ]);
        let t = Duration::from_secs(1);
        let first = s.next_event(t).await.expect("priming event");
        assert!(first.is_priming());
        assert_eq!(first.retry, Some(3000));
        let second = s.next_event(t).await.expect("message");
        assert_eq!(second.data.as_deref(), Some("{\"a\":1}\n2"));
        assert_eq!(second.id.as_deref(), Some("s_1-0"));
        assert_eq!(s.comments(), 1);
        assert!(s.next_event(t).await.is_none());
        assert!(s.is_ended() && s.error.is_none());
        assert!(s.first_byte_at.is_some());
    }

    #[tokio::test]
    async fn event_without_data_field_has_none() {
        let mut s = stream_of(&[b"id: x\n\n"]);
        let ev = s.next_event(Duration::from_secs(1)).await.unwrap();
        assert_eq!(ev.data, None);
        assert!(!ev.is_priming());
    }
}
