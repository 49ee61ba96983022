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

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;

use super::intake::{Closed, Intake};
use super::probe::Prober;
use super::wire;
use crate::error::StoreError;
use crate::model::{BusMessage, BusSettings};
use crate::redis::connection::{Conn, Renew, Subscriber};
use crate::redis::keys::Keys;
use crate::rules::INBOX_CAPACITY;
use crate::traits::StoreResult;

/// How long after a disconnection the node subscribes again (a burst of disconnections, one per
/// lost node connection, ends first).
const CATCH_UP_AFTER: Duration = Duration::from_millis(200);

/// How long after Redis unsubscribed a channel by itself the node subscribes again (the slot's
/// other channels' pushes arrive meanwhile: one resubscription for all).
const UNSUBSCRIBED_AFTER: Duration = Duration::from_millis(50);

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
            .unwrap_or_else(|e| e.into_inner())
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
        let mut reader = Reader::new(Arc::downgrade(self), intake, &self.settings);
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
        self.lock().insert(sid.to_owned(), Instant::now());
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
        let sessions: Vec<String> = self.lock().keys().cloned().collect();
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
                .is_some_and(|sid| self.lock().contains_key(sid))
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
        let old = std::mem::replace(&mut *self.sub_lock(), fresh);
        drop(old);
        Ok(())
    }

    /// A handle on the subscriber connection.
    fn sub(&self) -> ClusterConnection {
        self.sub_lock().clone()
    }

    fn sub_lock(&self) -> std::sync::MutexGuard<'_, ClusterConnection> {
        self.sub.lock().unwrap_or_else(|e| e.into_inner())
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
            let mut conn = self.sub();
            let channel = self.keys.session_channel(sid);
            *self.leaving().entry(channel.clone()).or_default() += 1;
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

    fn leaving(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.leaving.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether an `sunsubscribe` push for `channel` confirms this node's own `SUNSUBSCRIBE`
    /// (counted off), rather than Redis unsubscribing it by itself.
    fn own_unsubscribe(&self, channel: &str) -> bool {
        let mut leaving = self.leaving();
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

/// A pending resubscription: of everything, or of the channels Redis unsubscribed by itself.
#[derive(Default)]
struct Heal {
    /// When it is due.
    at: Option<tokio::time::Instant>,
    /// Every wanted channel (after a disconnection, a lost probe, a slot map change).
    all: bool,
    /// Channels Redis unsubscribed by itself.
    channels: HashSet<String>,
    /// On a new subscriber connection ([`Sharded::renew`]): the slot map changed.
    renew: bool,
    /// What made it due, counted once it is done (`None` for a repetition within the window).
    cause: Option<&'static str>,
}

impl Heal {
    /// Makes a resubscription due within `after` (keeping an earlier one).
    fn due(&mut self, after: Duration, cause: &'static str) {
        let at = tokio::time::Instant::now() + after;
        self.at = Some(self.at.map_or(at, |t| t.min(at)));
        self.cause.get_or_insert(cause);
    }
}

/// The reader of the sharded inbox: the connection's pushes, the checks, the resubscriptions.
struct Reader {
    owner: Weak<Sharded>,
    intake: Intake,
    prober: Prober,
    heal: Heal,
    /// Until when events are verified against their log (a window after a disconnection, while
    /// the cluster client may drop and restore subscriptions unseen).
    window_ends: tokio::time::Instant,
    /// From a disconnection until the first resubscription after it, pushes wait here: a live
    /// event delivered before the node is told to catch up would move its stream past the
    /// events it missed meanwhile, and the catch-up (which reads after the last event sent)
    /// would skip them. After `Resubscribed` they follow, in order.
    held: Option<Vec<PushInfo>>,
    /// The slot map's fingerprint at the last check.
    slots: Option<u64>,
    check_every: Duration,
}

impl Reader {
    fn new(owner: Weak<Sharded>, intake: Intake, settings: &BusSettings) -> Reader {
        Reader {
            owner,
            intake,
            prober: Prober::default(),
            heal: Heal::default(),
            window_ends: tokio::time::Instant::now(),
            held: None,
            slots: None,
            check_every: settings.check_interval.max(Duration::from_millis(10)),
        }
    }

    /// Reads pushes and runs the checks until the receiver or the store is dropped.
    async fn run(mut self, mut pushes: mpsc::UnboundedReceiver<PushInfo>) {
        let mut check = tokio::time::interval(self.check_every);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        check.tick().await;
        loop {
            let step = tokio::select! {
                push = pushes.recv() => match push {
                    Some(push) => self.push(push).await,
                    None => return,
                },
                _ = wait_until(self.heal.at) => self.resubscribe().await,
                _ = check.tick() => self.check().await,
                _ = self.intake.until_closed() => return,
            };
            if step.is_err() || self.owner.strong_count() == 0 {
                return;
            }
        }
    }

    async fn push(&mut self, push: PushInfo) -> Result<(), Closed> {
        match push.kind {
            PushKind::SMessage => {
                if let Some(held) = self.held.as_mut() {
                    held.push(push);
                    return Ok(());
                }
                self.message(&push).await
            }
            PushKind::SUnsubscribe => {
                let Some(Value::BulkString(channel)) = push.data.first() else {
                    return Ok(());
                };
                let channel = String::from_utf8_lossy(channel).into_owned();
                let Some(sharded) = self.owner.upgrade() else {
                    return Err(Closed);
                };
                if !sharded.own_unsubscribe(&channel) && sharded.wants(&channel) {
                    tracing::warn!(%channel, "Redis unsubscribed this node from a channel it still wants (its slot moved, or its server was demoted): subscribing again");
                    self.heal.channels.insert(channel);
                    self.heal.due(UNSUBSCRIBED_AFTER, "unsubscribed");
                    self.verify_for_a_while();
                }
                Ok(())
            }
            PushKind::Disconnection => {
                tracing::warn!("bus inbox connection lost; subscribing again in 200 ms");
                // Confirmations of this node's own unsubscriptions may be lost with it.
                if let Some(sharded) = self.owner.upgrade() {
                    sharded.leaving().clear();
                }
                // The last of a burst of disconnections (one per lost node connection) sets when.
                let now = tokio::time::Instant::now();
                self.heal.at = Some(now + CATCH_UP_AFTER);
                self.heal.all = true;
                self.heal.cause.get_or_insert("disconnected");
                self.window_ends = now + RESUBSCRIBE_WINDOW;
                self.held.get_or_insert_with(Vec::new);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Some subscriptions were (or may have been) lost and are being restored: for
    /// [`RESUBSCRIBE_WINDOW`] live events are verified against their logs, so that one arriving
    /// on a restored subscription does not move its stream past the events missed before it
    /// (the chaos suite's graceful Cluster failover lost 4 of 3,296 `notify` events this way).
    fn verify_for_a_while(&mut self) {
        let until = tokio::time::Instant::now() + RESUBSCRIBE_WINDOW;
        self.window_ends = self.window_ends.max(until);
    }

    /// One message push: a probe of this node's, or a doorbell of a mailbox.
    async fn message(&mut self, push: &PushInfo) -> Result<(), Closed> {
        let [Value::BulkString(channel), Value::BulkString(payload)] = push.data.as_slice() else {
            return Ok(());
        };
        let channel = String::from_utf8_lossy(channel);
        let Some(sharded) = self.owner.upgrade() else {
            return Err(Closed);
        };
        let Some(mailbox) = sharded.mailbox_of(&channel) else {
            return Ok(());
        };
        let (for_me, body) = if channel.ends_with("}:bus") {
            let Some(split) = payload.iter().position(|b| *b == b'\n') else {
                return Ok(());
            };
            let to = &payload[..split];
            (
                to == b"*" || to == sharded.node_id.as_bytes(),
                &payload[split + 1..],
            )
        } else {
            if let Some(n) = wire::probe_number(payload) {
                self.prober.back(n);
                return Ok(());
            }
            (true, &payload[..])
        };
        drop(sharded);
        // Within the window a subscription may have been lost and restored (by the cluster
        // client) unseen: the holder checks its log before writing the event.
        self.intake
            .verify_events(tokio::time::Instant::now() < self.window_ends);
        self.intake.rung(&mailbox, for_me, body).await
    }

    /// Subscribes again (everything, or what Redis unsubscribed), then reads the mailboxes behind
    /// those channels and tells the node to catch its held streams up.
    async fn resubscribe(&mut self) -> Result<(), Closed> {
        self.heal.at = None;
        let Some(sharded) = self.owner.upgrade() else {
            return Err(Closed);
        };
        let all = self.heal.all;
        let channels: Vec<String> = if all {
            sharded.wanted()
        } else {
            self.heal
                .channels
                .iter()
                .filter(|c| sharded.wants(c))
                .cloned()
                .collect()
        };
        let renew = self.heal.renew && all;
        let subscribed = if renew {
            sharded.renew().await
        } else {
            sharded.resubscribe(channels.clone()).await
        };
        if let Err(e) = subscribed {
            tracing::warn!(error = %e, renew, "bus inbox could not subscribe again; retrying");
            self.heal.at = Some(tokio::time::Instant::now() + RESUBSCRIBE_RETRY);
            return Ok(());
        }
        self.heal.renew = false;
        let mut mailboxes: Vec<String> = channels
            .iter()
            .filter_map(|c| sharded.mailbox_of(c))
            .collect();
        mailboxes.extend(sharded.own_mailboxes());
        drop(sharded);
        tracing::info!(channels = channels.len(), "bus inbox resubscribed");
        if let Some(cause) = self.heal.cause.take() {
            switchboard_telemetry::metrics::get().bus.heal(cause);
        }
        self.heal.channels.clear();
        self.heal.all = false;
        self.prober.reset();
        let now = tokio::time::Instant::now();
        if all && now < self.window_ends {
            self.heal.at = Some(now + RESUBSCRIBE_AGAIN);
            self.heal.all = true;
        }
        self.intake.hand(BusMessage::Resubscribed {}).await?;
        for push in self.held.take().unwrap_or_default() {
            self.message(&push).await?;
        }
        for mailbox in mailboxes {
            self.intake.catch_up(&mailbox).await?;
        }
        Ok(())
    }

    /// The periodic check: the probe sent at the last check came back, the slot map is the
    /// same, the node's mailboxes hold nothing unread.
    async fn check(&mut self) -> Result<(), Closed> {
        let Some(sharded) = self.owner.upgrade() else {
            return Err(Closed);
        };
        if !self.prober.healthy() {
            tracing::warn!("bus inbox: this node's probe did not come back through its subscription; subscribing again");
            self.heal.all = true;
            self.heal.due(Duration::ZERO, "probe");
            self.verify_for_a_while();
        }
        let probe = wire::probe(self.prober.next());
        let sent = redis::cmd("SPUBLISH")
            .arg(sharded.keys.inbox(&sharded.node_id))
            .arg(probe)
            .query_async::<i64>(&mut sharded.conn.clone())
            .await;
        if sent.is_ok() {
            self.prober.sent();
        }
        match sharded.slot_map().await {
            Ok(map) => {
                if self.slots.is_some_and(|old| old != map) {
                    tracing::warn!("the cluster's slot map changed: subscribing again to every channel of this node, on a new connection that knows the new map");
                    self.heal.all = true;
                    self.heal.renew = true;
                    self.heal.due(Duration::ZERO, "slot_map");
                    self.verify_for_a_while();
                }
                self.slots = Some(map);
            }
            Err(e) => tracing::debug!(error = %e, "could not read the cluster's slot map"),
        }
        let own = sharded.own_mailboxes();
        let interest: HashSet<String> = sharded
            .lock()
            .keys()
            .map(|sid| sharded.keys.session_mailbox(sid))
            .collect();
        drop(sharded);
        self.intake
            .retain(|mailbox| own.iter().any(|m| m == mailbox) || interest.contains(mailbox));
        self.intake.check(&own).await
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
