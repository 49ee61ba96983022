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
//! The cluster connection resubscribes by itself after it reconnects (`redis`'s subscription
//! tracker), but that is not enough through a failover: measured here
//! (`tests/tests/redis_failover.rs`), after a primary was killed and its replica promoted, nodes
//! had lost some of their session subscriptions, on the promoted shard and on shards that never
//! changed (`PUBSUB SHARDNUMSUB` one subscriber short), and their held streams got no events
//! again, and a node whose resubscriptions all failed (sent while the shard had no primary) never
//! got the confirmation it waited for. So 200 ms after the last disconnection this node
//! subscribes again to everything it wants (its inbox, the broadcast channel, every session of
//! interest; `SSUBSCRIBE` of a channel a connection already has is a no-op), every 500 ms until
//! that succeeds, then again every second for 15 s after the disconnection (the promotion and
//! the slot refreshes come later, and a subscription sent before them was lost too), each time
//! followed by [`BusMessage::Resubscribed`], so held streams catch up from their logs.

use std::collections::HashMap;
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

/// How long after a disconnection the node subscribes again (a burst of disconnections, one per
/// lost node connection, ends first).
const CATCH_UP_AFTER: Duration = Duration::from_millis(200);

/// How long after a failed resubscription the node tries again.
const RESUBSCRIBE_RETRY: Duration = Duration::from_millis(500);

/// How long after a disconnection the node goes on subscribing again, every
/// [`RESUBSCRIBE_AGAIN`]: the promotion and the cluster connection's slot refreshes that follow
/// it (each may replace node connections and lose their subscriptions) come seconds later.
const RESUBSCRIBE_WINDOW: Duration = Duration::from_secs(15);

/// The interval of the resubscriptions within [`RESUBSCRIBE_WINDOW`].
const RESUBSCRIBE_AGAIN: Duration = Duration::from_secs(1);

/// The sharded inbox and this node's session subscriptions.
pub(crate) struct Sharded {
    conn: ClusterConnection,
    pushes: Mutex<Option<mpsc::UnboundedReceiver<PushInfo>>>,
    /// Session id → when this node last used it, for the sessions whose channel it subscribes.
    interest: Mutex<HashMap<String, Instant>>,
    keys: Keys,
    node_id: String,
    idle: Duration,
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

    /// Subscribes again to every channel this node wants: its inbox, the broadcast channel and
    /// the channel of every session of interest, one `SSUBSCRIBE` each (they live in different
    /// slots), concurrently.
    ///
    /// # Errors
    /// The first `SSUBSCRIBE` that failed (e.g. its slot's shard has no primary yet).
    async fn resubscribe(&self) -> StoreResult<()> {
        let sessions: Vec<String> = self.lock().keys().cloned().collect();
        let channels = [self.keys.inbox(&self.node_id), self.keys.all()]
            .into_iter()
            .chain(sessions.iter().map(|sid| self.keys.session_channel(sid)));
        let subscribes = channels.map(|channel| {
            let mut conn = self.conn.clone();
            async move { conn.ssubscribe(channel).await }
        });
        futures::future::try_join_all(subscribes).await?;
        Ok(())
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

/// Forwards this node's messages from the connection's pushes; after a disconnection, subscribes
/// again and tells the node to catch up.
async fn read(
    owner: Weak<Sharded>,
    mut pushes: mpsc::UnboundedReceiver<PushInfo>,
    tx: mpsc::Sender<BusMessage>,
) {
    let mut catch_up: Option<tokio::time::Instant> = None;
    let mut window_ends = tokio::time::Instant::now();
    // From a disconnection until the first resubscription after it, messages wait here: a live
    // event delivered before the node is told to catch up would move its stream past the events
    // it missed meanwhile, and the catch-up (which reads after the last event sent) would skip
    // them. After `Resubscribed` they follow, in order; the catch-up has sent them already.
    let mut held: Option<Vec<BusMessage>> = None;
    loop {
        let push = tokio::select! {
            push = pushes.recv() => match push { Some(p) => p, None => return },
            _ = wait_until(catch_up) => {
                catch_up = None;
                let Some(sharded) = owner.upgrade() else { return };
                if let Err(e) = sharded.resubscribe().await {
                    tracing::warn!(error = %e, "bus inbox could not subscribe again; retrying");
                    catch_up = Some(tokio::time::Instant::now() + RESUBSCRIBE_RETRY);
                    continue;
                }
                drop(sharded);
                tracing::info!("bus inbox resubscribed");
                let now = tokio::time::Instant::now();
                if now < window_ends {
                    catch_up = Some(now + RESUBSCRIBE_AGAIN);
                }
                if tx.send(BusMessage::Resubscribed {}).await.is_err() { return }
                for msg in held.take().unwrap_or_default() {
                    if tx.send(msg).await.is_err() { return }
                }
                continue;
            }
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
                // Within the window a subscription may have been lost and restored (by the
                // cluster client) unseen: the holder checks its log before writing the event.
                let mut msg = msg;
                if let BusMessage::Event(e) = &mut msg {
                    e.verify = tokio::time::Instant::now() < window_ends;
                }
                if let Some(waiting) = held.as_mut() {
                    waiting.push(msg);
                } else if tx.send(msg).await.is_err() {
                    return;
                }
            }
            PushKind::Disconnection => {
                tracing::warn!("bus inbox connection lost; subscribing again in 200 ms");
                // The last of a burst of disconnections (one per lost node connection) sets when.
                let now = tokio::time::Instant::now();
                catch_up = Some(now + CATCH_UP_AFTER);
                window_ends = now + RESUBSCRIBE_WINDOW;
                held.get_or_insert_with(Vec::new);
            }
            _ => {}
        }
    }
}

async fn wait_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
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
