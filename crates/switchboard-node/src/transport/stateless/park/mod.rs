//! Parked requests: MRTR for upstreams that keep per-session state (stdio children, session-era
//! HTTP and SSE servers), whose calls cannot be re-run from the start without repeating what
//! they did.
//!
//! A 2026-07-28 request for such an upstream runs in an ephemeral upstream session of its own
//! (created for it, ended with it). When the upstream asks the client something, the call stays
//! where it is, waiting for the answer: the node answers `InputRequiredResult` whose sealed
//! `requestState` names this node and the park id ([`crate::mrtr::Retry::Resume`]). The retry,
//! on any node, resumes it: on this node directly ([`resume_here`]), from another node through
//! the bus ([`resume_remote`] there, [`resume_from`] on the retry's node), the answers delivered
//! to the upstream as the responses to its requests, and what the call produces next streamed
//! back to the retry. A state is used once: resuming takes the park. A park not resumed within
//! `stateless.mrtr.state_ttl` is cancelled, which ends its upstream session.
//!
//! Each round's response stream holds a [`RoundGuard`]: closing it cancels the request (MCP
//! 2026-07-28, Cancellation) unless the round already ended with an `InputRequiredResult`.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};
use switchboard_protocol::{codes, jsonrpc, RequestId};
use switchboard_store::BusMessage;
use switchboard_upstream::{ClientPeer, PeerError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cluster::forward::origin::{await_outcome, Awaited};
use crate::state::App;

pub use crate::state::parking::{Item, ItemSink, Resumed, RoundGuard, Rounds};

/// The error a retry gets when its parked request is gone.
fn gone(id: &RequestId) -> Value {
    jsonrpc::error_response(
        Some(id),
        codes::INVALID_PARAMS,
        "requestState names a request that no longer waits for input (answered already, \
         expired, or its node stopped); send the request again without requestState",
        None,
    )
}

/// Resumes park `park` on this node with `answers`; the retry's items arrive on the receiver.
pub fn resume_here(
    app: &App,
    id: RequestId,
    park: &str,
    principal: &str,
    answers: Map<String, Value>,
) -> (mpsc::Receiver<Item>, Option<RoundGuard>) {
    let (tx, rx) = mpsc::channel(app.cfg.connection_queue.max(1));
    let resumed = Resumed {
        answers,
        tx: tx.clone(),
        id: id.clone(),
    };
    match app.parking.take(park, principal, resumed) {
        Some((token, rounds)) => {
            let round = rounds.current();
            (rx, Some(RoundGuard::new(token, rounds, round)))
        }
        None => {
            let _ = tx.try_send(Item::Final(gone(&id)));
            (rx, None)
        }
    }
}

/// On the retry's node: resumes park `park` held by `node` through the bus; the retry's items
/// arrive on the receiver, and dropping the token's guard cancels it there.
pub fn resume_from(
    app: &App,
    node: &str,
    id: RequestId,
    park: String,
    answers: Map<String, Value>,
) -> (mpsc::Receiver<Item>, CancellationToken) {
    let (tx, rx) = mpsc::channel(app.cfg.connection_queue.max(1));
    let cancel = CancellationToken::new();
    let relay: Arc<dyn ClientPeer> = Arc::new(Relay { tx: tx.clone() });
    let (call, done) = app.forwards.start(relay);
    let msg = BusMessage::Resume {
        call: call.clone(),
        origin: app.node_id().to_owned(),
        park,
        answers,
    };
    let (app, node, token) = (app.clone(), node.to_owned(), cancel.clone());
    tokio::spawn(async move {
        let outcome = await_outcome(&app, &node, &call, msg, done, &token, None).await;
        app.forwards.finish(&call);
        let response = match outcome {
            Awaited::Done(Value::Object(mut response)) => {
                response.insert("id".into(), id.0.clone());
                Value::Object(response)
            }
            Awaited::Done(other) => jsonrpc::error_response(
                Some(&id),
                codes::INTERNAL_ERROR,
                format!("bad answer from node {node}: {other}"),
                None,
            ),
            Awaited::Cancelled => return,
            Awaited::NotSent(_) | Awaited::OwnerStopped(_) | Awaited::TimedOut => gone(&id),
        };
        let _ = tx.send(Item::Final(response)).await;
    });
    (rx, cancel)
}

/// On the node holding the park: a retry arrived on `origin` as `call`.
pub async fn resume_remote(
    app: App,
    call: String,
    origin: String,
    park: String,
    answers: Map<String, Value>,
) {
    let (tx, mut rx) = mpsc::channel(app.cfg.connection_queue.max(1));
    let resumed = Resumed {
        answers,
        tx,
        id: RequestId(Value::Null),
    };
    // The principal was checked by the retry's node when it opened the sealed state.
    let principal = app.parking.principal_of(&park);
    let taken = principal.and_then(|p| app.parking.take(&park, &p, resumed));
    if let Some((token, _)) = &taken {
        app.forwards.track(&origin, &call, token.clone());
    } else {
        let msg = BusMessage::ForwardDone {
            call,
            outcome: gone(&RequestId(Value::Null)),
        };
        let _ = app.store.send_to(&origin, &msg).await;
        return;
    }
    while let Some(item) = rx.recv().await {
        let (msg, last) = match item {
            Item::Note(v) => (
                BusMessage::ForwardMessage {
                    call: call.clone(),
                    message: v,
                },
                false,
            ),
            Item::Final(v) => (
                BusMessage::ForwardDone {
                    call: call.clone(),
                    outcome: v,
                },
                true,
            ),
        };
        if let Err(e) = app.store.send_to(&origin, &msg).await {
            tracing::warn!(error = %e, %origin, "could not relay a resumed request's message");
        }
        if last {
            break;
        }
    }
    app.forwards.untrack(&origin, &call);
}

/// The retry node's side of a remote round: puts the holder's messages on the retry's stream.
struct Relay {
    tx: mpsc::Sender<Item>,
}

#[async_trait]
impl ClientPeer for Relay {
    async fn notify(&self, message: Value) -> Result<(), PeerError> {
        self.send_raw(message).await
    }

    async fn notify_standalone(&self, _message: Value) -> Result<(), PeerError> {
        Ok(())
    }

    async fn request(&self, method: &str, _params: Value) -> Result<Value, PeerError> {
        Err(PeerError::Delivery(format!(
            "{method}: a resumed request's questions travel in its result"
        )))
    }

    async fn send_raw(&self, message: Value) -> Result<(), PeerError> {
        self.tx
            .send(Item::Note(message))
            .await
            .map_err(|_| PeerError::Cancelled)
    }
}
