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
/// when it turns out longer than `max_body` (the edge's limit fails the read).
pub(crate) async fn collect(
    body: Body,
    deadline: BodyDeadline,
    max_body: usize,
) -> Result<Bytes, HttpError> {
    match tokio::time::timeout_at(deadline.at, axum::body::to_bytes(body, usize::MAX)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(HttpError::PayloadTooLarge(max_body)),
        Err(_) => {
            tracing::debug!(timeout = ?deadline.timeout, "a request body did not arrive in time");
            Err(HttpError::BodyTimeout(deadline.timeout))
        }
    }
}
