//! # switchboard-bench
//!
//! A load generator for MCP Streamable HTTP servers (Switchboard nodes, or any other server
//! speaking protocol revision 2025-11-25). Virtual clients open sessions and loop `tools/call`,
//! spreading requests round robin over node URLs; the result is requests/s, latency percentiles
//! and errors, printed and optionally written as JSON.
//!
//! Modules:
//! - [`baseline`]: the servers `compare` measures against (`serve-axum`, `serve-rmcp`,
//!   `serve-forward`).
//! - [`compare`]: the one-command side-by-side comparison (baselines vs Switchboard, ratios).
//! - [`error`]: [`error::CallError`], why one request failed.
//! - [`client`]: one MCP client (handshake, `tools/call`, `DELETE`), JSON and SSE answers.
//! - [`events`]: streaming exchanges on a chosen node (SSE answers event by event, GET streams,
//!   resumption with `Last-Event-ID`, answers to server requests).
//! - [`sse`]: SSE answers read through the `sse-stream` parser, event by event.
//! - [`memory`]: node RSS and Redis memory sampling, shared by `idle-sessions` and
//!   `open-streams`; its Redis probe also tells `resume-storm` when calls have finished.
//! - [`modes`]: `open-streams`, `resume-storm` and `sampling`.
//! - [`run`]: the `run` and `idle-sessions` modes.
//! - [`stats`]: latency percentiles and the report structs.
//!
//! The binary (`src/main.rs`) is only the command line over [`run`].

pub mod baseline;
pub mod client;
pub mod compare;
pub mod error;
pub mod events;
pub mod memory;
pub mod modes;
pub mod run;
pub mod sse;
pub mod stats;
