//! SSE streams backed by the store's event logs:
//!
//! - [`pump`]: the task behind one open connection (priming, replay, live events, keep-alives).
//! - [`resume`]: the checks before a stream is resumed from `Last-Event-ID`.
//! - [`sse`]: SSE framing and response headers.
//!
//! Tests: `rules` runs the replica runtime's rules through this node's streams.

pub mod pump;
pub mod resume;
#[cfg(test)]
mod rules;
pub mod sse;
