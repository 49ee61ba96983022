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
//! Every message that must arrive is also posted to a mailbox (see the `intake` module): the
//! node's own `p:mbox:{<node>}`, the broadcast `p:mbox:{all}`, and the session's `p:{sid}:mbox`
//! for what the session scripts say (their receiver in field `to`). So a subscription that lapses
//! delays a message, never loses it: the node reads the mailbox after any gap it sees (a
//! doorbell's number past the next one) and after every resubscription.
//!
//! Subscriptions lapse without a disconnection: when a channel's slot moves to another shard
//! (resharding, scale-out) or its server is demoted by a graceful `CLUSTER FAILOVER`, Redis
//! unsubscribes its subscribers with an unsolicited `sunsubscribe` push and the connection stays
//! up (redis/redis#12558). The reader reads every push: such a push for a channel the node still
//! wants makes it subscribe again at once (50 ms later, so a slot's burst of pushes is one
//! resubscription), on the slot's new owner (the cluster client follows the `MOVED`), then read
//! the mailboxes behind those channels and tell the node to catch its held streams up. Two
//! periodic checks find what no push announced, at every `bus.check_interval`: a probe the node
//! sends itself on its inbox channel (one that has not come back by the next check means the
//! subscription is gone), and the cluster's slot map (`CLUSTER SLOTS`: a change subscribes every
//! channel again).
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
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, Value};
use tokio::sync::mpsc;

use super::intake::Intake;
use crate::bus::BusSettings;
use crate::error::StoreError;
use crate::model::BusMessage;
use crate::redis::connection::{Conn, Renew, Subscriber};
use crate::redis::keys::Keys;
use crate::rules::INBOX_CAPACITY;
use crate::traits::StoreResult;

mod reader;

/// The sharded inbox and this node's session subscriptions.
pub(crate) struct Sharded {
    /// The command connection (probes, the slot map; the intake reads mailboxes over it too).
    conn: ClusterConnection,
    /// The subscriber connection: `SSUBSCRIBE`/`SUNSUBSCRIBE` only ([`Subscriber`]); replaced
    /// by a new one when the slot map changes ([`Sharded::renew`]).
    sub: Mutex<ClusterConnection>,
    /// What makes a new subscriber connection.
    renewal: Renew,
    pushes: Mutex<Option<mpsc::UnboundedReceiver<PushInfo>>>,
    /// Session id → when this node last used it, for the sessions whose channel it subscribes.
    interest: Mutex<HashMap<String, Instant>>,
    /// Channel → this node's own `SUNSUBSCRIBE`s of it whose confirming push has not arrived
    /// (so it is not taken for Redis unsubscribing the node by itself).
    leaving: Mutex<HashMap<String, u32>>,
    keys: Keys,
    node_id: String,
    idle: Duration,
    settings: BusSettings,
}

impl Sharded {
    /// The inbox of `node_id`: commands over `conn`, subscriptions over `subscriber`.
    pub fn new(
        conn: ClusterConnection,
        subscriber: Subscriber,
        keys: Keys,
        node_id: &str,
        idle: Duration,
        settings: BusSettings,
    ) -> Arc<Sharded> {
        Arc::new(Sharded {
            conn,
            sub: Mutex::new(subscriber.conn),
            renewal: subscriber.renew,
            pushes: Mutex::new(Some(subscriber.pushes)),
            interest: Mutex::new(HashMap::new()),
            leaving: Mutex::new(HashMap::new()),
            keys,
            node_id: node_id.to_owned(),
            idle,
            settings,
        })
    }

    /// Subscribes to this node's inbox and the broadcast channel, then reads until the receiver
    /// is dropped.
    pub async fn start(self: &Arc<Self>) -> StoreResult<mpsc::Receiver<BusMessage>> {
        let pushes = self
            .pushes
            .lock()
            .take()
            .ok_or_else(|| StoreError::Backend("the sharded inbox is already read".into()))?;
        let (tx, rx) = mpsc::channel(INBOX_CAPACITY);
        let conn = Conn::Cluster(self.conn.clone());
        let mut intake = Intake::new(&self.node_id, conn, tx, self.settings.clone());
        let owner = Arc::downgrade(self);
        intake.watch(Arc::new(move |msg| {
            if let (BusMessage::Terminated { sid }, Some(sharded)) = (msg, owner.upgrade()) {
                sharded.forget(sid);
            }
        }));
        // Where the mailboxes end before subscribing: whatever is posted after it reaches this
        // node (by its doorbell, or by the read after the first check).
        for mailbox in self.own_mailboxes() {
            intake.start_at_tail(&mailbox).await?;
        }
        // The slot map the subscriptions are made under, which the first check compares with
        // (else a move in the node's first `check_interval` would go unseen).
        let slots = self.slot_map().await.ok();
        // One command per channel: they live in different slots.
        for channel in [self.keys.inbox(&self.node_id), self.keys.all()] {
            self.sub().ssubscribe(channel).await?;
        }
        let mut reader = reader::Reader::new(Arc::downgrade(self), intake, &self.settings);
        reader.slots = slots;
        tokio::spawn(reader.run(pushes));
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
        self.sub()
            .ssubscribe(self.keys.session_channel(sid))
            .await?;
        self.interest.lock().insert(sid.to_owned(), Instant::now());
        Ok(true)
    }

