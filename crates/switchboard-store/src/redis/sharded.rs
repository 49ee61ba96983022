//! The inbox of a node in Redis Cluster: sharded pub/sub (`SSUBSCRIBE`, Redis 7), so that a
//! message is carried by the one shard that owns its channel's slot, not by every shard.
//!
//! Channels (prefix `p`):
//! - `p:inbox:{<node>}`: messages a node sends to one node (`SPUBLISH` by the sender);
//! - `p:{all}`: messages to every node (the `listen` fan-out); one shard carries each;
//! - `p:{<sid>}:bus`: what the session scripts deliver (events for a stream's holder, takeovers,
//!   replies, cancellations, `Terminated`). A Lua script may only publish in its own slot, so it
//!   publishes on its session's channel, as `<node>\n<json>` (`*`: every node); the reader keeps
//!   what is addressed to this node.
//!
//! A node subscribes to a session's channel *before* it does what makes it a message's target:
//! holding a stream (`claim`, a POST stream registered by `begin`/`register`), running a call
//! (`register`), waiting for a client's answer (`register_pending`), owning a node-bound upstream
//! (`claim_owner`), keeping a session alive (`touch`). So the first of these per session and node
//! costs one more round trip (`SSUBSCRIBE`); a request answered at once (`check`) costs none. The
//! subscription is dropped when the session ends (`Terminated`) or when this node has not used the
//! session for `idle_ttl` (checked every `idle_ttl / 4`, between 1 and 60 s).
//!
//! Fan-out per message: one shard (its primary, and its replicas through replication); a session
//! message reaches every node subscribed to that session (the nodes that have a part in it), a
//! node message one node, a broadcast every node.
//!
//! After the connection to a server drops (a `Disconnection` push), this node subscribes to all its
//! channels again, every 100 ms doubling to 1 s until every one succeeds: when a primary died,
//! its slots answer only once a replica is promoted and the cluster client has learnt that. Then
//! it hands the node [`BusMessage::Resubscribed`], so held streams catch up from their logs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;

use super::keys::Keys;
use super::pubsub::decode;
use crate::error::StoreError;
use crate::model::BusMessage;
use crate::rules::INBOX_CAPACITY;
use crate::traits::StoreResult;

/// The first wait before subscribing again after a disconnection; it doubles up to
/// [`RESUBSCRIBE_MAX`].
const RESUBSCRIBE_FIRST: Duration = Duration::from_millis(100);
/// The longest wait between two attempts to subscribe again.
const RESUBSCRIBE_MAX: Duration = Duration::from_secs(1);

/// The sharded inbox and this node's session subscriptions.
pub(crate) struct Sharded {
    conn: ClusterConnection,
    pushes: Mutex<Option<mpsc::UnboundedReceiver<PushInfo>>>,
    /// Session id → when this node last used it, for the sessions whose channel it subscribes.
    interest: Mutex<HashMap<String, Instant>>,
    keys: Keys,
    node_id: String,
    idle: Duration,
    /// Whether a resubscription after a disconnection is under way.
    resubscribing: AtomicBool,
}

impl Sharded {
    /// The inbox of `node_id` over `conn`, whose pushes arrive on `pushes`.
    pub fn new(
        conn: ClusterConnection,
        pushes: mpsc::UnboundedReceiver<PushInfo>,
        keys: Keys,
        node_id: &str,
        idle: Duration,
    ) -> Arc<Sharded> {
        Arc::new(Sharded {
            conn,
            pushes: Mutex::new(Some(pushes)),
            interest: Mutex::new(HashMap::new()),
            keys,
            node_id: node_id.to_owned(),
            idle,
            resubscribing: AtomicBool::new(false),
        })
    }

