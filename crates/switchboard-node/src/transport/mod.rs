//! The transports on the MCP endpoint and beside it, each turning HTTP into JSON-RPC messages of
//! a session (or, in the 2026-07-28 era, of no session):
//!
//! - [`streamable`]: Streamable HTTP (MCP 2025-03-26 through 2025-11-25): POST, GET, DELETE.
//! - [`legacy_sse`]: HTTP+SSE (MCP 2024-11-05): the SSE endpoint and its messages URI.
//! - [`websocket`]: one session over one WebSocket (subprotocol `mcp`).
//! - [`stateless`]: MCP 2026-07-28 on the same endpoint as Streamable HTTP (no session).
//! - [`forwarded`]: a request another node forwarded over the bus to this one, the owner of a
//!   session's node-bound upstream.

pub mod forwarded;
pub mod legacy_sse;
pub mod stateless;
pub mod streamable;
pub mod websocket;
