//! The [`ClientPeer`] of a 2026-07-28 request: its response stream only (MCP 2026-07-28,
//! basic/transports, Receiving Messages: a POST's SSE stream carries notifications tied to the
//! request, then its response; the server MUST NOT send JSON-RPC requests on any stream).
//!
//! - `notifications/message` goes out only when the request's `_meta` named a log level, and
//!   only at or above it (per-request `logLevel`; without it, none).
//! - There is no standalone stream: unsolicited notifications a `subscriptions/listen` stream can
//!   carry go to every listener of the cluster ([`super::listen`]); the rest are dropped (logged
//!   at debug).
//! - Server-to-client requests are refused: -32021 when the request did not declare the
//!   capability the method needs (recorded, so the request answers -32021), otherwise a clear
//!   error until MRTR (`InputRequiredResult`) is built.

use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::Value;
use switchboard_upstream::{ClientPeer, PeerError};
use tokio::sync::mpsc;

use crate::peer::{required_capability, severity};

/// What the request's task hands the HTTP side, in order.
#[derive(Debug)]
pub enum Item {
    /// A notification for the request's stream.
    Note(Value),
    /// The final JSON-RPC response.
    Final(Value),
}

/// The way back to the client for one 2026-07-28 request.
pub struct StatelessPeer {
    pub(crate) tx: mpsc::Sender<Item>,
    pub(crate) capabilities: Value,
    pub(crate) log_level: Option<String>,
    /// The client capability a server-to-client request needed and the request lacked.
    pub(crate) missing: Mutex<Option<&'static str>>,
    /// Where unsolicited notifications go: the cluster's listen streams.
    pub(crate) listen: super::listen::Raiser,
}

impl StatelessPeer {
    /// The capability a refused server-to-client request needed, if any.
    pub fn missing_capability(&self) -> Option<&'static str> {
        *self.missing.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn dropped(&self, message: &Value) -> bool {
        if message.get("method").and_then(Value::as_str) != Some("notifications/message") {
            return false;
        }
        let Some(min) = &self.log_level else {
            return true;
        };
        let level = message.pointer("/params/level").and_then(Value::as_str);
        level.is_none_or(|l| severity(l) < severity(min))
    }
}

#[async_trait]
impl ClientPeer for StatelessPeer {
    async fn notify(&self, message: Value) -> Result<(), PeerError> {
        if self.dropped(&message) {
            return Ok(());
        }
        self.tx
            .send(Item::Note(message))
            .await
            .map_err(|_| PeerError::Cancelled)
    }

    async fn notify_standalone(&self, message: Value) -> Result<(), PeerError> {
        if !self.listen.raise(&message).await {
            tracing::debug!(%message, "2026-07-28 has no standalone stream; notification dropped");
        }
        Ok(())
    }

    async fn request(&self, method: &str, _params: Value) -> Result<Value, PeerError> {
        if let Some(cap) = required_capability(method) {
            if self.capabilities.get(cap).is_none() {
                *self.missing.lock().unwrap_or_else(|p| p.into_inner()) = Some(cap);
                return Err(PeerError::MissingCapability(cap));
            }
        }
        Err(PeerError::Delivery(format!(
            "{method} cannot be sent under protocol version 2026-07-28: servers may not send \
             requests to clients, and this gateway does not serve MRTR (InputRequiredResult) yet"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn peer(level: Option<&str>) -> (StatelessPeer, mpsc::Receiver<Item>) {
        let (tx, rx) = mpsc::channel(8);
        let p = StatelessPeer {
            tx,
            capabilities: json!({"sampling": {}}),
            log_level: level.map(str::to_owned),
            missing: Mutex::new(None),
            listen: Default::default(),
        };
        (p, rx)
    }

    fn log(level: &str) -> Value {
        json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": level}})
    }

    #[test]
    fn log_messages_follow_the_request_level() {
        let (none, _) = peer(None);
        assert!(none.dropped(&log("emergency")));
        let (warn, _) = peer(Some("warning"));
        assert!(warn.dropped(&log("info")) && !warn.dropped(&log("error")));
        assert!(!none.dropped(&json!({"method": "notifications/progress"})));
    }

    #[tokio::test]
    async fn server_requests_are_refused() {
        let (p, _) = peer(None);
        let e = p
            .request("elicitation/create", json!({}))
            .await
            .unwrap_err();
        assert_eq!(e, PeerError::MissingCapability("elicitation"));
        assert_eq!(p.missing_capability(), Some("elicitation"));
        let (p, _) = peer(None);
        let e = p
            .request("sampling/createMessage", json!({}))
            .await
            .unwrap_err();
        assert!(matches!(e, PeerError::Delivery(m) if m.contains("MRTR")));
        assert_eq!(p.missing_capability(), None);
    }
}
