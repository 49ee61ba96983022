//! Newline-delimited JSON-RPC framing of a child's stdio (MCP 2025-11-25, basic/transports,
//! stdio: "Messages are delimited by newlines, and MUST NOT contain embedded newlines").
//!
//! Reading works on bytes: a line is everything up to a `\n`, decoded as UTF-8 only once it is
//! complete, so a multi-byte character whose bytes arrive in two reads survives (case C27). A
//! trailing `\r` is dropped (CRLF line endings, case C28) and blank lines are skipped. Writing
//! serializes one JSON object compactly (serde_json never emits a raw newline: newlines inside
//! strings become `\n` escapes) and appends `\n`. Only objects can be written, so a batch array
//! never reaches a child (case C19, step 3).

use serde_json::{Map, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Why a line could not be read.
#[derive(Debug, PartialEq)]
pub(crate) enum FrameError {
    /// A line grew past the limit without a newline; the stream cannot be resynchronised.
    TooLong(usize),
    /// Reading the pipe failed.
    Io(String),
}

/// Reads `\n`-terminated lines from a buffered byte stream, up to `max` bytes each.
pub(crate) struct LineReader<R> {
    inner: R,
    max: usize,
    line: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// A reader of lines of at most `max` bytes (the newline not counted).
    pub(crate) fn new(inner: R, max: usize) -> LineReader<R> {
        LineReader {
            inner,
            max,
            line: Vec::new(),
        }
    }

    /// The next non-blank line without its `\n` (and `\r`), as raw bytes; `Ok(None)` at end of
    /// stream. A last line without a newline is returned at end of stream.
    pub(crate) async fn next_line(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        loop {
            match self.next_raw().await? {
                None => return Ok(None),
                Some(mut line) => {
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    if !line.iter().all(u8::is_ascii_whitespace) {
                        return Ok(Some(line));
                    }
                }
            }
        }
    }

    /// The next line, blank or not.
    async fn next_raw(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        loop {
            let available = self
                .inner
                .fill_buf()
                .await
                .map_err(|e| FrameError::Io(e.to_string()))?;
            if available.is_empty() {
                if self.line.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(std::mem::take(&mut self.line)));
            }
            let (take, done) = match available.iter().position(|b| *b == b'\n') {
                Some(i) => (i, true),
                None => (available.len(), false),
            };
            if self.line.len() + take > self.max {
                return Err(FrameError::TooLong(self.max));
            }
            self.line.extend_from_slice(&available[..take]);
            self.inner.consume(if done { take + 1 } else { take });
            if done {
                return Ok(Some(std::mem::take(&mut self.line)));
            }
        }
    }
}

/// What one stdout line turned out to be.
#[derive(Debug, PartialEq)]
pub(crate) enum Decoded {
    /// A JSON object (to be classified as JSON-RPC by the caller).
    Json(Value),
    /// Valid UTF-8 that is not a JSON object (a banner or log line on stdout, case C28).
    Noise(String),
    /// Invalid UTF-8; holds the JSON found after lossy decoding, if any, so that the call it
    /// answers can be failed with a clear error instead of hanging (case C27, step 4).
    BadUtf8(Option<Value>),
}

/// Decodes one line read by [`LineReader`].
pub(crate) fn decode(line: Vec<u8>) -> Decoded {
    match String::from_utf8(line) {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(v @ Value::Object(_)) => Decoded::Json(v),
            _ => Decoded::Noise(text),
        },
        Err(e) => {
            let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
            Decoded::BadUtf8(
                serde_json::from_str::<Value>(&lossy)
                    .ok()
                    .filter(Value::is_object),
            )
        }
    }
}

/// One message as the bytes written to a child: compact JSON and a `\n`.
pub(crate) fn encode(message: &Map<String, Value>) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(message).unwrap_or_else(|_| b"{}".to_vec());
    bytes.push(b'\n');
    bytes
}

/// `text` cut to at most `max` bytes (at a character boundary) for a log line, with `…` when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}
