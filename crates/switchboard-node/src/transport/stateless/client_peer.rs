//! The [`ClientPeer`] of a 2026-07-28 request: its response stream only (MCP 2026-07-28,
//! basic/transports, Receiving Messages: a POST's SSE stream carries notifications tied to the
//! request, then its response; the server MUST NOT send JSON-RPC requests on any stream).
//!
//! - `notifications/message` goes out only when the request's `_meta` named a log level, and
//!   only at or above it (per-request `logLevel`; without it, none).
//! - There is no standalone stream: unsolicited notifications a `subscriptions/listen` stream can
//!   carry go to every listener of the cluster (`super::listen`); the rest are dropped and
//!   counted (`switchboard_notifications_dropped_total`).
//! - Server-to-client requests become MRTR questions (`crate::mrtr`): answered at once from
//!   the retry's inputs when it carries them, else recorded and parked until the run stops,
//!   which then answers `InputRequiredResult`. Refused with -32021 when the request did not
//!   declare the capability the method needs (recorded, so the request answers -32021), and
//!   with an error on methods that may not answer `InputRequiredResult`.

use std::sync::Arc;

use parking_lot::Mutex;

use async_trait::async_trait;
use serde_json::Value;
use switchboard_upstream::{ClientPeer, PeerError};

use tokio_util::sync::CancellationToken;

use crate::mrtr::{Ask, Inputs};
use crate::state::parking::{Item, ItemSink};
use crate::telemetry;
use switchboard_protocol::logging::{required_capability, severity};

/// The way back to the client for one 2026-07-28 request.
pub struct StatelessPeer {
    pub(crate) tx: Arc<ItemSink>,
    pub(crate) capabilities: Value,
    pub(crate) log_level: Option<String>,
    /// The client capability a server-to-client request needed and the request lacked.
    pub(crate) missing: Mutex<Option<&'static str>>,
    /// The request's MRTR answers and questions; `None`: the method may not ask (MCP
    /// 2026-07-28, basic/patterns/mrtr, Supported Requests).
    pub(crate) inputs: Option<Arc<Inputs>>,
    /// The request's cancellation: parked questions wait for it.
    pub(crate) cancel: CancellationToken,
    /// Where unsolicited notifications go: the cluster's listen streams.
    pub(crate) listen: super::listen::Raiser,
}

impl StatelessPeer {
    /// The capability a refused server-to-client request needed, if any.
    pub fn missing_capability(&self) -> Option<&'static str> {
        *self.missing.lock()
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
        let method = message["method"].as_str().unwrap_or("?").to_owned();
        if self.tx.send(Item::Note(message)).await {
            Ok(())
        } else {
            telemetry::notification_dropped(&method, "the request's stream has closed");
            Err(PeerError::Cancelled)
        }
    }

    async fn notify_standalone(&self, message: Value) -> Result<(), PeerError> {
        if !self.listen.raise(&message).await {
            let method = message["method"].as_str().unwrap_or("?");
            telemetry::notification_dropped(method, "no subscriptions/listen stream carries it");
        }
        Ok(())
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, PeerError> {
        let Some(cap) = required_capability(method) else {
            return Err(PeerError::Delivery(format!(
                "{method} cannot be sent under protocol version 2026-07-28: servers may not send \
                 requests to clients, and it is not an MRTR input request"
            )));
        };
        // A capability is declared by an object (`null` or `false` declares nothing).
        if !self.capabilities.get(cap).is_some_and(Value::is_object) {
            *self.missing.lock() = Some(cap);
            return Err(PeerError::MissingCapability(cap));
        }
        let Some(inputs) = &self.inputs else {
            return Err(PeerError::Delivery(format!(
                "{method} cannot be asked during this request: under protocol version \
                 2026-07-28 only tools/call, prompts/get and resources/read may need input"
            )));
        };
        // The trait returns the whole JSON-RPC response; MRTR carries only results.
        let response = |answer| serde_json::json!({"jsonrpc": "2.0", "result": answer});
        match inputs.answer_or_ask(method, &params) {
            Ask::Answer(answer) => Ok(response(answer)),
            // The run stops and answers InputRequiredResult; the retry asks again.
            Ask::Stop => {
                self.cancel.cancelled().await;
                Err(PeerError::Cancelled)
            }
            // The run parks; a retry's answer arrives here.
            Ask::Wait(answer) => tokio::select! {
                answer = answer => answer.map(response).map_err(|_| PeerError::Cancelled),
                () = self.cancel.cancelled() => Err(PeerError::Cancelled),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::sync::mpsc;

    fn peer(level: Option<&str>) -> (StatelessPeer, mpsc::Receiver<Item>) {
        let (tx, rx) = mpsc::channel(8);
        let p = StatelessPeer {
            tx: Arc::new(ItemSink::new(tx)),
            capabilities: json!({"sampling": {}}),
            log_level: level.map(str::to_owned),
            missing: Mutex::new(None),
            inputs: None,
            cancel: CancellationToken::new(),
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
    async fn questions_park_until_the_run_stops() {
        let (mut p, _) = peer(None);
        let inputs = Arc::new(Inputs::none("tools/call", &json!({})));
        p.inputs = Some(inputs.clone());
        let cancel = p.cancel.clone();
        let p = Arc::new(p);
        let asking = tokio::spawn({
            let p = p.clone();
            async move { p.request("sampling/createMessage", json!({})).await }
        });
        inputs.asked().await;
        assert!(!asking.is_finished());
        cancel.cancel();
        assert_eq!(asking.await.unwrap(), Err(PeerError::Cancelled));
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
        assert!(matches!(e, PeerError::Delivery(m) if m.contains("only tools/call")));
        assert_eq!(p.missing_capability(), None);
    }
}
