//! [`CallError`]: why one request of the load generator failed.

use serde_json::Value;

/// Why a request failed: an HTTP status, a JSON-RPC error, a timeout or a transport failure.
#[derive(Debug)]
pub enum CallError {
    /// The answer had a non-2xx status.
    Http(u16),
    /// A JSON-RPC error response, or a tool result with `isError: true`.
    JsonRpc(Value),
    /// The per-request timeout passed.
    Timeout,
    /// Connection failure, malformed answer, or a stream that ended without our response.
    Transport(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Http(s) => write!(f, "HTTP status {s}"),
            CallError::JsonRpc(v) => write!(f, "JSON-RPC error: {v}"),
            CallError::Timeout => write!(f, "timeout"),
            CallError::Transport(e) => write!(f, "transport: {e}"),
        }
    }
}

impl From<reqwest::Error> for CallError {
    fn from(e: reqwest::Error) -> CallError {
        if e.is_timeout() {
            CallError::Timeout
        } else {
            CallError::Transport(e.to_string())
        }
    }
}
