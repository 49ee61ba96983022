//! Server-sent events: an incremental parser (WHATWG HTML, "Interpreting an event stream") and a
//! stream reader with per-event arrival times, for tests that care about what arrives when.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::Value;

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

/// Incremental SSE parser: feed it chunks, get complete events back.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    id: Option<String>,
    event: Option<String>,
    data: Option<String>,
    retry: Option<u64>,
    fields: usize,
    /// Number of comment lines (`:` keep-alives) seen so far.
    pub comments: usize,
    /// Arrival time of each comment line.
    pub comment_times: Vec<Instant>,
}

impl SseParser {
    /// Parses `chunk` (arrived at `at`) and returns every event completed by it.
    pub fn push(&mut self, chunk: &[u8], at: Instant) -> Vec<SseEvent> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(rel) = self.buf[start..]
            .iter()
            .position(|b| *b == b'\n' || *b == b'\r')
        {
            let end = start + rel;
            let step = match (self.buf[end], self.buf.get(end + 1)) {
                (b'\r', Some(b'\n')) => 2,
                (b'\r', None) => break, // a '\n' may follow in the next chunk
                _ => 1,
            };
            let line = String::from_utf8_lossy(&self.buf[start..end]).into_owned();
            start = end + step;
            if let Some(ev) = self.line(&line, at) {
                out.push(ev);
            }
        }
        self.buf.drain(..start);
        out
    }

    fn line(&mut self, line: &str, at: Instant) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch(at);
        }
        if line.starts_with(':') {
            self.comments += 1;
            self.comment_times.push(at);
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        self.fields += 1;
        match field {
            "data" => {
                let data = self.data.get_or_insert_with(String::new);
                data.push_str(value);
                data.push('\n');
            }
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            "event" => self.event = Some(value.to_owned()),
            "retry" => self.retry = value.parse().ok(),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self, at: Instant) -> Option<SseEvent> {
        if std::mem::take(&mut self.fields) == 0 {
            return None;
        }
        let mut data = self.data.take();
        if let Some(d) = data.as_mut() {
            d.pop();
        }
        Some(SseEvent {
            id: self.id.take(),
            event: self.event.take(),
            data,
            retry: self.retry.take(),
            at,
        })
    }
}

type Body = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// An open SSE response body, read incrementally. Dropping it closes the connection.
pub struct SseStream {
    body: Body,
    parser: SseParser,
    queue: VecDeque<SseEvent>,
    ended: bool,
    /// When the request was sent.
    pub sent_at: Instant,
    /// When the first body byte arrived.
    pub first_byte_at: Option<Instant>,
    /// The transport error that ended the stream, if it did not end cleanly.
    pub error: Option<String>,
}

impl SseStream {
    /// Wraps a response body; `sent_at` is when its request went out.
    pub fn new(response: reqwest::Response, sent_at: Instant) -> SseStream {
        SseStream {
            body: Box::pin(response.bytes_stream()),
            parser: SseParser::default(),
            queue: VecDeque::new(),
            ended: false,
            sent_at,
            first_byte_at: None,
            error: None,
        }
    }

    /// The next event (priming events included) within `timeout`; `None` on timeout or when the
    /// stream has ended (see [`SseStream::is_ended`]).
    pub async fn next_event(&mut self, timeout: Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(ev) = self.queue.pop_front() {
                return Some(ev);
            }
            if self.ended {
                return None;
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Err(_) => return None,
                Ok(None) => self.ended = true,
                Ok(Some(Err(e))) => {
                    self.ended = true;
                    self.error = Some(e.to_string());
                }
                Ok(Some(Ok(chunk))) => {
                    let now = Instant::now();
                    self.first_byte_at.get_or_insert(now);
                    let events = self.parser.push(&chunk, now);
                    self.queue.extend(events);
                }
            }
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

    /// Whether the body has ended (cleanly or not).
    pub fn is_ended(&self) -> bool {
        self.ended && self.queue.is_empty()
    }

    /// Comment lines (keep-alives) seen so far.
    pub fn comments(&self) -> usize {
        self.parser.comments
    }

    /// Arrival times of the comment lines seen so far.
    pub fn comment_times(&self) -> &[Instant] {
        &self.parser.comment_times
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

    #[test]
    fn parses_priming_comments_and_split_chunks() {
        let mut p = SseParser::default();
        let now = Instant::now();
        let mut evs = p.push(
            b"id: s_0-0\r\nretry: 3000\r\ndata:\r\n\r\n: keep\n\nda",
            now,
        );
        evs.extend(p.push(b"ta: {\"a\":1}\ndata: 2\nid: s_1-0\r", now));
        assert_eq!(evs.len(), 1);
        assert!(evs[0].is_priming());
        assert_eq!(evs[0].retry, Some(3000));
        assert_eq!(p.comments, 1);
        let evs = p.push(b"\n\r\n", now);
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].data.as_deref(), Some("{\"a\":1}\n2"));
        assert_eq!(evs[0].id.as_deref(), Some("s_1-0"));
    }

    #[test]
    fn event_without_data_field_has_none() {
        let mut p = SseParser::default();
        let evs = p.push(b"id: x\n\n", Instant::now());
        assert_eq!(evs[0].data, None);
        assert!(!evs[0].is_priming());
    }
}