    /// Subscribes to this node's inbox and the broadcast channel, then reads until the receiver
    /// is dropped.
    pub async fn start(self: &Arc<Self>) -> StoreResult<mpsc::Receiver<BusMessage>> {
        let pushes = self
            .pushes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| StoreError::Backend("the sharded inbox is already read".into()))?;
        // One command per channel: they live in different slots.
        for channel in [self.keys.inbox(&self.node_id), self.keys.all()] {
            self.conn.clone().ssubscribe(channel).await?;
        }
        let (tx, rx) = mpsc::channel(INBOX_CAPACITY);
        tokio::spawn(read(Arc::downgrade(self), pushes, tx));
        tokio::spawn(sweep(Arc::downgrade(self)));
        Ok(rx)
    }

    /// Makes sure this node receives the messages of session `sid` (one `SSUBSCRIBE` when it
    /// did not yet), and marks the session used now. Returns whether it subscribed now (so a
    /// caller that then finds the session gone can undo it).
    pub async fn interest(&self, sid: &str) -> StoreResult<bool> {
        if self.used(sid) {
            return Ok(false);
        }
        self.conn
            .clone()
            .ssubscribe(self.keys.session_channel(sid))
            .await?;
        self.lock().insert(sid.to_owned(), Instant::now());
        Ok(true)
    }

    /// Marks `sid` used now when this node subscribes to it; whether it does.
    pub fn used(&self, sid: &str) -> bool {
        match self.lock().get_mut(sid) {
            Some(at) => {
                *at = Instant::now();
                true
            }
            None => false,
        }
    }

    /// How many session channels this node subscribes to.
    pub fn sessions(&self) -> usize {
        self.lock().len()
    }

    /// Stops receiving the messages of `sid`.
    pub fn forget(&self, sid: &str) {
        if self.lock().remove(sid).is_some() {
            let mut conn = self.conn.clone();
            let channel = self.keys.session_channel(sid);
            tokio::spawn(async move {
                if let Err(e) = conn.sunsubscribe(&channel).await {
                    tracing::debug!(error = %e, "could not unsubscribe a session channel");
                }
            });
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.interest.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The message a push carries for this node, if any.
    fn message_of(&self, push: &PushInfo) -> Option<BusMessage> {
        let [Value::BulkString(channel), Value::BulkString(payload)] = push.data.as_slice() else {
            return None;
        };
        if !channel.ends_with(b"}:bus") {
            return decode(payload);
        }
        let split = payload.iter().position(|b| *b == b'\n')?;
        let (to, json) = (&payload[..split], &payload[split + 1..]);
        (to == b"*" || to == self.node_id.as_bytes())
            .then(|| decode(json))
            .flatten()
    }
}

/// Forwards this node's messages from the connection's pushes; subscribes again after a
/// disconnection.
async fn read(
    owner: Weak<Sharded>,
    mut pushes: mpsc::UnboundedReceiver<PushInfo>,
    tx: mpsc::Sender<BusMessage>,
) {
    loop {
        let push = tokio::select! {
            push = pushes.recv() => match push { Some(p) => p, None => return },
            _ = tx.closed() => return,
        };
        let Some(sharded) = owner.upgrade() else {
            return;
        };
        match push.kind {
            PushKind::SMessage => {
                let Some(msg) = sharded.message_of(&push) else {
                    continue;
                };
                if let BusMessage::Terminated { sid } = &msg {
                    sharded.forget(sid);
                }
                drop(sharded);
                if tx.send(msg).await.is_err() {
                    return;
                }
            }
            PushKind::Disconnection if !sharded.resubscribing.swap(true, Ordering::SeqCst) => {
                tracing::warn!("bus inbox lost a connection; subscribing again");
                tokio::spawn(resubscribe(owner.clone(), tx.clone()));
            }
            _ => {}
        }
    }
}

/// Subscribes to every channel of this node again until all succeed, then tells the node to
/// catch up.
async fn resubscribe(owner: Weak<Sharded>, tx: mpsc::Sender<BusMessage>) {
    let mut wait = RESUBSCRIBE_FIRST;
    loop {
        tokio::time::sleep(wait).await;
        let Some(sharded) = owner.upgrade() else {
            return;
        };
        let mut channels = vec![sharded.keys.inbox(&sharded.node_id), sharded.keys.all()];
        channels.extend(
            sharded
                .lock()
                .keys()
                .map(|sid| sharded.keys.session_channel(sid)),
        );
        let attempts = channels.into_iter().map(|channel| {
            let mut conn = sharded.conn.clone();
            async move { conn.ssubscribe(channel).await }
        });
        let failed = futures::future::join_all(attempts)
            .await
            .into_iter()
            .filter(Result::is_err)
            .count();
        if failed == 0 {
            sharded.resubscribing.store(false, Ordering::SeqCst);
            tracing::info!("bus inbox resubscribed");
            let _ = tx.send(BusMessage::Resubscribed {}).await;
            return;
        }
        tracing::debug!(failed, "bus inbox: channels not subscribed again yet");
        wait = (wait * 2).min(RESUBSCRIBE_MAX);
    }
}

/// Drops the subscriptions of sessions this node has not used for `idle`.
async fn sweep(owner: Weak<Sharded>) {
    let every = match owner.upgrade() {
        Some(s) => (s.idle / 4).clamp(Duration::from_secs(1), Duration::from_secs(60)),
        None => return,
    };
    loop {
        tokio::time::sleep(every).await;
        let Some(sharded) = owner.upgrade() else {
            return;
        };
        let stale: Vec<String> = sharded
            .lock()
            .iter()
            .filter(|(_, at)| at.elapsed() >= sharded.idle)
            .map(|(sid, _)| sid.clone())
            .collect();
        for sid in stale {
            sharded.forget(&sid);
        }
    }
}
