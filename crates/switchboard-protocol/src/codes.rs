//! JSON-RPC 2.0 and MCP error codes.
//!
//! Sources: JSON-RPC 2.0 §5.1; MCP 2025-11-25 `schema.ts`; MCP 2026-07-28 basic/transports.

/// Invalid JSON was received (JSON-RPC 2.0 §5.1).
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object (JSON-RPC 2.0 §5.1).
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or is not available (JSON-RPC 2.0 §5.1).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters (JSON-RPC 2.0 §5.1).
pub const INVALID_PARAMS: i64 = -32602;
/// Internal error (JSON-RPC 2.0 §5.1).
pub const INTERNAL_ERROR: i64 = -32603;
/// Implementation-defined server error: the session is unknown, expired or deleted
/// (the value the TypeScript SDK uses with HTTP 404).
pub const SESSION_NOT_FOUND: i64 = -32001;
/// Implementation-defined server error: the cluster cannot take more sessions or requests now.
pub const OVERLOADED: i64 = -32003;
/// Implementation-defined server error: the request was cancelled or its node went away.
pub const REQUEST_ABORTED: i64 = -32004;
/// Implementation-defined server error: a rate limit (`rate_limits`) refused the request;
/// `data.retryAfterMs` (integer ms) says when it would pass and `data.limit` names the limit.
/// In a session the POST still answers 200 with this error, like the other in-session refusals.
pub const RATE_LIMITED: i64 = -32029;
/// A rate limit refused a 2026-07-28 (stateless) request, answered with HTTP 429: the same
/// `data` as [`RATE_LIMITED`]. Not -32029: MCP 2026-07-28 (basic, Error Codes) reserves
/// -32020…-32099 for codes the specification defines (implementations MUST NOT emit others
/// there) and retires -32000…-32019 (SHOULD NOT be used), so a code of our own lies outside
/// JSON-RPC's reserved -32768…-32000 (JSON-RPC 2.0 §5.1: application-defined).
pub const STATELESS_RATE_LIMITED: i64 = -31029;
/// Implementation-defined server error: the upstream did not answer in time.
pub const UPSTREAM_TIMEOUT: i64 = -32005;
/// Implementation-defined server error: the upstream failed or is unreachable.
pub const UPSTREAM_UNAVAILABLE: i64 = -32006;
/// MCP "resource not found" (until 2025-11-25; 2026-07-28 uses -32602).
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// MCP 2026-07-28 `HeaderMismatch`: a required header (`MCP-Protocol-Version`, `Mcp-Method`,
/// `Mcp-Name`, `Mcp-Param-*`) is missing, invalid or differs from the body; HTTP 400
/// (basic/transports, Server Validation).
pub const HEADER_MISMATCH: i64 = -32020;
/// MCP 2026-07-28 `MissingRequiredClientCapabilityError`: the request needs a client capability
/// its `_meta` did not declare; HTTP 400, `data.requiredCapabilities` (basic, `_meta`).
pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
/// MCP 2026-07-28 `UnsupportedProtocolVersionError`: HTTP 400, `data.supported` lists the
/// versions served and `data.requested` repeats the asked one (basic/versioning).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
