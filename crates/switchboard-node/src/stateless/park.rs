//! Parked requests: MRTR for upstreams that keep per-session state (stdio children, session-era
//! HTTP and SSE servers), whose calls cannot be re-run from the start without repeating what
//! they did.
//!
//! A 2026-07-28 request for such an upstream runs in an ephemeral upstream session of its own
//! (created for it, ended with it). When the upstream asks the client something, the call stays
//! where it is, waiting for the answer: the node answers `InputRequiredResult` whose sealed
//! `requestState` names this node and the park id ([`super::mrtr::Retry::Resume`]). The retry,
//! on any node, resumes it: on this node directly ([`resume_here`]), from another node through
//! the bus ([`resume_remote`] there, [`resume_from`] on the retry's node), the answers delivered
//! to the upstream as the responses to its requests, and what the call produces next streamed
//! back to the retry. A state is used once: resuming takes the park. A park not resumed within
//! `mrtr_state_ttl_ms` is cancelled, which ends its upstream session.
//!
//! Each round's response stream holds a [`RoundGuard`]: closing it cancels the request (MCP
//! 2026-07-28, Cancellation) unless the round already ended with an `InputRequiredResult`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Map, Value};
use switchboard_protocol::{codes, jsonrpc, RequestId};
use switchboard_store::BusMessage;
use switchboard_upstream::{ClientPeer, PeerError};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::peer::Item;
use crate::forward::Awaited;
use crate::state::App;

/// Where a request's items go: the response stream of its current round.
pub struct Sink(Mutex<mpsc::Sender<Item>>);

impl Sink {
    /// A sink feeding `tx`.
    pub fn new(tx: mpsc::Sender<Item>) -> Sink {
        Sink(Mutex::new(tx))
    }

    /// Sends `item` to the current round; `false` when that round's stream is gone.
    pub async fn send(&self, item: Item) -> bool {
        let tx = lock(&self.0).clone();
        tx.send(item).await.is_ok()
    }

    /// Points the sink at a new round's stream.
    pub fn redirect(&self, tx: mpsc::Sender<Item>) {
        *lock(&self.0) = tx;
    }
}

/// Which round of a request is current, and whether it is parked.
#[derive(Default)]
pub struct Rounds {
    round: AtomicU64,
    parked: AtomicBool,
}

impl Rounds {
    /// The request parked: the current round's stream may close without cancelling.
    pub fn park(&self) {
        self.parked.store(true, Ordering::SeqCst);
    }

    /// A retry resumed the request: a new round, not parked. Returns its number.
    pub fn resume(&self) -> u64 {
        self.parked.store(false, Ordering::SeqCst);
        self.round.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The current round.
    pub fn current(&self) -> u64 {
        self.round.load(Ordering::SeqCst)
    }
}

/// Held by a round's response stream: dropping it cancels the request when that round is still
/// the current one and not parked.
pub struct RoundGuard {
    token: Option<CancellationToken>,
    rounds: Arc<Rounds>,
    round: u64,
}

impl RoundGuard {
    /// A guard of round `round` of the request cancelled by `token`.
    pub fn new(token: CancellationToken, rounds: Arc<Rounds>, round: u64) -> RoundGuard {
        RoundGuard {
            token: Some(token),
            rounds,
            round,
        }
    }

    /// Stops guarding (the request outlives its stream, e.g. as a task); the token it held.
    pub fn disarm(mut self) -> CancellationToken {
        self.token.take().expect("an armed guard holds its token")
    }
}

impl Drop for RoundGuard {
    fn drop(&mut self) {
        let current = self.rounds.current() == self.round;
        if let Some(token) = &self.token {
            if current && !self.rounds.parked.load(Ordering::SeqCst) {
                token.cancel();
            }
        }
    }
}

/// What a retry hands a parked request.
pub struct Resumed {
    /// The answers, by question key.
    pub answers: Map<String, Value>,
    /// The retry's stream.
    pub tx: mpsc::Sender<Item>,
    /// The retry's JSON-RPC id (the final response carries it).
    pub id: RequestId,
}

struct Parked {
    principal: String,
    resume: oneshot::Sender<Resumed>,
    token: CancellationToken,
    rounds: Arc<Rounds>,
}

/// This node's parked requests.
#[derive(Default)]
pub struct Parking {
    parked: Mutex<HashMap<String, Parked>>,
}

/// A parked request, as its run sees it.
pub struct Park {
    /// The park id (in the sealed state).
    pub id: String,
    /// Fires when a retry resumes it.
    pub resumed: oneshot::Receiver<Resumed>,
}

impl Parking {
    /// Parks a request of `principal`; a retry takes it (see [`resume_here`] and [`resume_remote`]).
    pub fn park(&self, principal: &str, token: &CancellationToken, rounds: &Arc<Rounds>) -> Park {
        let bytes: [u8; 16] = rand::random();
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let (tx, rx) = oneshot::channel();
        lock(&self.parked).insert(
            id.clone(),
            Parked {
                principal: principal.to_owned(),
                resume: tx,
                token: token.clone(),
                rounds: rounds.clone(),
            },
        );
        Park { id, resumed: rx }
    }

