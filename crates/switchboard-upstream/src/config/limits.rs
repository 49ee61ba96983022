//! The defaults of the size and count limits of `[[upstreams]]` tables: `max_line_bytes`
//! (stdio), `max_message_bytes` (http, sse) and `max_attached_sessions` (shared stdio). They live
//! here, with the fields they default, so the config imports nothing from the upstream kinds
//! that enforce them (`stdio`, `http`, `sse`).

/// Default `max_line_bytes` of a stdio upstream: the longest line a child may write on stdout,
/// in bytes, its newline not counted (16 MiB).
pub const DEFAULT_MAX_LINE_BYTES: u64 = 16 * 1024 * 1024;

/// Default `max_message_bytes` of an http or sse upstream: the largest message read from the
/// server, in bytes (32 MiB): a JSON answer body, one SSE event (its lines included), an error
/// body.
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 32 * 1024 * 1024;

/// Default `max_attached_sessions` of a shared stdio upstream: the most client sessions attached
/// to its child on one node (a count of sessions).
pub const DEFAULT_MAX_ATTACHED_SESSIONS: usize = 10_000;
