//! `[transports.legacy_sse]` and `[transports.websocket]`: the paths of the transports besides
//! Streamable HTTP; an empty path turns its transport off.

use serde::{Deserialize, Serialize};

use super::http::check_path;
use super::owners::node;

/// The transports besides Streamable HTTP (which is `http.endpoint_path`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransportsConfig {
    /// The legacy HTTP+SSE transport (MCP 2024-11-05).
    pub legacy_sse: LegacySseConfig,
    /// The WebSocket transport.
    pub websocket: WebSocketConfig,
}

/// The legacy HTTP+SSE transport (MCP 2024-11-05): a GET on `sse_path` opens a session whose
/// first event names where to POST. Either path empty turns the transport off (both then 404).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LegacySseConfig {
    /// Path of the SSE endpoint.
    pub sse_path: String,
    /// Path clients POST their messages to, as `?sessionId=<id>`; each POST gets 202 and its
    /// answers arrive on the SSE stream.
    pub messages_path: String,
}

impl Default for LegacySseConfig {
    /// The node's defaults ([`super::owners`]).
    fn default() -> Self {
        let node = node();
        LegacySseConfig {
            sse_path: node.legacy_sse_path,
            messages_path: node.legacy_messages_path,
        }
    }
}

/// The WebSocket transport: subprotocol `mcp`, one JSON-RPC message per text frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebSocketConfig {
    /// Path of the transport; empty turns it off (the path gets 404).
    pub path: String,
}

impl Default for WebSocketConfig {
    /// The node's default ([`super::owners`]).
    fn default() -> Self {
        WebSocketConfig {
            path: node().websocket_path,
        }
    }
}

/// Dotted keys of the transport paths.
pub(super) const SSE_PATH: &str = "transports.legacy_sse.sse_path";
pub(super) const MESSAGES_PATH: &str = "transports.legacy_sse.messages_path";
pub(super) const WEBSOCKET_PATH: &str = "transports.websocket.path";

impl TransportsConfig {
    /// Problems of the paths, each with its key: each is empty (off) or a path like
    /// `http.endpoint_path`'s that no other route of the node has.
    pub(super) fn problems(&self, endpoint_path: &str) -> Vec<(&'static str, String)> {
        let sse = &self.legacy_sse;
        let legacy = [
            (SSE_PATH, &sse.sse_path, &sse.messages_path),
            (MESSAGES_PATH, &sse.messages_path, &sse.sse_path),
        ];
        let mut problems = Vec::new();
        for (key, path, other) in legacy {
            if path.is_empty() {
                continue;
            }
            if let Some(problem) = check_path(key, path) {
                problems.push((key, problem));
            } else if path == endpoint_path || path == other {
                problems.push((key, format!(
                    "{key} `{path}` is also http.endpoint_path or the other legacy path; choose another, or empty (off)"
                )));
            }
        }
        let ws = &self.websocket.path;
        if !ws.is_empty() {
            if let Some(problem) = check_path(WEBSOCKET_PATH, ws) {
                problems.push((WEBSOCKET_PATH, problem));
            } else if [endpoint_path, &sse.sse_path, &sse.messages_path].contains(&ws.as_str()) {
                problems.push((WEBSOCKET_PATH, format!(
                    "{WEBSOCKET_PATH} `{ws}` is also http.endpoint_path or a legacy path; choose another, or empty (off)"
                )));
            }
        }
        problems
    }
}
