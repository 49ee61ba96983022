//! The replica runtime's rules ([`switchboard_runtime::rules`]) through this node: its
//! [`AppState`] as the replica and its SSE sink ([`super::pump`]) as the stream, in both
//! framings, the bytes decoded back as a client reads them.

use std::sync::Arc;

use futures::StreamExt;
use switchboard_runtime::pump::OpenStream;
use switchboard_runtime::rules::{Host, Settings, Written};
use switchboard_store::Store;
use switchboard_upstream::demo::DemoUpstream;
use tokio::sync::mpsc;

use super::pump::Framing;
use crate::state::AppState;
use crate::NodeConfig;

/// This node with its streams framed as `framing`.
struct Node {
    framing: Framing,
}

impl Host for Node {
    type Replica = AppState;

    fn replica(&self, store: Arc<dyn Store>, s: Settings) -> Arc<AppState> {
        let cfg = NodeConfig {
            node_ttl: s.node_ttl,
            keepalive_interval: s.recheck,
            liveness_check_interval: s.liveness_check,
            ..NodeConfig::default()
        };
        AppState::new(cfg, store, Arc::new(DemoUpstream::new()))
    }

    fn open(&self, app: &Arc<AppState>, open: OpenStream) -> mpsc::UnboundedReceiver<Written> {
        let response = super::pump::open(app, open, self.framing.clone());
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut body = response.into_body().into_data_stream();
            let mut text = String::new();
            while let Some(Ok(chunk)) = body.next().await {
                text.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
                while let Some(end) = text.find("\n\n") {
                    let frame: String = text.drain(..end + 2).collect();
                    if tx.send(decode(&frame)).is_err() {
                        return;
                    }
                }
            }
        });
        rx
    }
}

/// One SSE frame as a client reads it.
fn decode(frame: &str) -> Written {
    let lines: Vec<&str> = frame.lines().filter(|l| !l.is_empty()).collect();
    if lines.iter().all(|l| l.starts_with(':')) {
        return Written::Keepalive;
    }
    let field = |name: &str| {
        lines
            .iter()
            .filter_map(|l| l.strip_prefix(name))
            .map(|v| v.strip_prefix(' ').unwrap_or(v))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let data = field("data:");
    if data.is_empty() || field("event:") == "endpoint" {
        return Written::Other;
    }
    Written::Event(serde_json::from_str(&data).expect("an event's data is JSON"))
}

mod event_ids {
    use super::*;

    switchboard_runtime::rules_tests!(Node {
        framing: Framing::EventIds {
            priming: Some("priming_0-0".into())
        }
    });
}

mod legacy {
    use super::*;

    switchboard_runtime::rules_tests!(Node {
        framing: Framing::Legacy {
            endpoint: "/messages?sessionId=x".into()
        }
    });
}