    /// Forgets a park (its run gave up waiting).
    pub fn forget(&self, id: &str) {
        lock(&self.parked).remove(id);
    }

    /// Resumes park `id` for `principal` with `resumed`; the request's token and round guard
    /// parts, or `None` when no such park waits here (resumed already, expired, or another
    /// principal's).
    fn take(
        &self,
        id: &str,
        principal: &str,
        resumed: Resumed,
    ) -> Option<(CancellationToken, Arc<Rounds>)> {
        let mut parked = lock(&self.parked);
        if parked.get(id).is_none_or(|p| p.principal != principal) {
            return None;
        }
        let p = parked.remove(id)?;
        drop(parked);
        p.rounds.resume();
        p.resume.send(resumed).ok()?;
        Some((p.token, p.rounds))
    }

    /// The number of requests parked here.
    pub fn len(&self) -> usize {
        lock(&self.parked).len()
    }

    /// Whether no request is parked here.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

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
        answers: Value::Object(answers).to_string(),
    };
    let (app, node, token) = (app.clone(), node.to_owned(), cancel.clone());
    tokio::spawn(async move {
        let outcome =
            crate::forward::await_outcome(&app, &node, &call, msg, done, &token, None).await;
        app.forwards.finish(&call);
        let response = match outcome {
            Awaited::Done(text) => match serde_json::from_str::<Value>(&text) {
                Ok(mut response) => {
                    response["id"] = id.0.clone();
                    response
                }
                Err(e) => jsonrpc::error_response(
                    Some(&id),
                    codes::INTERNAL_ERROR,
                    format!("bad answer from node {node}: {e}"),
                    None,
                ),
            },
            Awaited::Cancelled => return,
            Awaited::NotSent(_) | Awaited::OwnerStopped(_) | Awaited::TimedOut => gone(&id),
        };
        let _ = tx.send(Item::Final(response)).await;
    });
    (rx, cancel)
}

/// On the node holding the park: a retry arrived on `origin` as `call`.
pub async fn resume_remote(app: App, call: String, origin: String, park: String, answers: String) {
    let answers = serde_json::from_str::<Value>(&answers)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    let (tx, mut rx) = mpsc::channel(app.cfg.connection_queue.max(1));
    let resumed = Resumed {
        answers,
        tx,
        id: RequestId(Value::Null),
    };
    // The principal was checked by the retry's node when it opened the sealed state.
    let principal = lock(&app.parking.parked)
        .get(&park)
        .map(|p| p.principal.clone());
    let taken = principal.and_then(|p| app.parking.take(&park, &p, resumed));
    let key = (origin.clone(), call.clone());
    if let Some((token, _)) = &taken {
        lock(&app.forwards.running).insert(key.clone(), token.clone());
    } else {
        let msg = BusMessage::ForwardDone {
            call,
            outcome: gone(&RequestId(Value::Null)).to_string(),
        };
        let _ = app.store.send_to(&origin, &msg).await;
        return;
    }
    while let Some(item) = rx.recv().await {
        let (msg, last) = match item {
            Item::Note(v) => (
                BusMessage::ForwardMessage {
                    call: call.clone(),
                    message: v.to_string(),
                },
                false,
            ),
            Item::Final(v) => (
                BusMessage::ForwardDone {
                    call: call.clone(),
                    outcome: v.to_string(),
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
    lock(&app.forwards.running).remove(&key);
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
