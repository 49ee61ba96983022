//! The bookkeeping of forwarded calls on this node (see the parent module for the protocol):
//! on the origin side the calls waiting for another node's outcome, on the owner side the
//! calls running here for another node. A leaf: it knows nothing of the node's state.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use serde_json::Value;
use switchboard_upstream::ClientPeer;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

struct Waiting {
    peer: Arc<dyn ClientPeer>,
    done: Option<oneshot::Sender<Value>>,
}

/// Both sides' bookkeeping of forwarded calls on this node.
#[derive(Default)]
pub struct Forwards {
    seq: AtomicU64,
    waiting: Mutex<HashMap<String, Waiting>>,
    running: Mutex<HashMap<(String, String), CancellationToken>>,
}

impl Forwards {
    /// Origin: a new call id, and the receiver of its outcome text.
    pub fn start(&self, peer: Arc<dyn ClientPeer>) -> (String, oneshot::Receiver<Value>) {
        let call = self.seq.fetch_add(1, Ordering::Relaxed).to_string();
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().insert(
            call.clone(),
            Waiting {
                peer,
                done: Some(tx),
            },
        );
        (call, rx)
    }

    /// Origin: the call is over (answered, cancelled or its owner died).
    pub fn finish(&self, call: &str) {
        self.waiting.lock().remove(call);
    }

    /// Origin: puts a message the owner produced on the client's stream.
    pub async fn relay(&self, call: &str, message: Value) {
        let peer = self.waiting.lock().get(call).map(|w| w.peer.clone());
        let Some(peer) = peer else {
            return;
        };
        if let Err(e) = peer.send_raw(message).await {
            tracing::warn!(error = %e, call, "could not relay a forwarded call's message");
        }
    }

    /// Origin: the owner finished the call.
    pub fn done(&self, call: &str, outcome: Value) {
        if let Some(tx) = self
            .waiting
            .lock()
            .get_mut(call)
            .and_then(|w| w.done.take())
        {
            let _ = tx.send(outcome);
        }
    }

    /// Owner: call `call` of node `origin` runs here under `token` (an origin's cancel fires it).
    pub fn track(&self, origin: &str, call: &str, token: CancellationToken) {
        self.running
            .lock()
            .insert((origin.to_owned(), call.to_owned()), token);
    }

    /// Owner: call `call` of node `origin` no longer runs here.
    pub fn untrack(&self, origin: &str, call: &str) {
        self.running
            .lock()
            .remove(&(origin.to_owned(), call.to_owned()));
    }

    /// Owner: the origin cancelled the call.
    pub fn cancel(&self, origin: &str, call: &str) {
        if let Some(t) = self
            .running
            .lock()
            .get(&(origin.to_owned(), call.to_owned()))
        {
            t.cancel();
        }
    }
}
