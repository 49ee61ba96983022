//! The replica runtime's rules ([`switchboard_runtime::rules`]) through library mode: its
//! [`Node`] as the replica and its stream task with rmcp's typed messages (`conn`) as the
//! stream, each message read back as rmcp's SSE writer would send it.

use std::sync::Arc;

use futures::StreamExt;
use switchboard_runtime::pump::OpenStream;
use switchboard_runtime::rules::{Host, Settings, Written};
use switchboard_store::Store;
use tokio::sync::mpsc;

use crate::config::ReplicatedConfig;
use crate::node::Node;

struct LibraryMode;

impl Host for LibraryMode {
    type Replica = Node;

    fn replica(&self, store: Arc<dyn Store>, s: Settings) -> Arc<Node> {
        let mut config = ReplicatedConfig::default();
        config.store.node_ttl = s.node_ttl;
        config.log_recheck_interval = s.recheck;
        config.liveness_check_interval = s.liveness_check;
        Arc::new(Node::new(store, config))
    }

    fn open(&self, node: &Arc<Node>, open: OpenStream) -> mpsc::UnboundedReceiver<Written> {
        let mut messages = crate::conn::spawn(node.clone(), open, true);
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(sse) = messages.next().await {
                let written = match sse.message {
                    Some(message) => Written::Event(serde_json::to_value(&*message).expect("JSON")),
                    None => Written::Other,
                };
                if tx.send(written).is_err() {
                    return;
                }
            }
        });
        rx
    }
}

switchboard_runtime::rules_tests!(LibraryMode);
