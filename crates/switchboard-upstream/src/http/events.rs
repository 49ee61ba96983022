//! Reading `text/event-stream` bodies: an incremental parser of server-sent events and an async
//! reader over an HTTP response.
//!
//! Source: WHATWG HTML, "Server-sent events", §9.2.6 Interpreting an event stream (lines end in
//! CR LF, LF or CR; `data` lines are joined with LF; `id` without NUL sets the last event id;
//! `retry` is an integer of milliseconds; lines starting with `:` are comments). MCP uses `id`
//! and `retry` for resumption (MCP 2025-11-25, basic/transports, Resumability and Redelivery).
//!
//! Bytes are split into lines before they are decoded, so a multi-byte UTF-8 character split
//! across two network reads is decoded whole.

use futures::stream::BoxStream;
use futures::StreamExt;

/// The largest line buffer kept for the next line cut by a chunk's end; after a longer line the
/// buffer is freed, so a long-lived stream does not hold the memory of its longest line.
const KEEP_LINE_BUFFER: usize = 64 * 1024;
/// The UTF-8 byte-order mark, skipped once at the start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

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

/// Incremental parser: feed it chunks as they arrive, collect whole events.
#[derive(Debug)]
pub(crate) struct SseParser {
    /// The largest line plus pending event data buffered, in bytes (`max_message_bytes`); a
    /// bigger one ends the stream with an error.
    max: usize,
    /// Bytes of the line being read.
    line: Vec<u8>,
    /// The previous chunk ended in CR: a leading LF of the next chunk belongs to it.
    after_cr: bool,
    /// Fields of the event being assembled.
    pending: SseEvent,
    /// Whether any data line was seen for the pending event.
    has_data: bool,
    /// Whether any field at all was seen for the pending event.
    has_fields: bool,
    /// Whether the byte-order mark at the start was handled.
    started: bool,
}

impl SseParser {
    /// A parser buffering at most `max` bytes of one event (its lines included).
    pub fn new(max: usize) -> SseParser {
        SseParser {
            max,
            line: Vec::new(),
            after_cr: false,
            pending: SseEvent::default(),
            has_data: false,
            has_fields: false,
            started: false,
        }
    }

    /// Parses `chunk`, returning the events it completed. Errors when a line grows beyond the
    /// buffer limit.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, String> {
        let mut out = Vec::new();
        let mut bytes = chunk;
        let held;
        if !self.started {
            // A byte-order mark may arrive cut over two reads: a piece of one waits (in `line`)
            // for the rest; only then are the held bytes joined to the chunk.
            if !self.line.is_empty() {
                let mut head = std::mem::take(&mut self.line);
                head.extend_from_slice(chunk);
                held = head;
                bytes = &held;
            }
            if bytes.len() < BOM.len() && BOM.starts_with(bytes) {
                self.line = bytes.to_vec();
                return Ok(out);
            }
            self.started = true;
            bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
        }
        while let Some(&first) = bytes.first() {
            if std::mem::take(&mut self.after_cr) && first == b'\n' {
                bytes = &bytes[1..];
                continue;
            }
            // Whole lines are handed on as slices of the chunk; only a line cut by the end of
            // a chunk is copied (into `line`, whose buffer is kept for the next one).
            let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') else {
                self.line.extend_from_slice(bytes);
                break;
            };
            self.after_cr = bytes[end] == b'\r';
            let event = if self.line.is_empty() {
                self.line_done(&bytes[..end])
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&bytes[..end]);
                let event = self.line_done(&line);
                if line.capacity() <= KEEP_LINE_BUFFER {
                    line.clear();
                    self.line = line;
                }
                event
            };
            // An event's data over the limit fails the stream, even when the whole event
            // came in one chunk.
            let data = event
                .as_ref()
                .map_or(self.pending.data.len(), |e| e.data.len());
            if data > self.max {
                return Err(format!("an SSE event exceeds {} bytes", self.max));
            }
            out.extend(event);
            bytes = &bytes[end + 1..];
        }
        if self.line.len() + self.pending.data.len() > self.max {
            return Err(format!("an SSE event exceeds {} bytes", self.max));
        }
        Ok(out)
    }

    /// Handles one complete line; returns an event when the line was blank and ended one.
    fn line_done(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None;
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text.as_ref(), ""),
        };
        self.has_fields = true;
        match field {
            "data" => {
                if self.has_data {
                    self.pending.data.push('\n');
                }
                self.pending.data.push_str(value);
                self.has_data = true;
            }
            // An empty type is the default one, `message` (WHATWG, dispatch step 5).
            "event" => self.pending.event = (!value.is_empty()).then(|| value.to_owned()),
            "id" if !value.contains('\0') => self.pending.id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|c| c.is_ascii_digit()) => {
                self.pending.retry = value.parse().ok();
            }
            _ => {}
        }
        None
    }

    /// Ends the pending event. Events with only `id`/`retry` are dispatched too (with empty
    /// data), so the reader learns the resumption cursor from priming events.
    fn dispatch(&mut self) -> Option<SseEvent> {
        let had = std::mem::take(&mut self.has_fields);
        self.has_data = false;
        let event = std::mem::take(&mut self.pending);
        had.then_some(event)
    }
}

/// Reads the events of one `text/event-stream` response body.
pub(crate) struct EventReader {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    parser: SseParser,
    ready: std::collections::VecDeque<SseEvent>,
    /// Set when an event passed the limit (its value, in bytes): the stream ended there.
    over_limit: Option<usize>,
}

