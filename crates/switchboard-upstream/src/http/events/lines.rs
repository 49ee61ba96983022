//! The byte stream in front of [`sse_stream`]: cuts an event-stream body into whole lines,
//! bounds the event being read, and hands each line on as its own chunk.
//!
//! Why it exists: sse-stream has no size limit, and it is stricter than WHATWG HTML §9.2.6
//! ("Interpreting an event stream") in ways an upstream may trip over. What this adapter does,
//! and nothing more:
//! - Lines end in CR LF, LF or CR (a CR LF cut over two reads is one line end); each line is
//!   handed on as one chunk ending in LF, so a line sse-stream refuses costs that line only
//!   (it drops the rest of a chunk after an error).
//! - The bytes of the lines since the last blank line (line ends not counted, comments not
//!   counted) may not pass `max`: past it the stream fails with [`LineError::TooLarge`]. The
//!   line being read counts too, so a line that never ends fails at `max` bytes instead of
//!   buffering without limit.
//! - The byte-order mark is skipped (also when cut over reads); comment lines are dropped.
//! - WHATWG leniencies sse-stream lacks: invalid UTF-8 becomes U+FFFD (sse-stream refuses the
//!   line); a line without a colon is a field with an empty value (sse-stream refuses it);
//!   fields other than `data`, `event`, `id`, `retry` are dropped (sse-stream refuses them).
//! - sse-stream refuses a second `event`, `id` or `retry` line in one event, where WHATWG lets
//!   the last one win: the last `event` line, the last `id` line without NUL and the last
//!   `retry` line of ASCII digits only are held and handed on just before the blank line that
//!   ends the event (other `id` and `retry` lines are ignored, as WHATWG says).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};

/// The largest line buffer kept for the next line cut by a chunk's end; after a longer line the
/// buffer is freed, so a long-lived stream does not hold the memory of its longest line.
pub(super) const KEEP_LINE_BUFFER: usize = 64 * 1024;
/// The UTF-8 byte-order mark, skipped once at the start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Why the line stream failed (sse-stream hands it back inside its `Error::Body`).
#[derive(Debug, thiserror::Error)]
pub(super) enum LineError {
    /// The body failed (the HTTP client's description of why).
    #[error("{0}")]
    Body(String),
    /// The event being read passed the limit (its value, in bytes).
    #[error("an SSE event exceeds {0} bytes")]
    TooLarge(usize),
}

/// An event-stream body as a stream of whole lines, each ending in LF (see the module doc).
/// Ends after the body's end or the first error.
pub(super) struct Lines {
    /// The body; `None` once it ended or failed.
    body: Option<BoxStream<'static, Result<Bytes, String>>>,
    /// The most bytes the event being read may hold (`max_message_bytes`).
    max: usize,
    /// Bytes of the line cut by a chunk's end.
    pub(super) partial: Vec<u8>,
    /// The previous chunk ended in CR: a LF starting the next one belongs to it.
    after_cr: bool,
    /// Bytes of the complete lines of the event being read.
    event_bytes: usize,
    /// Whether the first line (the one a byte-order mark may start) was read.
    started: bool,
    /// The last valid `event`, `id` and `retry` lines of the event being read.
    held: [Option<Bytes>; 3],
    /// Lines cut, not yet handed on.
    ready: VecDeque<Bytes>,
    /// Why the stream failed, handed on after the lines cut before the failure.
    failed: Option<LineError>,
}

impl Lines {
    /// Lines of `body`, failing an event over `max` bytes.
    pub(super) fn new(body: BoxStream<'static, Result<Bytes, String>>, max: usize) -> Lines {
        Lines {
            body: Some(body),
            max,
            partial: Vec::new(),
            after_cr: false,
            event_bytes: 0,
            started: false,
            held: Default::default(),
            ready: VecDeque::new(),
            failed: None,
        }
    }

