//! Header names and fixed values of the Streamable HTTP transport.
//!
//! Source: MCP 2025-11-25, basic/transports (Session Management, Protocol Version Header,
//! Resumability and Redelivery). Header names are case-insensitive; these are the lower-case forms.

/// `Mcp-Session-Id`: the session a request belongs to (MCP 2025-03-26 … 2025-11-25).
pub const MCP_SESSION_ID: &str = "mcp-session-id";
/// `MCP-Protocol-Version`: the negotiated revision, sent on every request after `initialize`.
pub const MCP_PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// `Mcp-Method`: the body's `method`, on every 2026-07-28 request (MCP 2026-07-28,
/// basic/transports, Standard Request Headers).
pub const MCP_METHOD: &str = "mcp-method";
/// `Mcp-Name`: `params.name` (`tools/call`, `prompts/get`) or `params.uri` (`resources/read`),
/// possibly in the `=?base64?…?=` encoding ([`crate::header_value`]).
pub const MCP_NAME: &str = "mcp-name";
/// Prefix of `Mcp-Param-{Name}` headers mirroring tool arguments tagged `x-mcp-header`
/// (MCP 2026-07-28, basic/transports, Custom Headers).
pub const MCP_PARAM_PREFIX: &str = "mcp-param-";
/// `Last-Event-ID`: the SSE cursor a client resumes from.
pub const LAST_EVENT_ID: &str = "last-event-id";
/// Media type of JSON answers.
pub const APPLICATION_JSON: &str = "application/json";
/// Media type of SSE streams.
pub const TEXT_EVENT_STREAM: &str = "text/event-stream";