impl EventReader {
    /// Wraps a response whose body is an event stream, buffering events of at most `max` bytes.
    pub fn new(response: reqwest::Response, max: usize) -> EventReader {
        EventReader {
            body: response.bytes_stream().boxed(),
            parser: SseParser::new(max),
            ready: Default::default(),
            over_limit: None,
        }
    }

    /// The limit, when the stream ended because an event passed it (a resumption would only
    /// bring the same event again).
    pub fn over_limit(&self) -> Option<usize> {
        self.over_limit
    }

    /// The next event; `None` when the stream ended (an unfinished event at the end is dropped,
    /// as the SSE rules say); `Err` when the connection failed.
    pub async fn next(&mut self) -> Option<Result<SseEvent, String>> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(Ok(event));
            }
            let chunk = match self.body.next().await? {
                Ok(chunk) => chunk,
                Err(e) => return Some(Err(super::exchange::describe(&e))),
            };
            match self.parser.push(&chunk) {
                Ok(events) => self.ready.extend(events),
                Err(e) => {
                    self.over_limit = Some(self.parser.max);
                    return Some(Err(e));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parser with the default `max_message_bytes`, as a connection has it.
    fn parser() -> SseParser {
        SseParser::new(usize::try_from(crate::http::wire::DEFAULT_MAX_MESSAGE_BYTES).unwrap())
    }

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = parser();
        chunks.iter().flat_map(|c| p.push(c).unwrap()).collect()
    }

    #[test]
    fn joins_data_lines_and_reads_fields() {
        let events =
            parse_all(&[b"event: message\nid: s1:4\nretry: 1500\ndata: {\"a\":\ndata: 1}\n\n"]);
        assert_eq!(
            events,
            vec![SseEvent {
                event: Some("message".into()),
                data: "{\"a\":\n1}".into(),
                id: Some("s1:4".into()),
                retry: Some(1500),
            }]
        );
        assert!(events[0].is_message());
    }

    #[test]
    fn handles_every_line_ending_and_splits_anywhere() {
        let text = b"data: one\r\n\r\ndata: two\r\rdata: three\n\n";
        let whole = parse_all(&[text]);
        let datas: Vec<_> = whole.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(datas, ["one", "two", "three"]);
        for cut in 0..text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(parse_all(&[a, b]), whole, "cut at {cut}");
        }
    }

    #[test]
    fn a_line_cut_over_several_reads_is_whole_and_leaves_nothing_behind() {
        let events = parse_all(&[b"data: ab", b"cd", b"ef\nid: 7\n", b"\ndata: x", b"\n\n"]);
        let datas: Vec<_> = events.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(datas, ["abcdef", "x"]);
        assert_eq!(events[0].id.as_deref(), Some("7"));
        assert_eq!(events[1].id, None);
    }

    #[test]
    fn a_long_cut_line_does_not_keep_its_buffer() {
        let mut p = parser();
        let long = vec![b'x'; 4 * KEEP_LINE_BUFFER];
        p.push(b"data: ").unwrap();
        p.push(&long).unwrap();
        let events = p.push(b"\n\n").unwrap();
        assert_eq!(events[0].data.len(), long.len());
        assert_eq!(p.line.capacity(), 0, "the long line's buffer was kept");
        p.push(b"data: ab").unwrap();
        let events = p.push(b"c\n\n").unwrap();
        assert_eq!(events[0].data, "abc");
        assert!(
            p.line.capacity() > 0,
            "a short line's buffer is kept for the next one"
        );
    }

    #[test]
    fn a_byte_order_mark_cut_over_reads_is_skipped() {
        let text: &[u8] = b"\xEF\xBB\xBFdata: x\n\n";
        for cut in 1..3 {
            let events = parse_all(&[&text[..cut], &text[cut..]]);
            assert_eq!(events.len(), 1, "cut at {cut}: {events:?}");
            assert_eq!(events[0].data, "x");
        }
        let events = parse_all(&[b"", b"\xEF", b"\xBB", b"\xBF", b"data: y\n\n"]);
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].data, "y");
        // Not a mark after all: the held byte is the start of the first line, whose field is
        // then not `data`.
        let events = parse_all(&[b"\xEF", b"data: z\n\n"]);
        assert!(events.iter().all(|e| e.data.is_empty()), "{events:?}");
    }

    #[test]
    fn an_empty_event_type_is_a_message() {
        let events = parse_all(&[b"event: tick\nevent:\ndata: {\"a\":1}\n\n"]);
        assert_eq!(events[0].event, None);
        assert!(events[0].is_message());
    }

    #[test]
    fn multibyte_characters_survive_a_split_read() {
        let text = "data: {\"t\":\"héllo → ✓\"}\n\n".as_bytes();
        let cut = text.iter().position(|&b| b == 0xE2).unwrap() + 1;
        let events = parse_all(&[&text[..cut], &text[cut..]]);
        assert_eq!(events[0].data, "{\"t\":\"héllo → ✓\"}");
    }

    #[test]
    fn comments_priming_events_and_bad_retry() {
        let events =
            parse_all(&[b"\xEF\xBB\xBF: keep-alive\n\nid: p0\ndata:\n\nretry: soon\ndata: x\n\n"]);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].id.as_deref(), Some("p0"));
        assert_eq!(events[0].data, "");
        assert!(!events[0].is_message());
        assert_eq!(events[1].retry, None);
        let other = parse_all(&[b"event: endpoint\ndata: /m?x=1\n\n"]);
        assert!(!other[0].is_message());
    }
}
