//! Reading `text/event-stream` bodies: server-sent events of an HTTP response, parsed by the
//! maintained `sse-stream` crate behind a small bounding adapter ([`lines`]).
//!
//! Source: WHATWG HTML, "Server-sent events", §9.2.6 Interpreting an event stream (lines end in
//! CR LF, LF or CR; `data` lines are joined with LF; `id` without NUL sets the last event id;
//! `retry` is an integer of milliseconds; lines starting with `:` are comments). MCP uses `id`
//! and `retry` for resumption (MCP 2025-11-25, basic/transports, Resumability and Redelivery).
//! Where sse-stream is stricter than WHATWG, [`lines`] says what it does about it; an empty
//! `event` type is the default one here (sse-stream keeps it as `Some("")`).
//!
//! Bytes are split into lines before they are decoded, so a multi-byte UTF-8 character split
//! across two network reads is decoded whole.

mod lines;
#[cfg(test)]
mod tests;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use self::lines::{LineError, Lines};

/// One dispatched event. Fields the event did not carry are `None`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct SseEvent {
    /// The `event` field (the event type); `None` means the default type, `message`.
    pub event: Option<String>,
    /// The joined `data` lines (empty for an event without data, e.g. a priming event).
    pub data: String,
    /// The `id` field, when the event carried one.
    pub id: Option<String>,
    /// The `retry` field in milliseconds, when the event carried a valid one.
    pub retry: Option<u64>,
}

impl SseEvent {
    /// Whether this event carries a message (type `message` or none, and non-blank data).
    pub fn is_message(&self) -> bool {
        matches!(self.event.as_deref(), None | Some("message")) && !self.data.trim().is_empty()
    }
}

/// Reads the events of one `text/event-stream` response body.
pub(crate) struct EventReader {
    /// sse-stream's events over the bounded lines of the body.
    events: BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>,
    /// Set when an event passed the limit (its value, in bytes): the stream ended there.
    over_limit: Option<usize>,
}

impl EventReader {
    /// Wraps a response whose body is an event stream, buffering events of at most `max` bytes.
    pub fn new(response: reqwest::Response, max: usize) -> EventReader {
        let body = response
            .bytes_stream()
            .map_err(|e| super::exchange::describe(&e));
        EventReader::from_body(body.boxed(), max)
    }

    /// Reads an event-stream body given as chunks (`Err`: the connection failed, described).
    fn from_body(body: BoxStream<'static, Result<bytes::Bytes, String>>, max: usize) -> Self {
        EventReader {
            events: sse_stream::SseStream::from_bytes_stream(Lines::new(body, max)).boxed(),
            over_limit: None,
        }
    }

    /// The limit, when the stream ended because an event passed it (a resumption would only
    /// bring the same event again).
    pub fn over_limit(&self) -> Option<usize> {
        self.over_limit
    }

    /// The next event; `None` when the stream ended (an unfinished event at the end is dropped,
    /// as the SSE rules say); `Err` when the connection failed or an event passed the limit.
    pub async fn next(&mut self) -> Option<Result<SseEvent, String>> {
        loop {
            let error = match self.events.next().await? {
                Ok(sse) => return Some(Ok(SseEvent::from(sse))),
                Err(sse_stream::Error::Body(error)) => error,
                // One line sse-stream refused (only a `retry` past u64 gets here): ignored, as
                // WHATWG ignores a field it cannot use. The line was its own chunk: nothing
                // else is lost.
                Err(other) => {
                    tracing::debug!(error = %other, "skipped an SSE line");
                    continue;
                }
            };
            if let Some(LineError::TooLarge(max)) = error.downcast_ref::<LineError>() {
                self.over_limit = Some(*max);
            }
            return Some(Err(error.to_string()));
        }
    }
}

/// One event as [`read_all_events`] gives it: type, data, id, retry.
#[doc(hidden)]
pub type ReadEvent = (Option<String>, String, Option<String>, Option<u64>);

/// Reads a whole event-stream body given as `chunks` (the network reads) with events of at most
/// `max` bytes, as an upstream's SSE answer is read: each event as (type, data, id, retry), and
/// at the end the error that ended the stream, if any. For the fuzz targets (`fuzz/`).
#[doc(hidden)]
pub fn read_all_events(chunks: Vec<Vec<u8>>, max: usize) -> (Vec<ReadEvent>, Option<String>) {
    let body = futures::stream::iter(chunks.into_iter().map(|c| Ok(bytes::Bytes::from(c))));
    let mut reader = EventReader::from_body(body.boxed(), max);
    futures::executor::block_on(async move {
        let mut events = Vec::new();
        while let Some(next) = reader.next().await {
            match next {
                Ok(e) => events.push((e.event, e.data, e.id, e.retry)),
                Err(error) => return (events, Some(error)),
            }
        }
        (events, None)
    })
}

impl From<sse_stream::Sse> for SseEvent {
    fn from(sse: sse_stream::Sse) -> SseEvent {
        SseEvent {
            // An empty type is the default one, `message` (WHATWG, dispatch step 5).
            event: sse.event.filter(|e| !e.is_empty()),
            data: sse.data.unwrap_or_default(),
            id: sse.id,
            retry: sse.retry,
        }
    }
}
