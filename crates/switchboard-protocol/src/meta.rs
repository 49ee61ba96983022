//! Reserved `_meta` keys and `resultType` values of MCP 2026-07-28 (basic, `_meta` and
//! ResultType; server/discover).

/// `params._meta` key: the protocol version of this request (required).
pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `params._meta` key: the client's capabilities for this request (required).
pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `params._meta` key: the client's `Implementation` (SHOULD; advisory only).
pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `params._meta` key: the lowest log level to send as `notifications/message` on this request's
/// stream; without it the server sends none (optional, deprecated with logging).
pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `result._meta` key: the server's `Implementation`.
pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The member every 2026-07-28 result carries.
pub const RESULT_TYPE: &str = "resultType";
/// `resultType` of a finished request.
pub const RESULT_COMPLETE: &str = "complete";
/// `params._meta` key of every notification on a `subscriptions/listen` stream, and `result._meta`
/// key of the result that closes one: the listen request's JSON-RPC id (MCP 2026-07-28,
/// basic/patterns/subscriptions).
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