    /// Cuts `bytes` into lines; the last piece without a line end waits in `partial`.
    fn cut(&mut self, mut bytes: &[u8]) -> Result<(), LineError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if std::mem::take(&mut self.after_cr) && bytes[0] == b'\n' {
            bytes = &bytes[1..];
        }
        while let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
            let cr = bytes[end] == b'\r';
            if self.partial.is_empty() {
                self.line(&bytes[..end])?;
            } else {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(&bytes[..end]);
                self.line(&whole)?;
                if whole.capacity() <= KEEP_LINE_BUFFER {
                    whole.clear();
                    self.partial = whole;
                }
            }
            bytes = &bytes[end + 1..];
            if cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
        }
        // The line being read counts as it will once whole: without a byte-order mark the first
        // line loses, and not at all when it is a comment, which is dropped whole at its end;
        // of a comment only the colon is kept, however long it grows. So where the reads end
        // never decides whether an event is over the limit. Its first four bytes decide both.
        let mut first = [0u8; 4];
        let n = self.partial.len().min(4);
        first[..n].copy_from_slice(&self.partial[..n]);
        let m = bytes.len().min(4 - n);
        first[n..n + m].copy_from_slice(&bytes[..m]);
        let first = &first[..n + m];
        let start = if self.started {
            0
        } else if first.starts_with(BOM) {
            BOM.len()
        } else if BOM.starts_with(first) {
            first.len()
        } else {
            0
        };
        if first.get(start) == Some(&b':') {
            self.partial.clear();
            self.partial.extend_from_slice(&first[..=start]);
            return Ok(());
        }
        // Checked before the bytes are kept: the buffer never grows past `max` (a growth past
        // it would double its capacity for bytes that are refused anyway).
        self.check(self.event_bytes + self.partial.len() + bytes.len() - start)?;
        self.partial.extend_from_slice(bytes);
        Ok(())
    }

    /// Fails when the event being read holds more than `max` bytes.
    fn check(&self, bytes: usize) -> Result<(), LineError> {
        if bytes > self.max {
            return Err(LineError::TooLarge(self.max));
        }
        Ok(())
    }

    /// Routes one complete line (without its line end).
    fn line(&mut self, raw: &[u8]) -> Result<(), LineError> {
        let raw = match std::mem::replace(&mut self.started, true) {
            false => raw.strip_prefix(BOM).unwrap_or(raw),
            true => raw,
        };
        if raw.is_empty() {
            self.event_bytes = 0;
            let held = std::mem::take(&mut self.held);
            self.ready.extend(held.into_iter().flatten());
            self.ready.push_back(Bytes::from_static(b"\n"));
            return Ok(());
        }
        if raw[0] == b':' {
            return Ok(());
        }
        self.event_bytes += raw.len();
        self.check(self.event_bytes)?;
        let line = field_line(raw);
        let colon = line.iter().position(|&b| b == b':').unwrap_or_default();
        let value = &line[colon + 1..line.len() - 1];
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match &line[..colon] {
            b"data" => self.ready.push_back(line),
            b"event" => self.held[0] = Some(line),
            b"id" if !value.contains(&0) => self.held[1] = Some(line),
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.held[2] = Some(line);
            }
            _ => {}
        }
        Ok(())
    }
}

/// A line as sse-stream can read it: valid UTF-8 (invalid bytes as U+FFFD), with a colon (a
/// line without one is a field with an empty value), ending in LF.
fn field_line(raw: &[u8]) -> Bytes {
    let text = String::from_utf8_lossy(raw);
    let mut line = Vec::with_capacity(text.len() + 2);
    line.extend_from_slice(text.as_bytes());
    if !text.contains(':') {
        line.push(b':');
    }
    line.push(b'\n');
    Bytes::from(line)
}

impl Stream for Lines {
    type Item = Result<Bytes, LineError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(line) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(line)));
            }
            if let Some(failed) = this.failed.take() {
                return Poll::Ready(Some(Err(failed)));
            }
            let Some(body) = this.body.as_mut() else {
                return Poll::Ready(None);
            };
            let failed = match std::task::ready!(body.poll_next_unpin(cx)) {
                Some(Ok(chunk)) => match this.cut(&chunk) {
                    Ok(()) => continue,
                    Err(e) => e,
                },
                Some(Err(e)) => LineError::Body(e),
                // An unfinished line or event at the end is dropped, as WHATWG says.
                None => {
                    this.body = None;
                    return Poll::Ready(None);
                }
            };
            // The events completed before the failure are still read.
            this.body = None;
            this.failed = Some(failed);
        }
    }
}
