//! SSE streams backed by the store's event logs:
//!
//! - [`hub`]: the SSE connections held by this node, keyed by (session, stream).
//! - [`pump`]: the task behind one open connection (priming, replay, live events, keep-alives).
//! - [`sse`]: SSE framing and response headers.

pub mod hub;
pub mod pump;
pub mod sse;
