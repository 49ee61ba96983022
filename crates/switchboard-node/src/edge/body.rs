//! How a POST body is read: within `http.max_body` bytes (the edge's `RequestBodyLimitLayer`
//! counts them) and within `http.body_read_timeout` of the end of its head.
//!
//! The deadline is set when the request enters the edge (layer 1 in `app.rs`, which runs as
//! soon as hyper has parsed the head) and rides with the request as a [`BodyDeadline`]
//! extension; [`collect`] reads the body under `tokio::time::timeout_at`. It bounds the whole
//! body, not the gap between chunks (tower-http's `TimeoutBody` resets on every chunk, so a body
//! sent a byte a second would never trip it). `http.header_read_timeout` bounds the head alone.

use std::time::Duration;

use axum::body::{Body, Bytes};
use tokio::time::Instant;

use super::error::HttpError;

/// When the request's body must have arrived in full.
#[derive(Clone, Copy, Debug)]
pub struct BodyDeadline {
    at: Instant,
    timeout: Duration,
}

impl BodyDeadline {
    /// `timeout` from now.
    pub fn from_now(timeout: Duration) -> Self {
        BodyDeadline {
            at: Instant::now() + timeout,
            timeout,
        }
    }
}

/// The whole body: 408 ([`HttpError::BodyTimeout`]) when it has not arrived by `deadline`, 413
/// when it turns out longer than `max_body` (the edge's limit fails the read), 400 when it is
/// not framed as HTTP/1.1 says (a malformed chunk size, a body cut short: RFC 9112 §7.1, §8).
pub(crate) async fn collect(
    body: Body,
    deadline: BodyDeadline,
    max_body: usize,
) -> Result<Bytes, HttpError> {
    match tokio::time::timeout_at(deadline.at, axum::body::to_bytes(body, usize::MAX)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) if over_the_limit(&e) => Err(HttpError::PayloadTooLarge(max_body)),
        Ok(Err(e)) => {
            let why = with_causes(&e);
            tracing::debug!(error = %why, "a request body could not be read");
            Err(HttpError::BadFraming(why))
        }
        Err(_) => {
            tracing::debug!(timeout = ?deadline.timeout, "a request body did not arrive in time");
            Err(HttpError::BodyTimeout(deadline.timeout))
        }
    }
}

/// Whether a body read failed on the edge's length limit (`http_body_util::LengthLimitError`
/// somewhere in the error's chain), rather than on the body's framing or the connection.
fn over_the_limit(e: &axum::Error) -> bool {
    chain(e).any(|c| c.is::<http_body_util::LengthLimitError>())
}

/// An error and its causes, `outer: inner: …` (hyper's body error says only "error reading a body
/// from connection"; its cause names the fault, e.g. "invalid chunk size line").
fn with_causes(e: &axum::Error) -> String {
    let mut text = String::new();
    for c in chain(e) {
        let part = c.to_string();
        if !text.ends_with(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
    }
    text
}

/// `e` and then each of its causes (`source()`), outermost first.
fn chain<'e>(
    e: &'e (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'e (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |c| c.source())
}
