//! # switchboard-protocol
//!
//! The wire vocabulary every other crate speaks: JSON-RPC 2.0 envelopes, MCP protocol revisions,
//! HTTP header names, error codes, and the formats of session ids and event ids.
//!
//! Depends on nothing else in the workspace. Messages stay `serde_json::Value` so unknown fields and
//! methods pass through untouched; this crate only classifies and validates them.
//!
//! Modules:
//! - [`jsonrpc`]: classify a body into requests, notifications and responses; build error responses.
//! - [`revision`]: the MCP revisions we speak and the negotiation rule.
//! - [`headers`]: header names and SSE/HTTP constants.
//! - [`header_value`]: the `=?base64?…?=` value encoding of MCP 2026-07-28 request headers.
//! - [`meta`]: the reserved `_meta` keys and `resultType` values of MCP 2026-07-28.
//! - [`ids`]: session ids, stream ids and event ids (their formats and parsers).
//! - [`codes`]: JSON-RPC and MCP error codes.
//! - [`logging`]: the MCP log levels and the client capabilities server requests need.
//! - [`param_headers`]: tool arguments mirrored into `Mcp-Param-{Name}` headers (2026-07-28).
//! - [`shaping`]: answers shaped for the revision the client negotiated (what an older one lacks).

pub mod codes;
pub mod header_value;
pub mod headers;
pub mod ids;
pub mod jsonrpc;
pub mod logging;
pub mod meta;
pub mod param_headers;
pub mod revision;
pub mod shaping;

pub use ids::{EventId, SessionId, StreamId};
pub use jsonrpc::{Body, Message, RequestId};
pub use revision::Revision;