    /// The node's mailbox and the broadcast mailbox.
    fn own_mailboxes(&self) -> [String; 2] {
        [
            self.keys.mailbox(&self.node_id),
            self.keys.broadcast_mailbox(),
        ]
    }

    /// Every channel this node wants: its inbox, the broadcast channel, the channel of every
    /// session of interest.
    fn wanted(&self) -> Vec<String> {
        let sessions: Vec<String> = self.interest.lock().keys().cloned().collect();
        [self.keys.inbox(&self.node_id), self.keys.all()]
            .into_iter()
            .chain(sessions.iter().map(|sid| self.keys.session_channel(sid)))
            .collect()
    }

    /// Whether this node still wants `channel`.
    fn wants(&self, channel: &str) -> bool {
        channel == self.keys.inbox(&self.node_id)
            || channel == self.keys.all()
            || self
                .session_of(channel)
                .is_some_and(|sid| self.interest.lock().contains_key(sid))
    }

    /// The session id of a session channel `p:{sid}:bus`.
    fn session_of<'a>(&self, channel: &'a str) -> Option<&'a str> {
        let inner = channel.strip_suffix("}:bus")?;
        inner.rsplit_once(":{").map(|(_, sid)| sid)
    }

    /// The mailbox behind `channel`: the node's, the broadcast one, or a session's.
    fn mailbox_of(&self, channel: &str) -> Option<String> {
        if channel == self.keys.inbox(&self.node_id) {
            Some(self.keys.mailbox(&self.node_id))
        } else if channel == self.keys.all() {
            Some(self.keys.broadcast_mailbox())
        } else {
            self.session_of(channel)
                .map(|sid| self.keys.session_mailbox(sid))
        }
    }

    /// Subscribes again to `channels`, one `SSUBSCRIBE` each (they live in different slots),
    /// concurrently (`SSUBSCRIBE` of a channel a connection already has is a no-op).
    ///
    /// # Errors
    /// The first `SSUBSCRIBE` that failed (e.g. its slot's shard has no primary yet).
    async fn resubscribe(&self, channels: Vec<String>) -> StoreResult<()> {
        subscribe_all(&self.sub(), channels).await
    }

    /// Replaces the subscriber connection with a new one, subscribed to every channel this node
    /// wants before it takes over (the old one's subscriptions end with it). A new connection
    /// reads the slot map afresh: after a graceful failover the old one still sends a slot's
    /// `SSUBSCRIBE` to the demoted server, which takes it (a replica does) with no `MOVED` to
    /// correct it.
    async fn renew(&self) -> StoreResult<()> {
        let fresh = self.renewal.connect().await?;
        subscribe_all(&fresh, self.wanted()).await?;
        let old = std::mem::replace(&mut *self.sub.lock(), fresh);
        drop(old);
        Ok(())
    }

    /// A handle on the subscriber connection.
    fn sub(&self) -> ClusterConnection {
        self.sub.lock().clone()
    }

    /// A fingerprint of the cluster's slot map (`CLUSTER SLOTS`: ranges and their servers).
    async fn slot_map(&self) -> StoreResult<u64> {
        let ranges: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut self.conn.clone())
            .await?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        format!("{ranges:?}").hash(&mut hasher);
        Ok(hasher.finish())
    }

    /// Marks `sid` used now when this node subscribes to it; whether it does.
    pub fn used(&self, sid: &str) -> bool {
        match self.interest.lock().get_mut(sid) {
            Some(at) => {
                *at = Instant::now();
                true
            }
            None => false,
        }
    }

    /// Stops receiving the messages of `sid`.
    pub fn forget(&self, sid: &str) {
        if self.interest.lock().remove(sid).is_some() {
            let mut conn = self.sub();
            let channel = self.keys.session_channel(sid);
            *self.leaving.lock().entry(channel.clone()).or_default() += 1;
            tokio::spawn(async move {
                if let Err(e) = conn.sunsubscribe(&channel).await {
                    tracing::debug!(error = %e, "could not unsubscribe a session channel");
                }
            });
        }
    }

    /// Whether an `sunsubscribe` push for `channel` confirms this node's own `SUNSUBSCRIBE`
    /// (counted off), rather than Redis unsubscribing it by itself.
    fn own_unsubscribe(&self, channel: &str) -> bool {
        let mut leaving = self.leaving.lock();
        match leaving.get_mut(channel) {
            Some(n) => {
                *n -= 1;
                if *n == 0 {
                    leaving.remove(channel);
                }
                true
            }
            None => false,
        }
    }
}

/// `SSUBSCRIBE` of each of `channels` on `sub`, concurrently.
async fn subscribe_all(sub: &ClusterConnection, channels: Vec<String>) -> StoreResult<()> {
    let subscribes = channels.into_iter().map(|channel| {
        let mut sub = sub.clone();
        async move { sub.ssubscribe(channel).await }
    });
    futures::future::try_join_all(subscribes).await?;
    Ok(())
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
            .interest
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
