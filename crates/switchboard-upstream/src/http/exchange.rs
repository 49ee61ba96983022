//! Why one HTTP exchange with an upstream failed, naming the exchange: the message that was
//! sent (`initialize`, the call's method, `GET`, `DELETE`) and the endpoint that answered
//! (the address connected to), so every error a client reads says who answered what.

use std::net::SocketAddr;

use reqwest::{Response, StatusCode};
use serde_json::Value;

use super::common::rpc_error;
use crate::upstream::RpcError;

/// How much of an unexpected error body is quoted in an error message.
const QUOTED_BODY: usize = 200;

/// Which exchange an error comes from: the message (`initialize`, a method, `GET`, `DELETE`)
/// and the endpoint that answered (the address connected to, as `reqwest` reports it, else the
/// pinned address, else the URL's `host:port`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct At {
    /// The message, e.g. `tools/call` or `GET`.
    pub what: String,
    /// The endpoint, e.g. `127.0.0.2:8080`.
    pub endpoint: String,
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` at {}", self.what, self.endpoint)
    }
}

/// Why an exchange failed.
#[derive(Debug)]
pub(crate) enum WireError {
    /// 404 to a request that carried our `Mcp-Session-Id` (or the 400 rule of [`super::wire::Wire::post`]):
    /// the upstream ended or forgot the session (MCP 2025-11-25, basic/transports, Session
    /// Management items 3–4). The request was not run.
    Gone {
        /// The exchange.
        at: At,
        /// 404, or 400.
        status: StatusCode,
    },
    /// An HTTP error status whose body was a JSON-RPC error.
    Rpc {
        /// The exchange.
        at: At,
        /// The status.
        status: StatusCode,
        /// The upstream's error.
        error: RpcError,
    },
    /// No connection could be made to the endpoint (refused, unreachable, connect timeout).
    Unreachable {
        /// The exchange.
        at: At,
        /// The pinned endpoint, when the session has one.
        pinned: Option<SocketAddr>,
        /// What the connection attempt said.
        why: String,
    },
    /// Anything else: unexpected status or body, a broken stream. The text says what and where.
    Failed(String),
}

impl WireError {
    /// Whether the error's text is about a session (see the 400 rule in [`super::wire::Wire::post`]).
    pub(crate) fn mentions_session(&self) -> bool {
        let text = match self {
            WireError::Gone { .. } => return true,
            WireError::Rpc { error, .. } => error.message.to_ascii_lowercase(),
            WireError::Failed(why) => why.to_ascii_lowercase(),
            WireError::Unreachable { .. } => return false,
        };
        text.contains("session")
    }

    /// What the error says, naming the exchange.
    pub fn describe(&self) -> String {
        match self {
            WireError::Gone { at, status } => format!(
                "{} answered HTTP {} to the upstream session id",
                at,
                status.as_u16()
            ),
            WireError::Rpc { at, status, error } => format!(
                "{} answered HTTP {}: {} ({})",
                at,
                status.as_u16(),
                error.message,
                error.code
            ),
            WireError::Unreachable { at, why, .. } => {
                format!("cannot connect to {} for `{}`: {why}", at.endpoint, at.what)
            }
            WireError::Failed(why) => why.clone(),
        }
    }
}

/// An error status: a JSON-RPC error from its body when there is one, otherwise the status
/// and the start of the body, naming the exchange.
pub(crate) async fn failure(response: Response, at: &At) -> WireError {
    let status = response.status();
    let body = response.bytes().await.unwrap_or_default();
    if let Ok(value) = serde_json::from_slice::<Value>(&body) {
        if let Some(error) = value.get("error").filter(|e| e.is_object()) {
            return WireError::Rpc {
                at: at.clone(),
                status,
                error: rpc_error(error),
            };
        }
    }
    let text = String::from_utf8_lossy(&body);
    let text = text.trim();
    if text.is_empty() {
        WireError::Failed(format!("{at} answered HTTP {status}"))
    } else {
        let quoted: String = text.chars().take(QUOTED_BODY).collect();
        WireError::Failed(format!("{at} answered HTTP {status}: {quoted}"))
    }
}

/// A reqwest error with its causes ("error sending request … : connection refused").
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        "cannot connect".to_owned()
    } else {
        e.to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}
