//! This node's parked 2026-07-28 requests and the plumbing of their rounds (see the parent
//! module): the [`Item`]s a request hands its response stream, the [`ItemSink`] that points at the
//! current round's stream, the [`Rounds`] counter and [`RoundGuard`], and the [`Parking`]
//! registry a retry takes its park from. A leaf: it knows nothing of the node's state.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use serde_json::{Map, Value};
use switchboard_protocol::RequestId;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// What the request's task hands the HTTP side, in order.
#[derive(Debug)]
pub enum Item {
    /// A notification for the request's stream.
    Note(Value),
    /// The final JSON-RPC response.
    Final(Value),
}

/// Where a request's items go: the response stream of its current round.
pub struct ItemSink(Mutex<mpsc::Sender<Item>>);

impl ItemSink {
    /// A sink feeding `tx`.
    pub fn new(tx: mpsc::Sender<Item>) -> ItemSink {
        ItemSink(Mutex::new(tx))
    }

    /// Sends `item` to the current round; `false` when that round's stream is gone.
    pub async fn send(&self, item: Item) -> bool {
        let tx = self.0.lock().clone();
        tx.send(item).await.is_ok()
    }

    /// Points the sink at a new round's stream.
    pub fn redirect(&self, tx: mpsc::Sender<Item>) {
        *self.0.lock() = tx;
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
    /// Parks a request of `principal`; a retry takes it (see `resume_here` and `resume_remote` in `stateless::park`).
    pub fn park(&self, principal: &str, token: &CancellationToken, rounds: &Arc<Rounds>) -> Park {
        let bytes: [u8; 16] = rand::random();
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let (tx, rx) = oneshot::channel();
        self.parked.lock().insert(
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
        self.parked.lock().remove(id);
    }

    /// Resumes park `id` for `principal` with `resumed`; the request's token and round guard
    /// parts, or `None` when no such park waits here (resumed already, expired, or another
    /// principal's).
    pub(crate) fn take(
        &self,
        id: &str,
        principal: &str,
        resumed: Resumed,
    ) -> Option<(CancellationToken, Arc<Rounds>)> {
        let mut parked = self.parked.lock();
        if parked.get(id).is_none_or(|p| p.principal != principal) {
            return None;
        }
        let p = parked.remove(id)?;
        drop(parked);
        p.rounds.resume();
        p.resume.send(resumed).ok()?;
        Some((p.token, p.rounds))
    }

    /// The principal park `id` was parked for, when it waits here.
    pub fn principal_of(&self, id: &str) -> Option<String> {
        self.parked.lock().get(id).map(|p| p.principal.clone())
    }

    /// The number of requests parked here.
    pub fn len(&self) -> usize {
        self.parked.lock().len()
    }
}
