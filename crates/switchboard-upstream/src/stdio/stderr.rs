//! Draining a child's stderr (case C29: an undrained pipe blocks the child after ~64 KiB).
//!
//! stderr is read continuously, whatever the child writes, and turned into `tracing` events at
//! INFO under the target `switchboard::stdio::stderr`, with fields `upstream` and `session`.
//! Lines are cut at [`MAX_STDERR_LINE`] bytes (output without newlines becomes several events);
//! bytes are decoded lossily (stderr is diagnostics, not protocol). The last [`TAIL_LINES`] lines
//! are kept for diagnostics and logged at WARN when the child exits unexpectedly; the newest of
//! them (at most [`STDERR_IN_ERRORS`] characters) end the error of a child that exited on its own. At most
//! [`MAX_LOGGED_LINES_PER_SECOND`] lines a second are logged per child; the rest are counted.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use switchboard_telemetry::trace::logged_session;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

/// Longest stderr line logged as one event, in bytes.
pub(crate) const MAX_STDERR_LINE: usize = 8 * 1024;

/// How many stderr lines are kept for diagnostics.
pub(crate) const TAIL_LINES: usize = 20;

/// How much of a child's last stderr lines, in characters, the error of a child that exited on
/// its own carries (and with it the restart back-off's error and `/upstreamz`'s `last_error`).
pub(crate) const STDERR_IN_ERRORS: usize = 200;

/// stderr lines of one child logged per second at most; past it lines are still read (the child
/// never blocks) and kept in the tail, but only counted, and the count is logged once the second
/// is over, so a flooding child cannot flood the node's log.
pub(crate) const MAX_LOGGED_LINES_PER_SECOND: u32 = 100;

/// Per-second budget of logged lines.
struct Budget {
    window: tokio::time::Instant,
    logged: u32,
    dropped: u64,
}

impl Budget {
    /// Whether one more line may be logged now; reports the previous second's dropped lines.
    fn take(&mut self, upstream: &str, session: &str) -> bool {
        let now = tokio::time::Instant::now();
        if now.duration_since(self.window) >= std::time::Duration::from_secs(1) {
            self.flush(upstream, session);
            self.window = now;
            self.logged = 0;
        }
        self.logged += 1;
        if self.logged > MAX_LOGGED_LINES_PER_SECOND {
            self.dropped += 1;
            return false;
        }
        true
    }

    fn flush(&mut self, upstream: &str, session: &str) {
        if self.dropped > 0 {
            tracing::warn!(target: "switchboard::stdio::stderr", upstream, session, dropped = self.dropped, "stderr lines not logged (more than {MAX_LOGGED_LINES_PER_SECOND} a second)");
            self.dropped = 0;
        }
    }
}

/// The last stderr lines of one child, and whether its stderr has closed.
#[derive(Clone, Default)]
pub(crate) struct Tail {
    lines: Arc<Mutex<VecDeque<String>>>,
    closed: CancellationToken,
}

impl Tail {
    fn push(&self, line: String) {
        let mut tail = self.lines.lock();
        if tail.len() == TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }

    /// The kept lines, oldest first.
    pub(crate) fn lines(&self) -> Vec<String> {
        let tail = self.lines.lock();
        tail.iter().cloned().collect()
    }

    /// Waits until the child's stderr has closed and every line of it is kept.
    pub(crate) async fn closed(&self) {
        self.closed.cancelled().await
    }

    /// The last lines for an error message: as many of the newest lines as fit in
    /// [`STDERR_IN_ERRORS`] characters, oldest first, joined with ` | `; the newest alone cut to
    /// that length (ending in `…`) when it is longer. `None` when the child wrote nothing.
    pub(crate) fn last_words(&self) -> Option<String> {
        last_words(&self.lines(), STDERR_IN_ERRORS)
    }
}

/// See [`Tail::last_words`]: the newest `lines` within `max` characters.
fn last_words(lines: &[String], max: usize) -> Option<String> {
    let mut kept: Vec<&str> = Vec::new();
    let mut used = 0;
    for line in lines
        .iter()
        .rev()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
    {
        let len = line.chars().count() + if kept.is_empty() { 0 } else { 3 };
        if used + len > max {
            if kept.is_empty() {
                let cut: String = line.chars().take(max.saturating_sub(1)).collect();
                return Some(format!("{cut}…"));
            }
            break;
        }
        used += len;
        kept.push(line);
    }
    kept.reverse();
    (!kept.is_empty()).then(|| kept.join(" | "))
}

/// Reads `stderr` until end of stream, logging each line; returns when the pipe closes.
pub(crate) async fn drain(
    mut stderr: impl AsyncRead + Unpin,
    upstream: Arc<str>,
    session: String,
    tail: Tail,
) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut line: Vec<u8> = Vec::new();
    let mut budget = Budget {
        window: tokio::time::Instant::now(),
        logged: 0,
        dropped: 0,
    };
    let mut emit = |bytes: &[u8]| {
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        if bytes.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(bytes).into_owned();
        if budget.take(&upstream, &session) {
            tracing::info!(target: "switchboard::stdio::stderr", upstream = %upstream, session = %logged_session(&session), "{text}");
        }
        tail.push(text);
    };
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for chunk in buf[..n].split_inclusive(|b| *b == b'\n') {
            let complete = chunk.last() == Some(&b'\n');
            let chunk = chunk.strip_suffix(b"\n").unwrap_or(chunk);
            let mut rest = chunk;
            while line.len() + rest.len() > MAX_STDERR_LINE {
                let room = MAX_STDERR_LINE - line.len();
                line.extend_from_slice(&rest[..room]);
                emit(&line);
                line.clear();
                rest = &rest[room..];
            }
            line.extend_from_slice(rest);
            if complete {
                emit(&line);
                line.clear();
            }
        }
    }
    emit(&line);
    budget.flush(&upstream, &session);
    tail.closed.cancel();
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn at_most_the_budget_is_logged_each_second() {
        let mut b = Budget {
            window: tokio::time::Instant::now(),
            logged: 0,
            dropped: 0,
        };
        let logged = (0..150).filter(|_| b.take("u", "s")).count();
        assert_eq!(logged, MAX_LOGGED_LINES_PER_SECOND as usize);
        assert_eq!(b.dropped, 50);
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        assert!(b.take("u", "s"), "a new second, a new budget");
        assert_eq!(b.dropped, 0, "the dropped count was reported and reset");
    }
}

#[cfg(test)]
mod last_words_tests {
    use super::last_words;

    fn lines(all: &[&str]) -> Vec<String> {
        all.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn the_newest_lines_that_fit_oldest_first() {
        let tail = lines(&[
            "starting",
            "",
            "error: cannot open database `app.db`",
            "  exiting  ",
        ]);
        assert_eq!(
            last_words(&tail, 200).as_deref(),
            Some("starting | error: cannot open database `app.db` | exiting")
        );
        assert_eq!(
            last_words(&tail, 50).as_deref(),
            Some("error: cannot open database `app.db` | exiting"),
            "the oldest line does not fit"
        );
        assert_eq!(last_words(&lines(&["", " "]), 200), None);
    }

    #[test]
    fn a_newest_line_longer_than_the_bound_is_cut() {
        let long = "é".repeat(500);
        let words = last_words(&lines(&["before", &long]), 200).unwrap();
        assert_eq!(words.chars().count(), 200, "{words}");
        assert!(words.starts_with("éé") && words.ends_with('…'), "{words}");
    }
}
